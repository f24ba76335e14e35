"""BERT-style pre-training data: masked language modelling (notebook 08).

* :func:`mask_tokens` — choose the positions a masked language model must fill in, and corrupt
  them as BERT does: of the selected tokens, 80% become ``[MASK]``, 10% a random word, 10% stay.
* :func:`build_bert_pretrainer` — the BERT-style model: token + segment + position embeddings,
  a stack of encoder blocks, a masked-language-model head tied to the token embedding and a
  next-sentence head on the pooled ``[CLS]`` output; :func:`build_bert_classifier` puts a
  classifier on the same (pre-trained) layers.
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

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_model_sizes
from .classifier import ClassTokenOutput
from .masks import masked_softmax, padding_mask
from .positional import PositionalEmbedding
from .training import RoundOrder
from .transformer import TiedTokenDistribution, TransformerEncoder

__all__ = ["mask_tokens", "contiguous_segments", "gelu_approximate", "gather_selected", "PretrainingBatches",
           "SegmentEmbedding", "GatherPositions", "build_bert_pretrainer", "build_bert_classifier",
           "build_bert_encoder",
           "split_sentences", "group_sentences", "next_sentence_pairs", "pack_pair", "IS_NEXT", "NOT_NEXT"]

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
        raise ValueError(f"`token_ids` must lie in 0..{vocabulary_size - 1}; "
                         f"received ids from {ids.min()} to {ids.max()}.")
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
    token_ids[:len(tokens)], segment_ids[:len(segments)] = tokens, segments
    return token_ids, segment_ids


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
    body = stream[:rows * width].reshape(rows, width)
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
        raise ValueError(f"`selected` and `labels` must both have shape (batch, length); received {selected.shape} "
                         f"and {labels.shape}.")
    max_predictions = check_integer("max_predictions", max_predictions)
    positions = np.zeros((len(selected), max_predictions), dtype="int32")
    position_labels = np.zeros((len(selected), max_predictions), dtype="int32")
    for row, (chosen, row_labels) in enumerate(zip(selected, labels)):
        kept = np.flatnonzero(chosen)[:max_predictions]
        positions[row, :len(kept)] = kept
        position_labels[row, :len(kept)] = row_labels[kept]
    return positions, position_labels


@keras.saving.register_keras_serializable(package="transformer_course")
class SegmentEmbedding(keras.layers.Layer):
    """Add a learned vector per segment (sentence A = 0, sentence B = 1) to token vectors.

    Args:
        num_segments: int, segment ids ``0 .. num_segments - 1`` (BERT: 2).
        embed_dim: int E.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: float ``(B, T, E)``, with its padding mask if it has one.
        segment_ids: int ``(B, T)``.

    Returns:
        float ``(B, T, E)``: ``inputs + table[segment_ids]``, carrying the input's padding mask
        on (``keras.layers.Add`` would drop it, since the segment ids have no mask).
    """

    def __init__(self, num_segments, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.num_segments = check_integer("num_segments", num_segments)
        self.embed_dim = check_integer("embed_dim", embed_dim)
        self.supports_masking = True

    def build(self, inputs_shape, segment_ids_shape=None):
        self.table = self.add_weight(name="table", shape=(self.num_segments, self.embed_dim),
                                     initializer=keras.initializers.RandomNormal(stddev=0.02))
        super().build(inputs_shape)

    def call(self, inputs, segment_ids):
        return inputs + ops.cast(ops.take(self.table, ops.cast(segment_ids, "int32"), axis=0), inputs.dtype)

    def compute_mask(self, inputs, mask=None, segment_ids=None):
        return mask

    def compute_output_shape(self, inputs_shape, segment_ids_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        return {**super().get_config(), "num_segments": self.num_segments, "embed_dim": self.embed_dim}


@keras.saving.register_keras_serializable(package="transformer_course")
class GatherPositions(keras.layers.Layer):
    """The vectors at chosen positions of each sequence: ``(B, T, E), (B, P) -> (B, P, E)``.

    Call arguments:
        inputs: list ``[sequence, positions]``: float ``(B, T, E)`` and int ``(B, P)`` indices
            into T.

    Returns:
        float ``(B, P, E)``; no mask.
    """

    def call(self, inputs):
        sequence, positions = inputs
        return ops.take_along_axis(sequence, ops.expand_dims(ops.cast(positions, "int32"), -1), axis=1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        sequence_shape, positions_shape = inputs_shape
        return (sequence_shape[0], positions_shape[1], sequence_shape[2])


def build_bert_pretrainer(vocabulary_size: int, sequence_length: int, max_predictions: int, embed_dim: int = 256,
                          num_heads: int = 4, intermediate_dim: int = 1024, num_layers: int = 4, dropout: float = 0.1,
                          next_sentence: bool = True, activation="gelu", name: str | None = None) -> keras.Model:
    """A BERT-style encoder with its two pre-training heads (Devlin et al., 2019, §3.1, Figure 2).

    The input representation is the sum of a token embedding, a learned position embedding and
    a **segment** embedding (0 for sentence A and ``[CLS]``, 1 for sentence B), then LayerNorm
    and dropout (§3, "Input/Output Representations"); then ``num_layers`` post-norm
    ``TransformerEncoder`` blocks with GELU, as in BERT. Padding (id 0) is masked everywhere.

    * Masked-LM head: the vectors at ``mask_positions`` → dense (GELU) → LayerNorm → scores
      against every token embedding (the output layer **is** the token-embedding matrix,
      transposed) plus a bias → softmax.
    * Next-sentence head: the ``[CLS]`` output → dense (tanh), the **pooled** output → softmax
      over NotNext (0) / IsNext (1).

    Args:
        vocabulary_size: int V (id 0 padding; ``[CLS]``, ``[SEP]``, ``[MASK]`` are ids of their own).
        sequence_length: int T, the longest packed input.
        max_predictions: int P, masked positions scored per sequence (see :func:`gather_selected`).
        embed_dim, num_heads, intermediate_dim: ints E, N (divides E), F.
        num_layers: int, encoder blocks.
        dropout: float in [0, 1).
        next_sentence: bool; False builds the masked-LM pretrainer alone (RoBERTa's, Liu et al.,
            2019, §4.2): no pooler and no next-sentence head, and the output is ``{"mlm"}`` only.
        activation: the activation of the feed-forward layers and the masked-LM transform: a name
            Keras knows (``"gelu"``, exact, the default) or a function, such as
            :func:`gelu_approximate` (the tanh approximation Google's BERT checkpoints use).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids": int (B, T), "segment_ids": int (B, T),
        "mask_positions": int (B, P)}`` to ``{"mlm": float32 (B, P, V), "nsp": float32 (B, 2)}``
        (``{"mlm"}`` alone when ``next_sentence`` is False).
        Layer names: ``token_embedding``, ``segment_embedding``, ``embedding_norm``,
        ``embedding_dropout``, ``encoder_1`` …, ``cls_output``, ``pooler``, and the heads'
        ``mlm_*`` (the output layer named ``mlm`` when it is the only output) and ``nsp_output`` (what
        :func:`build_bert_classifier` reads).

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), or ``num_heads`` not
            dividing ``embed_dim``.
    """
    check_model_sizes(embed_dim, num_heads, dropout, vocabulary_size=vocabulary_size, sequence_length=sequence_length,
                      max_predictions=max_predictions, intermediate_dim=intermediate_dim, num_layers=num_layers)
    inputs = {"token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
              "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
              "mask_positions": keras.Input(shape=(max_predictions,), dtype="int32", name="mask_positions")}
    embedding = PositionalEmbedding(sequence_length, vocabulary_size, embed_dim, name="token_embedding")
    x = SegmentEmbedding(2, embed_dim, name="segment_embedding")(embedding(inputs["token_ids"]),
                                                                 segment_ids=inputs["segment_ids"])
    x = keras.layers.LayerNormalization(epsilon=1e-12, name="embedding_norm")(x)
    x = keras.layers.Dropout(dropout, name="embedding_dropout")(x)
    for index in range(num_layers):
        x = TransformerEncoder(intermediate_dim, num_heads, dropout=dropout, activation=activation,
                               layer_norm_epsilon=1e-12, name=f"encoder_{index + 1}")(x)
    masked = GatherPositions(name="mlm_gather")([x, inputs["mask_positions"]])  # (B, P, E)
    masked = keras.layers.Dense(embed_dim, activation=activation, name="mlm_transform")(masked)
    masked = keras.layers.LayerNormalization(epsilon=1e-12, name="mlm_norm")(masked)
    # Named "mlm" when it is the only output: Keras before 3.10 names a one-output model's outputs by their layers.
    mlm = TiedTokenDistribution(vocabulary_size, name="mlm_output" if next_sentence else "mlm",
                                dtype="float32")(embedding(masked, reverse=True))
    if not next_sentence:
        return keras.Model(inputs, {"mlm": mlm}, name=name)
    pooled = keras.layers.Dense(embed_dim, activation="tanh", name="pooler")(ClassTokenOutput(name="cls_output")(x))
    nsp = keras.layers.Dense(2, activation="softmax", name="nsp_output", dtype="float32")(pooled)
    return keras.Model(inputs, {"mlm": mlm, "nsp": nsp}, name=name)


@keras.saving.register_keras_serializable(package="transformer_course")
def gelu_approximate(x):
    """GELU by its tanh approximation, ``0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³)))``.

    Google's BERT checkpoints (and keras-hub's ``BertBackbone``) use it; the exact GELU differs
    by at most about 1e-3 per unit, enough to break an equality test at 1e-5.

    Args:
        x: float tensor of any shape.

    Returns:
        float tensor of the same shape and dtype.

    Source: Hendrycks and Gimpel, 2016, "Gaussian Error Linear Units (GELUs)", §2.

    Example:
        >>> float(gelu_approximate(keras.ops.convert_to_tensor(1.0)))  # doctest: +ELLIPSIS
        0.841...
    """
    return keras.activations.gelu(x, approximate=True)


CLASSIFIER_POOLINGS = ("cls", "mean")


def build_bert_classifier(pretrainer: keras.Model, num_classes: int, dropout: float = 0.1,
                          name: str | None = None, pooling: str = "cls") -> keras.Model:
    """A classifier on a (pre-trained) BERT-style encoder: its pooled ``[CLS]`` output, or the mean of its outputs.

    The new model **shares** the pretrainer's embedding and encoder layers (their weights,
    trained or not) and adds dropout and one softmax layer: fine-tuning as in Devlin et al.,
    2019, §4.1. Build it from a freshly built pretrainer for the same architecture trained from
    scratch.

    With ``pooling="cls"`` (BERT's recipe) the classifier reads the output at position 0 through
    the pooler (dense, tanh). A pretrainer built with ``next_sentence=False`` has no pooler: the
    classifier then gets a freshly initialised one, as RoBERTa's classification head. With
    ``pooling="mean"`` it reads the mean of the outputs over the real positions (token id ≠ 0;
    ``[CLS]`` and ``[SEP]`` included, padding never), with no pooler: the MEAN strategy of
    Reimers and Gurevych, 2019 (Sentence-BERT, §3), and what the frozen probe of notebook 08 reads.

    Args:
        pretrainer: a model from :func:`build_bert_pretrainer`.
        num_classes: int.
        dropout: float in [0, 1), before the softmax layer.
        name: optional model name.
        pooling: ``"cls"`` or ``"mean"``.

    Returns:
        ``keras.Model`` from ``{"token_ids": int (B, T), "segment_ids": int (B, T)}`` to float32
        ``(B, num_classes)``. Padding (token id 0) changes no prediction.

    Raises:
        ValueError: for a non-positive ``num_classes``, a ``dropout`` outside [0, 1) or an
            unknown ``pooling``.

    Example:
        >>> pretrainer = build_bert_pretrainer(100, 16, 3, embed_dim=8, num_heads=2, intermediate_dim=16)
        >>> build_bert_classifier(pretrainer, 2, pooling="mean").output_shape
        (None, 2)
    """
    num_classes = check_integer("num_classes", num_classes)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1); received {dropout!r}.")
    if pooling not in CLASSIFIER_POOLINGS:
        raise ValueError(f"`pooling` must be one of {CLASSIFIER_POOLINGS}; received {pooling!r}.")
    inputs = _text_inputs()
    x = _encoded(pretrainer, inputs)
    if pooling == "mean":
        pooled = keras.layers.GlobalAveragePooling1D(name="mean_output")(x, mask=padding_mask(inputs["token_ids"]))
    else:
        has_pooler = any(layer.name == "pooler" for layer in pretrainer.layers)
        pooler = pretrainer.get_layer("pooler") if has_pooler else keras.layers.Dense(
            x.shape[-1], activation="tanh", name="pooler")  # masked-LM-only pre-training trains no pooler
        pooled = pooler(ClassTokenOutput(name="cls_output")(x))
    pooled = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
    probabilities = keras.layers.Dense(num_classes, activation="softmax", name="classifier_output",
                                       dtype="float32")(pooled)
    return keras.Model(inputs, probabilities, name=name)


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

    def __init__(self, token_ids, segment_ids, next_labels, batch_size: int, vocabulary_size: int, mask_token_id: int,
                 special_token_ids, max_predictions: int, seed: int = 0, batches_per_epoch: int | None = None,
                 **kwargs):
        super().__init__(**kwargs)
        self.token_ids = np.asarray(token_ids, "int32")
        self.segment_ids = np.zeros_like(self.token_ids) if segment_ids is None else np.asarray(segment_ids, "int32")
        self.with_next = next_labels is not None
        self.next_labels = np.asarray(next_labels if self.with_next else np.zeros(len(self.token_ids)), "int32")
        if not (self.token_ids.shape == self.segment_ids.shape and len(self.next_labels) == len(self.token_ids)):
            raise ValueError(f"`token_ids` {self.token_ids.shape}, `segment_ids` {self.segment_ids.shape} and "
                             f"`next_labels` ({len(self.next_labels)},) must describe the same pairs.")
        self.batch_size = check_integer("batch_size", batch_size)
        self.vocabulary_size, self.mask_token_id = vocabulary_size, mask_token_id
        self.unselectable = (0, *special_token_ids, mask_token_id)
        self.max_predictions = check_integer("max_predictions", max_predictions)
        self.rng = np.random.default_rng(check_integer("seed", seed, minimum=0))
        self.rounds = RoundOrder(len(self.token_ids), self.batch_size, batches_per_epoch,
                                 np.random.default_rng([seed, 1]))

    def __len__(self):
        return len(self.rounds)

    def __getitem__(self, index):
        rows = self.rounds.batch(index)
        masked, labels, selected = mask_tokens(self.token_ids[rows], self.rng, self.vocabulary_size, self.mask_token_id,
                                               unselectable_token_ids=self.unselectable)
        positions, position_labels = gather_selected(selected, labels, self.max_predictions)
        targets = {"mlm": position_labels}
        if self.with_next:
            targets["nsp"] = self.next_labels[rows]
        return {"token_ids": masked, "segment_ids": self.segment_ids[rows], "mask_positions": positions}, targets

    def on_epoch_end(self):
        self.rounds.end_epoch()


def build_bert_encoder(pretrainer: keras.Model, name: str | None = None) -> keras.Model:
    """The encoder of a BERT-style pretrainer alone: its last block's vector at every position.

    The new model **shares** the pretrainer's embedding and encoder layers; use it to read the
    representations (a frozen-encoder probe) or to compare with another implementation.

    Args:
        pretrainer: a model from :func:`build_bert_pretrainer` (or a converted checkpoint).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids": int (B, T), "segment_ids": int (B, T)}`` to float32
        ``(B, T, E)``, carrying the padding mask (token id 0) as its Keras mask; the vectors at
        padding positions are computed but mean nothing.

    Example:
        >>> pretrainer = build_bert_pretrainer(50, 8, 2, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1)
        >>> encoder = build_bert_encoder(pretrainer)
        >>> tuple(encoder({"token_ids": np.ones((1, 8), "int32"), "segment_ids": np.zeros((1, 8), "int32")}).shape)
        (1, 8, 8)
    """
    inputs = _text_inputs()
    return keras.Model(inputs, _encoded(pretrainer, inputs), name=name)


def _encoded(pretrainer: keras.Model, inputs: dict):
    """The pretrainer's encoder (embeddings and blocks, shared layers) on new inputs: ``(B, T, E)``."""
    layer = pretrainer.get_layer
    x = layer("segment_embedding")(layer("token_embedding")(inputs["token_ids"]), segment_ids=inputs["segment_ids"])
    x = layer("embedding_dropout")(layer("embedding_norm")(x))
    index = 1
    while any(candidate.name == f"encoder_{index}" for candidate in pretrainer.layers):
        x = layer(f"encoder_{index}")(x)
        index += 1
    return x


def _text_inputs() -> dict:
    return {"token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
            "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids")}


