"""Attention layers: for seq2seq decoders (notebook 02) and the Transformer (notebook 04).

Part 1 — attention for sequence-to-sequence decoders: Luong dot, Luong general and Bahdanau
scores.

At each output step the decoder's state (the *query*) is scored against every encoder state (the
*values*). A softmax turns the alignment scores into attention weights over the source
positions, and the weighted sum of the encoder states is the step's context vector:

    alpha_s = softmax_s(score(h_t, h_s)),    context_t = sum_s alpha_s h_s

Shape letters: B batch, S source length, H width of the encoder states (values), Q width of the
decoder state (query), A the Bahdanau attention width.

Mask contract: an optional boolean ``mask`` of shape ``(B, S)`` comes from the **source**
(encoder) sequence; True marks a real token that may be attended to. Masked positions get an
attention weight of exactly 0. A row whose every position is masked gets all-zero weights and a
zero context vector.

Part 2 — scaled dot-product attention and multi-head attention (Vaswani et al. 2017, §3.2), with
the mask contract of :mod:`transformer_course.masks`.

References:
    Vaswani et al., 2017. "Attention Is All You Need", §3.2.1 (scaled dot-product attention) and
    §3.2.2 (multi-head attention). https://arxiv.org/abs/1706.03762
    Luong, Pham and Manning, 2015. "Effective Approaches to Attention-based Neural Machine
    Translation", §3.1 (global attention, the dot and general scores).
    https://arxiv.org/abs/1508.04025
    Bahdanau, Cho and Bengio, 2015. "Neural Machine Translation by Jointly Learning to Align and
    Translate", §3.1 and Appendix A.1.2 (the additive score). https://arxiv.org/abs/1409.0473
"""

from __future__ import annotations

import math

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)
import keras
from keras import ops

from ._validation import check_integer
from .masks import causal_mask, combine_masks

__all__ = [
    "LuongDotAttention",
    "LuongGeneralAttention",
    "BahdanauAttention",
    "scaled_dot_product_attention",
    "MultiHeadAttention",
]

# Added to the score of a masked position; exp() of it underflows to exactly 0 in float32.
_MASKED_SCORE = -1e9


