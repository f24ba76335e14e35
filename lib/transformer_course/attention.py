"""Scaled dot-product attention and multi-head attention (notebook 04), with a key/value cache.

* :func:`scaled_dot_product_attention` — ``softmax(Q Kᵀ / √d_k) V`` for any leading axes.
* :class:`MultiHeadAttention` — N heads in their own subspaces, Keras' weight layout and call
  signature; with ``cache`` / ``cache_update_index`` it attends over stored keys and values, so
  generation computes one new position per step (notebooks 07 and 09).
* :class:`GroupedQueryAttention` — N query heads sharing G key/value heads (Ainslie et al., 2023),
  with rotary positions as an option and the same cache, G heads wide: today's decoders.

Attention of a recurrent decoder's state over the source positions (Luong, Bahdanau; notebook
02) lives in :mod:`transformer_course.seq2seq_attention`. Both turn scores into weights with
:func:`transformer_course.masks.masked_softmax`.

Shape letters: B batch, T query length, S key/value length, E model width, N heads, H head width,
L cache length. Mask contract: :mod:`transformer_course.masks` (True = may attend).

References:
    Vaswani et al., 2017. "Attention Is All You Need", §3.2.1 (scaled dot-product attention) and
    §3.2.2 (multi-head attention). https://arxiv.org/abs/1706.03762
"""

from __future__ import annotations

import math

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
from keras import ops

from . import masks  # as a module: this layer's own arguments are called key_mask and attention_mask
from ._validation import check_integer, check_positive, check_rate
from .masks import causal_mask, masked_softmax
from .rotary import rotary_embedding

__all__ = ["scaled_dot_product_attention", "MultiHeadAttention", "GroupedQueryAttention"]


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
            f"`query` and `key` must have the same last dimension d_k; received {depth} and {key.shape[-1]}."
        )
    scores = ops.matmul(query, ops.swapaxes(key, -1, -2)) / math.sqrt(depth)  # (..., T, S)
    weights = masked_softmax(scores, mask)  # exactly 0 on masked positions
    return ops.matmul(weights, value), weights


def _project(inputs, kernel, bias):
    """``(B, T, E)`` through a kernel ``(E, N, H)`` (and bias ``(N, H)``): split into heads, ``(B, T, N, H)``."""
    projected = ops.einsum("bte,enh->btnh", inputs, kernel)
    return projected if bias is None else projected + bias


def _heads_mask(query, key_length, query_mask, key_padding_mask, attention_mask, use_causal_mask, offset):
    """The one mask both attention layers attend with: ``(B, 1, T, S)`` bool, broadcast over the heads, or None.

    Every source is AND-ed: the query's padding mask (a padded query reads nothing), the keys'
    padding mask, the causal mask (query t sits at position ``offset + t`` among the S keys, as
    in cached generation) and the caller's ``attention_mask`` ``(B, T, S)``.
    """
    causal = (
        ops.expand_dims(causal_mask(ops.shape(query)[1], key_length, offset=offset), 0) if use_causal_mask else None
    )
    mask = masks.combine_masks(masks.attention_mask(query_mask, key_padding_mask), causal, attention_mask)
    return None if mask is None else ops.expand_dims(mask, 1)


def _attend(q, k, v, head_mask, dropout_layer, training, return_weights):
    """Scaled dot-product attention of every head at once, the fused kernel when nothing else is asked for.

    Args:
        q: float ``(B, T, N, H)``; k: ``(B, S, N, H)``; v: ``(B, S, N, H_v)`` (grouped keys and
            values already repeated to N heads).
        head_mask: bool ``(B, 1, T, S)`` or None (:func:`_heads_mask`).
        dropout_layer: the layer's ``keras.layers.Dropout``, on the weights when ``training``.
        return_weights: bool, also return the weights.

    Returns:
        ``(output, weights)``: float ``(B, T, N, H_v)``, and ``(B, N, T, S)`` (before dropout, as
        Keras' layer returns them) or None. Without weights and without dropout the backend's
        fused ``ops.dot_product_attention`` computes the output; otherwise the weights are
        computed once and the (dropped) weights multiply the values once.
    """
    use_dropout = dropout_layer.rate > 0 and training
    if not (return_weights or use_dropout):
        return ops.dot_product_attention(q, k, v, mask=head_mask, scale=1.0 / math.sqrt(q.shape[-1])), None
    q, k, v = (ops.transpose(tensor, (0, 2, 1, 3)) for tensor in (q, k, v))  # (B, N, T or S, H)
    weights = masked_softmax(ops.matmul(q, ops.swapaxes(k, -1, -2)) / math.sqrt(q.shape[-1]), head_mask)
    read = dropout_layer(weights, training=training) if use_dropout else weights
    return ops.transpose(ops.matmul(read, v), (0, 2, 1, 3)), weights


