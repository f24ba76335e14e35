"""Training throughput of the IMDB Transformer classifier, with and without the speed-ups.

The notebook-06 model (embedding 256, 2 heads, feed-forward 32, reviews cut at 600 tokens,
batches of 32) trains on the same real reviews in four set-ups, measured in one run with the
repetitions interleaved so every set-up sees the same machine load:

* ``padded``         every batch padded to 600 tokens, the plain Keras graph (the textbook set-up);
* ``padded+xla``     the same, compiled with XLA (``jit_compile=True``);
* ``bucketed``       batches of reviews of similar length, padded to their bucket's boundary;
* ``bucketed+xla``   both.

Prints examples/s of each and the ratio to ``padded``. Every set-up ignores padding (masked
attention and pooling), so each learns the same function; only the speed differs.

    .venv/bin/python benchmarks/imdb_classifier.py [--reviews 1024 --repeats 2]
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

from transformer_course.classifier import build_sentiment_classifier  # noqa: E402
from transformer_course.datasets import load_imdb  # noqa: E402
from transformer_course.text import standardize_review, vectorized_batches  # noqa: E402

SEQUENCE_LENGTH = 600
BUCKETS = (64, 128, 192, 256, 384, 512, SEQUENCE_LENGTH + 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reviews", type=int, default=1024, help="training reviews per timed epoch")
    parser.add_argument("--repeats", type=int, default=2, help="timed epochs per set-up")
    parser.add_argument("--batch", type=int, default=32)
    arguments = parser.parse_args(argv)

    train, _ = load_imdb(progress=False)
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(train.texts), size=arguments.reviews, replace=False)
    texts = [train.texts[i] for i in chosen]
    labels = np.asarray(train.labels)[chosen].astype("float32")
    vectorizer = keras.layers.TextVectorization(
        max_tokens=20000, output_sequence_length=SEQUENCE_LENGTH, standardize=standardize_review
    )
    vectorizer.adapt(texts)

    setups = {}
    for name, buckets, xla in [
        ("padded", None, False),
        ("padded+xla", None, True),
        ("bucketed", BUCKETS, False),
        ("bucketed+xla", BUCKETS, True),
    ]:
        keras.utils.set_random_seed(0)
        model = build_sentiment_classifier(20000, SEQUENCE_LENGTH)
        model.compile(optimizer="rmsprop", loss="binary_crossentropy", metrics=["accuracy"], jit_compile=xla)
        data = vectorized_batches(
            texts, labels, vectorizer, arguments.batch, bucket_boundaries=buckets, shuffle=True, seed=0
        )
        model.fit(data, epochs=1, verbose=0)  # trace, compile every bucket shape, fill the cache
        setups[name] = (model, data)

    seconds = {name: [] for name in setups}
    for _ in range(arguments.repeats):
        for name, (model, data) in setups.items():
            start = time.perf_counter()
            model.fit(data, epochs=1, verbose=0)
            seconds[name].append(time.perf_counter() - start)

    machine = hardware()
    lengths = [int(np.count_nonzero(row)) for row in vectorizer(texts[:1024]).numpy()]
    print(
        f"IMDB Transformer classifier, training throughput: {arguments.reviews} reviews per epoch, "
        f"batch {arguments.batch}, {arguments.repeats} interleaved timed epochs per set-up "
        f"(mean review length {np.mean(lengths):.0f} tokens after the cut at {SEQUENCE_LENGTH})"
    )
    print(
        f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores; "
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}"
    )
    rates = {name: arguments.reviews / statistics.median(values) for name, values in seconds.items()}
    for name, rate in rates.items():
        print(f"  {name:<13} {rate:8.1f} examples/s   x{rate / rates['padded']:.2f} vs padded")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