class _SourceAttention(keras.layers.Layer):
    """Shared call: validate, score, masked softmax over source positions, weighted sum."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The layer consumes the source mask; its outputs have no source axis left to mask.
        self.supports_masking = True

    def compute_mask(self, *args, **kwargs):
        return None

    def build(self, query_shape, values_shape=None, mask_shape=None):
        if values_shape is not None:
            self._check_shapes(query_shape, values_shape)
        super().build(query_shape)

    def _check_shapes(self, query_shape, values_shape):
        if len(query_shape) != 2:
            raise ValueError(
                f"`query` must have shape (batch, width), the decoder state; received shape "
                f"{tuple(query_shape)}."
            )
        if len(values_shape) != 3:
            raise ValueError(
                f"`values` must have shape (batch, source_length, width), the encoder states; "
                f"received shape {tuple(values_shape)}."
            )

    def score(self, query, values):
        """Alignment scores: float32 ``(B, S)`` from query ``(B, Q)`` and values ``(B, S, H)``."""
        raise NotImplementedError

    def call(self, query, values, mask=None):
        self._check_shapes(query.shape, values.shape)
        scores = self.score(query, values)  # (B, S)
        if mask is not None:
            if len(mask.shape) != 2:
                raise ValueError(
                    f"`mask` must have shape (batch, source_length); received shape {tuple(mask.shape)}."
                )
            mask = ops.cast(mask, "bool")
            # A large negative score underflows to a weight of exactly 0 after the softmax.
            scores = ops.where(mask, scores, ops.full_like(scores, _MASKED_SCORE))
        weights = ops.softmax(scores, axis=-1)  # (B, S)
        if mask is not None:
            weights = ops.where(mask, weights, ops.zeros_like(weights))  # fully masked rows -> 0
        context = ops.einsum("bs,bsh->bh", weights, values)  # (B, H)
        return context, weights

    def compute_output_shape(self, query_shape, values_shape, mask_shape=None):
        return (values_shape[0], values_shape[2]), (values_shape[0], values_shape[1])


@keras.saving.register_keras_serializable(package="transformer_course")
class LuongDotAttention(_SourceAttention):
    """Luong's dot score, ``score(h_t, h_s) = h_tᵀ h_s``: no weights of its own.

    Call arguments:
        query: float32 ``(B, H)``, the decoder state h_t.
        values: float32 ``(B, S, H)``, the encoder states h_s (same width as the query).
        mask: optional bool ``(B, S)`` from the source sequence; True = may attend.

    Returns:
        ``(context_vector, attention_weights)``: float32 ``(B, H)`` and ``(B, S)``; the weights
        sum to 1 over unmasked positions and are exactly 0 on masked ones.

    Raises:
        ValueError: if ranks are wrong, or the query and values widths differ.

    Source: Luong et al., 2015, §3.1, the "dot" score.
    """

    def score(self, query, values):
        if query.shape[-1] is not None and values.shape[-1] is not None and query.shape[-1] != values.shape[-1]:
            raise ValueError(
                "The dot score needs `query` and `values` of the same width; received "
                f"{query.shape[-1]} and {values.shape[-1]}. Use LuongGeneralAttention for "
                "different widths."
            )
        return ops.einsum("bh,bsh->bs", query, values)


@keras.saving.register_keras_serializable(package="transformer_course")
class LuongGeneralAttention(_SourceAttention):
    """Luong's general (multiplicative) score, ``score(h_t, h_s) = h_tᵀ W_a h_s``.

    ``W_a`` is a learned ``(H, Q)`` matrix (a bias-free dense layer applied to the encoder
    states), so the query and values may have different widths.

    Call arguments, returns and mask semantics as :class:`LuongDotAttention`, with query of
    shape ``(B, Q)``.

    Raises:
        ValueError: if ranks are wrong.

    Source: Luong et al., 2015, §3.1, the "general" score.
    """

    def build(self, query_shape, values_shape, mask_shape=None):
        self._check_shapes(query_shape, values_shape)
        self.W_a = keras.layers.Dense(query_shape[-1], use_bias=False, name="W_a")
        self.W_a.build(values_shape)
        super().build(query_shape)

    def score(self, query, values):
        return ops.einsum("bq,bsq->bs", query, self.W_a(values))  # h_tᵀ (W_a h_s)


@keras.saving.register_keras_serializable(package="transformer_course")
class BahdanauAttention(_SourceAttention):
    """Bahdanau's additive score, ``score(h_t, h_s) = v_aᵀ tanh(W_a h_t + U_a h_s)``.

    This is ``v_aᵀ tanh(W [h_t; h_s])`` with ``W = [W_a U_a]`` split by the halves of the
    concatenation, which lets ``U_a h_s`` be computed once for all decoder steps.

    Args:
        units: int, the attention width A (rows of W_a and U_a, length of v_a).
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments, returns and mask semantics as :class:`LuongDotAttention`, with query of
    shape ``(B, Q)``.

    Raises:
        ValueError: if ``units`` is not a positive integer, or ranks are wrong.

    Source: Bahdanau et al., 2015, §3.1 and Appendix A.1.2.
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = check_integer("units", units)
        self.W_a = keras.layers.Dense(units, use_bias=False, name="W_a")
        self.U_a = keras.layers.Dense(units, use_bias=False, name="U_a")
        self.v_a = keras.layers.Dense(1, use_bias=False, name="v_a")

    def build(self, query_shape, values_shape, mask_shape=None):
        self._check_shapes(query_shape, values_shape)
        self.W_a.build(query_shape)
        self.U_a.build(values_shape)
        self.v_a.build((None, None, self.units))
        super().build(query_shape)

    def score(self, query, values):
        hidden = ops.tanh(ops.expand_dims(self.W_a(query), 1) + self.U_a(values))  # (B, S, A)
        return ops.squeeze(self.v_a(hidden), axis=-1)  # (B, S)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config


# --------------------------------------------------------------------------------------------
# Part 2: scaled dot-product and multi-head attention
# --------------------------------------------------------------------------------------------


