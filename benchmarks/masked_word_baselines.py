"""Yardsticks for notebook 08's masked-LM accuracy: how often counting neighbouring words fills a blank.

A masked-language-model accuracy means little alone. This script measures what three count
tables, built on the same reviews and vocabulary as notebook 08, get on the same kind of held-out
blanks:

* ``most frequent word``   always guess the most common word of the training text;
* ``word before``          the word seen most often after the word to the left of the blank;
* ``words on both sides``  the word seen most often between the blank's two neighbours, backing
                           off to the word before, then the word after, then the most frequent
                           word when a neighbour is itself hidden or the pair was never seen.

Text and vocabulary as notebook 08's full profile: the 25,000 IMDB training reviews, the first 5%
held out; the most frequent words after ``standardize_review``, plus padding, ``[UNK]``,
``[CLS]``, ``[SEP]`` and ``[MASK]``. The tables count every position of the other 95%. The
blanks: each held-out review's first ``pair_length - 2`` tokens between ``[CLS]`` and ``[SEP]``,
masked by ``mask_tokens`` (15% chosen; 80% ``[MASK]``, 10% a random word, 10% unchanged). A
table sees the corrupted neighbours, as the model does, but never the chosen token itself (the
model sees it in the 10% left unchanged). A blank whose answer is ``[UNK]`` counts like any other,
as in the notebook.

    .venv/bin/python benchmarks/masked_word_baselines.py [--seed 0]
"""

import argparse
import collections
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from transformer_course import profile  # noqa: E402
from transformer_course.datasets import load_imdb  # noqa: E402
from transformer_course.pretraining import mask_tokens  # noqa: E402
from transformer_course.runtime import hardware  # noqa: E402
from transformer_course.text import standardize_review  # noqa: E402

CLS, SEP, MASK = 2, 3, 4  # as notebook 08: 0 padding, 1 [UNK], then [CLS], [SEP], [MASK]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0, help="seeds the choice of blanks")
    arguments = parser.parse_args(argv)

    settings = profile("full").notebook("08")
    reviews = load_imdb()[0].texts
    counter = keras.layers.TextVectorization(max_tokens=settings.vocab_size - 3, standardize=standardize_review)
    counter.adapt(reviews, batch_size=512)
    vectorizer = keras.layers.TextVectorization(standardize=standardize_review, ragged=True,
                                                vocabulary=["[CLS]", "[SEP]", "[MASK]"] + counter.get_vocabulary()[2:])
    rows = vectorizer(reviews).to_list()
    held_out = int(len(rows) * settings.validation_fraction)

    unigram, before, after, both = collections.Counter(), {}, {}, {}
    for row in rows[held_out:]:
        row = [CLS, *row, SEP]
        for index in range(1, len(row) - 1):
            left, word, right = row[index - 1], row[index], row[index + 1]
            unigram[word] += 1
            before.setdefault(left, collections.Counter())[word] += 1
            after.setdefault(right, collections.Counter())[word] += 1
            both.setdefault((left, right), collections.Counter())[word] += 1
    most_frequent = unigram.most_common(1)[0][0]
    best = {name: {key: counts.most_common(1)[0][0] for key, counts in table.items()}
            for name, table in (("before", before), ("after", after), ("both", both))}

    length = settings.pair_length
    token_ids = np.zeros((held_out, length), dtype="int32")
    for index, row in enumerate(rows[:held_out]):
        kept = [CLS, *row[:length - 2], SEP]
        token_ids[index, :len(kept)] = kept
    masked, _, selected = mask_tokens(token_ids, np.random.default_rng(arguments.seed), len(vectorizer.get_vocabulary()),
                                      MASK, unselectable_token_ids=(0, CLS, SEP, MASK))

    hits = collections.Counter()
    rows_chosen, columns_chosen = np.nonzero(selected)
    for row, column in zip(rows_chosen, columns_chosen):
        answer, left, right = token_ids[row, column], masked[row, column - 1], masked[row, column + 1]
        guess_before = best["before"].get(left, most_frequent) if left != MASK else most_frequent
        guess_after = best["after"].get(right) if right != MASK else None
        guess_both = (best["both"].get((left, right)) if MASK not in (left, right) else None) or \
            (guess_before if left != MASK and left in best["before"] else guess_after or most_frequent)
        hits["most frequent word"] += answer == most_frequent
        hits["word before"] += answer == guess_before
        hits["words on both sides"] += answer == guess_both

    machine = hardware()
    blanks = len(rows_chosen)
    print(f"Count-table yardsticks for notebook 08's masked-LM accuracy: vocabulary {len(vectorizer.get_vocabulary()):,}; "
          f"tables from {len(rows) - held_out:,} training reviews; {blanks:,} blanks in the first {length - 2} tokens "
          f"of {held_out:,} held-out reviews (mask_tokens, seed {arguments.seed})")
    print(f"machine: {machine['processor']}, {machine['cpu_count']} CPU cores; Keras {keras.__version__}, "
          f"NumPy {np.__version__}")
    for name in ("most frequent word", "word before", "words on both sides"):
        print(f"  {name:<20} {hits[name] / blanks:6.1%} of the blanks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
