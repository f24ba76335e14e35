"""The BERT-style model: an encoder pre-trained as a masked language model, and its fine-tuning heads (notebook 08).

* :class:`BertPretrainer` (and :func:`build_bert_pretrainer`) — token + segment + position
  embeddings, a stack of encoder blocks, a masked-language-model head tied to the token embedding
  and a next-sentence head on the pooled ``[CLS]`` output.
* :func:`build_bert_classifier`, :func:`build_token_tagger`, :func:`build_span_finder` and
  :func:`build_bert_encoder` — new models on the same (pre-trained) layers: a sentence classifier
  (pooled ``[CLS]`` or the mean of the outputs), a tag per token, a span (start, end), the
  encoder's vectors alone.
* :class:`SpanHead` — the span finder's head. The layers BERT shares with ELECTRA live beside
  the other layers and are re-exported here: :class:`~transformer_course.positional.SegmentEmbedding`,
  :class:`~transformer_course.pooling.GatherPositions` and
  :func:`~transformer_course.transformer.gelu_approximate`.

The data the pretrainer reads (masking, packing, batches) is in
:mod:`transformer_course.pretraining`; published checkpoints load into it through
:mod:`transformer_course.bert_checkpoints`.

Shape letters: B sequences, T positions, P masked positions scored per sequence, E width, V vocabulary.

References:
    Devlin et al., 2019, "BERT: Pre-training of Deep Bidirectional Transformers for Language
    Understanding", NAACL, §3 and §4. https://arxiv.org/abs/1810.04805
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
from keras import ops

from ._validation import check_integer, check_model_sizes, check_rate
from .masks import masked_softmax, padding_mask
from .pooling import ClassTokenOutput, GatherPositions
from .positional import PositionalEmbedding, SegmentEmbedding
from .transformer import BertStyleEncoder, TiedTokenDistribution, gelu_approximate

__all__ = [
    "BertPretrainer",
    "build_bert_pretrainer",
    "build_bert_classifier",
    "build_bert_encoder",
    "build_token_tagger",
    "build_span_finder",
    "SegmentEmbedding",
    "GatherPositions",
    "SpanHead",
    "gelu_approximate",
    "CLASSIFIER_POOLINGS",
]


@keras.saving.register_keras_serializable(package="transformer_course")
class BertPretrainer(BertStyleEncoder, keras.Model):
    """A BERT-style encoder with its pre-training heads (Devlin et al., 2019, §3.1, Figure 2).

    The input representation is the sum of a token embedding, a learned position embedding and
    a **segment** embedding (0 for sentence A and ``[CLS]``, 1 for sentence B), then LayerNorm
    and dropout (§3, "Input/Output Representations"); then ``num_layers`` post-norm
    ``TransformerEncoder`` blocks with GELU, as in BERT. Padding (id 0) is masked everywhere.

    * Masked-LM head: the vectors at ``mask_positions`` → dense (GELU) → LayerNorm → scores
      against every token embedding (the output layer **is** the token-embedding matrix,
      transposed) plus a bias → softmax.
    * Next-sentence head: the ``[CLS]`` output → dense (tanh), the **pooled** output → softmax
      over NotNext (0) / IsNext (1).

    A functional model with its parts as attributes, read by ``encode`` (of
    :class:`~transformer_course.transformer.BertStyleEncoder`, the body it shares with ELECTRA's
    discriminator), the fine-tuning builders below and :mod:`transformer_course.bert_checkpoints`:
    ``token_embedding`` (tokens and positions), ``segment_embedding``, ``embedding_norm``,
    ``embedding_dropout``, ``encoder_blocks`` (a list) and ``pooler`` (None without the
    next-sentence head).
    ``get_config`` returns the arguments below, so a ``.keras`` file reloads with no
    ``custom_objects``.

    Args:
        vocabulary_size: int V (id 0 padding; ``[CLS]``, ``[SEP]``, ``[MASK]`` are ids of their own).
        sequence_length: int T, the longest packed input.
        max_predictions: int P, masked positions scored per sequence (see
            :func:`~transformer_course.pretraining.gather_selected`).
        embed_dim, num_heads, intermediate_dim: ints E, N (divides E), F; keyword only, as every
            argument after them.
        num_layers: int, encoder blocks.
        dropout: float in [0, 1).
        next_sentence: bool; False builds the masked-LM pretrainer alone (RoBERTa's, Liu et al.,
            2019, §4.2): no pooler and no next-sentence head, and the output is ``{"mlm"}`` only.
        activation: the activation of the feed-forward layers and the masked-LM transform: a name
            Keras knows (``"gelu"``, exact, the default) or a registered function, such as
            :func:`gelu_approximate` (the tanh approximation Google's BERT checkpoints use).
        **kwargs: ``name``, ``trainable``, passed to ``keras.Model``.

    Call arguments:
        inputs: ``{"token_ids": int (B, T), "segment_ids": int (B, T), "mask_positions": int (B, P)}``.

    Returns:
        ``{"mlm": float32 (B, P, V), "nsp": float32 (B, 2)}`` (``{"mlm"}`` alone when
        ``next_sentence`` is False).

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), or ``num_heads`` not
            dividing ``embed_dim``.

    Example:
        >>> model = BertPretrainer(100, 16, 3, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=2)
        >>> len(model.encoder_blocks), sorted(model.output)
        (2, ['mlm', 'nsp'])
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        max_predictions,
        *,
        embed_dim=256,
        num_heads=4,
        intermediate_dim=1024,
        num_layers=4,
        dropout=0.1,
        next_sentence=True,
        activation="gelu",
        **kwargs,
    ):
        check_model_sizes(
            embed_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            sequence_length=sequence_length,
            max_predictions=max_predictions,
            intermediate_dim=intermediate_dim,
            num_layers=num_layers,
        )
        activation = keras.activations.get(activation)
        inputs = {
            "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
            "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
            "mask_positions": keras.Input(shape=(max_predictions,), dtype="int32", name="mask_positions"),
        }
        token_embedding = PositionalEmbedding(sequence_length, vocabulary_size, embed_dim, name="token_embedding")
        segment_embedding = SegmentEmbedding(2, embed_dim, name="segment_embedding")
        x = segment_embedding(token_embedding(inputs["token_ids"]), segment_ids=inputs["segment_ids"])
        x, embedding_norm, embedding_dropout, encoder_blocks = self.build_body(
            x,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            activation=activation,
        )
        masked = GatherPositions(name="mlm_gather")([x, inputs["mask_positions"]])  # (B, P, E)
        masked = keras.layers.Dense(embed_dim, activation=activation, name="mlm_transform")(masked)
        masked = keras.layers.LayerNormalization(epsilon=1e-12, name="mlm_norm")(masked)
        # Named "mlm" when it is the only output: Keras before 3.10 names a one-output model's outputs by its layers.
        outputs = {
            "mlm": TiedTokenDistribution(
                vocabulary_size, name="mlm_output" if next_sentence else "mlm", dtype="float32"
            )(token_embedding(masked, reverse=True))
        }
        pooler = None
        if next_sentence:
            pooler = keras.layers.Dense(embed_dim, activation="tanh", name="pooler")
            pooled = pooler(ClassTokenOutput(name="cls_output")(x))
            outputs["nsp"] = keras.layers.Dense(2, activation="softmax", name="nsp_output", dtype="float32")(pooled)
        super().__init__(inputs, outputs, **kwargs)
        self.token_embedding, self.segment_embedding = token_embedding, segment_embedding
        self.embedding_norm, self.embedding_dropout = embedding_norm, embedding_dropout
        self.encoder_blocks, self.pooler = encoder_blocks, pooler
        self.vocabulary_size, self.sequence_length, self.max_predictions = (
            vocabulary_size,
            sequence_length,
            max_predictions,
        )
        self.embed_dim, self.num_heads, self.intermediate_dim = embed_dim, num_heads, intermediate_dim
        self.num_layers, self.dropout, self.next_sentence = num_layers, dropout, next_sentence
        self.activation = activation

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "vocabulary_size": self.vocabulary_size,
            "sequence_length": self.sequence_length,
            "max_predictions": self.max_predictions,
            "embed_dim": self.embed_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
            "next_sentence": self.next_sentence,
            "activation": keras.activations.serialize(self.activation),
        }

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "activation": keras.activations.deserialize(config["activation"])})