def scaled_dot_product_attention(query, key, value, mask=None):
    """``softmax(Q Kᵀ / √d_k) V``, with an optional boolean mask.

    Args:
        query: float ``(..., T, d_k)``.
        key: float ``(..., S, d_k)``.
        value: float ``(..., S, d_v)``.
        mask: optional bool, broadcastable to ``(..., T, S)``; True = may attend. Build it with
            :mod:`transformer_course.masks` (padding masks come from the key sequence, the causal
            mask from the query and key positions).

    Returns:
        ``(output, weights)``: float ``(..., T, d_v)`` and ``(..., T, S)``. Each row of weights
        sums to 1 over its unmasked positions; masked positions get exactly 0. A row whose every
        position is masked gets all-zero weights and a zero output, as Keras' softmax does.

    Raises:
        ValueError: if ranks differ or ``d_k`` of query and key disagree.

    Source: Vaswani et al., 2017, §3.2.1, equation (1).
    """
    if len(query.shape) != len(key.shape) or len(key.shape) != len(value.shape) or len(query.shape) < 2:
        raise ValueError(
            "`query`, `key` and `value` must have the same rank (at least 2); received shapes "
            f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}."
        )
    depth = query.shape[-1]
    if depth is not None and key.shape[-1] is not None and depth != key.shape[-1]:
        raise ValueError(
            f"`query` and `key` must have the same last dimension d_k; received {depth} and "
            f"{key.shape[-1]}."
        )
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / math.sqrt(depth)  # (..., T, S)
    if mask is not None:
        mask = ops.cast(mask, "bool")
        scores = ops.where(mask, scores, ops.full_like(scores, _MASKED_SCORE))
    weights = ops.softmax(scores, axis=-1)
    if mask is not None:
        weights = ops.where(mask, weights, ops.zeros_like(weights))  # fully masked rows -> 0
    return ops.matmul(weights, value), weights


