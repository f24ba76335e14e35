"""Decoding and training throughput of the notebook-07 translator, measured side by side.

On one fixed batch of source sentences, with the notebook's full-profile model size:

* ``greedy, recompute``   every step runs the whole model (encoder included) over all tokens so
                          far — what a straightforward loop around ``model.predict`` does;
* ``greedy, cached``      ``IncrementalDecoder``: the encoder once, cross-attention keys/values
                          once, a key/value cache in self-attention — one new position per step;
* ``beam, uncached``      ``decoding.beam_search``: one sentence at a time, the encoder once,
                          the decoder over the whole prefix of every beam at each step;
* ``beam, cached``        ``IncrementalDecoder.beam_decode``: all sentences' beams in one batch
                          (B x K rows), the key/value cache reordered by beam parent each step.

The weights are random, so no sentence ends early: every decoder runs the full ``--steps``
steps, the same work for all. (A trained model ends most sentences sooner.) The cached and
recomputed outputs are checked to be identical, for greedy and for beam search. Also prints training examples/s on
batches shaped like the notebook's (bucketed, about 12 tokens a side).

    .venv/bin/python benchmarks/translation_decoding.py [--batch 64 --steps 20 --repeats 3]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from transformer_course.tooling.runtime import hardware, import_tensorflow_quietly

tf = import_tensorflow_quietly()
import keras  # noqa: E402
import numpy as np  # noqa: E402
from _timing import interleaved_seconds  # noqa: E402 - benchmarks/_timing.py beside this script

from transformer_course import profile  # noqa: E402
from transformer_course.decoding import beam_search, greedy_decode  # noqa: E402
from transformer_course.generation import IncrementalDecoder  # noqa: E402
from transformer_course.masks import PADDING_ID  # noqa: E402
from transformer_course.metrics import masked_accuracy, masked_loss  # noqa: E402
from transformer_course.translation import build_translation_model  # noqa: E402

START = 2


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="sentences decoded together by greedy search")
    parser.add_argument("--beam-sentences", type=int, default=8, help="sentences decoded by uncached beam search")
    parser.add_argument("--steps", type=int, default=20, help="tokens generated per sentence")
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args(argv)

    settings = profile("full").notebook("07")
    architecture = settings.model  # as notebook 07's, but with the output layer's own weights (untied)
    vocabulary = (settings.source_vocabulary_size, settings.target_vocabulary_size)
    keras.utils.set_random_seed(0)
    model = build_translation_model(
        *vocabulary, 40, max(arguments.steps, 12), **{**architecture, "tie_embeddings": False}
    )
    rng = np.random.default_rng(0)
    lengths = rng.integers(4, 16, size=arguments.batch)
    source = np.zeros((arguments.batch, 16), dtype="int32")
    for row, length in enumerate(lengths):
        source[row, :length] = rng.integers(4, vocabulary[0], size=length)

    @tf.function(reduce_retracing=True)
    def last_position(source_ids, target_ids):
        return model({"source_ids": source_ids, "target_ids": target_ids})[:, -1, :]

    def recompute(decoded):
        probabilities = last_position(tf.constant(source), tf.constant(decoded, dtype=tf.int32)).numpy()
        probabilities[:, PADDING_ID] = 0.0  # never padding, as the cached decoder
        return probabilities

    incremental = IncrementalDecoder(model, arguments.steps)
    no_end = -1  # an end id that is never produced: every sentence runs all the steps
    decoders = {
        "greedy, recompute": lambda: greedy_decode(recompute, np.full(arguments.batch, START), no_end, arguments.steps),
        "greedy, cached": lambda: incremental.decode(source, START, no_end),
    }
    np.testing.assert_array_equal(decoders["greedy, recompute"](), decoders["greedy, cached"]())

    def uncached_beam_search(source_ids):
        """One sentence (S,): the encoder once, the decoder over every beam's whole prefix at each step."""
        encoded, source_mask = model.encode(keras.ops.convert_to_tensor(source_ids[None], dtype="int32"))

        def next_token_probabilities(decoded):
            beams = len(decoded)
            probabilities = model.decode(
                keras.ops.convert_to_tensor(decoded, dtype="int32"),
                keras.ops.repeat(encoded, beams, axis=0),
                keras.ops.repeat(source_mask, beams, axis=0),
                last_only=True,
            ).probabilities
            probabilities = keras.ops.convert_to_numpy(probabilities[:, 0, :])
            probabilities[:, PADDING_ID] = 0.0
            return probabilities

        return beam_search(next_token_probabilities, START, no_end, arguments.steps, 4, 0.6)[0]

    beam_rows = source[: arguments.beam_sentences]
    decoders["beam, uncached (width 4)"] = lambda: [uncached_beam_search(row) for row in beam_rows]
    decoders["beam, cached (width 4)"] = lambda: incremental.beam_decode(source, START, no_end, 4, 0.6)
    cached_beams = decoders["beam, cached (width 4)"]()
    for row, expected in zip(cached_beams, decoders["beam, uncached (width 4)"]()):
        np.testing.assert_array_equal(row[: len(expected)], expected)
    sentences = {
        "greedy, recompute": arguments.batch,
        "greedy, cached": arguments.batch,
        "beam, uncached (width 4)": arguments.beam_sentences,
        "beam, cached (width 4)": arguments.batch,
    }

    for decode in decoders.values():
        decode()  # trace and warm up
    seconds = interleaved_seconds(decoders, arguments.repeats)

    model.compile(optimizer="adam", loss=masked_loss, metrics=[masked_accuracy])
    pairs = 64 * 20
    inputs = {
        "source_ids": rng.integers(1, vocabulary[0], size=(pairs, 12)).astype("int32"),
        "target_ids": rng.integers(1, vocabulary[1], size=(pairs, 12)).astype("int32"),
    }
    labels = rng.integers(1, vocabulary[1], size=(pairs, 12)).astype("int32")
    model.fit(inputs, labels, batch_size=64, epochs=1, verbose=0)
    start = time.perf_counter()
    model.fit(inputs, labels, batch_size=64, epochs=1, verbose=0)
    training_rate = pairs / (time.perf_counter() - start)

    machine = hardware()
    print(
        f"Translator decoding: E={architecture.embed_dim}, F={architecture.intermediate_dim}, "
        f"{architecture.num_heads} heads, {architecture.num_layers} block(s) a side, "
        f"vocabularies {vocabulary[0]:,}/{vocabulary[1]:,}; "
        f"{arguments.steps} tokens per sentence, {arguments.repeats} interleaved repeats"
    )
    print(
        f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    )
    rates = {name: sentences[name] / statistics.median(values) for name, values in seconds.items()}
    for name, rate in rates.items():
        print(
            f"  {name:<22} {rate:8.1f} sentences/s  (x{rate / rates['greedy, recompute']:.2f} vs recompute; "
            f"{sentences[name]} sentences)"
        )
    print(f"  training               {training_rate:8.1f} sentence pairs/s (batches of 64, 12 tokens a side)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
