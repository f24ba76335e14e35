import numpy as np
import pytest

from transformer_course.reversal import one_hot_decode, one_hot_encode, reversal_dataset


def test_lecture_notes_example_round_trips():
    encoded = one_hot_encode([2, 8, 1, 6], n_features=10)
    assert encoded.shape == (4, 10) and encoded.dtype == np.float32
    assert encoded.sum(axis=1).tolist() == [1, 1, 1, 1]
    assert [int(np.flatnonzero(row)[0]) for row in encoded] == [2, 8, 1, 6]
    assert one_hot_decode(encoded).tolist() == [2, 8, 1, 6]


def test_one_hot_encode_keeps_batch_shape():
    symbols = np.array([[1, 2, 3], [4, 5, 6]])
    encoded = one_hot_encode(symbols, 7)
    assert encoded.shape == (2, 3, 7)
    np.testing.assert_array_equal(one_hot_decode(encoded), symbols)


@pytest.mark.parametrize("sequence", [[0, 10], [-1], [3, 12]])
def test_one_hot_encode_rejects_out_of_range_symbols(sequence):
    with pytest.raises(ValueError, match="`sequence` values must lie in 0..9"):
        one_hot_encode(sequence, 10)


def test_one_hot_encode_rejects_floats():
    with pytest.raises(ValueError, match="integers"):
        one_hot_encode([1.5, 2.0], 10)


def test_reversal_dataset_shapes_and_targets():
    X_train, y_train, X_test, y_test = reversal_dataset(2000, 200, 4, 10, seed=0)
    assert X_train.shape == y_train.shape == (2000, 4, 10)
    assert X_test.shape == y_test.shape == (200, 4, 10)
    for X, y in [(X_train, y_train), (X_test, y_test)]:
        assert set(np.unique(X)) == {0.0, 1.0} and (X.sum(-1) == 1).all()
        np.testing.assert_array_equal(one_hot_decode(y), one_hot_decode(X)[:, ::-1])


def test_reversal_symbols_avoid_zero_and_cover_the_rest():
    X_train, *_ = reversal_dataset(2000, 10, 4, 10, seed=1)
    symbols = one_hot_decode(X_train)
    assert symbols.min() == 1 and symbols.max() == 9
    assert set(np.unique(symbols)) == set(range(1, 10))


def test_reversal_dataset_is_reproducible_per_seed():
    first = reversal_dataset(50, 10, 5, 8, seed=3)
    again = reversal_dataset(50, 10, 5, 8, seed=3)
    other = reversal_dataset(50, 10, 5, 8, seed=4)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize(
    "argument, value",
    [
        ("train_size", 0),
        ("test_size", -5),
        ("n_timesteps_in", 0),
        ("n_features", 1),
        ("train_size", 2.5),
        ("n_features", True),
    ],
)
def test_invalid_sizes_name_the_argument(argument, value):
    arguments = dict(train_size=10, test_size=10, n_timesteps_in=4, n_features=10)
    arguments[argument] = value
    with pytest.raises(ValueError, match=f"`{argument}` must be (a positive integer|an integer >= 2)"):
        reversal_dataset(**arguments)


def test_split_pairs_is_seeded_and_complete():
    from transformer_course.datasets import split_pairs

    pairs = [(f"en {i}", f"es {i}") for i in range(1000)]
    train, validation, test = split_pairs(pairs, seed=3)
    assert (len(train), len(validation), len(test)) == (700, 150, 150)
    assert sorted(train + validation + test) == sorted(pairs)
    assert split_pairs(pairs, seed=3) == (train, validation, test)
    assert split_pairs(pairs, seed=4)[0] != train
    with pytest.raises(ValueError, match="`fractions` must be three positive numbers"):
        split_pairs(pairs, fractions=(0.8, 0.3, 0.1))
    with pytest.raises(ValueError, match="empty"):
        split_pairs([])


def test_score_sequences_counts_steps_and_whole_sequences():
    import keras

    from transformer_course.reversal import score_sequences

    y = one_hot_encode([[1, 2, 3], [4, 5, 6]], 7)
    answers = one_hot_encode([[1, 2, 3], [4, 5, 0]], 7)  # the second sequence has one wrong step
    model = keras.Sequential([keras.Input((3, 7)), keras.layers.Identity()])
    element, sequence = score_sequences(model, answers, y, batch_size=1)
    assert element == 5 / 6 and sequence == 0.5
    with pytest.raises(ValueError, match="same number of sequences"):
        score_sequences(model, answers, y[:1])
