"""The arithmetic coder driven by notebook 09's model: characters a second, and where the time goes.

Codes the same test reviews in each arm, the arms interleaved (a change of load hits them alike),
and prints the median characters a second of each and, for compression, the share of the time spent
in the model (its cached step) against the coder (the integer frequencies and the interval arithmetic):

* compress and decompress with the key/value cache, one stream and ``--streams`` side by side;
* compress without the cache: the model recomputes the whole window (up to its 256 tokens) at
  every step — what the cache saves.

The model has the size notebook 09's recorded run chose (its record's ``final_width``; section 4's
width without a record) and its tokenizer (8,000 merges), with random weights: its tokens cost more
bits than a trained model's (about 13 a token against 6), so the coder does more work a token than
in the notebook, and its share here is an upper bound.

    .venv/bin/python benchmarks/arithmetic_coder.py [--characters 6000] [--repeats 3] [--streams 8] [--width W]
        [--no-uncached]
"""

import argparse
import statistics
import sys
import time

import keras
import numpy as np

from transformer_course.bpe import BytePairEncoding
from transformer_course.compression import ArithmeticEncoder, compress, decompress, integer_frequencies
from transformer_course.datasets import load_imdb
from transformer_course.language_model import build_language_model
from transformer_course.tooling.profiles import profile
from transformer_course.tooling.results import load_record
from transformer_course.tooling.runtime import hardware


def uncached_compress_seconds(text, model, tokenizer, start_id) -> float:
    """Seconds to code ``text`` with the whole window recomputed at every step (no cache); the code is discarded."""
    window, encoder, history = model.sequence_length, ArithmeticEncoder(), [start_id]
    step = keras.ops.convert_to_numpy
    started = time.perf_counter()
    for token in tokenizer.encode(text):
        probabilities = step(model(np.array([history[-window:]], "int32")))[0, -1].copy()
        probabilities[0] = 0.0
        encoder.encode(token, integer_frequencies(probabilities / probabilities.sum()))
        history.append(token)
    encoder.finish()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--characters", type=int, default=6000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--width", type=int, default=None, help="the model's width (default: 09's recorded choice)")
    parser.add_argument("--no-uncached", action="store_true", help="leave out the arm without the cache (slow)")
    arguments = parser.parse_args()
    settings = profile("full").notebook("09")
    record = load_record("09_language_model") or {}
    width = arguments.width or int(record.get("metrics", {}).get("final_width", {}).get("value", 0)) or None
    architecture = {**settings.model, **({"embed_dim": width, "intermediate_dim": 4 * width} if width else {})}
    train, test = load_imdb()
    learned = BytePairEncoding.train(train.texts[:3000], settings.merges, special_tokens=["<|endoftext|>"])
    tokenizer = BytePairEncoding.from_vocabulary_and_merges(
        *learned.vocabulary_and_merges(), special_tokens=["<|endoftext|>"], id_offset=1
    )
    keras.utils.set_random_seed(0)
    model = build_language_model(tokenizer.vocabulary_size, settings.chunk_length, **architecture)
    text = ""
    for review in test.texts:
        if len(text) + len(review) > arguments.characters:
            break
        text += review
    end = tokenizer.special_ids["<|endoftext|>"]
    compress(text[:200], model, tokenizer, streams=arguments.streams)  # compiles both batch shapes' steps
    compress(text[:200], model, tokenizer)
    packed = {streams: compress(text, model, tokenizer, streams=streams) for streams in (1, arguments.streams)}
    shares, seconds = {}, {}
    arms = {}
    for streams in (1, arguments.streams):

        def coded(streams=streams):
            started = time.perf_counter()
            _, facts = compress(text, model, tokenizer, streams=streams, statistics=True)
            shares.setdefault(streams, []).append(
                facts["model_seconds"] / (facts["model_seconds"] + facts["coder_seconds"])
            )
            return time.perf_counter() - started

        def decoded(streams=streams):
            started = time.perf_counter()
            assert decompress(packed[streams], model, tokenizer) == text
            return time.perf_counter() - started

        arms[f"compress, cache, {streams} stream{'s' * (streams > 1)}"] = coded
        arms[f"decompress, cache, {streams} stream{'s' * (streams > 1)}"] = decoded
    if not arguments.no_uncached:
        arms["compress, no cache, 1 stream"] = lambda: uncached_compress_seconds(text, model, tokenizer, end)
    for name in arms:
        seconds[name] = []
    for _ in range(arguments.repeats):
        for name, arm in arms.items():
            seconds[name].append(arm())
    machine = hardware()
    print(
        f"notebook 09's model ({model.count_params():,} parameters, random weights: no checkpoint is read here), "
        f"{len(text):,} characters of IMDB test reviews, median of {arguments.repeats} (arms interleaved), "
        f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, Keras {keras.__version__} on "
        f"{keras.backend.backend()}, {machine['processor']}, {machine['cpu_count']} CPUs"
    )
    base = statistics.median(seconds["compress, cache, 1 stream"])
    for name, values in seconds.items():
        median = statistics.median(values)
        streams = int(name.split(", ")[-1].split()[0])
        share = (
            f"; {statistics.median(shares[streams]):.0%} of the time in the model, "
            f"{1 - statistics.median(shares[streams]):.0%} in the coder"
            if name.startswith("compress, cache")
            else ""
        )
        print(f"  {name:<32} {len(text) / median:8,.0f} characters/s  {base / median:5.2f}x one cached stream{share}")


if __name__ == "__main__":
    main()
