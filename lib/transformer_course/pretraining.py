"""BERT-style pre-training data: masked language modelling and next-sentence pairs (notebook 08).

* :func:`mask_tokens` — choose the positions a masked language model must fill in, and corrupt
  them as BERT does: of the selected tokens, 80% become ``[MASK]``, 10% a random word, 10% stay.
* :func:`gather_selected` — the chosen positions and their labels, as the fixed-size arrays the
  masked-LM head reads.
* :func:`contiguous_segments` — texts read one after another, cut into ``[CLS] … [SEP]`` inputs
  with no padding (RoBERTa's FULL-SENTENCES).
* :func:`pack_single` — one text an input, ``[CLS] text [SEP]``, for fine-tuning a classifier.
* :func:`split_sentences`, :func:`group_sentences`, :func:`next_sentence_pairs` and
  :func:`pack_pair` — next-sentence prediction: pairs of sentences that follow each other in a
  text (IsNext) or come from another text (NotNext), packed as ``[CLS] A [SEP] B [SEP]`` with
  segment ids.
* :class:`PretrainingBatches` — shuffled batches, masked afresh every epoch.

The model these batches train is in :mod:`transformer_course.bert`.

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

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np

from ._validation import check_integer
from .training import RoundOrder

__all__ = [
    "mask_tokens",
    "contiguous_segments",
    "pack_single",
    "gather_selected",
    "PretrainingBatches",
    "split_sentences",
    "group_sentences",
    "next_sentence_pairs",
    "pack_pair",
    "IS_NEXT",
    "NOT_NEXT",
]

IS_NEXT, NOT_NEXT = 1, 0


def _rate(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1]; received {value!r}.")
    return float(value)


def mask_tokens(
    token_ids,
    rng: np.random.Generator,
    vocabulary_size: int,
    mask_token_id: int,
    mask_selection_rate: float = 0.15,
    mask_token_rate: float = 0.8,
    random_token_rate: float = 0.1,
    unselectable_token_ids=(0,),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        raise ValueError(
            f"`mask_token_rate` + `random_token_rate` must be at most 1; received {mask_rate} + {random_rate}."
        )
    ids = np.asarray(token_ids, dtype="int64")
    if ids.size and (ids.min() < 0 or ids.max() >= vocabulary_size):
        raise ValueError(
            f"`token_ids` must lie in 0..{vocabulary_size - 1}; received ids from {ids.min()} to {ids.max()}."
        )
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


def group_sentences(sentences, max_words: int) -> list[str]:
    """Join consecutive sentences into spans of at most ``max_words`` whitespace-separated words.

    BERT's "sentences" are spans of contiguous text, not linguistic sentences (Devlin et al.,
    2019, §3: "a 'sentence' can be an arbitrary span of contiguous text"): each half of a
    pre-training pair is filled up to its share of the packed length, so that little of a pair
    is padding. Sentences are taken in order and added to the current span while it stays within
    ``max_words``; a sentence longer than ``max_words`` becomes a span of its own (:func:`pack_pair`
    cuts it later).

    Args:
        sentences: list of str, one document's sentences in order (e.g. from :func:`split_sentences`).
        max_words: int >= 1, the most words a span holds (words: ``str.split`` pieces).

    Returns:
        list of str, the spans in order; the sentences of a span are joined by one space. Every
        sentence is in exactly one span.

    Raises:
        ValueError: for a ``max_words`` below 1.
    """
    max_words = check_integer("max_words", max_words)
    spans, current, length = [], [], 0
    for sentence in sentences:
        words = len(sentence.split())
        if current and length + words > max_words:
            spans.append(" ".join(current))
            current, length = [], 0
        current.append(sentence)
        length += words
    if current:
        spans.append(" ".join(current))
    return spans


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
    first = list(np.asarray(first_ids, dtype="int64").ravel())
    second = list(np.asarray(second_ids, dtype="int64").ravel())
    while len(first) + len(second) > sequence_length - 3:
        (first if len(first) > len(second) else second).pop()
    tokens = [cls_id, *first, sep_id, *second, sep_id]
    segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    token_ids = np.zeros(sequence_length, dtype="int32")
    segment_ids = np.zeros(sequence_length, dtype="int32")
    token_ids[: len(tokens)], segment_ids[: len(segments)] = tokens, segments
    return token_ids, segment_ids


def pack_single(token_lists, cls_id: int, sep_id: int, sequence_length: int, head_fraction: float = 0.25) -> dict:
    """Texts as classification inputs, ``[CLS] text [SEP]``, segment 0 everywhere; a long text keeps its head and tail.

    A text longer than the ``sequence_length - 2`` tokens between ``[CLS]`` and ``[SEP]`` keeps
    its first ``head_fraction`` of that room and fills the rest from its end: reviews often end
    on the verdict, and head + tail was the best cut for IMDB in Sun et al., 2019, *How to
    Fine-Tune BERT for Text Classification?*, §5.3.1. Shorter texts are padded with 0.

    Args:
        token_lists: N sequences of int ids (no special tokens, no padding).
        cls_id, sep_id: ints, the ids of ``[CLS]`` and ``[SEP]``.
        sequence_length: int T >= 3.
        head_fraction: float in [0, 1], the share of the room a long text fills from its start.

    Returns:
        ``{"token_ids": int32 (N, T), "segment_ids": int32 (N, T)}``, the inputs of
        :func:`~transformer_course.bert.build_bert_classifier`.

    Raises:
        ValueError: for a ``sequence_length`` below 3 or a ``head_fraction`` outside [0, 1].

    Example:
        >>> pack_single([[7, 8, 9, 10, 11, 12]], cls_id=1, sep_id=2, sequence_length=6)["token_ids"].tolist()
        [[1, 7, 10, 11, 12, 2]]
    """
    sequence_length = check_integer("sequence_length", sequence_length, minimum=3)
    room = sequence_length - 2
    head = int(room * _rate("head_fraction", head_fraction))
    token_ids = np.zeros((len(token_lists), sequence_length), dtype="int32")
    for index, tokens in enumerate(token_lists):
        tokens = list(tokens)
        kept = tokens if len(tokens) <= room else tokens[:head] + tokens[len(tokens) - (room - head) :]
        token_ids[index, : len(kept) + 2] = [cls_id, *kept, sep_id]
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}


def contiguous_segments(token_lists, sequence_length: int, cls_id: int, sep_id: int) -> np.ndarray:
    """Cut documents into full-length single-segment inputs, ``[CLS] text [SEP]``, with no padding.

    The documents' tokens are read as one stream, a ``[SEP]`` after each document, and cut into
    windows of ``sequence_length - 2`` tokens; a window may run from one document into the next
    (RoBERTa's FULL-SENTENCES inputs, Liu et al., 2019, §4.2, cut at any token rather than at a
    sentence end). The last, incomplete window is dropped. Every position is real text, and an
    input looks like a fine-tuning input ``[CLS] review [SEP]`` with segment 0 everywhere.

    Args:
        token_lists: iterable of 1-D int sequences, one per document, without special tokens.
        sequence_length: int T >= 3.
        cls_id, sep_id: ints, the ids of ``[CLS]`` and ``[SEP]``.

    Returns:
        int32 ``(N, T)``: N = (tokens + documents) // (T - 2) rows, each ``[CLS]``, T - 2 tokens of
        the stream, ``[SEP]``.

    Raises:
        ValueError: for a ``sequence_length`` below 3.

    Example:
        >>> contiguous_segments([[5, 6, 7], [8, 9]], 5, cls_id=2, sep_id=3).tolist()
        [[2, 5, 6, 7, 3], [2, 3, 8, 9, 3]]
    """
    sequence_length = check_integer("sequence_length", sequence_length, minimum=3)
    pieces = []
    for tokens in token_lists:
        pieces.append(np.asarray(tokens, dtype="int32").ravel())
        pieces.append(np.array([sep_id], dtype="int32"))
    stream = np.concatenate(pieces) if pieces else np.zeros(0, "int32")
    width = sequence_length - 2
    rows = len(stream) // width
    body = stream[: rows * width].reshape(rows, width)
    return np.concatenate([np.full((rows, 1), cls_id, "int32"), body, np.full((rows, 1), sep_id, "int32")], axis=1)


def gather_selected(selected, labels, max_predictions: int) -> tuple[np.ndarray, np.ndarray]:
    """The selected positions of each row, padded to ``max_predictions``, with their labels.

    The masked-language-model head then scores only these positions (about 15% of a row)
    instead of all of them, which saves most of the output layer's work (Devlin et al., 2019,
    predict at most ``max_predictions_per_seq`` positions a sequence).

    Args:
        selected: bool ``(B, T)`` from :func:`mask_tokens`.
        labels: int ``(B, T)`` from :func:`mask_tokens`.
        max_predictions: int P; a row with more selected positions keeps its first P.

    Returns:
        ``(positions, position_labels)``: int32 ``(B, P)`` each; unused slots have position 0 and
        label 0 (padding, which the masked loss skips).

    Raises:
        ValueError: if ``selected`` and ``labels`` differ in shape or are not 2-D.
    """
    selected, labels = np.asarray(selected, dtype=bool), np.asarray(labels)
    if selected.shape != labels.shape or selected.ndim != 2:
        raise ValueError(
            f"`selected` and `labels` must both have shape (batch, length); received {selected.shape} "
            f"and {labels.shape}."
        )
    max_predictions = check_integer("max_predictions", max_predictions)
    positions = np.zeros((len(selected), max_predictions), dtype="int32")
    position_labels = np.zeros((len(selected), max_predictions), dtype="int32")
    for row, (chosen, row_labels) in enumerate(zip(selected, labels)):
        kept = np.flatnonzero(chosen)[:max_predictions]
        positions[row, : len(kept)] = kept
        position_labels[row, : len(kept)] = row_labels[kept]
    return positions, position_labels


class PretrainingBatches(keras.utils.PyDataset):
    """Batches for masked-LM + next-sentence pre-training, masked afresh every epoch (dynamic masking).

    Every epoch shuffles the packed pairs and draws new masked positions with
    :func:`mask_tokens` (``[CLS]``, ``[SEP]``, ``[MASK]`` and padding never selected), so the
    model never sees the same blanks twice. Works with every Keras backend.

    Args:
        token_ids: int ``(N, T)``: packed pairs from :func:`pack_pair`, or single segments from
            :func:`contiguous_segments`.
        segment_ids: int ``(N, T)``, or None for segment 0 everywhere.
        next_labels: int ``(N,)``, ``IS_NEXT`` / ``NOT_NEXT``; or None for masked-LM batches alone
            (no ``"nsp"`` target).
        batch_size: int.
        vocabulary_size, mask_token_id: as :func:`mask_tokens`.
        special_token_ids: ids never selected besides padding (``[CLS]``, ``[SEP]``, ``[MASK]``).
        max_predictions: int P, see :func:`gather_selected`.
        seed: int, seeds the order and the masks.
        batches_per_epoch: int, or None (the default) for one pass over the rows an epoch. Set, an
            "epoch" is that many full batches, and the next epoch goes on where it ended; a batch
            that runs past the end of a pass takes its last rows from the next pass's new order.
            Pre-training cut into rounds of a chosen length, for example a checkpoint after each
            quarter.

    Yields:
        ``({"token_ids", "segment_ids", "mask_positions"}, {"mlm": (B, P) labels, "nsp": (B,)})``
        (without ``"nsp"`` when ``next_labels`` is None).
    """

    def __init__(
        self,
        token_ids,
        segment_ids,
        next_labels,
        batch_size: int,
        vocabulary_size: int,
        mask_token_id: int,
        special_token_ids,
        max_predictions: int,
        seed: int = 0,
        batches_per_epoch: int | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.token_ids = np.asarray(token_ids, "int32")
        self.segment_ids = np.zeros_like(self.token_ids) if segment_ids is None else np.asarray(segment_ids, "int32")
        self.with_next = next_labels is not None
        self.next_labels = np.asarray(next_labels if self.with_next else np.zeros(len(self.token_ids)), "int32")
        if not (self.token_ids.shape == self.segment_ids.shape and len(self.next_labels) == len(self.token_ids)):
            raise ValueError(
                f"`token_ids` {self.token_ids.shape}, `segment_ids` {self.segment_ids.shape} and "
                f"`next_labels` ({len(self.next_labels)},) must describe the same pairs."
            )
        self.batch_size = check_integer("batch_size", batch_size)
        self.vocabulary_size, self.mask_token_id = vocabulary_size, mask_token_id
        self.unselectable = (0, *special_token_ids, mask_token_id)
        self.max_predictions = check_integer("max_predictions", max_predictions)
        self.rng = np.random.default_rng(check_integer("seed", seed, minimum=0))
        self.rounds = RoundOrder(
            len(self.token_ids), self.batch_size, batches_per_epoch, np.random.default_rng([seed, 1])
        )

    def __len__(self):
        return len(self.rounds)

    def __getitem__(self, index):
        rows = self.rounds.batch(index)
        masked, labels, selected = mask_tokens(
            self.token_ids[rows],
            self.rng,
            self.vocabulary_size,
            self.mask_token_id,
            unselectable_token_ids=self.unselectable,
        )
        positions, position_labels = gather_selected(selected, labels, self.max_predictions)
        targets = {"mlm": position_labels}
        if self.with_next:
            targets["nsp"] = self.next_labels[rows]
        return {"token_ids": masked, "segment_ids": self.segment_ids[rows], "mask_positions": positions}, targets

    def on_epoch_end(self):
        self.rounds.end_epoch()
