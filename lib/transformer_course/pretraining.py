"""BERT-style pre-training data: masked language modelling (notebook 08).

* :func:`mask_tokens` — choose the positions a masked language model must fill in, and corrupt
  them as BERT does: of the selected tokens, 80% become ``[MASK]``, 10% a random word, 10% stay.
* :func:`split_sentences`, :func:`next_sentence_pairs` and :func:`pack_pair` — next-sentence
  prediction: pairs of sentences that follow each other in a text (IsNext) or come from another
  text (NotNext), packed as ``[CLS] A [SEP] B [SEP]`` with segment ids.

Masking is meant to be **dynamic**: call :func:`mask_tokens` afresh for every epoch (with the
same generator), so the model never sees the same blanks twice (Liu et al., 2019, RoBERTa, §4.1).

Argument names follow ``keras_hub.layers.MaskedLMMaskGenerator`` where the two overlap
(``vocabulary_size``, ``mask_selection_rate``, ``mask_token_id``, ``unselectable_token_ids``,
``mask_token_rate``, ``random_token_rate``).

Shape letters: B sequences, T positions.

References:
    Devlin et al., 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
    Understanding", NAACL, §3.1 (Task #1: Masked LM) and Appendix A.1.
    https://arxiv.org/abs/1810.04805
"""

from __future__ import annotations

import re

import numpy as np

from ._validation import check_integer

__all__ = ["mask_tokens", "split_sentences", "next_sentence_pairs", "pack_pair", "IS_NEXT", "NOT_NEXT"]

IS_NEXT, NOT_NEXT = 1, 0


def _rate(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1]; received {value!r}.")
    return float(value)


