"""Byte-level BPE, ours against Hugging Face ``tokenizers``: training time and encoding throughput.

Both learn 8,000 merges from the 25,000 IMDB training reviews (``<br />`` tags replaced by spaces)
with GPT-2's pre-tokenisation, side by side in one run; then both encode the first 2,000 test
reviews with **our** merges (loaded into a Hugging Face BPE model), and the ids are checked equal
before the throughput is compared. Hugging Face's trainer is written in Rust and uses every core;
ours is plain Python on one. Target: ours trains in at most 2 minutes on a 2-core CPU.

    .venv/bin/python benchmarks/bpe_training.py [--merges 8000]
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tokenizers

from transformer_course.bpe import BytePairEncoding
from transformer_course.datasets import load_imdb
from transformer_course.tooling.runtime import hardware


def hugging_face(vocabulary=None, merges=None):
    model = tokenizers.models.BPE() if vocabulary is None else tokenizers.models.BPE(vocab=vocabulary, merges=merges)
    tokenizer = tokenizers.Tokenizer(model)
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tokenizer


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--merges", type=int, default=8000)
    arguments = parser.parse_args(argv)
    train, test = load_imdb()
    texts = [text.replace("<br />", " ") for text in train.texts]
    sample = [text.replace("<br />", " ") for text in test.texts[:2000]]

    started = time.perf_counter()
    ours = BytePairEncoding.train(texts, num_merges=arguments.merges)
    ours_seconds = time.perf_counter() - started
    reference = hugging_face()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=256 + arguments.merges,
        show_progress=False,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    started = time.perf_counter()
    reference.train_from_iterator(texts, trainer)
    reference_seconds = time.perf_counter() - started

    vocabulary, merges = ours.vocabulary_and_merges()
    same_merges = hugging_face(vocabulary, [tuple(merge.split(" ")) for merge in merges])
    started = time.perf_counter()
    ours_ids = [ours.encode(text) for text in sample]
    ours_encode = time.perf_counter() - started
    started = time.perf_counter()
    reference_ids = [encoding.ids for encoding in same_merges.encode_batch(sample)]
    reference_encode = time.perf_counter() - started
    if ours_ids != reference_ids:
        raise AssertionError("our encoding and Hugging Face's differ with the same merges")
    tokens = sum(map(len, ours_ids))

    machine = hardware()
    print(
        f"Byte-level BPE, {arguments.merges:,} merges learned from {len(texts):,} IMDB training reviews; encoding "
        f"{len(sample):,} test reviews ({tokens:,} tokens, ids equal both ways)"
    )
    print(f"machine: {machine['processor']}, {machine['cpu_count']} CPU cores; tokenizers {tokenizers.__version__}")
    print(
        f"  training   ours {ours_seconds:7.1f} s   Hugging Face {reference_seconds:6.1f} s   "
        f"ours / theirs x{ours_seconds / reference_seconds:.1f}   (target: ours <= 120 s)"
    )
    print(
        f"  encoding   ours {tokens / ours_encode:9,.0f} tokens/s   Hugging Face {tokens / reference_encode:11,.0f} "
        f"tokens/s   theirs / ours x{ours_encode / reference_encode:.1f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
