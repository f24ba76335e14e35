"""Metrics the course reports.

Sequence-to-sequence accuracy comes in two strengths: **element accuracy** counts every output
step that is right, **sequence accuracy** counts a sequence only if every step is right.

For translation, :func:`masked_loss` and :func:`masked_accuracy` ignore padding: a padded target
position (id 0) is neither a loss to minimise nor a free point of accuracy.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_rate
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
        raise ValueError(
            "`attention_weights` must have shape (N, T, S) with T == S; received shape "
            f"{weights.shape}."
        )
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
    return [tuple(tokens[index:index + n]) for index in range(len(tokens) - n + 1)]


def _token_lists(name: str, texts) -> list[list]:
    if isinstance(texts, str) or not hasattr(texts, "__iter__"):
        raise TypeError(f"`{name}` must be a list of token sequences (lists of ids or words); received {texts!r:.60}.")
    lists = []
    for text in texts:
        if isinstance(text, str):
            raise TypeError(f"`{name}` must hold token sequences, not strings: split each text into tokens first; "
                            f"received {text!r:.60}.")
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
    rates = [1.0 - len(set(grams)) / len(grams)
             for grams in (_ngrams(tokens, n) for tokens in _token_lists("texts", texts)) if grams]
    return float(np.mean(rates)) if rates else 0.0