def mask_tokens(token_ids, rng: np.random.Generator, vocabulary_size: int, mask_token_id: int,
                mask_selection_rate: float = 0.15, mask_token_rate: float = 0.8, random_token_rate: float = 0.1,
                unselectable_token_ids=(0,)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Select positions for masked language modelling and corrupt them, BERT's way.

    Each token whose id is not in ``unselectable_token_ids`` (padding, ``[CLS]``, ``[SEP]`` …) is
    selected independently with probability ``mask_selection_rate``. A selected token becomes
    ``mask_token_id`` with probability ``mask_token_rate``, a random id with probability
    ``random_token_rate`` (drawn uniformly from the ids that are neither unselectable nor the mask
    id), and otherwise stays as it is — so the model cannot learn that only ``[MASK]`` positions
    matter, and must keep a good representation of every token.

    Args:
        token_ids: int ``(B, T)`` (or ``(T,)``), 0 = padding.
        rng: ``numpy.random.Generator``; the same generator state gives the same masks.
        vocabulary_size: int V; ids lie in ``0 .. V - 1``.
        mask_token_id: int, the id of ``[MASK]``.
        mask_selection_rate: float in [0, 1], the share of selectable tokens to select.
        mask_token_rate, random_token_rate: floats in [0, 1] with a sum <= 1.
        unselectable_token_ids: ids never selected (padding and special tokens).

    Returns:
        ``(masked_ids, labels, selected)``, each shaped like ``token_ids``: the corrupted int32
        ids; int32 labels holding the original id at selected positions and 0 elsewhere (so a
        loss that skips label 0 — :class:`transformer_course.metrics.MaskedCrossEntropy` —
        counts the selected positions only); and the bool selection.

    Raises:
        ValueError: for rates outside [0, 1], ``mask_token_rate + random_token_rate`` above 1,
            a non-positive ``vocabulary_size``, or ids outside ``0 .. V - 1``.
    """
    vocabulary_size = check_integer("vocabulary_size", vocabulary_size)
    mask_token_id = check_integer("mask_token_id", mask_token_id, minimum=0)
    selection_rate = _rate("mask_selection_rate", mask_selection_rate)
    mask_rate, random_rate = _rate("mask_token_rate", mask_token_rate), _rate("random_token_rate", random_token_rate)
    if mask_rate + random_rate > 1.0 + 1e-12:
        raise ValueError(f"`mask_token_rate` + `random_token_rate` must be at most 1; received "
                         f"{mask_rate} + {random_rate}.")
    ids = np.asarray(token_ids, dtype="int64")
    if ids.size and (ids.min() < 0 or ids.max() >= vocabulary_size):
        raise ValueError(f"`token_ids` must lie in 0..{vocabulary_size - 1}; received ids from {ids.min()} to {ids.max()}.")
    unselectable = np.asarray(list(unselectable_token_ids), dtype="int64")
    selectable = ~np.isin(ids, unselectable)
    selected = selectable & (rng.random(ids.shape) < selection_rate)
    action = rng.random(ids.shape)  # < mask_rate: [MASK]; then random_rate: a random word; else unchanged
    candidates = np.setdiff1d(np.arange(vocabulary_size), np.append(unselectable, mask_token_id))
    random_words = candidates[rng.integers(0, len(candidates), size=ids.shape)] if len(candidates) else ids
    masked = np.where(selected & (action < mask_rate), mask_token_id, ids)
    masked = np.where(selected & (action >= mask_rate) & (action < mask_rate + random_rate), random_words, masked)
    labels = np.where(selected, ids, 0)
    return masked.astype("int32"), labels.astype("int32"), selected


_SENTENCE_END = re.compile(r"[.!?][\"')]*(?=\s)")


def split_sentences(text: str) -> list[str]:
    """Cut a text into sentences with one simple rule: a sentence ends at ``.``, ``!`` or ``?``
    (and any closing quotes or brackets) followed by whitespace.

    HTML line breaks (``<br />``) count as whitespace. The rule is wrong for abbreviations
    ("Mr. Smith" is cut after "Mr.") and misses sentences without end punctuation; for review
    text that is rare enough not to matter here.

    Args:
        text: str.

    Returns:
        list of str, stripped, none empty (``[]`` for a text with no words).

    Raises:
        TypeError: if ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a str; received {type(text).__name__}.")
    text = re.sub(r"<br\s*/?>", " ", text)
    ends = [match.end() for match in _SENTENCE_END.finditer(text)]
    pieces = [text[start:end] for start, end in zip([0, *ends], [*ends, len(text)])]
    return [piece.strip() for piece in pieces if piece.strip()]


def next_sentence_pairs(documents, rng: np.random.Generator) -> list[tuple[str, str, int]]:
    """Sentence pairs for next-sentence prediction, half IsNext and half NotNext.

    For every two consecutive sentences (A, B) of a document, with probability 1/2 the pair is
    (A, B, ``IS_NEXT``); otherwise B is replaced by a sentence drawn at random from a *different*
    document: (A, B', ``NOT_NEXT``) (Devlin et al., 2019, §3.1, Task #2).

    Args:
        documents: list of documents, each a list of sentences (str), e.g. from
            :func:`split_sentences`.
        rng: ``numpy.random.Generator``.

    Returns:
        list of ``(sentence_a, sentence_b, label)``, label ``IS_NEXT`` (1) or ``NOT_NEXT`` (0).

    Raises:
        ValueError: if fewer than two documents have a sentence (no other document to draw from).
    """
    documents = [list(document) for document in documents]
    filled = [index for index, document in enumerate(documents) if document]
    if len(filled) < 2:
        raise ValueError(f"`documents` must hold at least 2 documents with sentences; received {len(filled)}.")
    pairs = []
    for index, document in enumerate(documents):
        for first, second in zip(document, document[1:]):
            if rng.random() < 0.5:
                pairs.append((first, second, IS_NEXT))
                continue
            other = index
            while other == index:
                other = filled[rng.integers(len(filled))]
            pairs.append((first, documents[other][rng.integers(len(documents[other]))], NOT_NEXT))
    return pairs


def pack_pair(first_ids, second_ids, cls_id: int, sep_id: int, sequence_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Pack two token sequences as ``[CLS] A [SEP] B [SEP]``, with segment ids 0 for A and 1 for B.

    If the pair is too long, the longer of the two loses its last token, again and again until
    it fits (BERT's ``truncate_seq_pair``); then the row is padded with 0.

    Args:
        first_ids, second_ids: 1-D int sequences (no padding).
        cls_id, sep_id: ints, the ids of ``[CLS]`` and ``[SEP]``.
        sequence_length: int T >= 5, the packed length.

    Returns:
        ``(token_ids, segment_ids)``: int32 ``(T,)`` each. ``[CLS]``, A and the first ``[SEP]``
        have segment 0; B and the second ``[SEP]`` have segment 1; padding has segment 0.

    Raises:
        ValueError: for a ``sequence_length`` below 5 (room for one token of each sentence).
    """
    sequence_length = check_integer("sequence_length", sequence_length, minimum=5)
    first, second = list(np.asarray(first_ids, dtype="int64").ravel()), list(np.asarray(second_ids, dtype="int64").ravel())
    while len(first) + len(second) > sequence_length - 3:
        (first if len(first) > len(second) else second).pop()
    tokens = [cls_id, *first, sep_id, *second, sep_id]
    segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    token_ids = np.zeros(sequence_length, dtype="int32")
    segment_ids = np.zeros(sequence_length, dtype="int32")
    token_ids[:len(tokens)], segment_ids[:len(segments)] = tokens, segments
    return token_ids, segment_ids