def build_token_tagger(pretrainer: keras.Model, num_tags: int, dropout: float = 0.1,
                       name: str | None = None) -> keras.Model:
    """A tag for every token (named-entity-recognition style) on a (pre-trained) BERT-style encoder.

    Each token's output vector goes through dropout and one softmax layer over ``num_tags``
    tags (Devlin et al., 2019, §5.3: "feed the final hidden representation of each token into a
    classification layer"). Padding positions still get a distribution; give them label 0 and
    a loss that skips it (:class:`~transformer_course.metrics.MaskedCrossEntropy`), with the real
    tags numbered from 1.

    Args:
        pretrainer: a model from :func:`build_bert_pretrainer` (its layers are shared).
        num_tags: int, tags including the padding label 0.
        dropout: float in [0, 1).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids", "segment_ids"}`` (int ``(B, T)``) to float32
        ``(B, T, num_tags)``.
    """
    num_tags = check_integer("num_tags", num_tags)
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1); received {dropout!r}.")
    inputs = _text_inputs()
    x = keras.layers.Dropout(dropout, name="tagger_dropout")(_encoded(pretrainer, inputs))
    return keras.Model(inputs, keras.layers.Dense(num_tags, activation="softmax", name="tagger_output",
                                                  dtype="float32")(x), name=name)