def _attend_by_group(q, k, v, head_mask):
    """Scaled dot-product attention of N query heads over G < N key/value heads, without repeating them.

    The queries are grouped, ``(B, T, G, N/G, H)``, and each group's heads score the group's one key head, so
    the keys and values are read once (a decoding step with a cache of L positions reads ``2 · L · G · H``
    numbers, not ``2 · L · N · H``: ``benchmarks/grouped_query_decoding.py``). As in the fused kernel, a query
    with nothing to attend to gets uniform weights; its output is not used downstream.

    Args:
        q: float ``(B, T, N, H)``; k: ``(B, S, G, H)``; v: ``(B, S, G, H_v)``.
        head_mask: bool ``(B, 1, T, S)`` or None (:func:`_heads_mask`).

    Returns:
        float ``(B, T, N, H_v)``.
    """
    batch, length = ops.shape(q)[0], ops.shape(q)[1]
    heads, width, groups = q.shape[2], q.shape[3], k.shape[2]
    grouped = ops.reshape(q, (batch, length, groups, heads // groups, width))
    scores = ops.einsum("btgrh,bsgh->bgrts", grouped, k) / math.sqrt(width)  # (B, G, N/G, T, S)
    dtype, scores = scores.dtype, ops.cast(scores, "float32")
    if head_mask is not None:
        scores = ops.where(ops.expand_dims(head_mask, 1), scores, ops.full_like(scores, -1e9))
    exponentials = ops.exp(scores - ops.max(scores, axis=-1, keepdims=True))  # written out: S may be 1 (one token)
    weights = ops.cast(exponentials / ops.sum(exponentials, axis=-1, keepdims=True), dtype)
    output = ops.einsum("bgrts,bsgh->btgrh", weights, v)  # (B, T, G, N/G, H_v)
    return ops.reshape(output, (batch, length, heads, v.shape[-1]))


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
        cache: optional float ``(B, 2, L, N, H)``, a **key/value cache** (keys ``[:, 0]``,
            values ``[:, 1]``; :meth:`initial_cache` makes an empty one). With a cache, keys and
            values are not projected from ``key``/``value`` again: generation does one new
            position of work per step instead of recomputing the prefix.
        cache_update_index: optional int (or int scalar tensor), with ``cache``: project
            ``key``/``value`` (``(B, T', E)``, the new positions) and write them into the cache at
            positions ``cache_update_index .. + T' - 1`` before attending; the causal mask then
            places query t at position ``cache_update_index + t``, so unwritten (later) cache
            positions are never attended. ``None`` with a cache: use the cache as it is (the
            source keys/values of cross-attention, computed once). The arguments follow
            ``keras_hub.layers.CachedMultiHeadAttention``.

    Returns:
        float ``(B, T, E)``, and the weights if ``return_attention_scores``, and the updated
        cache last when ``cache`` is given. All masks are
        combined with AND; masked positions get a weight of exactly 0. Like Keras' layer, the
        fused path (taken when no weights are returned and no dropout applies) gives a query
        position with nothing to attend to — a padded query — uniform weights instead of zeros;
        outputs at padded positions are not used downstream.

    Raises:
        ValueError: for a non-positive ``num_heads``, ``key_dim`` or ``value_dim``, a
            ``dropout`` outside [0, 1), inputs that are not rank 3, or a
            ``cache_update_index`` without a ``cache``.

    Source: Vaswani et al., 2017, §3.2.2; the cache as in keras-hub's
    ``CachedMultiHeadAttention`` (and Pope et al., 2022, "Efficiently Scaling Transformer
    Inference", §2, on why generation caches keys and values).

    Example:
        >>> import numpy as np
        >>> layer = MultiHeadAttention(num_heads=2, key_dim=4)
        >>> query, value = np.ones((1, 3, 8), "float32"), np.ones((1, 5, 8), "float32")  # 3 queries read 5 values
        >>> tuple(layer(query, value).shape)
        (1, 3, 8)
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
        check_rate("dropout", dropout)
        self.num_heads = check_integer("num_heads", num_heads)
        self.key_dim = check_integer("key_dim", key_dim)
        self.value_dim = self.key_dim if value_dim is None else check_integer("value_dim", value_dim)
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.supports_masking = True  # the output keeps the query's padding mask

    def _projection(self, name, input_width, head_width):
        kernel = self.add_weight(
            name=f"{name}_kernel",
            shape=(input_width, self.num_heads, head_width),
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
            name="output_kernel",
            shape=(self.num_heads, self.value_dim, embed_dim),
            initializer=self.kernel_initializer,
        )
        self.output_bias = (
            self.add_weight(name="output_bias", shape=(embed_dim,), initializer=self.bias_initializer)
            if self.use_bias
            else None
        )
        super().build(query_shape)

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
        cache=None,
        cache_update_index=None,
    ):
        key = value if key is None else key
        for name, tensor in (("query", query), ("value", value), ("key", key)):
            if tensor is not None and len(tensor.shape) != 3:
                raise ValueError(f"`{name}` must have shape (batch, length, width); received {tuple(tensor.shape)}.")
        if cache_update_index is not None and cache is None:
            raise ValueError("`cache_update_index` needs a `cache` to write into; received cache=None.")
        # Keras fills query_mask, value_mask and key_mask from the inputs' masks (mask_zero).
        if key is value:
            key_mask = None  # the same sequence: its mask is value_mask

        # 1. Project and split into heads. With a cache, keys and values come from it: read as
        #    they are (cache_update_index=None), or after writing the new positions' projections
        #    at cache_update_index.
        q = _project(query, self.query_kernel, self.query_bias)  # (B, T, N, H)
        if cache is None:
            k = _project(key, self.key_kernel, self.key_bias)  # (B, S, N, H)
            v = _project(value, self.value_kernel, self.value_bias)  # (B, S, N, H_v)
        else:
            k, v = cache[:, 0], cache[:, 1]  # (B, L, N, H): L = the cache's length
            if cache_update_index is not None:
                start = (0, cache_update_index, 0, 0)
                k = ops.slice_update(k, start, ops.cast(_project(key, self.key_kernel, self.key_bias), k.dtype))
                new_values = _project(value, self.value_kernel, self.value_bias)
                v = ops.slice_update(v, start, ops.cast(new_values, v.dtype))
                cache = ops.stack([k, v], axis=1)
            value_mask = key_mask = None  # padding masks describe the inputs, not the cache

        # 2. One (B, T, S) mask from every source, AND-ed; broadcast over the heads. With a cache,
        #    the causal mask is offset: query t sits at position cache_update_index + t.
        offset = 0 if cache_update_index is None else cache_update_index
        head_mask = _heads_mask(
            q,
            ops.shape(k)[1],
            query_mask,
            masks.combine_masks(value_mask, key_mask),
            attention_mask,
            use_causal_mask,
            offset,
        )  # (B, 1, T, S)

        # 3. Attend in every head at once (the backend's fused kernel when no weights are kept).
        output, weights = _attend(q, k, v, head_mask, self.dropout_layer, training, return_attention_scores)

        # 4. Concatenate the heads and project back to the model width with W_O.
        output = ops.einsum("btnh,nhe->bte", output, self.output_kernel)  # (B, T, E)
        if self.output_bias is not None:
            output = output + self.output_bias
        results = (output, weights) if return_attention_scores else (output,)
        results = results if cache is None else (*results, cache)
        return results[0] if len(results) == 1 else results

    def initial_cache(self, batch_size, length, dtype=None):
        """An empty key/value cache for ``length`` positions: zeros ``(B, 2, L, N, H)``.

        Args:
            batch_size: int, B.
            length: int, L, the most positions the cache will hold.
            dtype: the cache's dtype; defaults to the layer's compute dtype.

        Returns:
            float zeros ``(B, 2, L, N, H)``: ``[:, 0]`` keys, ``[:, 1]`` values (``value_dim``
            must equal ``key_dim``, as in every Transformer block).

        Raises:
            ValueError: if ``value_dim`` differs from ``key_dim``.
        """
        if self.value_dim != self.key_dim:
            raise ValueError(
                f"a key/value cache needs value_dim == key_dim; this layer has {self.value_dim} and {self.key_dim}."
            )
        return ops.zeros((batch_size, 2, length, self.num_heads, self.key_dim), dtype=dtype or self.compute_dtype)

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


@keras.saving.register_keras_serializable(package="transformer_course")
class GroupedQueryAttention(keras.layers.Layer):
    """Self-attention in which N query heads share G key/value heads, with an optional key/value cache.

    Query head n reads key/value head ``n // (N / G)``: G = N is multi-head attention, G = 1
    multi-query attention (Shazeer, 2019). A cache holds G heads instead of N, so it costs G/N of
    multi-head attention's memory per token, which is why today's decoders use it. With
    ``rotary_max_wavelength`` the queries and keys are rotated by their positions
    (:func:`~transformer_course.rotary.rotary_embedding`) before the scores, as in Llama.

    The weights have Keras' layout, so ``set_weights`` copies a ``keras.layers.GroupQueryAttention``
    exactly: query kernel ``(E, N, H)``, key and value kernels ``(E, G, H)``, output kernel
    ``(N, H, E)``, each followed by its bias when ``use_bias``. Each projection is a
    ``keras.layers.EinsumDense`` (``query_dense``, ``key_dense``, ``value_dense``,
    ``output_dense``), as in Keras' layer, so ``enable_lora(rank)`` and ``model.quantize("int8")``
    reach them (notebook 11).

    Args:
        head_dim: int, H.
        num_query_heads: int, N.
        num_key_value_heads: int, G, dividing N.
        dropout: float in [0, 1), on the attention weights during training.
        use_bias: bool, biases on the four projections (Llama has none).
        rotary_max_wavelength: optional float: rotate queries and keys (None: no positions here).
        rotary_scaling_factor: float > 0, the rotation's positions divided by it (1: none; Position
            Interpolation, :func:`~transformer_course.rotary.rotary_embedding`).
        kernel_initializer, bias_initializer: Keras initializers.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments (the masks as :class:`MultiHeadAttention` takes them: one convention for both):
        query: float ``(B, T, E)``.
        value: float ``(B, S, E)``; ``key`` defaults to it.
        query_mask, value_mask, key_mask: optional bool ``(B, T)`` / ``(B, S)`` padding masks;
            when omitted, the inputs' Keras masks are used. With a cache the key and value
            masks are ignored: they describe the inputs, not the cache.
        attention_mask: optional bool ``(B, T, S)``, True = may attend.
        use_causal_mask: bool, forbid later positions (offset by ``cache_update_index``).
        cache: optional float ``(B, 2, L, G, H)`` (:meth:`initial_cache`); with
            ``cache_update_index``, the new keys and values are projected and written at that
            position first, and rotary positions start there; without it the cache is read as it
            is and ``key``/``value`` are not projected.
        training: bool, apply dropout.
        return_attention_scores: bool, also return the weights ``(B, N, T, S)``.

    Returns:
        float ``(B, T, E)``, then the weights if ``return_attention_scores``, then the updated
        cache when ``cache`` is given. Without weights and dropout the backend's fused
        ``ops.dot_product_attention`` computes it, as in Keras' layer, after repeating the keys
        and values to N heads; a decoding step (one query with a cache) instead attends by
        group, reading each key/value head once for its N/G query heads, so its cost falls with
        G (``benchmarks/grouped_query_decoding.py``). A query with nothing to attend to (a
        padded query) gets uniform weights either way, and its output is not used downstream.

    Raises:
        ValueError: for non-positive sizes, G not dividing N, a ``dropout`` outside [0, 1), or
            a ``cache_update_index`` without a ``cache``.

    Source: Ainslie et al., 2023, "GQA: Training Generalized Multi-Query Transformer Models from
    Multi-Head Checkpoints", §2.2; equal to ``keras.layers.GroupQueryAttention`` (tested).

    Example:
        >>> import numpy as np
        >>> layer = GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
        >>> tuple(layer(np.ones((1, 3, 8), "float32"), np.ones((1, 3, 8), "float32")).shape)
        (1, 3, 8)
    """

    def __init__(
        self,
        head_dim,
        num_query_heads,
        num_key_value_heads,
        dropout=0.0,
        use_bias=True,
        rotary_max_wavelength=None,
        rotary_scaling_factor=1.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.head_dim = check_integer("head_dim", head_dim)
        self.num_query_heads = check_integer("num_query_heads", num_query_heads)
        self.num_key_value_heads = check_integer("num_key_value_heads", num_key_value_heads)
        if self.num_query_heads % self.num_key_value_heads:
            raise ValueError(
                f"`num_key_value_heads` ({num_key_value_heads}) must divide `num_query_heads` ({num_query_heads})."
            )
        self.dropout = check_rate("dropout", dropout)
        self.use_bias, self.rotary_max_wavelength = use_bias, rotary_max_wavelength
        self.rotary_scaling_factor = check_positive("rotary_scaling_factor", rotary_scaling_factor)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.dropout_layer = keras.layers.Dropout(self.dropout, dtype=self.dtype_policy)
        self.supports_masking = True  # the output keeps the query's padding mask

    def _projection(self, name, equation, output_shape, bias_axes, input_shape):
        """One projection as a ``keras.layers.EinsumDense``, so ``enable_lora`` and ``quantize`` apply to it."""
        layer = keras.layers.EinsumDense(
            equation,
            output_shape,
            bias_axes=bias_axes if self.use_bias else None,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            name=name,
            dtype=self.dtype_policy,
        )
        layer.supports_masking = True  # the padding mask rides along on the input; attention applies it
        layer.build(input_shape)
        return layer

    def build(self, query_shape, value_shape=None, key_shape=None):
        width = query_shape[-1]
        heads, groups, head_dim = self.num_query_heads, self.num_key_value_heads, self.head_dim
        source_shape = value_shape or query_shape
        self.query_dense = self._projection("query", "bte,enh->btnh", (None, heads, head_dim), "nh", query_shape)
        key_shape = key_shape or source_shape
        self.key_dense = self._projection("key", "bse,egh->bsgh", (None, groups, head_dim), "gh", key_shape)
        self.value_dense = self._projection("value", "bse,egh->bsgh", (None, groups, head_dim), "gh", source_shape)
        self.output_dense = self._projection(
            "output", "btnh,nhe->bte", (None, width), "e", (*query_shape[:-1], heads, head_dim)
        )
        super().build(query_shape)

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        training=None,
        return_attention_scores=False,
    ):
        if cache_update_index is not None and cache is None:
            raise ValueError("`cache_update_index` needs a `cache` to write into; received cache=None.")
        key = value if key is None else key
        if key is value:
            key_mask = None  # the same sequence: its mask is value_mask
        start = 0 if cache_update_index is None else cache_update_index
        q = self.query_dense(query)  # (B, T, N, H)
        if self.rotary_max_wavelength is not None:
            q = rotary_embedding(q, start, self.rotary_max_wavelength, self.rotary_scaling_factor)
        if cache is not None and cache_update_index is None:
            k, v = cache[:, 0], cache[:, 1]  # the cache as it is: nothing to project
        else:
            k, v = self.key_dense(key), self.value_dense(value)  # (B, S, G, H)
            if self.rotary_max_wavelength is not None:
                k = rotary_embedding(k, start, self.rotary_max_wavelength, self.rotary_scaling_factor)
        if cache is not None:
            if cache_update_index is not None:
                offset = (0, cache_update_index, 0, 0)
                k = ops.slice_update(cache[:, 0], offset, ops.cast(k, cache.dtype))
                v = ops.slice_update(cache[:, 1], offset, ops.cast(v, cache.dtype))
            cache = ops.stack([k, v], axis=1)
            value_mask = key_mask = None  # padding masks describe the inputs, not the cache
        head_mask = _heads_mask(
            q,
            ops.shape(k)[1],
            query_mask,
            masks.combine_masks(value_mask, key_mask),
            attention_mask,
            use_causal_mask,
            start,
        )  # (B, 1, T, S)
        repeats = self.num_query_heads // self.num_key_value_heads
        one_cached_token = cache is not None and q.shape[1] == 1  # a decoding step: the cache's read is its cost
        if (
            repeats > 1
            and one_cached_token
            and not (return_attention_scores or (self.dropout_layer.rate > 0 and training))
        ):
            # By group: each key/value head is read once for its N/G query heads, never copied N/G times. Over many
            # queries (training, a prompt) the repeat and the fused kernel are faster (benchmarks/multi_head_attention).
            output, weights = _attend_by_group(q, k, v, head_mask), None
        else:
            k, v = ops.repeat(k, repeats, axis=2), ops.repeat(v, repeats, axis=2)  # each group's heads share them
            output, weights = _attend(q, k, v, head_mask, self.dropout_layer, training, return_attention_scores)
        output = self.output_dense(output)  # (B, T, N, H) -> (B, T, E)
        results = (output, weights) if return_attention_scores else (output,)
        results = results if cache is None else (*results, cache)
        return results[0] if len(results) == 1 else results

    def initial_cache(self, batch_size, length, dtype=None):
        """An empty key/value cache for ``length`` positions: zeros ``(B, 2, L, G, H)``, G/N of multi-head's."""
        return ops.zeros(
            (batch_size, 2, length, self.num_key_value_heads, self.head_dim), dtype=dtype or self.compute_dtype
        )

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None, **kwargs):
        return tuple(query_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            head_dim=self.head_dim,
            num_query_heads=self.num_query_heads,
            num_key_value_heads=self.num_key_value_heads,
            dropout=self.dropout,
            use_bias=self.use_bias,
            rotary_max_wavelength=self.rotary_max_wavelength,
            rotary_scaling_factor=self.rotary_scaling_factor,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
        )
        return config
