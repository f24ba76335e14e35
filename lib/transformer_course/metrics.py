"""Metrics the course reports.

A language model's scores (notebooks 09 and 11): :func:`token_log_probabilities` of a test text,
its :func:`perplexity` per token and its :func:`bits_per_character`, beside general-purpose
compressors' (:func:`compressor_bits_per_character`) on the same text.

Sequence-to-sequence accuracy comes in two strengths: **element accuracy** counts every output
step that is right, **sequence accuracy** counts a sequence only if every step is right.

For translation, :func:`masked_loss` and :func:`masked_accuracy` ignore padding: a padded target
position (id 0) is neither a loss to minimise nor a free point of accuracy.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import bz2
import lzma
import math
import zlib

import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_rate
from .masks import PADDING_ID, padding_mask

__all__ = [
    "element_accuracy",
    "sequence_accuracy",
    "anti_diagonal_attention_mass",
    "masked_loss",
    "MaskedCrossEntropy",
    "masked_accuracy",
    "corpus_bleu",
    "distinct_n",
    "repetition_rate",
    "token_log_probabilities",
    "perplexity",
    "bits_per_character",
    "compressor_bits_per_character",
    "mean_interval",
    "bootstrap_interval",
]


def _symbols(name: str, values) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim == 3:  # (N, T, F) one-hot vectors or probabilities
        return np.argmax(values, axis=-1)
    if values.ndim == 2 and np.issubdtype(values.dtype, np.integer):  # (N, T) symbols
        return values
    raise ValueError(
        f"`{name}` must be one-hot/probabilities of shape (N, T, F) or integer symbols of shape "
        f"(N, T); received shape {values.shape} and dtype {values.dtype}."
    )


def _aligned(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    true, predicted = _symbols("y_true", y_true), _symbols("y_pred", y_pred)
    if true.shape != predicted.shape:
        raise ValueError(
            f"`y_true` and `y_pred` must describe the same (N, T) sequences; received "
            f"{true.shape} and {predicted.shape}."
        )
    if true.size == 0:
        raise ValueError("`y_true` holds no sequences; accuracy of nothing is undefined.")
    return true, predicted


def element_accuracy(y_true, y_pred) -> float:
    """Fraction of output steps whose most likely symbol is the true one.

    Args:
        y_true: one-hot ``(N, T, F)`` or integer ``(N, T)`` targets.
        y_pred: probabilities or one-hot ``(N, T, F)``, or integer ``(N, T)`` predictions.

    Returns:
        float in [0, 1].

    Raises:
        ValueError: if the shapes disagree, a rank is wrong, or there is nothing to score.
    """
    true, predicted = _aligned(y_true, y_pred)
    return float(np.mean(true == predicted))


def sequence_accuracy(y_true, y_pred) -> float:
    """Fraction of sequences whose every step is right (exact match).

    Arguments, return value and errors as :func:`element_accuracy`.
    """
    true, predicted = _aligned(y_true, y_pred)
    return float(np.mean(np.all(true == predicted, axis=-1)))


def anti_diagonal_attention_mass(attention_weights) -> float:
    """Mean attention weight that output step t puts on input position S - 1 - t.

    For the reversal task that is exactly the input symbol step t must copy, so a model that
    attends perfectly scores 1.0; uniform attention over S positions scores 1 / S.

    Args:
        attention_weights: float array ``(N, T, S)`` with T == S, each row summing to 1.

    Returns:
        float in [0, 1].

    Raises:
        ValueError: if the array is not rank 3 with T == S.
    """
    weights = np.asarray(attention_weights)
    if weights.ndim != 3 or weights.shape[1] != weights.shape[2]:
        raise ValueError(f"`attention_weights` must have shape (N, T, S) with T == S; received shape {weights.shape}.")
    steps = weights.shape[1]
    return float(np.mean(weights[:, np.arange(steps), steps - 1 - np.arange(steps)]))


def _real_tokens(y_true, padding_id: int = PADDING_ID):
    return ops.cast(padding_mask(y_true, padding_id), "float32")


@keras.saving.register_keras_serializable(package="transformer_course")
def masked_loss(y_true, y_pred):
    """Mean cross-entropy over real target tokens only (id 0 is padding).

    Args:
        y_true: int ``(B, T)`` target ids; 0 marks padding.
        y_pred: float ``(B, T, V)`` probabilities (a softmax output).

    Returns:
        float32 scalar: the sum of per-token cross-entropies at real positions divided by the
        number of real positions (0 if there are none).
    """
    per_token = keras.losses.sparse_categorical_crossentropy(y_true, y_pred)  # (B, T)
    real = _real_tokens(y_true)
    return ops.sum(per_token * real) / ops.maximum(ops.sum(real), 1.0)


@keras.saving.register_keras_serializable(package="transformer_course")
class MaskedCrossEntropy(keras.losses.Loss):
    """Cross-entropy over real target tokens only, with optional label smoothing.

    With ``label_smoothing`` ε the target is not a one-hot vector but ``(1 - ε)`` on the true id
    plus ``ε / V`` spread over all V ids, so the loss per token is
    ``(1 - ε) · (-log p_true) + ε · mean_v(-log p_v)``. The model is discouraged from putting all
    its probability on one word, which regularises it (Szegedy et al., 2016, §7; Vaswani et al.,
    2017, §5.4 use ε = 0.1). With ε = 0 this is :func:`masked_loss`.

    Args:
        label_smoothing: float in [0, 1), ε.
        **kwargs: passed to ``keras.losses.Loss`` (``name``).

    Call arguments:
        y_true: int ``(B, T)`` target ids; 0 marks padding.
        y_pred: float ``(B, T, V)`` probabilities (a softmax output).

    Returns:
        float32 scalar: the mean over real positions (0 if there are none).

    Raises:
        ValueError: for a ``label_smoothing`` outside [0, 1).
    """

    def __init__(self, label_smoothing: float = 0.0, name: str = "masked_cross_entropy", **kwargs):
        label_smoothing = check_rate("label_smoothing", label_smoothing)
        super().__init__(name=name, reduction=None, **kwargs)
        self.label_smoothing = label_smoothing

    def call(self, y_true, y_pred):
        y_pred = ops.cast(y_pred, "float32")
        log_probabilities = ops.log(ops.clip(y_pred, keras.config.epsilon(), 1.0))  # (B, T, V)
        true_ids = ops.expand_dims(ops.cast(y_true, "int32"), -1)
        per_token = -ops.squeeze(ops.take_along_axis(log_probabilities, true_ids, axis=-1), -1)  # (B, T)
        if self.label_smoothing:
            mean_log_probability = ops.mean(log_probabilities, axis=-1)  # the uniform target's part
            per_token = (1.0 - self.label_smoothing) * per_token - self.label_smoothing * mean_log_probability
        real = _real_tokens(y_true)
        return ops.sum(per_token * real) / ops.maximum(ops.sum(real), 1.0)

    def get_config(self):
        return {"name": self.name, "label_smoothing": self.label_smoothing}


@keras.saving.register_keras_serializable(package="transformer_course")
def masked_accuracy(y_true, y_pred):
    """Share of real target tokens (id != 0) whose most likely predicted id is right.

    Args:
        y_true: int ``(B, T)`` target ids; 0 marks padding.
        y_pred: float ``(B, T, V)`` probabilities or logits.

    Returns:
        float32 scalar in [0, 1] (0 if there are no real tokens).
    """
    real = _real_tokens(y_true)
    hits = ops.cast(ops.equal(ops.argmax(y_pred, axis=-1), ops.cast(y_true, "int64")), "float32")
    return ops.sum(hits * real) / ops.maximum(ops.sum(real), 1.0)


def corpus_bleu(hypotheses, references) -> tuple[float, str]:
    """Corpus BLEU of translations against one reference each, computed by sacrebleu.

    The order matters: ``hypotheses`` are what the model wrote, ``references`` the human
    translations. (Swapping them changes the brevity penalty and the score.) sacrebleu applies its
    own standard tokenisation (``13a``) and is case-sensitive; normalise both sides the same way
    before calling, and report the returned signature with the score.

    Args:
        hypotheses: list of N str, the model's translations.
        references: list of N str, one reference translation for each hypothesis.

    Returns:
        ``(score, signature)``: BLEU in [0, 100] and sacrebleu's signature string, e.g.
        ``"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"``.

    Raises:
        ValueError: if either argument is not a list of str, or their lengths differ, or they
            are empty.

    Source: Papineni et al., 2002, "BLEU: a Method for Automatic Evaluation of Machine
    Translation"; Post, 2018, "A Call for Clarity in Reporting BLEU Scores" (sacrebleu).
    """
    from sacrebleu.metrics import BLEU

    for name, texts in (("hypotheses", hypotheses), ("references", references)):
        if isinstance(texts, str) or not all(isinstance(text, str) for text in texts):
            raise ValueError(f"`{name}` must be a list of str, one per sentence; received {type(texts).__name__}.")
    if len(hypotheses) != len(references) or not hypotheses:
        raise ValueError(
            "`hypotheses` and `references` must be non-empty and pair up one to one; received "
            f"{len(hypotheses)} and {len(references)}."
        )
    bleu = BLEU()
    result = bleu.corpus_score(list(hypotheses), [list(references)])
    return float(result.score), str(bleu.get_signature())


def _ngrams(tokens, n: int) -> list[tuple]:
    return [tuple(tokens[index : index + n]) for index in range(len(tokens) - n + 1)]


def _token_lists(name: str, texts) -> list[list]:
    if isinstance(texts, str) or not hasattr(texts, "__iter__"):
        raise TypeError(f"`{name}` must be a list of token sequences (lists of ids or words); received {texts!r:.60}.")
    lists = []
    for text in texts:
        if isinstance(text, str):
            raise TypeError(
                f"`{name}` must hold token sequences, not strings: split each text into tokens first; "
                f"received {text!r:.60}."
            )
        lists.append([token for token in np.asarray(text).tolist() if token != PADDING_ID])  # padding is not text
    return lists


def distinct_n(texts, n: int = 2) -> float:
    """The share of distinct n-grams among all n-grams of a set of generated texts (distinct-n).

    Higher means more varied text. Counted over the whole set, as Li et al. (2016), "A
    Diversity-Promoting Objective Function for Neural Conversation Models", NAACL, §4.3, define it.

    Args:
        texts: a list of token sequences (lists or 1-D arrays of ids, or lists of words); id 0
            (padding) is dropped.
        n: int >= 1.

    Returns:
        float in [0, 1]; 0.0 when the texts hold no n-gram.

    Raises:
        TypeError: if ``texts`` is a string or holds strings (tokenise first).
        ValueError: for an ``n`` that is not a positive integer.
    """
    from ._validation import check_integer

    n = check_integer("n", n)
    grams = [gram for tokens in _token_lists("texts", texts) for gram in _ngrams(tokens, n)]
    return len(set(grams)) / len(grams) if grams else 0.0


def repetition_rate(texts, n: int = 4) -> float:
    """How much each text repeats itself: the mean over texts of 1 - distinct n-grams / n-grams.

    ``seq-rep-n`` of Welleck et al. (2020), "Neural Text Generation with Unlikelihood Training",
    ICLR, §5: 0 for a text that never repeats an n-gram, near 1 for a text stuck in a loop.
    Texts shorter than n are left out.

    Args:
        texts: a list of token sequences, as :func:`distinct_n` takes.
        n: int >= 1.

    Returns:
        float in [0, 1]; 0.0 when no text has an n-gram.

    Raises:
        TypeError / ValueError: as :func:`distinct_n`.
    """
    from ._validation import check_integer

    n = check_integer("n", n)
    rates = [
        1.0 - len(set(grams)) / len(grams)
        for grams in (_ngrams(tokens, n) for tokens in _token_lists("texts", texts))
        if grams
    ]
    return float(np.mean(rates)) if rates else 0.0


def token_log_probabilities(model: keras.Model, inputs, targets, batch_size: int = 32) -> np.ndarray:
    """The natural-log probability the model gives each target token, batch by batch.

    Only the probability of the true next token is kept from each ``(b, L, V)`` output, so the
    whole test set can be scored without holding every distribution in memory.

    Args:
        model: a language model from
            :func:`~transformer_course.language_model.build_language_model` (int ``(B, L)`` -> ``(B, L, V)``).
        inputs: int ``(R, L)`` token ids.
        targets: int ``(R, L)``, the next token at each position; 0 = padding (not scored).
        batch_size: int, rows per forward pass.

    Returns:
        float64 ``(R, L)``: log P(target | inputs up to that position); 0.0 where the target is
        padding.

    Raises:
        ValueError: if ``inputs`` and ``targets`` differ in shape or are not 2-D.
    """
    inputs, targets = np.asarray(inputs, dtype="int32"), np.asarray(targets, dtype="int32")
    if inputs.shape != targets.shape or inputs.ndim != 2:
        raise ValueError(
            f"`inputs` and `targets` must both have shape (rows, length); received {inputs.shape} and {targets.shape}."
        )
    batch_size = check_integer("batch_size", batch_size)
    scores = np.zeros(targets.shape, dtype="float64")
    for start in range(0, len(inputs), batch_size):
        rows = slice(start, start + batch_size)
        probabilities = model(inputs[rows], training=False)  # (b, L, V)
        chosen = ops.take_along_axis(probabilities, ops.expand_dims(targets[rows], -1), axis=-1)[..., 0]
        chosen = ops.convert_to_numpy(ops.cast(chosen, "float32")).astype("float64")
        scores[rows] = np.where(targets[rows] != PADDING_ID, np.log(np.maximum(chosen, np.finfo("float32").tiny)), 0.0)
    return scores


def perplexity(log_probabilities, targets) -> float:
    """exp of the mean negative log-likelihood over the real (non-padding) target tokens.

    Args:
        log_probabilities: float ``(R, L)`` from :func:`token_log_probabilities`.
        targets: int ``(R, L)``; 0 = padding, left out of the mean.

    Returns:
        float >= 1. A model that spreads its probability evenly over V words scores V.

    Raises:
        ValueError: if there is no real target token.
    """
    real = np.asarray(targets) != PADDING_ID
    if not real.any():
        raise ValueError("`targets` holds no real token (all padding): perplexity is undefined.")
    return float(np.exp(-np.asarray(log_probabilities, dtype="float64")[real].mean()))


def bits_per_character(log_probabilities, targets, characters: int) -> float:
    """The model's code length of a text: summed negative log-likelihood in bits, per character.

    A language model is a compressor: an arithmetic coder driven by its next-token probabilities
    writes a text in (almost exactly) ``-sum log2 p`` bits. Dividing by the characters the
    scored tokens cover gives a number independent of the tokeniser, comparable with any other
    model — and with general-purpose compressors on the same text
    (:func:`compressor_bits_per_character`).

    Args:
        log_probabilities: float ``(R, L)`` natural-log probabilities from
            :func:`token_log_probabilities`; padding targets hold 0 and add nothing.
        targets: int ``(R, L)``; 0 = padding, not counted.
        characters: int > 0, the number of characters (Unicode code points) of the text the
            real targets spell out.

    Returns:
        float, bits per character.

    Raises:
        ValueError: for ``characters`` below 1, or targets without a real token.

    Example:
        >>> round(bits_per_character(np.log([[0.5, 0.25]]), np.array([[5, 6]]), characters=3), 6)
        1.0
    """
    characters = check_integer("characters", characters)
    real = np.asarray(targets) != PADDING_ID
    if not real.any():
        raise ValueError("`targets` holds no real token (all padding): there is nothing to score.")
    return float(-np.asarray(log_probabilities, dtype="float64")[real].sum() / math.log(2) / characters)


def compressor_bits_per_character(text: str) -> dict[str, float]:
    """Bits per character of ``text`` after three general-purpose compressors of Python's standard library.

    The text is encoded as UTF-8 and compressed whole with ``zlib`` (level 9, DEFLATE: LZ77 and
    Huffman codes), ``bz2`` (level 9, the Burrows-Wheeler transform) and ``lzma`` (preset
    ``9 | PRESET_EXTREME``, the xz format: LZ77 with range coding); each result is the compressed
    size in bits divided by the characters of ``text``. A language model's
    :func:`bits_per_character` on the same text is the fair comparison.

    Args:
        text: str, non-empty.

    Returns:
        dict ``{"zlib -9": float, "bz2 -9": float, "xz -9e": float}``, bits per character.

    Raises:
        ValueError: for an empty ``text``; TypeError for a ``text`` that is not a str.

    Example:
        >>> scores = compressor_bits_per_character("the film was good. " * 200)
        >>> scores["xz -9e"] < 1.0  # a repeated sentence compresses to almost nothing
        True
    """
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a str; received {type(text).__name__}.")
    if not text:
        raise ValueError("`text` must not be empty.")
    data = text.encode("utf-8")
    sizes = {
        "zlib -9": len(zlib.compress(data, 9)),
        "bz2 -9": len(bz2.compress(data, 9)),
        "xz -9e": len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME)),
    }
    return {name: 8 * size / len(text) for name, size in sizes.items()}


def mean_interval(values, confidence: float = 0.95) -> tuple[float, float, float]:
    """The mean of ``values`` and the Student-t confidence interval for it, over n - 1 degrees of freedom.

    What the course reports for a difference over paired seeds (notebooks 11 and 12): each seed's
    difference is one value; the interval is "separated" from zero only where it excludes it. The
    interval comes from SciPy (``scipy.stats.ttest_1samp(...).confidence_interval``).

    Args:
        values: float array-like (n,), n >= 1: one value per seed.
        confidence: float in (0, 1), the interval's confidence level (0.95 by default).

    Returns:
        ``(mean, low, high)``: three Python floats; ``low`` and ``high`` are NaN when n = 1 (one
        value has no spread to estimate).

    Raises:
        ValueError: ``values`` is empty or not one-dimensional, or ``confidence`` is not in (0, 1).

    Example:
        >>> mean, low, high = mean_interval([1.0, 2.0, 3.0])  # t(0.975, 2 degrees of freedom) = 4.303
        >>> round(mean, 4), round(low, 4), round(high, 4)
        (2.0, -0.4841, 4.4841)
    """
    values = np.asarray(values, dtype="float64")
    if values.ndim != 1 or len(values) == 0:
        raise ValueError(f"values must be a non-empty 1-D sequence (one value per seed); received shape {values.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1); received {confidence!r}")
    if len(values) < 2:
        return float(values.mean()), math.nan, math.nan
    from scipy import stats  # scikit-learn's dependency; imported here, where it is needed

    low, high = stats.ttest_1samp(values, 0.0).confidence_interval(confidence)
    return float(values.mean()), float(low), float(high)


def bootstrap_interval(values, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0):
    """The mean of per-example ``values`` and a bootstrap interval for it: the test set's own sampling noise.

    What a finite test set adds to a seed interval: the examples are a sample too. Each value is
    one example's score, or one example's paired difference between two models (1 − 0 where only
    the second is right); resampling the examples with replacement gives the spread of the mean a
    new test set of the same size would show. The interval is SciPy's percentile bootstrap
    (``scipy.stats.bootstrap``), which stays defined where every value is equal (a zero-width
    interval). Average a model's seeds per example first to count the test set with the seeds'
    mean; the seeds' own spread is :func:`mean_interval`'s.

    Args:
        values: float array-like ``(n,)``, n >= 2, one value per example.
        confidence: float in (0, 1).
        resamples: int >= 100, bootstrap resamples.
        seed: int, the resampling's seed (the same seed, the same interval).

    Returns:
        ``(mean, low, high)``: three Python floats.

    Raises:
        ValueError: for fewer than 2 values or values not one-dimensional, ``confidence`` outside
            (0, 1), or fewer than 100 resamples.

    Source: Efron and Tibshirani, 1993, *An Introduction to the Bootstrap*, ch. 13 (the percentile
    interval).

    Example:
        >>> mean, low, high = bootstrap_interval([1.0] * 60 + [0.0] * 40)  # binomial error: 0.049
        >>> round(mean, 2), low < 0.52 and 0.48 < 0.6 < high < 0.7
        (0.6, True)
    """
    values = np.asarray(values, dtype="float64")
    if values.ndim != 1 or len(values) < 2:
        raise ValueError(f"`values` must be one-dimensional with at least 2 values; received shape {values.shape}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"`confidence` must be in (0, 1); received {confidence!r}.")
    resamples = check_integer("resamples", resamples, minimum=100)
    if np.all(values == values[0]):
        return float(values[0]), float(values[0]), float(values[0])
    from scipy import stats

    result = stats.bootstrap((values,), np.mean, confidence_level=confidence, n_resamples=resamples,
                             method="percentile", random_state=np.random.default_rng(seed))  # fmt: skip
    return float(values.mean()), float(result.confidence_interval.low), float(result.confidence_interval.high)
