"""The reversal task of notebooks 01 and 02: one-hot sequences, made on the fly, and their scores.

Given ``[2, 8, 1, 6]``, predict ``[6, 1, 8, 2]`` — the lecture notes' toy seq2seq problem. Every
output step depends on an input step far away, and the right attention pattern is known in
advance (the anti-diagonal), which makes it a clean test bed for encoder-decoders and attention.

* :func:`one_hot_encode` / :func:`one_hot_decode` — integer symbols to one-hot vectors and back;
* :func:`reversal_dataset` — random training and test sequences;
* :func:`score_sequences` — a model's element and sequence accuracy on them.

Shape letters: N sequences, T time steps, F one-hot width (symbols ``0 .. F - 1``).
"""

from __future__ import annotations

import numpy as np

from ._validation import check_integer

__all__ = ["one_hot_encode", "one_hot_decode", "reversal_dataset", "score_sequences"]


def one_hot_encode(sequence, n_features: int) -> np.ndarray:
    """One-hot encode integer symbols.

    Args:
        sequence: integers in ``0 .. n_features - 1``, any shape ``S`` (a list, or an array of
            shape ``(T,)`` or ``(N, T)``).
        n_features: int, the one-hot width F.

    Returns:
        float32 array of shape ``S + (F,)`` with a single 1 in each last-axis vector.

    Raises:
        ValueError: if ``n_features < 1`` or a symbol is outside ``0 .. n_features - 1``
            (the message gives the first bad value).
    """
    n_features = check_integer("n_features", n_features)
    symbols = np.asarray(sequence)
    if symbols.size and not np.issubdtype(symbols.dtype, np.integer):
        raise ValueError(f"`sequence` must hold integers; received dtype {symbols.dtype}.")
    bad = (symbols < 0) | (symbols >= n_features)
    if np.any(bad):
        raise ValueError(
            f"`sequence` values must lie in 0..{n_features - 1} for n_features={n_features}; "
            f"received {symbols[bad].flat[0]}."
        )
    return np.eye(n_features, dtype="float32")[symbols]


def one_hot_decode(encoded) -> np.ndarray:
    """Turn one-hot vectors (or probabilities) back into symbols with argmax on the last axis.

    Args:
        encoded: array of shape ``S + (F,)``, one-hot vectors or probability distributions.

    Returns:
        int64 array of shape ``S``.

    Raises:
        ValueError: if ``encoded`` is a scalar.
    """
    encoded = np.asarray(encoded)
    if encoded.ndim < 1:
        raise ValueError("`encoded` must have a last axis of one-hot width; received a scalar.")
    return np.argmax(encoded, axis=-1).astype("int64")


def reversal_dataset(
    train_size: int = 2000,
    test_size: int = 200,
    n_timesteps_in: int = 4,
    n_features: int = 10,
    seed: int | None = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The reversal task: given ``[2, 8, 1, 6]``, predict ``[6, 1, 8, 2]``.

    Symbols are drawn uniformly from ``1 .. n_features - 1``; symbol 0 is never used, as in the
    lecture notes (so a zero vector can serve as the decoder's start input without clashing).

    Args:
        train_size: int >= 1, number of training sequences N_train.
        test_size: int >= 1, number of test sequences N_test.
        n_timesteps_in: int >= 1, sequence length T.
        n_features: int >= 2, one-hot width F.
        seed: int or None, seeds NumPy's ``default_rng``; the same seed gives the same data.

    Returns:
        ``(X_train, y_train, X_test, y_test)``, float32 one-hot arrays of shape ``(N, T, F)``;
        ``y[i]`` is ``X[i]`` reversed along the time axis.

    Raises:
        ValueError: naming the argument, for a size below its minimum or not an integer.
    """
    train_size = check_integer("train_size", train_size)
    test_size = check_integer("test_size", test_size)
    n_timesteps_in = check_integer("n_timesteps_in", n_timesteps_in)
    n_features = check_integer("n_features", n_features, 2)
    generator = np.random.default_rng(seed)

    def make(size: int) -> tuple[np.ndarray, np.ndarray]:
        symbols = generator.integers(1, n_features, size=(size, n_timesteps_in))
        return one_hot_encode(symbols, n_features), one_hot_encode(symbols[:, ::-1], n_features)

    X_train, y_train = make(train_size)
    X_test, y_test = make(test_size)
    return X_train, y_train, X_test, y_test


def score_sequences(model, X, y, batch_size: int = 1024) -> tuple[float, float]:
    """A model's element and sequence accuracy on one-hot inputs and targets.

    Args:
        model: a Keras model mapping float32 ``(N, T_in, F)`` to probabilities ``(N, T, F)``
            (called with ``training=False``: no dropout).
        X: float32 ``(N, T_in, F)`` one-hot inputs.
        y: float32 ``(N, T, F)`` one-hot targets.
        batch_size: int, sequences per call (memory only; the result does not depend on it).

    Returns:
        ``(element_accuracy, sequence_accuracy)``, floats in [0, 1]: the share of output steps
        whose most likely symbol is right, and the share of sequences right at every step.

    Raises:
        ValueError: if ``X`` and ``y`` hold different numbers of sequences, or as
            :func:`transformer_course.metrics.element_accuracy`.
    """
    from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

    # isort: split
    import keras

    from .metrics import element_accuracy, sequence_accuracy

    if len(X) != len(y):
        raise ValueError(f"`X` and `y` must hold the same number of sequences; received {len(X)} and {len(y)}.")
    batch_size = check_integer("batch_size", batch_size)
    predicted = np.concatenate(
        [
            keras.ops.convert_to_numpy(model(X[begin : begin + batch_size], training=False))
            for begin in range(0, len(X), batch_size)
        ]
    )
    return element_accuracy(y, predicted), sequence_accuracy(y, predicted)
