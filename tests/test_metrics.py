import numpy as np
import pytest

from transformer_course import metrics
from transformer_course.metrics import element_accuracy, sequence_accuracy
from transformer_course.reversal import one_hot_encode


def test_accuracies_on_a_known_example():
    targets = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    predictions = np.array([[1, 2, 3, 4], [5, 6, 0, 8]])  # 7 of 8 steps, 1 of 2 sequences
    assert element_accuracy(targets, predictions) == pytest.approx(7 / 8)
    assert sequence_accuracy(targets, predictions) == pytest.approx(1 / 2)


def test_probabilities_are_scored_by_argmax():
    targets = one_hot_encode([[1, 2]], 3)
    probabilities = np.array([[[0.2, 0.7, 0.1], [0.5, 0.2, 0.3]]])  # right, then wrong
    assert element_accuracy(targets, probabilities) == pytest.approx(0.5)
    assert sequence_accuracy(targets, probabilities) == 0.0


def test_mismatched_shapes_are_rejected():
    with pytest.raises(ValueError, match="same \\(N, T\\) sequences"):
        element_accuracy(np.zeros((2, 4), int), np.zeros((2, 5), int))
    with pytest.raises(ValueError, match="`y_pred` must be"):
        sequence_accuracy(np.zeros((2, 4), int), np.zeros(4))
    with pytest.raises(ValueError, match="no sequences"):
        element_accuracy(np.zeros((0, 4), int), np.zeros((0, 4), int))


def test_anti_diagonal_mass():
    from transformer_course.metrics import anti_diagonal_attention_mass

    perfect = np.eye(4)[::-1][None]  # step t looks only at position 3 - t
    assert anti_diagonal_attention_mass(perfect) == 1.0
    assert anti_diagonal_attention_mass(np.full((2, 4, 4), 0.25)) == pytest.approx(0.25)
    with pytest.raises(ValueError, match="T == S"):
        anti_diagonal_attention_mass(np.ones((2, 3, 4)))


def test_masked_metrics_ignore_padding():
    import keras

    from transformer_course.metrics import masked_accuracy, masked_loss

    y_true = np.array([[3, 1, 2, 0, 0], [1, 1, 0, 0, 0]])
    generator = np.random.default_rng(0)
    y_pred = generator.dirichlet(np.ones(4), size=(2, 5)).astype("float32")  # (B, T, V)
    real = y_true != 0
    # Reference: Keras' own loss with the padding weighted out, and a NumPy count.
    reference = keras.losses.SparseCategoricalCrossentropy(reduction="sum")(y_true, y_pred, sample_weight=real)
    assert float(masked_loss(y_true, y_pred)) == pytest.approx(float(reference) / real.sum(), rel=1e-5)
    expected = (y_pred.argmax(-1) == y_true)[real].mean()
    assert float(masked_accuracy(y_true, y_pred)) == pytest.approx(expected)
    # Whatever the model predicts at padded positions changes neither number.
    changed = y_pred.copy()
    changed[~real] = np.eye(4)[0]  # predicting "padding" there would inflate a plain accuracy
    assert float(masked_loss(y_true, changed)) == pytest.approx(float(masked_loss(y_true, y_pred)), rel=1e-6)
    assert float(masked_accuracy(y_true, changed)) == pytest.approx(expected)
    plain_accuracy = (changed.argmax(-1) == y_true).mean()
    assert plain_accuracy > expected  # why the masked version exists
    assert float(masked_accuracy(np.zeros((1, 3), int), y_pred[:1, :3])) == 0.0


def test_corpus_bleu_against_known_values():
    from transformer_course.metrics import corpus_bleu

    references = ["el gato está en la alfombra", "hoy hace mucho frío"]
    score, signature = corpus_bleu(references, references)
    assert score == pytest.approx(100.0)
    assert signature.startswith("nrefs:1|case:mixed") and "tok:13a" in signature
    assert corpus_bleu(["completely different words here", "nothing alike"], references)[0] < 10
    # The argument order matters: a short hypothesis is penalised, a short reference is not.
    short, long = ["el gato"], ["el gato está en la alfombra"]
    assert corpus_bleu(short, long)[0] < corpus_bleu(long, short)[0]


def test_corpus_bleu_checks_its_arguments():
    from transformer_course.metrics import corpus_bleu

    with pytest.raises(ValueError, match="pair up one to one; received 1 and 2"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="`hypotheses` must be a list of str"):
        corpus_bleu("a single string", ["a"])