@keras.saving.register_keras_serializable(package="transformer_course")
class SpanHead(keras.layers.Layer):
    """Where a span starts and ends: two learned vectors, one softmax over positions each.

    ``P(start = t) = softmax_t(S · h_t)`` and ``P(end = t) = softmax_t(E · h_t)`` with the start
    vector S and end vector E learned in fine-tuning (Devlin et al., 2019, §4.2, SQuAD); padding
    positions get probability 0.

    Call arguments:
        inputs: float ``(B, T, E)`` token vectors with their padding mask.

    Returns:
        ``(start, end)``: float32 ``(B, T)`` each, rows summing to 1 over the real tokens.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def build(self, inputs_shape):
        width = inputs_shape[-1]
        self.start_vector = self.add_weight(name="start_vector", shape=(width,), initializer="glorot_uniform")
        self.end_vector = self.add_weight(name="end_vector", shape=(width,), initializer="glorot_uniform")
        super().build(inputs_shape)

    def call(self, inputs, mask=None):
        inputs = ops.cast(inputs, "float32")
        start = ops.einsum("bte,e->bt", inputs, ops.cast(self.start_vector, "float32"))
        end = ops.einsum("bte,e->bt", inputs, ops.cast(self.end_vector, "float32"))
        return masked_softmax(start, mask), masked_softmax(end, mask)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        return (inputs_shape[0], inputs_shape[1]), (inputs_shape[0], inputs_shape[1])


def build_span_finder(pretrainer: keras.Model, name: str | None = None) -> keras.Model:
    """Question-answering style span extraction on a (pre-trained) BERT-style encoder.

    Args:
        pretrainer: a model from :func:`build_bert_pretrainer` (its layers are shared).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids", "segment_ids"}`` (int ``(B, T)``) to
        ``{"start": float32 (B, T), "end": float32 (B, T)}``: the probability that the span
        starts / ends at each position (0 on padding).
    """
    inputs = _text_inputs()
    start, end = SpanHead(name="span_head")(_encoded(pretrainer, inputs))
    return keras.Model(inputs, {"start": start, "end": end}, name=name)
