"""Attention for recurrent sequence-to-sequence decoders (notebook 02): Luong and Bahdanau scores.

At each output step the decoder's state (the *query*) is scored against every encoder state (the
*value*). A softmax turns the alignment scores into attention weights over the source positions,
and the weighted sum of the encoder states is the step's context vector:

    alpha_s = softmax_s(score(h_t, h_s)),    context_t = sum_s alpha_s h_s

* :class:`LuongDotAttention` — ``h_tᵀ h_s``;
* :class:`LuongGeneralAttention` — ``h_tᵀ W_a h_s``;
* :class:`BahdanauAttention` — ``v_aᵀ tanh(W_a h_t + U_a h_s)``.

Shape letters: B batch, S source length, H width of the encoder states (value), Q width of the
decoder state (query), A the Bahdanau attention width.

Mask contract: an optional boolean ``mask`` of shape ``(B, S)`` comes from the **source**
(encoder) sequence; True marks a real token that may be attended to. Masked positions get an
attention weight of exactly 0 (:func:`transformer_course.masks.masked_softmax`, shared with the
Transformer's attention). A row whose every position is masked gets all-zero weights and a zero
context vector.

References:
    Luong, Pham and Manning, 2015. "Effective Approaches to Attention-based Neural Machine
    Translation", §3.1 (global attention, the dot and general scores).
    https://arxiv.org/abs/1508.04025
    Bahdanau, Cho and Bengio, 2015. "Neural Machine Translation by Jointly Learning to Align and
    Translate", §3.1 and Appendix A.1.2 (the additive score). https://arxiv.org/abs/1409.0473
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
from keras import ops

from ._validation import check_integer
from .masks import masked_softmax

__all__ = ["LuongDotAttention", "LuongGeneralAttention", "BahdanauAttention"]


class _SourceAttention(keras.layers.Layer):
    """Shared call: validate, score, masked softmax over source positions, weighted sum."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # The layer consumes the source mask; its outputs have no source axis left to mask.
        self.supports_masking = True

    def compute_mask(self, *args, **kwargs):
        return None

    def build(self, query_shape, value_shape=None, mask_shape=None):
        if value_shape is not None:
            self._check_shapes(query_shape, value_shape)
        super().build(query_shape)

    def _check_shapes(self, query_shape, value_shape):
        if len(query_shape) != 2:
            raise ValueError(
                f"`query` must have shape (batch, width), the decoder state; received shape {tuple(query_shape)}."
            )
        if len(value_shape) != 3:
            raise ValueError(
                f"`value` must have shape (batch, source_length, width), the encoder states; "
                f"received shape {tuple(value_shape)}."
            )

    def score(self, query, value):
        """Alignment scores: float32 ``(B, S)`` from query ``(B, Q)`` and value ``(B, S, H)``."""
        raise NotImplementedError

    def call(self, query, value, mask=None):
        self._check_shapes(query.shape, value.shape)
        scores = self.score(query, value)  # (B, S)
        if mask is not None and len(mask.shape) != 2:
            raise ValueError(f"`mask` must have shape (batch, source_length); received shape {tuple(mask.shape)}.")
        weights = masked_softmax(scores, mask)  # (B, S), exactly 0 on masked positions
        context = ops.einsum("bs,bsh->bh", weights, value)  # (B, H)
        return context, weights

    def compute_output_shape(self, query_shape, value_shape, mask_shape=None):
        return (value_shape[0], value_shape[2]), (value_shape[0], value_shape[1])


@keras.saving.register_keras_serializable(package="transformer_course")
class LuongDotAttention(_SourceAttention):
    """Luong's dot score, ``score(h_t, h_s) = h_tᵀ h_s``: no weights of its own.

    Call arguments:
        query: float32 ``(B, H)``, the decoder state h_t.
        value: float32 ``(B, S, H)``, the encoder states h_s (same width as the query).
        mask: optional bool ``(B, S)`` from the source sequence; True = may attend.

    Returns:
        ``(context_vector, attention_weights)``: float32 ``(B, H)`` and ``(B, S)``; the weights
        sum to 1 over unmasked positions and are exactly 0 on masked ones.

    Raises:
        ValueError: if ranks are wrong, or the query and value widths differ.

    Source: Luong et al., 2015, §3.1, the "dot" score.

    Example:
        >>> import numpy as np
        >>> context, weights = LuongDotAttention()(np.ones((2, 8), "float32"), np.ones((2, 4, 8), "float32"))
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 8), (2, 4))
    """

    def score(self, query, value):
        if query.shape[-1] is not None and value.shape[-1] is not None and query.shape[-1] != value.shape[-1]:
            raise ValueError(
                "The dot score needs `query` and `value` of the same width; received "
                f"{query.shape[-1]} and {value.shape[-1]}. Use LuongGeneralAttention for "
                "different widths."
            )
        return ops.einsum("bh,bsh->bs", query, value)


@keras.saving.register_keras_serializable(package="transformer_course")
class LuongGeneralAttention(_SourceAttention):
    """Luong's general (multiplicative) score, ``score(h_t, h_s) = h_tᵀ W_a h_s``.

    ``W_a`` is a learned ``(H, Q)`` matrix (a bias-free dense layer applied to the encoder
    states), so the query and value may have different widths.

    Call arguments, returns and mask semantics as :class:`LuongDotAttention`, with query of
    shape ``(B, Q)``.

    Raises:
        ValueError: if ranks are wrong.

    Source: Luong et al., 2015, §3.1, the "general" score.

    Example:
        >>> import numpy as np
        >>> context, weights = LuongGeneralAttention()(np.ones((2, 8), "float32"), np.ones((2, 4, 8), "float32"))
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 8), (2, 4))
    """

    def build(self, query_shape, value_shape, mask_shape=None):
        self._check_shapes(query_shape, value_shape)
        self.W_a = keras.layers.Dense(query_shape[-1], use_bias=False, name="W_a", dtype=self.dtype_policy)
        self.W_a.build(value_shape)
        super().build(query_shape)

    def score(self, query, value):
        return ops.einsum("bq,bsq->bs", query, self.W_a(value))  # h_tᵀ (W_a h_s)


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

    Example:
        >>> import numpy as np
        >>> context, weights = BahdanauAttention(6)(np.ones((2, 8), "float32"), np.ones((2, 4, 8), "float32"))
        >>> tuple(context.shape), tuple(weights.shape)
        ((2, 8), (2, 4))
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = check_integer("units", units)
        self.W_a = keras.layers.Dense(units, use_bias=False, name="W_a", dtype=self.dtype_policy)
        self.U_a = keras.layers.Dense(units, use_bias=False, name="U_a", dtype=self.dtype_policy)
        self.v_a = keras.layers.Dense(1, use_bias=False, name="v_a", dtype=self.dtype_policy)

    def build(self, query_shape, value_shape, mask_shape=None):
        self._check_shapes(query_shape, value_shape)
        self.W_a.build(query_shape)
        self.U_a.build(value_shape)
        self.v_a.build((None, None, self.units))
        super().build(query_shape)

    def score(self, query, value):
        hidden = ops.tanh(ops.expand_dims(self.W_a(query), 1) + self.U_a(value))  # (B, S, A)
        return ops.squeeze(self.v_a(hidden), axis=-1)  # (B, S)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config
