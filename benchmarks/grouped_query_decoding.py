"""Decoding one token with a key/value cache: grouped-query attention against multi-head attention, on a CPU.

Generation reads the whole cache at every token: at N query heads of width H, a cache of L positions
holds 2 · L · G · H numbers per layer, G the key/value heads (G = N: multi-head attention; G < N:
grouped queries, Ainslie et al., 2023; G = 1: multi-query, Shazeer, 2019). Everything else a decoding
step does costs the same whatever G. So where the cache's read is what a token costs, the time a token
should fall with G; where the projections dominate (short caches), it should not.

One self-attention layer of notebook 11's width (N = 4 heads of 64) at batch 1, the package's
``GroupedQueryAttention``, writes the new token's key and value at the last position of a cache of L
positions and attends over all of them (causal), compiled with XLA through ``tf.function``. G is the
only thing that changes between arms (the query and output projections are the same size). Beside the
layer, the same step with the attention computed by group, without repeating the keys and values to N heads
(its output checked equal to the layer's), says what the layer's repeat costs. Every arm
is timed in interleaved rounds, so a busy moment on the machine slows all alike; each ratio is given
with a 95% bootstrap interval over the rounds (SciPy's ``bootstrap``, percentile, on the ratio of medians).

**Hypothesis** (set before the first run): at L = 4,096 a token with G = 2 takes at most 0.75 of its time
with G = 4 (MHA); at L = 64 the two take the same time within 10%.

    .venv/bin/python benchmarks/grouped_query_decoding.py [--rounds 60] [--lengths 64 1024 2048 4096]
"""

import argparse
import datetime
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from transformer_course.tooling.runtime import hardware, import_tensorflow_quietly, vector_extensions

tf = import_tensorflow_quietly()
import keras  # noqa: E402
import numpy as np  # noqa: E402
from _timing import interleaved_seconds  # noqa: E402
from keras import ops  # noqa: E402
from scipy import stats  # noqa: E402

from transformer_course import profile  # noqa: E402
from transformer_course.attention import GroupedQueryAttention  # noqa: E402

TOKENS_A_ROUND = 20  # steps timed together, so the timer's own noise is a twentieth of a step's


