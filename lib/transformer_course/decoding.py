"""Turning a next-token distribution into a sequence: greedy search, sampling and beam search.

Both work with any model through one callable, ``next_token_probabilities(decoded)``: given the
ids decoded so far, int ``(K, t)``, it returns the probabilities of the next id, float ``(K, V)``
(for a translator: run the decoder on ``decoded`` against a fixed source and take the last
position's softmax). Id 0 is padding.

Sampling draws each id at random from the distribution, reshaped first by a **temperature**
and cut to the **top k** ids or to the smallest **top-p** set (nucleus) — :func:`sample_decode`.

References:
    Sutskever, Vinyals and Le, 2014, §3.2 (beam search for seq2seq).
    Fan, Lewis and Dauphin, 2018, "Hierarchical Neural Story Generation", §5.4 (top-k sampling).
    Holtzman et al., 2020, "The Curious Case of Neural Text Degeneration", §3.1 (top-p sampling).
    Wu et al., 2016, "Google's Neural Machine Translation System", §7 (length penalty).
    https://arxiv.org/abs/1609.08144
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._ids import PADDING_ID
from ._next_token_table import NextTokenTable
from ._validation import check_integer

__all__ = [
    "greedy_decode",
    "beam_search",
    "batch_beam_search",
    "check_beam_arguments",
    "length_penalty",
    "NextTokenTable",
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "sample_decode",
]


def _probabilities(function: Callable, decoded: np.ndarray) -> np.ndarray:
    probabilities = np.asarray(function(decoded), dtype="float64")
    if probabilities.ndim != 2 or probabilities.shape[0] != decoded.shape[0]:
        raise ValueError(
            "`next_token_probabilities` must return shape (sequences, vocabulary) = "
            f"({decoded.shape[0]}, V); returned {probabilities.shape}."
        )
    return probabilities


def _start(start_ids) -> np.ndarray:
    """Start ids as int64 ``(B, t0)``: an int, ``(B,)`` start ids, or ``(B, t0)`` prompts."""
    decoded = np.asarray(start_ids, dtype="int64")
    if decoded.ndim < 2:
        decoded = np.atleast_1d(decoded)[:, None]  # (B, 1)
    if decoded.ndim != 2 or decoded.shape[1] < 1:
        raise ValueError(
            f"`start_ids` must be an int, (batch,) start ids or (batch, length) prompts; "
            f"received shape {decoded.shape}."
        )
    return decoded


def greedy_decode(next_token_probabilities: Callable, start_ids, end_id: int | None, max_length: int) -> np.ndarray:
    """Decode by taking the most likely next id at every step.

    Args:
        next_token_probabilities: callable, int ``(B, t)`` -> float ``(B, V)``.
        start_ids: int, int array ``(B,)`` (the start id of each sequence), or int ``(B, t0)``
            (a prompt per sequence, all of length t0, to continue).
        end_id: int, the id that ends a sequence; None for none (a language model writing on).
        max_length: int, the most ids to generate after the start.

    Returns:
        int64 ``(B, t0 + n)``, n <= max_length: each row starts with its start ids; after its
        end id, a row holds padding (0). Decoding stops once every row has ended.

    Raises:
        ValueError: for a non-positive ``max_length``, badly shaped ``start_ids`` or a callable
            returning the wrong shape.
    """
    return _decode(
        next_token_probabilities,
        start_ids,
        end_id,
        max_length,
        choose=lambda probabilities: probabilities.argmax(axis=-1),
    )


def _decode(
    next_token_probabilities: Callable,
    start_ids,
    end_id: int | None,
    max_length: int,
    choose: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray:
    """The loop greedy search and sampling share; they differ only in how ``choose`` picks the next ids.

    ``choose``: float64 ``(B, V)`` next-token probabilities -> int ``(B,)`` the id each row appends.
    A row that has produced ``end_id`` appends padding from then on; the loop stops when every
    row has ended, or after ``max_length`` steps.
    """
    max_length = check_integer("max_length", max_length)
    decoded = _start(start_ids)  # (B, t0)
    finished = np.zeros(decoded.shape[0], dtype=bool)
    for _ in range(max_length):
        next_ids = choose(_probabilities(next_token_probabilities, decoded))  # (B,)
        next_ids = np.where(finished, PADDING_ID, next_ids)
        decoded = np.concatenate([decoded, next_ids[:, None]], axis=1)
        finished |= next_ids == end_id
        if finished.all():
            break
    return decoded


def _distributions(name: str, probabilities) -> np.ndarray:
    probabilities = np.asarray(probabilities, dtype="float64")
    if probabilities.ndim != 2 or probabilities.shape[1] < 1:
        raise ValueError(f"`{name}` must have shape (rows, vocabulary); received shape {probabilities.shape}.")
    if np.any(probabilities < 0) or not np.all(np.isfinite(probabilities)):
        raise ValueError(f"`{name}` must hold finite probabilities >= 0.")
    return probabilities


def apply_temperature(probabilities, temperature: float) -> np.ndarray:
    """Sharpen (T < 1) or flatten (T > 1) each row of next-token probabilities.

    ``softmax(log p / T)``, the same as dividing the logits by T before the softmax: T = 1
    changes nothing, T → 0 approaches greedy (all mass on the most likely id), large T approaches
    uniform over the ids with non-zero probability.

    Args:
        probabilities: float ``(B, V)``, each row a distribution.
        temperature: float > 0.

    Returns:
        float64 ``(B, V)``, each row summing to 1; ids with probability 0 stay at 0.

    Raises:
        ValueError: for a non-positive ``temperature`` or probabilities of the wrong shape.
    """
    if not (isinstance(temperature, (int, float)) and temperature > 0):
        raise ValueError(f"`temperature` must be a positive number; received {temperature!r}.")
    probabilities = _distributions("probabilities", probabilities)
    with np.errstate(divide="ignore"):
        scores = np.log(probabilities) / temperature  # log 0 = -inf stays -inf
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    return weights / weights.sum(axis=-1, keepdims=True)


def top_k_filter(probabilities, k: int) -> np.ndarray:
    """Keep the ``k`` most likely ids of each row, renormalised; the others get probability 0.

    Ties at the k-th place are broken by id, lowest first (stable sort).

    Args:
        probabilities: float ``(B, V)``.
        k: int, 1 <= k; k >= V keeps every id.

    Returns:
        float64 ``(B, V)``, each row summing to 1 over at most ``k`` ids.

    Raises:
        ValueError: for ``k`` < 1 or probabilities of the wrong shape.
    """
    k = check_integer("k", k)
    probabilities = _distributions("probabilities", probabilities)
    order = np.argsort(-probabilities, axis=-1, kind="stable")[:, :k]  # (B, k) ids, most likely first
    kept = np.zeros_like(probabilities)
    np.put_along_axis(kept, order, np.take_along_axis(probabilities, order, axis=-1), axis=-1)
    return kept / kept.sum(axis=-1, keepdims=True)


def top_p_filter(probabilities, p: float) -> np.ndarray:
    """Keep the smallest set of most likely ids whose probabilities add up to ``p``: nucleus sampling.

    Ids are taken in order of probability; an id is kept while the probability of the ids before
    it is at most ``p`` — so the id that crosses ``p`` is kept, and the most likely id always is
    (keras-hub's ``TopPSampler`` rule). The kept probabilities are renormalised.

    Args:
        probabilities: float ``(B, V)``.
        p: float in (0, 1].

    Returns:
        float64 ``(B, V)``, each row summing to 1.

    Raises:
        ValueError: for ``p`` outside (0, 1] or probabilities of the wrong shape.
    """
    if not (isinstance(p, (int, float)) and 0 < p <= 1):
        raise ValueError(f"`p` must be in (0, 1]; received {p!r}.")
    probabilities = _distributions("probabilities", probabilities)
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    before = np.cumsum(ranked, axis=-1) - ranked  # probability of the ids ranked above each one
    ranked = np.where(before <= p, ranked, 0.0)
    kept = np.zeros_like(probabilities)
    np.put_along_axis(kept, order, ranked, axis=-1)
    return kept / kept.sum(axis=-1, keepdims=True)


def sample_decode(
    next_token_probabilities: Callable,
    start_ids,
    end_id: int | None,
    max_length: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
) -> np.ndarray:
    """Decode by drawing each next id at random from the (reshaped) next-token distribution.

    At every step each row's distribution goes through :func:`apply_temperature`, then
    :func:`top_k_filter` (if ``top_k``), then :func:`top_p_filter` (if ``top_p``), and one id is
    drawn from it. Rows end and are padded as in :func:`greedy_decode`.

    Args:
        next_token_probabilities: callable, int ``(B, t)`` -> float ``(B, V)``.
        start_ids: int, int ``(B,)`` start ids, or int ``(B, t0)`` prompts (as :func:`greedy_decode`).
        end_id: int, the id that ends a sequence; None for none.
        max_length: int, the most ids to generate after the start.
        temperature: float > 0; 1 samples from the model's own distribution.
        top_k: optional int >= 1.
        top_p: optional float in (0, 1].
        seed: optional int; the same seed gives the same ids.

    Returns:
        int64 ``(B, t0 + n)``, n <= max_length, padded with 0 after each row's end id.

    Raises:
        ValueError: naming the argument, for a bad ``temperature``, ``top_k``, ``top_p``,
            ``max_length`` or ``start_ids``, or a callable returning the wrong shape.
    """
    generator = np.random.default_rng(seed)

    def draw(probabilities):
        distributions = apply_temperature(probabilities, temperature)
        if top_k is not None:
            distributions = top_k_filter(distributions, top_k)
        if top_p is not None:
            distributions = top_p_filter(distributions, top_p)
        # One uniform number per row, placed on the row's cumulative distribution.
        cumulative = np.cumsum(distributions, axis=-1)
        draws = generator.random(distributions.shape[0])[:, None] * cumulative[:, -1:]
        return np.minimum((cumulative <= draws).sum(axis=-1), distributions.shape[1] - 1)

    return _decode(next_token_probabilities, start_ids, end_id, max_length, choose=draw)


def check_beam_arguments(max_length, beam_width, alpha) -> tuple[int, int]:
    """The one check of a beam search's arguments, wherever a beam search starts.

    Args:
        max_length: int, the most ids to generate; positive.
        beam_width: int, K, beams kept per sequence; positive.
        alpha: float >= 0, the length penalty's exponent.

    Returns:
        ``(max_length, beam_width)`` as ints.

    Raises:
        ValueError: naming the argument that is wrong and what was received.

    Example:
        >>> check_beam_arguments(20, 4, 0.6)
        (20, 4)
    """
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) or alpha < 0:
        raise ValueError(f"`alpha` must be >= 0; received {alpha!r}.")
    return check_integer("max_length", max_length), check_integer("beam_width", beam_width)


def _open_hypotheses(scores, rows, alpha: float) -> list[tuple[float, np.ndarray]]:
    """Unfinished beams ranked like finished ones: ``(score / length_penalty, ids)`` per live row.

    The fallback when no hypothesis ended within ``max_length`` (or every extension was
    impossible); rows with a -inf score are placeholders and are left out.
    """
    length = rows.shape[1] - 1  # generated ids, without the start id
    return [(score / length_penalty(length, alpha), row) for score, row in zip(scores, rows) if np.isfinite(score)]


def length_penalty(length, alpha: float) -> np.ndarray:
    """GNMT's length penalty ``((5 + length) / 6) ** alpha``; alpha = 0 turns it off.

    A hypothesis' score is its summed log-probability divided by this, so that longer outputs
    are not punished merely for multiplying more probabilities below 1.
    """
    return ((5.0 + np.asarray(length, dtype="float64")) / 6.0) ** alpha


def beam_search(
    next_token_probabilities: Callable,
    start_id: int,
    end_id: int,
    max_length: int,
    beam_width: int = 4,
    alpha: float = 0.6,
) -> tuple[np.ndarray, float]:
    """Keep the ``beam_width`` best partial sequences at every step; return the best finished one.

    Each step extends every kept sequence by every id, scores the extensions by summed
    log-probability, and keeps the best ``beam_width``. A sequence that emits ``end_id`` is set
    aside as finished. Search stops when ``beam_width`` sequences have finished or after
    ``max_length`` steps; the winner has the highest ``log p / length_penalty(length, alpha)``
    (length counted without the start id). With ``beam_width=1`` this is greedy search.

    Args:
        next_token_probabilities: callable, int ``(K, t)`` -> float ``(K, V)``.
        start_id: int, the start id.
        end_id: int, the end id.
        max_length: int, the most ids to generate after the start id.
        beam_width: int, K, sequences kept at every step.
        alpha: float >= 0, the length penalty's exponent (0: no normalisation).

    Returns:
        ``(ids, score)``: int64 ``(1 + n,)`` starting with ``start_id`` (ending with ``end_id``
        unless ``max_length`` was reached first), and its length-normalised log-probability.

    Raises:
        ValueError: for a non-positive ``max_length`` or ``beam_width``, a negative ``alpha``,
            or a callable returning the wrong shape.
    """
    max_length, beam_width = check_beam_arguments(max_length, beam_width, alpha)
    beams = np.array([[start_id]], dtype="int64")  # (K, t)
    scores = np.zeros(1)  # summed log-probabilities, (K,)
    finished: list[tuple[float, np.ndarray]] = []
    for step in range(1, max_length + 1):
        with np.errstate(divide="ignore"):
            log_probabilities = np.log(_probabilities(next_token_probabilities, beams))  # (K, V)
        candidates = (scores[:, None] + log_probabilities).ravel()  # (K * V,)
        vocabulary = log_probabilities.shape[1]
        best = np.argsort(-candidates, kind="stable")[: 2 * beam_width]
        kept_beams, kept_scores = [], []
        for flat in best:
            beam, token = divmod(int(flat), vocabulary)
            if not np.isfinite(candidates[flat]):
                break
            sequence = np.append(beams[beam], token)
            if token == end_id:
                finished.append((candidates[flat] / length_penalty(step, alpha), sequence))
            else:
                kept_beams.append(sequence)
                kept_scores.append(candidates[flat])
            if len(kept_beams) == beam_width:
                break
        if len(finished) >= beam_width or not kept_beams:
            break
        beams, scores = np.array(kept_beams), np.array(kept_scores)
    if not finished:  # nothing ended within max_length: rank the open sequences instead
        finished = _open_hypotheses(scores, beams, alpha)
    score, ids = max(finished, key=lambda item: item[0])
    return ids, float(score)


def _top_candidates(candidates: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` largest entries, largest first, ties by lower index.

    The same order as ``np.argsort(-candidates, kind="stable")[:count]``, without sorting all
    K * V entries: only those at or above the ``count``-th largest value are sorted.
    """
    if count >= candidates.size:
        return np.argsort(-candidates, kind="stable")
    threshold = np.partition(candidates, candidates.size - count)[candidates.size - count]
    indices = np.flatnonzero(candidates >= threshold)
    return indices[np.lexsort((indices, -candidates[indices]))][:count]


def batch_beam_search(
    next_token_probabilities: Callable,
    start_ids,
    end_id: int,
    max_length: int,
    beam_width: int = 4,
    alpha: float = 0.6,
    reorder: Callable | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`beam_search` for a batch of B sequences at once, B * K rows per model call.

    Every sentence keeps exactly the hypotheses :func:`beam_search` would keep, in the same
    order, so the results are the same; only the work is shared. Row ``b * K + k`` holds beam k
    of sentence b; a sentence with fewer than K live beams fills the rest with placeholder rows
    whose score is -inf, and a finished sentence's rows are carried along unused.

    A model that caches per-row state (a decoder's key/value cache) learns after every step
    which previous row each new row extends, through ``reorder(parents)``, and gathers its cache
    accordingly. It then needs only the last column of ``decoded``.

    Args:
        next_token_probabilities: callable, int ``(B * K, t)`` -> float ``(B * K, V)``.
        start_ids: int or int array ``(B,)``, the start id of each sequence.
        end_id: int, the id that ends a sequence.
        max_length: int, the most ids to generate after the start id.
        beam_width: int, K.
        alpha: float >= 0, the length penalty's exponent.
        reorder: optional callable, int64 ``(B * K,)`` -> None: row i of the next call extends
            row ``parents[i]`` of the previous one. Called before every call but the first.

    Returns:
        ``(ids, scores)``: int64 ``(B, 1 + n)``, each row the winner of :func:`beam_search` for
        that sentence followed by padding (0); float64 ``(B,)``, their length-normalised
        log-probabilities.

    Raises:
        ValueError: for a non-positive ``max_length`` or ``beam_width``, a negative ``alpha``,
            or a callable returning the wrong shape.
    """
    max_length, width = check_beam_arguments(max_length, beam_width, alpha)
    starts = np.atleast_1d(np.asarray(start_ids, dtype="int64"))
    batch = starts.shape[0]
    decoded = np.repeat(starts, width)[:, None]  # (B * K, t)
    scores = np.full((batch, width), -np.inf)
    scores[:, 0] = 0.0  # one live beam per sentence at the start, as in beam_search
    finished: list[list[tuple[float, np.ndarray]]] = [[] for _ in range(batch)]
    done = np.zeros(batch, dtype=bool)
    for step in range(1, max_length + 1):
        with np.errstate(divide="ignore"):
            log_probabilities = np.log(_probabilities(next_token_probabilities, decoded))  # (B * K, V)
        vocabulary = log_probabilities.shape[1]
        log_probabilities = log_probabilities.reshape(batch, width, vocabulary)
        parents = np.arange(batch * width)  # rows of done sentences follow themselves
        tokens = np.full(batch * width, end_id, dtype="int64")
        new_scores = np.full((batch, width), -np.inf)
        for sentence in np.flatnonzero(~done):
            candidates = (scores[sentence, :, None] + log_probabilities[sentence]).ravel()  # (K * V,)
            kept = 0
            for flat in _top_candidates(candidates, 2 * width):
                if not np.isfinite(candidates[flat]):
                    break
                beam, token = divmod(int(flat), vocabulary)
                row = sentence * width + beam
                if token == end_id:
                    sequence = np.append(decoded[row], token)
                    finished[sentence].append((candidates[flat] / length_penalty(step, alpha), sequence))
                else:
                    parents[sentence * width + kept] = row
                    tokens[sentence * width + kept] = token
                    new_scores[sentence, kept] = candidates[flat]
                    kept += 1
                if kept == width:
                    break
            for slot in range(kept, width):  # placeholders: copy a live row, never chosen (-inf)
                parents[sentence * width + slot] = parents[sentence * width] if kept else sentence * width
            if len(finished[sentence]) >= width or not kept:
                done[sentence] = True
                if not finished[sentence]:  # no live beam and none ended: rank the beams as they were
                    beams = decoded.reshape(batch, width, -1)[sentence]
                    finished[sentence] = _open_hypotheses(scores[sentence], beams, alpha)
        scores = np.where(done[:, None], scores, new_scores)
        decoded = np.concatenate([decoded[parents], tokens[:, None]], axis=1)
        if done.all():
            break
        if reorder is not None:
            reorder(parents)
    beams = decoded.reshape(batch, width, -1)  # (B, K, t)
    results = [
        max(
            finished[sentence] or _open_hypotheses(scores[sentence], beams[sentence], alpha),  # nothing ended:
            key=lambda item: item[0],
        )
        for sentence in range(batch)
    ]  # the open beams compete
    ids = np.zeros((batch, max(len(sequence) for _, sequence in results)), dtype="int64")
    for sentence, (_, sequence) in enumerate(results):
        ids[sentence, : len(sequence)] = sequence
    return ids, np.array([score for score, _ in results])