@keras.saving.register_keras_serializable(package="transformer_course")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention, written out; same call signature and weights as Keras' layer.

    Each of ``num_heads`` heads projects queries, keys and values into its own ``key_dim``-wide
    subspace, runs scaled dot-product attention there, and the heads' outputs are concatenated
    and projected back to the query's width E by ``W_O``.

    The weights have Keras' layout, so ``layer.set_weights(keras_layer.get_weights())`` copies a
    ``keras.layers.MultiHeadAttention`` exactly: query, key and value kernels ``(E, N, H)`` with
    biases ``(N, H)``, then the output kernel ``(N, H, E)`` with bias ``(E,)``.

    Args:
        num_heads: int, N.
        key_dim: int, H, the width of each head's queries and keys. In a Transformer block this
            is normally ``embed_dim // num_heads``.
        value_dim: int, the width of each head's values; defaults to ``key_dim``.
        dropout: float in [0, 1), dropout on the attention weights during training.
        use_bias: bool, whether the four projections have biases.
        kernel_initializer, bias_initializer: Keras initializers for the projections.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        query: float ``(B, T, E)``.
        value: float ``(B, S, E_v)``.
        key: optional float ``(B, S, E_k)``; defaults to ``value``.
        query_mask, value_mask, key_mask: optional bool ``(B, T)`` / ``(B, S)`` padding masks;
            when omitted, the inputs' Keras masks (from ``mask_zero``) are used. The key and
            value masks come from the key/value sequence — the **source** sequence in
            cross-attention.
        attention_mask: optional bool ``(B, T, S)``; True = may attend.
        return_attention_scores: bool, also return the weights ``(B, N, T, S)``.
        training: bool, apply dropout.
        use_causal_mask: bool, forbid attending to later positions (decoder self-attention).

    Returns:
        float ``(B, T, E)``, and the weights if ``return_attention_scores``. All masks are
        combined with AND; masked positions get a weight of exactly 0. Like Keras' layer, the
        fused path (taken when no weights are returned and no dropout applies) gives a query
        position with nothing to attend to — a padded query — uniform weights instead of zeros;
        outputs at padded positions are not used downstream.

    Raises:
        ValueError: for a non-positive ``num_heads``, ``key_dim`` or ``value_dim``, a
            ``dropout`` outside [0, 1), or inputs that are not rank 3.

    Source: Vaswani et al., 2017, §3.2.2.
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1); received {dropout!r}.")
        self.num_heads = check_integer("num_heads", num_heads)
        self.key_dim = check_integer("key_dim", key_dim)
        self.value_dim = self.key_dim if value_dim is None else check_integer("value_dim", value_dim)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout_layer = keras.layers.Dropout(dropout)
        self.supports_masking = True  # the output keeps the query's padding mask

    def _projection(self, name, input_width, head_width):
        kernel = self.add_weight(
            name=f"{name}_kernel", shape=(input_width, self.num_heads, head_width),
            initializer=self.kernel_initializer,
        )
        bias = None
        if self.use_bias:
            bias = self.add_weight(
                name=f"{name}_bias", shape=(self.num_heads, head_width), initializer=self.bias_initializer
            )
        return kernel, bias

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        key_shape = value_shape if key_shape is None else key_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            if len(shape) != 3:
                raise ValueError(f"`{name}` must have shape (batch, length, width); received {tuple(shape)}.")
        embed_dim = query_shape[-1]
        self.query_kernel, self.query_bias = self._projection("query", embed_dim, self.key_dim)
        self.key_kernel, self.key_bias = self._projection("key", key_shape[-1], self.key_dim)
        self.value_kernel, self.value_bias = self._projection("value", value_shape[-1], self.value_dim)
        self.output_kernel = self.add_weight(
            name="output_kernel", shape=(self.num_heads, self.value_dim, embed_dim),
            initializer=self.kernel_initializer,
        )
        self.output_bias = (
            self.add_weight(name="output_bias", shape=(embed_dim,), initializer=self.bias_initializer)
            if self.use_bias else None
        )
        super().build(query_shape)

    def _project(self, inputs, kernel, bias):
        projected = ops.einsum("bte,enh->btnh", inputs, kernel)  # (B, T, N, H): split into heads
        return projected if bias is None else projected + bias

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
    ):
        key = value if key is None else key
        for name, tensor in (("query", query), ("value", value), ("key", key)):
            if len(tensor.shape) != 3:
                raise ValueError(f"`{name}` must have shape (batch, length, width); received {tuple(tensor.shape)}.")
        # Keras fills query_mask, value_mask and key_mask from the inputs' masks (mask_zero).
        if key is value:
            key_mask = None  # the same sequence: its mask is value_mask

        # 1. Project and split into heads.
        q = self._project(query, self.query_kernel, self.query_bias)  # (B, T, N, H)
        k = self._project(key, self.key_kernel, self.key_bias)  # (B, S, N, H)
        v = self._project(value, self.value_kernel, self.value_bias)  # (B, S, N, H_v)

        # 2. One (B, T, S) mask from every source, AND-ed; broadcast over the heads.
        mask = combine_masks(
            None if query_mask is None else ops.expand_dims(query_mask, -1),
            None if value_mask is None else ops.expand_dims(value_mask, -2),
            None if key_mask is None else ops.expand_dims(key_mask, -2),
            None if not use_causal_mask else ops.expand_dims(causal_mask(ops.shape(query)[1], ops.shape(value)[1]), 0),
            attention_mask,
        )
        head_mask = None if mask is None else ops.expand_dims(mask, 1)  # (B, 1, T, S)

        # 3. Attend in every head at once.
        use_dropout = self.dropout > 0 and training
        if return_attention_scores or use_dropout:
            output, weights = scaled_dot_product_attention(
                ops.transpose(q, (0, 2, 1, 3)), ops.transpose(k, (0, 2, 1, 3)),
                ops.transpose(v, (0, 2, 1, 3)), head_mask,
            )  # (B, N, T, H_v), (B, N, T, S)
            if use_dropout:
                output = ops.matmul(self.dropout_layer(weights, training=training), ops.transpose(v, (0, 2, 1, 3)))
            output = ops.transpose(output, (0, 2, 1, 3))  # (B, T, N, H_v)
        else:
            # The same computation through the backend's fused kernel (faster, no weights kept).
            output = ops.dot_product_attention(q, k, v, mask=head_mask, scale=1.0 / math.sqrt(self.key_dim))
            weights = None

        # 4. Concatenate the heads and project back to the model width with W_O.
        output = ops.einsum("btnh,nhe->bte", output, self.output_kernel)  # (B, T, E)
        if self.output_bias is not None:
            output = output + self.output_bias
        return (output, weights) if return_attention_scores else output

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None, **kwargs):
        return tuple(query_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_heads=self.num_heads,
            key_dim=self.key_dim,
            value_dim=self.value_dim,
            dropout=self.dropout,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config

