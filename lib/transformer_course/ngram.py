"""Count-based language models: the baselines that give a Transformer's perplexity its meaning.

* :class:`UnigramModel` — P(w), add-one smoothed: a model that ignores context.
* :class:`BigramModel` — P(w | previous word) with interpolated Kneser-Ney smoothing: the
  classic strong count-based baseline for one word of context.

Both read the same token ids as the neural model (0 = padding, never counted) and score the
same target positions: every real token that has a real token before it in its sequence, so the
numbers sit side by side. Counting is NumPy only; a bigram is stored as the code
``previous · V + next`` in sorted arrays, so memory grows with the bigrams seen, not with V².

Shape letters: N sequences, T positions, V vocabulary.

References:
    Kneser and Ney, 1995, "Improved backing-off for M-gram language modeling", ICASSP.
    Chen and Goodman, 1999, "An empirical study of smoothing techniques for language modeling",
    Computer Speech & Language 13(4), §2.7 (interpolated Kneser-Ney, the discount D).
    Jurafsky and Martin, "Speech and Language Processing", 3rd ed. draft, §3.7 (Kneser-Ney).
"""

from __future__ import annotations

import math

import numpy as np

from ._ids import PADDING_ID
from ._validation import check_integer, renamed

__all__ = ["UnigramModel", "BigramModel", "scored_pairs"]


