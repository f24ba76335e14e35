"""Generation speed of the notebook-09 language model: recomputing the prefix vs a key/value cache.

For each prompt length, one batch of prompts is continued by greedy decoding for ``--steps``
tokens, two ways, measured side by side (interleaved repeats, medians):

* ``recompute``  every step runs the whole model over the prompt and all tokens generated so
                 far (one compiled function) and keeps the last position;
* ``cached``     ``CachedLanguageModel``: the prompt in one pass, filling every block's key/value
                 cache, then one new position per step.

The model has the notebook's full-profile size (E, F, heads, blocks, vocabulary) with random
weights: the work per step does not depend on the weights' values. Its position table is
long enough for the longest prompt plus the generated tokens. The two decoders' outputs are
checked to be identical before anything is timed. Runs on any Keras backend.

    .venv/bin/python benchmarks/language_model_generation.py [--prompts 16 64 128 --batch 8 --steps 32]
"""

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np
from _timing import interleaved_seconds  # benchmarks/_timing.py beside this script

from transformer_course import profile
from transformer_course.decoding import greedy_decode
from transformer_course.generation import CachedLanguageModel
from transformer_course.language_model import build_language_model
from transformer_course.tooling.runtime import hardware


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, nargs="+", default=[16, 64, 128], help="prompt lengths in tokens")
    parser.add_argument("--batch", type=int, default=8, help="prompts continued together")
    parser.add_argument("--steps", type=int, default=32, help="tokens generated per prompt")
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args(argv)

    settings = profile("full").notebook("09")
    vocabulary_size = 256 + settings.merges + 2  # the bytes, the merges, padding and <|endoftext|>
    length = max(arguments.prompts) + arguments.steps
    keras.utils.set_random_seed(0)
    model = build_language_model(vocabulary_size, length, **settings.model)
    last_position = _compiled(lambda ids: model(ids, training=False)[:, -1, :])

    def recompute(decoded):
        probabilities = np.array(keras.ops.convert_to_numpy(last_position(np.asarray(decoded, dtype="int32"))))
        probabilities[:, 0] = 0.0  # never padding, as the cached generator
        return probabilities

    cached = CachedLanguageModel(model, length)
    rng = np.random.default_rng(0)
    rates = {}
    for prompt_length in arguments.prompts:
        prompts = rng.integers(1, vocabulary_size, size=(arguments.batch, prompt_length)).astype("int32")
        # Both are called within this iteration (B023 warns of closures called after the loop moves on).
        decoders = {
            "recompute": lambda: greedy_decode(recompute, prompts, None, arguments.steps),  # noqa: B023
            "cached": lambda: greedy_decode(cached.next_token_function(prompts), prompts, None, arguments.steps),  # noqa: B023
        }
        np.testing.assert_array_equal(decoders["recompute"](), decoders["cached"]())  # also warms both up
        seconds = interleaved_seconds(decoders, arguments.repeats)
        rates[prompt_length] = {
            name: arguments.batch * arguments.steps / statistics.median(values) for name, values in seconds.items()
        }

    machine = hardware()
    print(
        f"Language model generation: E={settings.model.embed_dim}, F={settings.model.intermediate_dim}, "
        f"{settings.model.num_heads} heads, "
        f"{settings.model.num_layers} block(s), vocabulary {vocabulary_size:,}; batch {arguments.batch}, "
        f"{arguments.steps} new tokens each, {arguments.repeats} interleaved repeats; outputs identical"
    )
    print(
        f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
        f"Keras {keras.__version__} ({keras.backend.backend()})"
    )
    for prompt_length, rate in rates.items():
        print(
            f"  prompt {prompt_length:>4}: recompute {rate['recompute']:8.1f} tokens/s   "
            f"cached {rate['cached']:8.1f} "
            f"tokens/s   x{rate['cached'] / rate['recompute']:.2f}"
        )
    return 0


def _compiled(function):
    """``function`` compiled for the backend where it helps (tf.function / jax.jit), else as is."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, reduce_retracing=True)
    if backend == "jax":
        import jax

        return jax.jit(function)
    return function


if __name__ == "__main__":
    raise SystemExit(main())