def test_masked_cross_entropy_smooths_labels_and_skips_padding():
    import keras

    from transformer_course.metrics import MaskedCrossEntropy, masked_loss

    probabilities = np.array([[[0.7, 0.2, 0.1], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]]], "float32")
    labels = np.array([[1, 2, 0]])  # the last position is padding
    plain = float(MaskedCrossEntropy()(labels, probabilities))
    np.testing.assert_allclose(plain, float(masked_loss(labels, probabilities)), rtol=1e-5)
    np.testing.assert_allclose(plain, -(np.log(0.2) + np.log(0.3)) / 2, rtol=1e-5)
    smoothed = float(MaskedCrossEntropy(label_smoothing=0.1)(labels, probabilities))
    by_hand = np.mean(
        [
            0.9 * -np.log(p[t]) + 0.1 * -np.mean(np.log(p))
            for p, t in ((probabilities[0, 0], 1), (probabilities[0, 1], 2))
        ]
    )
    np.testing.assert_allclose(smoothed, by_hand, rtol=1e-5)
    assert keras.losses.deserialize(keras.losses.serialize(MaskedCrossEntropy(0.1))).label_smoothing == 0.1
    with pytest.raises(ValueError, match="label_smoothing"):
        MaskedCrossEntropy(1.0)


# --- diversity and repetition of generated text (notebook 09) ------------------------------


def test_distinct_n_counts_over_the_whole_set_and_ignores_padding():
    from transformer_course.metrics import distinct_n

    texts = [[1, 2, 3, 0, 0], [1, 2, 4]]  # bigrams (1,2) (2,3) (1,2) (2,4): 3 distinct of 4
    assert distinct_n(texts, 2) == 0.75
    assert distinct_n([["the", "film", "the", "film"]], 1) == 0.5
    assert distinct_n([[5]], 2) == 0.0
    with pytest.raises(TypeError, match="split each text into tokens first"):
        distinct_n(["a good film"], 2)


def test_repetition_rate_is_zero_without_repeats_and_high_for_a_loop():
    from transformer_course.metrics import repetition_rate

    assert repetition_rate([[1, 2, 3, 4, 5, 6]], 2) == 0.0
    loop = [7, 8, 9] * 10  # 28 trigrams, 3 distinct
    assert repetition_rate([loop], 3) == pytest.approx(1 - 3 / 28)
    assert repetition_rate([loop, [1, 2, 3]], 3) == pytest.approx((1 - 3 / 28 + 0.0) / 2)
    assert repetition_rate([[1, 2]], 4) == 0.0  # too short to have a 4-gram: left out


def test_mean_interval_is_the_student_t_interval_worked_by_hand():
    # [1, 2, 3]: mean 2, standard deviation 1, standard error 1/sqrt(3); t(0.975, df 2) = 4.302653
    mean, low, high = metrics.mean_interval([1.0, 2.0, 3.0])
    half_width = 4.302653 / np.sqrt(3)
    assert mean == pytest.approx(2.0)
    assert (low, high) == pytest.approx((2.0 - half_width, 2.0 + half_width), abs=1e-5)
    one = metrics.mean_interval([0.25])
    assert one[0] == 0.25 and np.isnan(one[1]) and np.isnan(one[2])
    with pytest.raises(ValueError, match="values"):
        metrics.mean_interval([])
    with pytest.raises(ValueError, match="confidence"):
        metrics.mean_interval([1.0, 2.0], confidence=95)


def test_the_bootstrap_interval_of_a_share_is_near_the_binomial_one():
    values = np.array([1.0] * 240 + [0.0] * 160)  # 60% of 400: the binomial standard error is 0.0245
    mean, low, high = metrics.bootstrap_interval(values, seed=1)
    assert mean == pytest.approx(0.6)
    assert (low, high) == pytest.approx((0.6 - 1.96 * 0.0245, 0.6 + 1.96 * 0.0245), abs=0.006)
    assert metrics.bootstrap_interval(values, seed=1) == (mean, low, high)  # the same seed, the same interval
    assert metrics.bootstrap_interval([0.5, 0.5, 0.5]) == (0.5, 0.5, 0.5)
    with pytest.raises(ValueError, match="`values` must be one-dimensional with at least 2 values"):
        metrics.bootstrap_interval([1.0])
    with pytest.raises(ValueError, match="`resamples`"):
        metrics.bootstrap_interval([0.0, 1.0], resamples=10)