def scored_pairs(
    token_ids, vocabulary_size: int | None = None, *, vocab_size: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The (previous, next) token pairs a language model is scored on.

    Args:
        token_ids: int ``(N, T)``, 0 = padding (anywhere; padding is skipped, never a target and
            never a context).
        vocabulary_size: int V; every id must be below it (``vocab_size``, its former name, still
            works with a DeprecationWarning).

    Returns:
        ``(previous, next)``: two int64 arrays ``(P,)``, one entry per real token that follows a
        real token in the same row.

    Raises:
        ValueError: for ids that are negative or not below ``vocabulary_size``, or input that is not 2-D.
    """
    vocabulary_size = check_integer(
        "vocabulary_size", renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
    )
    ids = np.asarray(token_ids, dtype="int64")
    if ids.ndim != 2:
        raise ValueError(f"`token_ids` must have shape (sequences, length); received shape {ids.shape}.")
    if ids.size and (ids.min() < 0 or ids.max() >= vocabulary_size):
        raise ValueError(
            f"`token_ids` must lie in 0..{vocabulary_size - 1}; received ids from {ids.min()} to {ids.max()}."
        )
    previous, following = ids[:, :-1].ravel(), ids[:, 1:].ravel()
    real = (previous != PADDING_ID) & (following != PADDING_ID)
    return previous[real], following[real]


class UnigramModel:
    """P(w) = (count(w) + 1) / (tokens + V - 1): word frequencies, add-one smoothed over ids 1..V-1.

    Args:
        vocabulary_size: int V (id 0 is padding and gets no probability); ``vocab_size``, its former
            name, still works with a DeprecationWarning.

    Raises:
        ValueError: for a ``vocabulary_size`` below 2.
    """

    def __init__(self, vocabulary_size: int | None = None, *, vocab_size: int | None = None):
        vocabulary_size = renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
        self.vocabulary_size = check_integer("vocabulary_size", vocabulary_size, minimum=2)
        self.log_probabilities = None

    def fit(self, token_ids) -> UnigramModel:
        """Count the real tokens of int ``(N, T)`` ``token_ids``; returns the model."""
        ids = np.asarray(token_ids, dtype="int64").ravel()
        size = self.vocabulary_size
        counts = np.bincount(ids[ids != PADDING_ID], minlength=size).astype("float64")[:size]
        counts[1:] += 1.0
        counts[0] = 0.0
        with np.errstate(divide="ignore"):
            self.log_probabilities = np.log(counts / counts.sum())
        return self

    def log_probability(self, previous, following) -> np.ndarray:
        """Natural-log P(following) for each pair (the previous token is ignored): float64 ``(P,)``."""
        if self.log_probabilities is None:
            raise ValueError("the model is not fitted yet: call fit(token_ids) first.")
        return self.log_probabilities[np.asarray(following, dtype="int64")]

    def perplexity(self, token_ids) -> float:
        """exp(mean negative log-likelihood) over :func:`scored_pairs` of int ``(N, T)`` ``token_ids``."""
        return _perplexity(self, token_ids)


class BigramModel:
    """P(w | v) with interpolated Kneser-Ney smoothing (one word of context).

    ``P(w | v) = max(c(v w) - D, 0) / c(v) + D · N₁₊(v •) / c(v) · P_cont(w)``, where
    ``N₁₊(v •)`` is the number of different words seen after v, and the continuation probability
    ``P_cont(w)`` is proportional to the number of different words seen *before* w (plus one, so
    no word gets probability 0). A context never seen falls back to ``P_cont``. The discount is
    Ney's estimate ``D = n₁ / (n₁ + 2 n₂)`` from the numbers of bigram types seen once and twice.

    Args:
        vocabulary_size: int V (id 0 is padding and gets no probability); ``vocab_size``, its former
            name, still works with a DeprecationWarning.
        discount: optional float in (0, 1); default: estimated from the training counts.

    Raises:
        ValueError: for a ``vocabulary_size`` below 2 or a ``discount`` outside (0, 1).
    """

    def __init__(
        self, vocabulary_size: int | None = None, discount: float | None = None, *, vocab_size: int | None = None
    ):
        vocabulary_size = renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
        self.vocabulary_size = check_integer("vocabulary_size", vocabulary_size, minimum=2)
        if discount is not None and not 0.0 < discount < 1.0:
            raise ValueError(f"`discount` must be in (0, 1) or None; received {discount!r}.")
        self.discount = discount
        self.codes = None

    def fit(self, token_ids) -> BigramModel:
        """Count the bigrams of int ``(N, T)`` ``token_ids`` (real tokens only); returns the model."""
        previous, following = scored_pairs(token_ids, self.vocabulary_size)
        size = self.vocabulary_size
        self.codes, self.counts = np.unique(previous * size + following, return_counts=True)  # sorted bigram types
        context = self.codes // size
        self.context_counts = np.bincount(previous, minlength=size).astype("float64")  # c(v)
        self.followers = np.bincount(context, minlength=size).astype("float64")  # N₁₊(v •)
        predecessors = np.bincount(self.codes % size, minlength=size).astype("float64") + 1.0  # N₁₊(• w) + 1
        predecessors[0] = 0.0
        self.continuation = predecessors / predecessors.sum()
        if self.discount is None:
            once, twice = np.sum(self.counts == 1), np.sum(self.counts == 2)
            self.discount = float(once / (once + 2 * twice)) if once else 0.5
        return self

    def log_probability(self, previous, following) -> np.ndarray:
        """Natural-log P(following | previous) for each pair: float64 ``(P,)``."""
        if self.codes is None:
            raise ValueError("the model is not fitted yet: call fit(token_ids) first.")
        previous, following = np.asarray(previous, dtype="int64"), np.asarray(following, dtype="int64")
        codes = previous * self.vocabulary_size + following
        where = np.minimum(np.searchsorted(self.codes, codes), len(self.codes) - 1)
        pair_counts = np.where(self.codes[where] == codes, self.counts[where], 0).astype("float64")
        context = self.context_counts[previous]
        seen = context > 0
        safe = np.where(seen, context, 1.0)
        backoff_weight = np.where(seen, self.discount * self.followers[previous] / safe, 1.0)
        probability = np.where(seen, np.maximum(pair_counts - self.discount, 0.0) / safe, 0.0)
        probability += backoff_weight * self.continuation[following]
        with np.errstate(divide="ignore"):  # padding (id 0) as the next token: probability 0, log -inf
            return np.log(probability)

    def perplexity(self, token_ids) -> float:
        """exp(mean negative log-likelihood) over :func:`scored_pairs` of int ``(N, T)`` ``token_ids``."""
        return _perplexity(self, token_ids)

    def next_token_probabilities(self, previous) -> np.ndarray:
        """The whole distribution of the token after each of ``previous``: what an arithmetic coder needs.

        Row b is ``P(w | previous[b])`` for every id w (0, padding, gets 0), the probabilities
        :meth:`log_probability` gives one pair at a time, so a count table drives
        :func:`~transformer_course.compression.compress` as a language model does.

        Args:
            previous: int ``(B,)``, each row's last token.

        Returns:
            float64 ``(B, V)``, rows summing to 1.

        Raises:
            ValueError: before :meth:`fit`.

        Example:
            >>> model = BigramModel(4).fit(np.array([[1, 2, 3, 1, 2]]))
            >>> model.next_token_probabilities(np.array([1])).round(3).tolist()
            [[0.0, 0.083, 0.833, 0.083]]
        """
        if self.codes is None:
            raise ValueError("the model is not fitted yet: call fit(token_ids) first.")
        previous = np.asarray(previous, dtype="int64").reshape(-1)
        size = self.vocabulary_size
        rows = np.zeros((len(previous), size))
        for row, context in enumerate(previous):
            seen = self.context_counts[context]
            if seen <= 0:  # a context never seen: the continuation probabilities alone
                rows[row] = self.continuation
                continue
            rows[row] = self.discount * self.followers[context] / seen * self.continuation
            first, last = np.searchsorted(self.codes, [context * size, (context + 1) * size])
            rows[row, self.codes[first:last] % size] += np.maximum(self.counts[first:last] - self.discount, 0.0) / seen
        return rows


def _perplexity(model, token_ids) -> float:
    previous, following = scored_pairs(token_ids, model.vocabulary_size)
    if not len(following):
        raise ValueError("`token_ids` holds no scored pair (a real token after a real token).")
    return float(math.exp(-np.mean(model.log_probability(previous, following))))
