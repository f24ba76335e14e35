"""Positional information for attention, which by itself ignores word order.

* :func:`sinusoidal_encoding` — the fixed encoding of Vaswani et al. (2017), §3.5.
* :class:`PositionalEmbedding` — learned token and position embeddings, summed.
* :class:`SegmentEmbedding` — a learned vector per segment (sentence A or B) added to token
  vectors (BERT, ELECTRA).
* :class:`TokenEmbedding` — the token embedding alone, for a model whose positions enter inside
  attention (rotary); like ``PositionalEmbedding`` it turns around for a tied output layer.
* :class:`RelativePositionBias` — a learned bias per query-key offset, added to attention
  scores (Shaw et al., 2018; the bucket-free, clipped form).
* Rotary position embedding (Su et al., 2021, RoFormer), which rotates queries and keys inside
  attention rather than adding to the embeddings, is :mod:`transformer_course.rotary`.

Shape letters: B batch, T sequence length, E embedding width, N heads.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer, renamed, renamed_config
from .masks import padding_mask

__all__ = ["sinusoidal_encoding", "PositionalEmbedding", "TokenEmbedding", "SegmentEmbedding", "RelativePositionBias"]


def sinusoidal_encoding(length: int, depth: int) -> np.ndarray:
    """The sinusoidal positional encoding table.

    ``P[t, 2i] = sin(t / 10000^(2i / depth))`` and ``P[t, 2i + 1] = cos(t / 10000^(2i / depth))``:
    each pair of columns is a sine and cosine of one frequency, from one cycle every 2π
    positions (columns 0, 1) down to one every 2π·10000 positions.

    Args:
        length: int, number of positions T (rows), starting at position 0.
        depth: int, the encoding width E (columns); must be even.

    Returns:
        float32 array ``(T, E)`` with values in [-1, 1].

    Raises:
        ValueError: if ``length`` or ``depth`` is not a positive integer, or ``depth`` is odd.

    Source: Vaswani et al., 2017, "Attention Is All You Need", §3.5.
    """
    length = check_integer("length", length)
    depth = check_integer("depth", depth)
    if depth % 2:
        raise ValueError(f"`depth` must be even (sine and cosine pairs); received {depth}.")
    positions = np.arange(length, dtype="float64")[:, None]  # (T, 1)
    frequencies = 1.0 / 10000 ** (np.arange(0, depth, 2, dtype="float64") / depth)  # (E/2,)
    angles = positions * frequencies  # (T, E/2)
    table = np.empty((length, depth), dtype="float64")
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    return table.astype("float32")


def _embedding_table(embedding, dtype="float32"):
    """A ``keras.layers.Embedding``'s table as floats ``(V, E)``, whether or not it was quantized.

    After ``quantize("int8")`` Keras keeps int8 rows and one scale per row (the row's largest
    absolute value maps to 127); the table is ``int8 / scale``. A tied output layer needs the
    whole table, so it reads it here.
    """
    if getattr(embedding, "quantization_mode", None) == "int8":
        table = ops.cast(embedding.embeddings, "float32") / ops.expand_dims(embedding.embeddings_scale, -1)
        return ops.cast(table, dtype)
    return ops.cast(embedding.embeddings, dtype)


@keras.saving.register_keras_serializable(package="transformer_course")
class PositionalEmbedding(keras.layers.Layer):
    """Learned token embedding plus learned position embedding.

    ``output[b, t] = token_embedding[ids[b, t]] + position_embedding[t]``.

    Args:
        sequence_length: int, the longest sequence the layer accepts (rows of the position
            table).
        vocabulary_size: int, number of token ids (rows of the token table). The former name,
            ``vocab_size``, still works, with a DeprecationWarning.
        embed_dim: int, E.
        mask_zero: bool, treat id 0 as padding: the output carries a padding mask
            ``ids != 0`` (True = real token) that later layers (attention, pooling) honour.
            Defaults to True.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: int ``(B, T)`` token ids, ``T <= sequence_length``.
        start_index: int (or int scalar tensor), the position of the first id; defaults to 0.
            Cached generation embeds one new token at a time at its true position.
        reverse: bool. True turns the layer around for an output layer **tied** to the
            embedding: inputs are hidden states float ``(B, T, E)`` and the result is their dot
            product with every token's embedding, float ``(B, T, V)`` (no mask). Press and Wolf,
            2017, "Using the Output Embedding to Improve Language Models"; Vaswani et al., 2017,
            §3.4.

    Returns:
        float32 ``(B, T, E)``, with the padding mask ``(B, T)`` attached when ``mask_zero``.

    Raises:
        ValueError: for non-positive sizes, or inputs that end past ``sequence_length``.

    Source: Devlin et al., 2019 (BERT), §3 (learned position embeddings); Chollet, "Deep
    Learning with Python", 2nd ed., §11.4.3.

    Example:
        >>> layer = PositionalEmbedding(sequence_length=10, vocabulary_size=50, embed_dim=8)
        >>> ids = np.array([[3, 4, 0]])
        >>> tuple(layer(ids).shape), keras.ops.convert_to_numpy(layer.compute_mask(ids)).tolist()
        ((1, 3, 8), [[True, True, False]])
    """

    def __init__(
        self, sequence_length, vocabulary_size=None, embed_dim=None, mask_zero=True, *, vocab_size=None, **kwargs
    ):
        vocabulary_size = renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
        super().__init__(**kwargs)
        self.sequence_length = check_integer("sequence_length", sequence_length)
        self.vocabulary_size = check_integer("vocabulary_size", vocabulary_size)
        self.embed_dim = check_integer("embed_dim", embed_dim)
        self.mask_zero = bool(mask_zero)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, embed_dim, name="token_embedding", dtype=self.dtype_policy
        )
        self.position_embedding = keras.layers.Embedding(
            sequence_length, embed_dim, name="position_embedding", dtype=self.dtype_policy
        )
        self.supports_masking = True

    def build(self, inputs_shape):
        self.token_embedding.build(inputs_shape)
        self.position_embedding.build((None,))
        super().build(inputs_shape)

    def call(self, inputs, start_index=0, reverse=False):
        if reverse:  # (B, T, E) hidden states -> (B, T, V) scores against every token's embedding
            return ops.matmul(inputs, ops.transpose(_embedding_table(self.token_embedding, inputs.dtype)))
        length = inputs.shape[-1]
        if isinstance(length, int) and isinstance(start_index, int) and length + start_index > self.sequence_length:
            raise ValueError(
                f"`inputs` has {length} positions from position {start_index}, but this PositionalEmbedding "
                f"was built for sequence_length={self.sequence_length}."
            )
        positions = ops.arange(ops.shape(inputs)[-1])  # (T,)
        positions = positions + ops.cast(start_index, positions.dtype)
        return self.token_embedding(inputs) + self.position_embedding(positions)  # (B, T, E)

    def compute_mask(self, inputs, mask=None, start_index=0, reverse=False):
        return padding_mask(inputs) if self.mask_zero and not reverse else None

    def compute_output_spec(self, inputs, start_index=0, reverse=False):
        width = self.vocabulary_size if reverse else self.embed_dim
        shape = tuple(inputs.shape[:-1] if reverse else inputs.shape) + (width,)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            sequence_length=self.sequence_length,
            vocabulary_size=self.vocabulary_size,
            embed_dim=self.embed_dim,
            mask_zero=self.mask_zero,
        )
        return config

    @classmethod
    def from_config(cls, config):
        return cls(**renamed_config(config, vocab_size="vocabulary_size"))


@keras.saving.register_keras_serializable(package="transformer_course")
class TokenEmbedding(keras.layers.Layer):
    """A learned token embedding with no position table, turned around for a tied output layer.

    For a model that puts positions inside attention (rotary position embedding, Llama): the
    embeddings carry no position at all. ``reverse=True`` scores hidden states against every
    token's embedding, as :class:`PositionalEmbedding` does, and still works after
    ``model.quantize("int8")`` (the int8 table is scaled back to floats first).

    Args:
        vocabulary_size: int V (``vocab_size``, its former name, still works with a DeprecationWarning).
        embed_dim: int E.
        mask_zero: bool, id 0 is padding: the output carries the mask ``ids != 0`` (True = real).
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: int ``(B, T)`` token ids; with ``reverse``, float ``(B, T, E)`` hidden states.
        start_index: accepted and unused (the caller's positions go to the attention layers), so
            a cached pass calls both embeddings alike.
        reverse: bool, hidden states -> float ``(B, T, V)`` scores (no mask).

    Returns:
        float ``(B, T, E)`` (``(B, T, V)`` with ``reverse``).

    Raises:
        ValueError: for non-positive sizes.

    Source: Touvron et al., 2023, "LLaMA", §2.2 (no absolute positions; rotary embeddings);
    Press and Wolf, 2017 (tied output embedding). keras-hub's ``ReversibleEmbedding`` is the
    library's counterpart.

    Example:
        >>> layer = TokenEmbedding(vocabulary_size=50, embed_dim=8)
        >>> tuple(layer(np.array([[3, 4, 0]])).shape), tuple(layer(np.ones((1, 3, 8), "float32"), reverse=True).shape)
        ((1, 3, 8), (1, 3, 50))
    """

    def __init__(self, vocabulary_size=None, embed_dim=None, mask_zero=True, *, vocab_size=None, **kwargs):
        vocabulary_size = renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
        super().__init__(**kwargs)
        self.vocabulary_size = check_integer("vocabulary_size", vocabulary_size)
        self.embed_dim = check_integer("embed_dim", embed_dim)
        self.mask_zero = bool(mask_zero)
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size, embed_dim, name="token_embedding", dtype=self.dtype_policy
        )
        self.supports_masking = True

    def build(self, inputs_shape):
        self.token_embedding.build(inputs_shape)
        super().build(inputs_shape)

    def call(self, inputs, start_index=0, reverse=False):
        if reverse:
            return ops.matmul(inputs, ops.transpose(_embedding_table(self.token_embedding, inputs.dtype)))
        return self.token_embedding(inputs)

    def compute_mask(self, inputs, mask=None, start_index=0, reverse=False):
        return padding_mask(inputs) if self.mask_zero and not reverse else None

    def compute_output_spec(self, inputs, start_index=0, reverse=False):
        width = self.vocabulary_size if reverse else self.embed_dim
        shape = tuple(inputs.shape[:-1] if reverse else inputs.shape) + (width,)
        return keras.KerasTensor(shape, dtype=self.compute_dtype)

    def get_config(self):
        return {
            **super().get_config(),
            "vocabulary_size": self.vocabulary_size,
            "embed_dim": self.embed_dim,
            "mask_zero": self.mask_zero,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**renamed_config(config, vocab_size="vocabulary_size"))


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

    Example:
        >>> import numpy as np
        >>> layer = SegmentEmbedding(2, 4)
        >>> tuple(layer(np.zeros((1, 3, 4), "float32"), segment_ids=np.array([[0, 0, 1]])).shape)
        (1, 3, 4)
    """

    def __init__(self, num_segments, embed_dim, **kwargs):
        super().__init__(**kwargs)
        self.num_segments = check_integer("num_segments", num_segments)
        self.embed_dim = check_integer("embed_dim", embed_dim)
        self.supports_masking = True

    def build(self, inputs_shape, segment_ids_shape=None):
        self.table = self.add_weight(
            name="table",
            shape=(self.num_segments, self.embed_dim),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
        )
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
class RelativePositionBias(keras.layers.Layer):
    """A learned attention bias for each offset between key and query position.

    ``bias[n, t, s] = table[n, clip(s - t, -max_distance, max_distance) + max_distance]``: one
    number per head and offset, added to the attention scores before the softmax. Unlike an
    absolute position, an offset means the same thing anywhere in a sequence of any length.

    Args:
        num_heads: int, N (one bias table per head).
        max_distance: int, offsets further than this share the bias of ±max_distance.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        attention_scores: float32 ``(B, N, T, S)``, scores before the softmax.

    Returns:
        float32 ``(B, N, T, S)``: the scores plus the bias (:meth:`bias` gives the bias alone).

    Raises:
        ValueError: for non-positive ``num_heads`` or ``max_distance``.

    Source: Shaw, Uszkoreit and Vaswani, 2018, "Self-Attention with Relative Position
    Representations", §3; the scalar-bias form of Raffel et al., 2020 (T5), §2.1.

    Example:
        >>> scores = np.zeros((1, 2, 4, 4), "float32")  # (B, N, T, T) attention scores
        >>> tuple(RelativePositionBias(num_heads=2, max_distance=3)(scores).shape)
        (1, 2, 4, 4)
    """

    def __init__(self, num_heads, max_distance, **kwargs):
        super().__init__(**kwargs)
        self.num_heads = check_integer("num_heads", num_heads)
        self.max_distance = check_integer("max_distance", max_distance)
        self.table = self.add_weight(
            name="table", shape=(self.num_heads, 2 * self.max_distance + 1), initializer="zeros"
        )

    def offsets(self, query_length, key_length=None):
        """Clipped offsets ``s - t`` shifted to table columns: int ``(T, S)``."""
        key_length = query_length if key_length is None else key_length
        offsets = ops.expand_dims(ops.arange(key_length), 0) - ops.expand_dims(ops.arange(query_length), 1)
        return ops.clip(offsets, -self.max_distance, self.max_distance) + self.max_distance

    def bias(self, query_length, key_length=None):
        """The bias alone: float32 ``(N, T, S)``."""
        return ops.take(self.table, self.offsets(query_length, key_length), axis=1)

    def call(self, attention_scores):
        if len(attention_scores.shape) != 4:
            raise ValueError(
                "`attention_scores` must have shape (batch, heads, query_length, key_length); "
                f"received {tuple(attention_scores.shape)}."
            )
        shape = ops.shape(attention_scores)
        return attention_scores + self.bias(shape[2], shape[3])

    def get_config(self):
        config = super().get_config()
        config.update(num_heads=self.num_heads, max_distance=self.max_distance)
        return config