def decoding_step(heads: int, key_value_heads: int, head_dim: int, length: int, grouped: bool = False):
    """One compiled decoding step of a fresh layer: the token at position length - 1, its cache filled before.

    ``grouped``: the same projections, but the attention computed by group without repeating the keys and values
    to N heads (the queries reshaped to (B, T, G, N/G, H)), to see what the repeat costs.
    """
    keras.utils.set_random_seed(0)
    layer = GroupedQueryAttention(head_dim, heads, key_value_heads)
    token = tf.random.normal((1, 1, heads * head_dim))
    cache = tf.random.normal((1, 2, length, key_value_heads, head_dim))
    layer(token, token)  # builds the weights

    @tf.function(jit_compile=True)
    def step(cache):
        output, updated = layer(token, token, use_causal_mask=True, cache=cache, cache_update_index=length - 1)
        return output, updated

    @tf.function(jit_compile=True)
    def grouped_step(cache):
        offset = (0, length - 1, 0, 0)
        keys = ops.slice_update(cache[:, 0], offset, layer.key_dense(token))  # (B, L, G, H)
        values = ops.slice_update(cache[:, 1], offset, layer.value_dense(token))
        queries = ops.reshape(layer.query_dense(token), (1, 1, key_value_heads, heads // key_value_heads, head_dim))
        scores = ops.einsum("btgrh,bsgh->bgrts", queries, keys) / head_dim**0.5  # the last position: every key
        attended = ops.einsum("bgrts,bsgh->btgrh", ops.softmax(scores, axis=-1), values)
        return layer.output_dense(ops.reshape(attended, (1, 1, heads, head_dim))), ops.stack([keys, values], axis=1)

    compiled = grouped_step if grouped else step
    expected, _ = step(cache)
    np.testing.assert_allclose(compiled(cache)[0].numpy(), expected.numpy(), atol=1e-4)  # the same token's output

    def tokens():
        for _ in range(TOKENS_A_ROUND):
            compiled(cache)[0].numpy()  # the token's output: the updated cache stays where a next step reads it

    return tokens


def ratio_interval(numerator, denominator) -> tuple[float, float, float]:
    """The ratio of the medians and its 95% percentile-bootstrap interval, resampling the paired rounds."""
    numerator, denominator = np.asarray(numerator), np.asarray(denominator)
    result = stats.bootstrap(
        (numerator, denominator),
        lambda a, b: np.median(a) / np.median(b),
        paired=True,
        vectorized=False,
        n_resamples=2000,
        method="percentile",
        random_state=np.random.default_rng(0),
    )
    ratio = float(np.median(numerator) / np.median(denominator))
    return ratio, float(result.confidence_interval.low), float(result.confidence_interval.high)


def main() -> int:
    settings = profile("full").notebook("11")
    heads = settings.model["num_heads"]
    head_dim = settings.model["embed_dim"] // heads
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60, help="interleaved rounds (default 60)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 1024, 2048, 4096])
    arguments = parser.parse_args()
    groups = sorted({heads, settings.num_key_value_heads, 1}, reverse=True)
    steps = {
        (length, key_value_heads, grouped): decoding_step(heads, key_value_heads, head_dim, length, grouped)
        for length in arguments.lengths
        for grouped in (False, True)
        for key_value_heads in groups
    }
    seconds = interleaved_seconds(steps, arguments.rounds)
    machine = hardware()
    today = f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"
    print(
        f"One decoding step, batch 1, N = {heads} query heads of {head_dim}, the cache's last position written and "
        f"attended (XLA); median of {arguments.rounds} interleaved rounds of {TOKENS_A_ROUND} steps, {today}, "
        f"{machine['processor']} ({vector_extensions() or 'vector extensions unknown'}), {machine['cpu_count']} cores, "
        f"Keras {keras.__version__} on {keras.backend.backend()}"
    )
    print(f"{'cache L':>8} {'G':>3} {'cache MB':>9} {'attention':<22} {'ms a token':>11}   time / MHA's, 95% interval")
    for length in arguments.lengths:
        for grouped in (False, True):
            for key_value_heads in groups:
                taken = seconds[length, key_value_heads, grouped]
                megabytes = 2 * length * key_value_heads * head_dim * 4 / 1e6
                ratio, low, high = ratio_interval(taken, seconds[length, heads, grouped])
                compared = "" if key_value_heads == heads else f"   {ratio:.2f} [{low:.2f}, {high:.2f}]"
                milliseconds = 1000 * np.median(taken) / TOKENS_A_ROUND
                how = "by group, no repeat" if grouped else "the layer"
                print(f"{length:>8,} {key_value_heads:>3} {megabytes:>9.2f} {how:<22} {milliseconds:>11.3f}{compared}")
    longest, shortest, grouped = max(arguments.lengths), min(arguments.lengths), settings.num_key_value_heads
    ratio, low, high = ratio_interval(seconds[longest, grouped, False], seconds[longest, heads, False])
    short, short_low, short_high = ratio_interval(seconds[shortest, grouped, False], seconds[shortest, heads, False])
    # The hypothesis is about the package's layer (its own rows); the rows by group say what its repeat costs.
    long_verdict = "met" if high <= 0.75 else "not met" if low > 0.75 else "not settled"
    within = 0.9 <= short_low and short_high <= 1.1
    short_verdict = "met" if within else "not met" if short_high < 0.9 or short_low > 1.1 else "not settled"
    print(
        f"hypothesis: at L = {longest:,}, G = {grouped} takes at most 0.75 of MHA's time: {ratio:.2f} "
        f"[{low:.2f}, {high:.2f}] -> {long_verdict}; at L = {shortest:,}, the same within 10%: {short:.2f} "
        f"[{short_low:.2f}, {short_high:.2f}] -> {short_verdict}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