def build_bert_pretrainer(
    vocabulary_size: int, sequence_length: int, max_predictions: int, **options
) -> BertPretrainer:
    """A :class:`BertPretrainer`: the three sizes, then its keyword arguments (``embed_dim=``, …).

    Example:
        >>> build_bert_pretrainer(100, 16, 3, embed_dim=8, num_heads=2, intermediate_dim=16,
        ...                       next_sentence=False).output["mlm"].shape
        (None, 3, 100)
    """
    return BertPretrainer(vocabulary_size, sequence_length, max_predictions, **options)


CLASSIFIER_POOLINGS = ("cls", "mean")


def build_bert_classifier(
    pretrainer: BertStyleEncoder, num_classes: int, dropout: float = 0.1, name: str | None = None, pooling: str = "cls"
) -> keras.Model:
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
        pretrainer: a :class:`BertPretrainer`.
        num_classes: int.
        dropout: float in [0, 1), before the softmax layer.
        name: optional model name.
        pooling: ``"cls"`` or ``"mean"``.

    Returns:
        ``keras.Model`` from ``{"token_ids": int (B, T), "segment_ids": int (B, T)}`` to float32
        ``(B, num_classes)``. Padding (token id 0) changes no prediction.

    Raises:
        TypeError: if ``pretrainer`` is not a :class:`~transformer_course.transformer.BertStyleEncoder`.
        ValueError: for a non-positive ``num_classes``, a ``dropout`` outside [0, 1) or an
            unknown ``pooling``.

    Example:
        >>> pretrainer = build_bert_pretrainer(100, 16, 3, embed_dim=8, num_heads=2, intermediate_dim=16)
        >>> build_bert_classifier(pretrainer, 2, pooling="mean").output_shape
        (None, 2)
    """
    num_classes = check_integer("num_classes", num_classes)
    check_rate("dropout", dropout)
    if pooling not in CLASSIFIER_POOLINGS:
        raise ValueError(f"`pooling` must be one of {CLASSIFIER_POOLINGS}; received {pooling!r}.")
    inputs = _text_inputs()
    x = _encoder(pretrainer).encode(inputs)
    if pooling == "mean":
        pooled = keras.layers.GlobalAveragePooling1D(name="mean_output")(x, mask=padding_mask(inputs["token_ids"]))
    else:
        pooler = pretrainer.pooler
        if pooler is None:  # masked-LM-only pre-training trains no pooler: a fresh one, as RoBERTa's head
            pooler = keras.layers.Dense(x.shape[-1], activation="tanh", name="pooler")
        pooled = pooler(ClassTokenOutput(name="cls_output")(x))
    pooled = keras.layers.Dropout(dropout, name="classifier_dropout")(pooled)
    probabilities = keras.layers.Dense(num_classes, activation="softmax", name="classifier_output", dtype="float32")(
        pooled
    )
    return keras.Model(inputs, probabilities, name=name)


def build_bert_encoder(pretrainer: BertStyleEncoder, name: str | None = None) -> keras.Model:
    """The encoder of a BERT-style pretrainer alone: its last block's vector at every position.

    The new model **shares** the pretrainer's embedding and encoder layers; use it to read the
    representations (a frozen-encoder probe) or to compare with another implementation.

    Args:
        pretrainer: a :class:`BertPretrainer` (or a converted checkpoint).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids": int (B, T), "segment_ids": int (B, T)}`` to float32
        ``(B, T, E)``, carrying the padding mask (token id 0) as its Keras mask; the vectors at
        padding positions are computed but mean nothing.

    Raises:
        TypeError: if ``pretrainer`` is not a :class:`~transformer_course.transformer.BertStyleEncoder`.

    Example:
        >>> pretrainer = build_bert_pretrainer(50, 8, 2, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1)
        >>> encoder = build_bert_encoder(pretrainer)
        >>> import numpy as np
        >>> tuple(encoder({"token_ids": np.ones((1, 8), "int32"), "segment_ids": np.zeros((1, 8), "int32")}).shape)
        (1, 8, 8)
    """
    inputs = _text_inputs()
    return keras.Model(inputs, _encoder(pretrainer).encode(inputs), name=name)


def _encoder(pretrainer) -> BertStyleEncoder:
    """``pretrainer`` itself, once it is checked to be a BERT-style encoder (a BERT or ELECTRA pre-trainer).

    Raises:
        TypeError: naming what was received instead.
    """
    if not isinstance(pretrainer, BertStyleEncoder):
        raise TypeError(
            "`pretrainer` must be a BERT-style encoder (a BertPretrainer, an ElectraPretrainer or a "
            f"converted checkpoint); received {type(pretrainer).__name__}."
        )
    return pretrainer


def _text_inputs() -> dict:
    return {
        "token_ids": keras.Input(shape=(None,), dtype="int32", name="token_ids"),
        "segment_ids": keras.Input(shape=(None,), dtype="int32", name="segment_ids"),
    }


def build_token_tagger(
    pretrainer: BertStyleEncoder, num_tags: int, dropout: float = 0.1, name: str | None = None
) -> keras.Model:
    """A tag for every token (named-entity-recognition style) on a (pre-trained) BERT-style encoder.

    Each token's output vector goes through dropout and one softmax layer over ``num_tags``
    tags (Devlin et al., 2019, §5.3: "feed the final hidden representation of each token into a
    classification layer"). Padding positions still get a distribution; give them label 0 and
    a loss that skips it (:class:`~transformer_course.metrics.MaskedCrossEntropy`), with the real
    tags numbered from 1.

    Args:
        pretrainer: a :class:`BertPretrainer` (its layers are shared).
        num_tags: int, tags including the padding label 0.
        dropout: float in [0, 1).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids", "segment_ids"}`` (int ``(B, T)``) to float32
        ``(B, T, num_tags)``.

    Raises:
        TypeError: if ``pretrainer`` is not a :class:`~transformer_course.transformer.BertStyleEncoder`.

    Example:
        >>> pretrainer = build_bert_pretrainer(50, 8, 2, embed_dim=8, num_heads=2, intermediate_dim=16)
        >>> build_token_tagger(pretrainer, num_tags=3).output_shape
        (None, None, 3)
    """
    num_tags = check_integer("num_tags", num_tags)
    check_rate("dropout", dropout)
    inputs = _text_inputs()
    x = keras.layers.Dropout(dropout, name="tagger_dropout")(_encoder(pretrainer).encode(inputs))
    return keras.Model(
        inputs, keras.layers.Dense(num_tags, activation="softmax", name="tagger_output", dtype="float32")(x), name=name
    )


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

    Example:
        >>> import numpy as np
        >>> start, end = SpanHead()(np.ones((1, 4, 8), "float32"))
        >>> tuple(start.shape), round(float(keras.ops.sum(start)), 5)
        ((1, 4), 1.0)
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


def build_span_finder(pretrainer: BertStyleEncoder, name: str | None = None) -> keras.Model:
    """Question-answering style span extraction on a (pre-trained) BERT-style encoder.

    Args:
        pretrainer: a :class:`BertPretrainer` (its layers are shared).
        name: optional model name.

    Returns:
        ``keras.Model`` from ``{"token_ids", "segment_ids"}`` (int ``(B, T)``) to
        ``{"start": float32 (B, T), "end": float32 (B, T)}``: the probability that the span
        starts / ends at each position (0 on padding).

    Raises:
        TypeError: if ``pretrainer`` is not a :class:`~transformer_course.transformer.BertStyleEncoder`.

    Example:
        >>> import numpy as np
        >>> finder = build_span_finder(build_bert_pretrainer(50, 8, 2, embed_dim=8, num_heads=2, intermediate_dim=16))
        >>> spans = finder({"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32")})
        >>> sorted(spans), tuple(spans["start"].shape)
        (['end', 'start'], (1, 4))
    """
    inputs = _text_inputs()
    start, end = SpanHead(name="span_head")(_encoder(pretrainer).encode(inputs))
    return keras.Model(inputs, {"start": start, "end": end}, name=name)
