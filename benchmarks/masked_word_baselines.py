"""Yardsticks for notebook 08's masked-LM accuracy: how often counting neighbouring tokens fills a blank.

A masked-language-model accuracy means little alone. This script measures what three count
tables, built on the same text and WordPiece vocabulary as notebook 08's full profile, get on the
very blanks the notebook scores its model on:

* ``most frequent token``   always guess the most common token of the pre-training text;
* ``token before``          the token seen most often after the token to the left of the blank;
* ``tokens on both sides``  the token seen most often between the blank's two neighbours, backing
                            off to the token before, then the token after, then the most frequent
                            token when a neighbour is itself hidden or the pair was never seen.

Text, vocabulary and blanks as notebook 08 builds them: the training and unlabelled IMDB reviews
less every text that occurs in the test split and every second copy, shuffled with seed 0, the
first ``validation_reviews`` held out; a WordPiece vocabulary computed on the first
``vocab_sample`` pre-training reviews; the pre-training text cut into ``[CLS]`` + 126 pieces +
``[SEP]`` inputs (``contiguous_segments``), every position of which the tables count; the blanks:
the first ``validation_segments`` held-out inputs masked by ``mask_tokens`` with seed 1
(15% chosen; 80% ``[MASK]``, 10% a random token, 10% unchanged), at most ``max_predictions`` of
them an input (``gather_selected``), as the notebook scores them. A table sees the corrupted
neighbours, as the model does, but never the chosen token itself (the model sees it in the 10%
left unchanged).

    .venv/bin/python benchmarks/masked_word_baselines.py
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import keras_hub
import numpy as np
import tensorflow as tf

from transformer_course import profile
from transformer_course.datasets import load_imdb, load_imdb_unlabelled
from transformer_course.pretraining import contiguous_segments, gather_selected, mask_tokens
from transformer_course.tooling.runtime import hardware

PAD, UNK, CLS, SEP, MASK = range(5)  # the reserved tokens, first in the vocabulary, as in notebook 08


def pretraining_text(settings):
    """(held-out reviews, pre-training reviews): notebook 08's section 1."""
    train, test = load_imdb()
    test_texts = set(test.texts)
    distinct = list(dict.fromkeys(text for text in train.texts + load_imdb_unlabelled() if text not in test_texts))
    documents = [distinct[i].replace("<br />", " ") for i in np.random.default_rng(0).permutation(len(distinct))]
    return documents[: settings.validation_reviews], documents[settings.validation_reviews :]


def word_pieces(settings, texts):
    """(vocabulary, tokenize): notebook 08's WordPiece vocabulary, computed on its first ``vocab_sample`` pre-training
    reviews, and a function from texts to one list of ids each (no special tokens)."""
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        tf.data.Dataset.from_tensor_slices(texts[: settings.vocab_sample]).batch(1000),
        vocabulary_size=settings.vocabulary_size,
        lowercase=True,
        strip_accents=True,
        reserved_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
    )
    tokenizer = keras_hub.tokenizers.WordPieceTokenizer(vocabulary=vocabulary, lowercase=True, strip_accents=True)

    def tokenize(batch_of_texts):
        return [
            row
            for ids in tf.data.Dataset.from_tensor_slices(batch_of_texts).batch(2000).map(tokenizer)
            for row in ids.to_list()
        ]

    return vocabulary, tokenize


def best_next(keys, answers, size):
    """For every key (an int below `size`), the answer seen most often with it; -1 where never seen."""
    counts = np.unique(keys.astype("int64") * size + answers, return_counts=True)
    key, answer = np.divmod(counts[0], size)
    order = np.lexsort((-counts[1], key))  # by key, the most frequent answer first
    first = np.r_[True, key[order][1:] != key[order][:-1]]
    return dict(zip(key[order][first].tolist(), answer[order][first].tolist()))


def main() -> int:
    settings = profile("full").notebook("08")
    held_out, texts = pretraining_text(settings)
    vocabulary, tokenize = word_pieces(settings, texts)
    segments = contiguous_segments(tokenize(texts), settings.sequence_length, CLS, SEP)
    size = len(vocabulary)
    left, word, right = segments[:, :-2].ravel(), segments[:, 1:-1].ravel(), segments[:, 2:].ravel()
    most_frequent = int(np.bincount(word, minlength=size).argmax())
    best_before, best_after = best_next(left, word, size), best_next(right, word, size)
    best_both = best_next(left.astype("int64") * size + right, word, size)

    blanks = contiguous_segments(tokenize(held_out), settings.sequence_length, CLS, SEP)[: settings.validation_segments]
    masked, labels, selected = mask_tokens(
        blanks, np.random.default_rng(1), size, MASK, unselectable_token_ids=(PAD, CLS, SEP, MASK)
    )
    positions, position_labels = gather_selected(selected, labels, settings.max_predictions)  # the scored ones
    hits = {"most frequent token": 0, "token before": 0, "tokens on both sides": 0}
    rows, slots = np.nonzero(position_labels)
    columns = positions[rows, slots]
    for row, column in zip(rows, columns):
        answer, before, after = blanks[row, column], masked[row, column - 1], masked[row, column + 1]
        guess_before = best_before.get(int(before), most_frequent) if before != MASK else most_frequent
        guess_after = best_after.get(int(after)) if after != MASK else None
        guess_both = (best_both.get(int(before) * size + int(after)) if MASK not in (before, after) else None) or (
            guess_before if before != MASK and int(before) in best_before else guess_after or most_frequent
        )
        hits["most frequent token"] += answer == most_frequent
        hits["token before"] += answer == guess_before
        hits["tokens on both sides"] += answer == guess_both

    machine = hardware()
    print(
        f"Count-table yardsticks for notebook 08's masked-LM accuracy: WordPiece vocabulary {size:,}; tables from "
        f"{len(segments):,} pre-training inputs of {settings.sequence_length} ({len(texts):,} reviews); "
        f"{len(rows):,} "
        f"blanks in {len(blanks):,} held-out inputs (mask_tokens, seed 1: the notebook's held-out blanks)"
    )
    print(
        f"machine: {machine['processor']}, {machine['cpu_count']} CPU cores; Keras {keras.__version__}, "
        f"keras-hub {keras_hub.__version__}, NumPy {np.__version__}"
    )
    for name, count in hits.items():
        print(f"  {name:<22} {count / len(rows):6.1%} of the blanks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
