"""Skip-gram with negative sampling (notebook 03): the pairs, the noise, the batches, the model, and the geometry."""

import keras
import numpy as np
import pytest

from transformer_course.word_vectors import (
    SkipGram,
    SkipGramBatches,
    analogy,
    nearest_words,
    noise_distribution,
    skipgram_pairs,
)


def pairs_by_hand(row, window):
    return [
        (row[i], row[j])
        for i in range(len(row))
        for j in range(len(row))
        if i != j and abs(i - j) <= window and row[i] and row[j]
    ]


@pytest.mark.parametrize("window", [1, 2, 4])
def test_pairs_equal_a_hand_count_in_sentence_order_and_skip_padding(window):
    rows = np.array([[4, 5, 6, 7, 0, 0], [8, 9, 10, 11, 12, 13]])
    expected = pairs_by_hand(list(rows[0]), window) + pairs_by_hand(list(rows[1]), window)
    assert [tuple(pair) for pair in skipgram_pairs(rows, window).tolist()] == expected
    assert skipgram_pairs([3], 2).shape == (0, 2)
    with pytest.raises(ValueError, match="window"):
        skipgram_pairs(rows, 0)


def test_the_noise_lifts_rare_words_and_never_draws_padding():
    noise = noise_distribution([100, 1000, 10, 0])
    assert noise[0] == 0 and noise[3] == 0 and noise.sum() == pytest.approx(1.0)
    assert noise[2] / noise[1] > 10 / 1000  # 3/4 power: rare words drawn more than their share
    assert noise[2] / noise[1] == pytest.approx((10 / 1000) ** 0.75)
    with pytest.raises(ValueError, match="positive count"):
        noise_distribution([5, 0, 0])


def test_batches_hold_one_real_context_then_the_drawn_ones():
    pairs = np.array([[1, 2], [2, 1], [2, 3], [3, 2]])
    batches = SkipGramBatches(pairs, noise_distribution([0, 1, 1, 1]), negatives=3, batch_size=3, seed=0)
    assert len(batches) == 2
    inputs, labels = batches[0]
    assert inputs["context"].shape == (3, 4) and labels.tolist() == [[1, 0, 0, 0]] * 3
    real = {tuple(pair) for pair in pairs.tolist()}
    assert all((centre, context) in real for centre, context in zip(inputs["centre"], inputs["context"][:, 0]))
    assert set(np.unique(inputs["context"][:, 1:])) <= {1, 2, 3}


def test_training_puts_words_that_share_contexts_together():
    # Two interchangeable words (1 and 2) always between the same neighbours; 3 and 4 elsewhere.
    rng = np.random.default_rng(0)
    rows = np.array([[5, rng.choice([1, 2]), 6, 7, rng.choice([3, 4]), 8] for _ in range(400)])
    pairs = skipgram_pairs(rows, 1)
    counts = np.bincount(rows.ravel(), minlength=9)
    keras.utils.set_random_seed(0)
    model = SkipGram(9, 8)
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="binary_crossentropy")
    model.fit(SkipGramBatches(pairs, noise_distribution(counts), 3, 64, seed=0), epochs=3, verbose=0)
    vectors = model.word_vectors()
    assert nearest_words(vectors, vectors[1], 1, exclude=(1,))[0][0] == 2
    assert nearest_words(vectors, vectors[3], 1, exclude=(3,))[0][0] == 4
    assert SkipGram.from_config(model.get_config()).count_params() == model.count_params()


def test_analogies_read_the_offset_and_leave_the_question_out():
    table = np.zeros((6, 3))
    table[1], table[2] = [1, 0, 0], [1, 1, 0]  # "man", "woman": the offset is the second axis
    table[3], table[4] = [0, 0, 1], [0, 1, 1]  # "uncle", "aunt"
    table[5] = [0, 0, 1.1]  # near "uncle", but not the answer
    assert analogy(table, 1, 2, 3, count=1)[0][0] == 4
    assert all(index not in (0, 1, 2, 3) for index, _ in analogy(table, 1, 2, 3, count=3))
    with pytest.raises(ValueError, match="`query` must have shape"):
        nearest_words(table, np.ones(2))
