"""Transformer blocks: the original encoder and decoder, and a Llama-style decoder block.

* :class:`TransformerEncoder`, :class:`TransformerDecoder` — Vaswani et al.'s blocks (post- or
  pre-norm), equal to keras-hub's.
* :class:`BertStyleEncoder` — the encoder body BERT pre-trains and ELECTRA's discriminator is
  (LayerNorm and dropout on the summed embeddings, then a stack of post-norm encoder blocks), built
  once for both models and run on new inputs by its :meth:`~BertStyleEncoder.encode`.
* :class:`RMSNorm`, :class:`SwiGLUFeedForward`, :class:`LlamaDecoder` — what today's decoders
  changed: a norm without centring or bias, a gated feed-forward, and a pre-norm block of both
  around grouped-query attention with rotary positions.

Shape letters: B batch, T sequence length, E model width, F feed-forward width, N heads.

Mask contract (see :mod:`transformer_course.masks`): True = real token / may attend. The encoder's
padding mask comes from its own input sequence.

References:
    Vaswani et al., 2017. "Attention Is All You Need", §3.1 (encoder stack), §3.3 (position-wise
    feed-forward networks), §5.4 (residual dropout). https://arxiv.org/abs/1706.03762
    Xiong et al., 2020. "On Layer Normalization in the Transformer Architecture" (pre-norm).
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
from keras import ops

from ._validation import check_integer, check_positive, check_rate
from .attention import GroupedQueryAttention, MultiHeadAttention
from .masks import combine_masks, key_mask

__all__ = [
    "TransformerEncoder",
    "TransformerDecoder",
    "BertStyleEncoder",
    "TokenDistribution",
    "TiedTokenDistribution",
    "gelu_approximate",
    "RMSNorm",
    "SwiGLUFeedForward",
    "LlamaDecoder",
]


class _TransformerBlock(keras.layers.Layer):
    """What the encoder and decoder blocks share: arguments, their checks, initializers, config."""

    def __init__(
        self,
        intermediate_dim,
        num_heads,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        normalize_first=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = check_integer("intermediate_dim", intermediate_dim)
        self.num_heads = check_integer("num_heads", num_heads)
        check_rate("dropout", dropout)
        self.dropout = dropout
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.normalize_first = bool(normalize_first)
        self.supports_masking = True

    def _dropout(self, name):
        return keras.layers.Dropout(self.dropout, name=name, dtype=self.dtype_policy)

    def _initializers(self):
        return dict(
            kernel_initializer=self.kernel_initializer.__class__.from_config(self.kernel_initializer.get_config()),
            bias_initializer=self.bias_initializer.__class__.from_config(self.bias_initializer.get_config()),
        )

    def _check_width(self, embed_dim):
        if embed_dim % self.num_heads:
            raise ValueError(
                f"`num_heads`={self.num_heads} must divide the input width {embed_dim}: each head "
                f"gets key_dim = width // num_heads, and {embed_dim} / {self.num_heads} is not whole."
            )

    def _attention(self, name, query_shape, value_shape):
        """A built MultiHeadAttention with key_dim = E // num_heads."""
        layer = MultiHeadAttention(
            self.num_heads,
            query_shape[-1] // self.num_heads,
            dropout=self.dropout,
            name=name,
            dtype=self.dtype_policy,
            **self._initializers(),
        )
        layer.build(query_shape, value_shape)
        return layer

    def _feedforward(self, shape):
        """The built position-wise feed-forward pair: Dense(F, activation) then Dense(E)."""
        hidden = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            name="feedforward_hidden",
            dtype=self.dtype_policy,
            **self._initializers(),
        )
        hidden.build(shape)
        output = keras.layers.Dense(
            shape[-1], name="feedforward_output", dtype=self.dtype_policy, **self._initializers()
        )
        output.build((*shape[:-1], self.intermediate_dim))
        return hidden, output

    def _norm(self, name, shape):
        """A built LayerNormalization."""
        layer = keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy)
        layer.build(shape)
        return layer

    # The residual step around every sub-layer, in two halves: post-norm (the original)
    # LayerNorm(x + Dropout(F(x))), pre-norm x + Dropout(F(LayerNorm(x))).
    def _sublayer_input(self, x, norm):
        """What the sub-layer reads: ``x``, or ``LayerNorm(x)`` in a pre-norm block."""
        return norm(x) if self.normalize_first else x

    def _residual(self, x, output, norm, dropout, training):
        """``x`` plus the sub-layer's dropped-out ``output``; then ``LayerNorm`` in a post-norm block."""
        x = x + dropout(output, training=training)
        return x if self.normalize_first else norm(x)

    def get_config(self):
        config = super().get_config()
        config.update(
            intermediate_dim=self.intermediate_dim,
            num_heads=self.num_heads,
            dropout=self.dropout,
            activation=keras.activations.serialize(self.activation),
            layer_norm_epsilon=self.layer_norm_epsilon,
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
            bias_initializer=keras.initializers.serialize(self.bias_initializer),
            normalize_first=self.normalize_first,
        )
        return config


@keras.saving.register_keras_serializable(package="transformer_course")
class TransformerEncoder(_TransformerBlock):
    """One Transformer encoder block.

    Post-norm (the original, ``normalize_first=False``)::

        x = LayerNorm(x + Dropout(MultiHeadSelfAttention(x)))
        x = LayerNorm(x + Dropout(Dense_E(activation(Dense_F(x)))))

    Pre-norm (``normalize_first=True``) normalises the input of each sub-layer instead:
    ``x = x + Dropout(SubLayer(LayerNorm(x)))``, which trains deep stacks more stably.

    The weights are created in keras-hub's order and shapes, so
    ``encoder.set_weights(keras_hub.layers.TransformerEncoder(...).get_weights())`` copies one.

    Args:
        intermediate_dim: int, F, the width of the feed-forward hidden layer.
        num_heads: int, N; must divide the input width E (each head gets ``E // N``).
        dropout: float in [0, 1), applied to the attention weights and to each sub-layer's output
            before its residual connection.
        activation: the feed-forward activation; defaults to ``"relu"``.
        layer_norm_epsilon: float, LayerNorm's epsilon; defaults to ``1e-5``.
        kernel_initializer, bias_initializer: Keras initializers for every dense projection.
        normalize_first: bool, pre-norm instead of post-norm. Defaults to False.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: float ``(B, T, E)``.
        padding_mask: optional bool ``(B, T)`` of the input sequence, True = real token. When
            omitted, the Keras mask of ``inputs`` (from ``mask_zero`` or ``PositionalEmbedding``)
            is used. No position attends to padding.
        attention_mask: optional bool ``(B, T, T)``, ANDed with the padding mask.
        training: bool, apply dropout.
        return_attention_scores: bool, also return the weights ``(B, N, T, T)``.

    Returns:
        float ``(B, T, E)`` (and the weights), carrying the input's padding mask onwards.

    Raises:
        ValueError: for a non-positive ``intermediate_dim`` or ``num_heads``, a ``dropout``
            outside [0, 1), an input that is not rank 3, or a width E that ``num_heads`` does not
            divide.

    Example:
        >>> encoder = TransformerEncoder(intermediate_dim=64, num_heads=4)
        >>> tuple(encoder(keras.ops.ones((2, 10, 32))).shape)
        (2, 10, 32)
    """

    def build(self, inputs_shape):
        if len(inputs_shape) != 3:
            raise ValueError(f"`inputs` must have shape (batch, length, width); received {tuple(inputs_shape)}.")
        self._check_width(inputs_shape[-1])
        self.attention = self._attention("self_attention", inputs_shape, inputs_shape)
        self.attention_norm = self._norm("attention_norm", inputs_shape)
        self.attention_dropout = self._dropout("attention_dropout")
        self.feedforward_norm = self._norm("feedforward_norm", inputs_shape)
        self.feedforward_hidden, self.feedforward_output = self._feedforward(inputs_shape)
        self.feedforward_dropout = self._dropout("feedforward_dropout")
        super().build(inputs_shape)

    def call(
        self, inputs, padding_mask=None, attention_mask=None, training=None, return_attention_scores=False, mask=None
    ):
        padding_mask = mask if padding_mask is None else padding_mask  # (B, T), True = real token
        self_attention_mask = combine_masks(key_mask(padding_mask), attention_mask)  # (B, T, T)

        # 1. Multi-head self-attention sub-layer with its residual connection.
        y = self._sublayer_input(inputs, self.attention_norm)
        y = self.attention(
            y, y, attention_mask=self_attention_mask, training=training, return_attention_scores=return_attention_scores
        )
        y, scores = y if return_attention_scores else (y, None)
        x = self._residual(inputs, y, self.attention_norm, self.attention_dropout, training)

        # 2. Position-wise feed-forward sub-layer: the same two dense layers at every position.
        y = self.feedforward_output(self.feedforward_hidden(self._sublayer_input(x, self.feedforward_norm)))
        x = self._residual(x, y, self.feedforward_norm, self.feedforward_dropout, training)
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)


class BertStyleEncoder:
    r"""The encoder body of BERT (Devlin et al., 2019, §3) and of ELECTRA's discriminator (Clark et al., 2020, §2).

    The summed token, position and segment embeddings go through LayerNorm and dropout (BERT's
    "Input/Output Representations"), then ``num_layers`` post-norm :class:`TransformerEncoder`
    blocks. :class:`~transformer_course.bert.BertPretrainer` and
    :class:`~transformer_course.electra.ElectraPretrainer` derive from this class (before
    ``keras.Model``): each builds its body with :meth:`build_body` on its own embeddings and keeps
    the parts as attributes, and :meth:`encode` runs those very layers on new inputs, which is
    how the fine-tuning builders of :mod:`transformer_course.bert` put a head on either model.

    Attributes a deriving model sets after ``keras.Model.__init__``: ``token_embedding`` (a
    :class:`~transformer_course.positional.PositionalEmbedding`), ``segment_embedding`` (a
    :class:`~transformer_course.positional.SegmentEmbedding`), ``embedding_norm``,
    ``embedding_dropout``, ``encoder_blocks`` (a list) and ``pooler`` (a dense layer, or None
    when the model trains none).

    Example:
        >>> from transformer_course.bert import BertPretrainer
        >>> model = BertPretrainer(100, 16, 3, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=2)
        >>> isinstance(model, BertStyleEncoder), len(model.encoder_blocks)
        (True, 2)
    """

    @staticmethod
    def build_body(
        embedded,
        *,
        num_layers: int,
        intermediate_dim: int,
        num_heads: int,
        dropout: float,
        activation,
        layer_norm_epsilon: float = 1e-12,
    ) -> tuple:
        """Make the body's layers, each just before its first call, and run them on ``embedded``.

        Args:
            embedded: float ``(B, T, E)``, the summed embeddings (symbolic, inside a functional
                model's construction), carrying the padding mask as its Keras mask.
            num_layers, intermediate_dim, num_heads: ints, the blocks and their sizes.
            dropout: float in [0, 1), of the embeddings and inside every block.
            activation: the blocks' feed-forward activation (a function).
            layer_norm_epsilon: float, of every LayerNorm; BERT's 1e-12 by default.

        Returns:
            ``(x, embedding_norm, embedding_dropout, encoder_blocks)``: the last block's output
            ``(B, T, E)`` and the layers, named ``embedding_norm``, ``embedding_dropout`` and
            ``encoder_1`` … ``encoder_<num_layers>``.
        """
        embedding_norm = keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="embedding_norm")
        embedding_dropout = keras.layers.Dropout(dropout, name="embedding_dropout")
        x = embedding_dropout(embedding_norm(embedded))
        encoder_blocks = []
        for index in range(num_layers):  # each block made just before its first call: it draws its seeds when made
            encoder_blocks.append(
                TransformerEncoder(
                    intermediate_dim,
                    num_heads,
                    dropout=dropout,
                    activation=activation,
                    layer_norm_epsilon=layer_norm_epsilon,
                    name=f"encoder_{index + 1}",
                )
            )
            x = encoder_blocks[-1](x)
        return x, embedding_norm, embedding_dropout, encoder_blocks

    def encode(self, inputs):
        r"""The encoder alone (embeddings and blocks, these very layers) on new inputs.

        Args:
            inputs: ``{"token_ids": int (B, T), "segment_ids": int (B, T)}``, tensors or
                symbolic ``keras.Input``\ s (to build a new model on the shared layers).

        Returns:
            float ``(B, T, E)``, the last block's vector at every position, carrying the padding
            mask (token id 0) as its Keras mask.
        """
        x = self.segment_embedding(self.token_embedding(inputs["token_ids"]), segment_ids=inputs["segment_ids"])
        x = self.embedding_dropout(self.embedding_norm(x))
        for block in self.encoder_blocks:
            x = block(x)
        return x


@keras.saving.register_keras_serializable(package="transformer_course")
class TransformerDecoder(_TransformerBlock):
    """One Transformer decoder block: causal self-attention, cross-attention, feed-forward.

    Post-norm (the original, ``normalize_first=False``)::

        x = LayerNorm(x + Dropout(SelfAttention(x, causal mask AND target padding mask)))
        x = LayerNorm(x + Dropout(CrossAttention(query=x, keys/values=encoder output,
                                                 source padding mask)))
        x = LayerNorm(x + Dropout(FFN(x)))

    Cross-attention is masked with the **source** (encoder) padding mask: no target position may
    look at padding in the source sentence. (Masking it with the decoder's own mask, as one
    well-known tutorial does, is a bug: that mask describes the wrong sequence.)

    A block first called without an ``encoder_sequence`` has no cross-attention: the decoder-only
    block of a GPT-style language model (causal self-attention and feed-forward).

    Weights are created in keras-hub's order and shapes, so
    ``decoder.set_weights(keras_hub.layers.TransformerDecoder(...).get_weights())`` copies one.

    Args:
        intermediate_dim: int, F, the feed-forward hidden width.
        num_heads: int, N; must divide the model width E.
        dropout: float in [0, 1), on attention weights and on each sub-layer's output.
        activation: feed-forward activation; defaults to ``"relu"``.
        layer_norm_epsilon: float; defaults to ``1e-5``.
        kernel_initializer, bias_initializer: Keras initializers for every dense projection.
        normalize_first: bool, pre-norm instead of post-norm (keras-hub's name). Defaults to
            False.
        **kwargs: passed to ``keras.layers.Layer`` (``dtype`` sets the policy of every
            sub-layer, e.g. ``"mixed_bfloat16"``).

    Call arguments:
        decoder_sequence: float ``(B, T, E)``, the target sequence so far (teacher forcing: the
            target shifted right).
        encoder_sequence: float ``(B, S, E)``, the encoder's output; required by a block with
            cross-attention unless ``cross_attention_cache`` holds its keys and values.
        decoder_padding_mask: optional bool ``(B, T)``, True = real target token.
        encoder_padding_mask: optional bool ``(B, S)``, True = real source token.
        use_causal_mask: bool, forbid attending to later target positions. Defaults to True.
        self_attention_cache: optional float ``(B, 2, L, N, E // N)``, the key/value cache of
            the target positions (:meth:`initial_caches` makes the first one).
        self_attention_cache_update_index: int (or int scalar tensor): where the T new
            positions go in ``self_attention_cache``; the causal mask is offset to match.
        cross_attention_cache: optional float ``(B, 2, S, N, E // N)``, the source keys and
            values, filled by :meth:`initial_caches` (or here: pass an empty one with
            ``cross_attention_cache_update_index=0`` and the ``encoder_sequence``), then passed
            with ``None`` to reuse it at every step.
        cross_attention_cache_update_index: int or None, as above.
        training: bool, apply dropout.
        return_attention_scores: bool, also return the cross-attention weights ``(B, N, T, S)``.
        decoder_sequence_mask, encoder_sequence_mask: filled in by Keras from the inputs' masks
            (``mask_zero``, ``PositionalEmbedding``); the explicit padding masks above win.

    Returns:
        float ``(B, T, E)``, carrying the target's padding mask; then the cross-attention weights
        if ``return_attention_scores``; then, with caches, the updated ``self_attention_cache``
        and (for a block with cross-attention) ``cross_attention_cache``, as keras-hub's
        decoder returns them.

    Raises:
        ValueError: for bad sizes or dropout, inputs that are not rank 3, a width E that
            ``num_heads`` does not divide, a missing ``encoder_sequence`` (or cross-attention
            cache) in a block with cross-attention, an ``encoder_sequence`` given to a block
            without one, or a cross-attention cache without a self-attention cache.

    Source: Vaswani et al., 2017, §3.1 (decoder stack) and §3.2.3 (the three uses of attention);
    Radford et al., 2018 (GPT), §3.1 (the decoder-only block).

    Example:
        >>> import numpy as np
        >>> decoder = TransformerDecoder(intermediate_dim=16, num_heads=2)
        >>> tuple(decoder(np.ones((1, 3, 8), "float32"), np.ones((1, 5, 8), "float32")).shape)  # target, source
        (1, 3, 8)
    """

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        for name, shape in (("decoder_sequence", decoder_sequence_shape), ("encoder_sequence", encoder_sequence_shape)):
            if shape is not None and len(shape) != 3:
                raise ValueError(f"`{name}` must have shape (batch, length, width); received {tuple(shape)}.")
        self._check_width(decoder_sequence_shape[-1])
        self.self_attention = self._attention("self_attention", decoder_sequence_shape, decoder_sequence_shape)
        self.self_attention_norm = self._norm("self_attention_norm", decoder_sequence_shape)
        self.has_cross_attention = encoder_sequence_shape is not None
        if self.has_cross_attention:
            self.cross_attention = self._attention("cross_attention", decoder_sequence_shape, encoder_sequence_shape)
            self.cross_attention_norm = self._norm("cross_attention_norm", decoder_sequence_shape)
        self.feedforward_hidden, self.feedforward_output = self._feedforward(decoder_sequence_shape)
        self.feedforward_norm = self._norm("feedforward_norm", decoder_sequence_shape)
        self.dropout_layer = self._dropout("residual_dropout")
        super().build(decoder_sequence_shape)

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        encoder_padding_mask=None,
        use_causal_mask=True,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cross_attention_cache_update_index=None,
        training=None,
        return_attention_scores=False,
        decoder_sequence_mask=None,
        encoder_sequence_mask=None,
    ):
        if self.has_cross_attention:
            cached_source = cross_attention_cache is not None and cross_attention_cache_update_index is None
            if encoder_sequence is None and not cached_source:
                raise ValueError(
                    "`encoder_sequence` is required: this block has cross-attention (it was built with "
                    "an encoder sequence), and no `cross_attention_cache` holds the source keys and "
                    "values."
                )
            if (cross_attention_cache is None) != (self_attention_cache is None):
                raise ValueError(
                    "`self_attention_cache` and `cross_attention_cache` must be given together or not "
                    f"at all; received {type(self_attention_cache).__name__} and "
                    f"{type(cross_attention_cache).__name__}."
                )
        elif encoder_sequence is not None or cross_attention_cache is not None:
            raise ValueError(
                "This block has no cross-attention (it was built without an encoder sequence); "
                "received an `encoder_sequence` or `cross_attention_cache`."
            )
        target_mask = decoder_sequence_mask if decoder_padding_mask is None else decoder_padding_mask  # (B, T)
        source_mask = encoder_sequence_mask if encoder_padding_mask is None else encoder_padding_mask  # (B, S)
        self_mask = key_mask(target_mask)  # (B, 1, T)
        if self_attention_cache is not None:
            # The padding mask describes the new positions only; the cache's positions are real
            # tokens, and the offset causal mask keeps unwritten ones out.
            self_mask = None
        cross_mask = key_mask(source_mask)  # (B, 1, S)
        cached = self_attention_cache is not None
        scores = None

        # 1. Causal self-attention over the target (with a cache: the new positions against all so far).
        y = self._sublayer_input(decoder_sequence, self.self_attention_norm)
        y = self.self_attention(
            y,
            y,
            attention_mask=self_mask,
            use_causal_mask=use_causal_mask,
            training=training,
            cache=self_attention_cache,
            cache_update_index=self_attention_cache_update_index,
        )
        y, self_attention_cache = y if cached else (y, None)
        x = self._residual(decoder_sequence, y, self.self_attention_norm, self.dropout_layer, training)

        # 2. Cross-attention: each target position attends to the source (the encoder's output).
        if self.has_cross_attention:
            y = self.cross_attention(
                self._sublayer_input(x, self.cross_attention_norm),
                encoder_sequence,
                attention_mask=cross_mask,
                training=training,
                return_attention_scores=return_attention_scores,
                cache=cross_attention_cache,
                cache_update_index=cross_attention_cache_update_index,
            )
            if return_attention_scores:
                y, scores, *rest = y
            elif cached:
                y, *rest = y
            cross_attention_cache = rest[0] if cached else None
            x = self._residual(x, y, self.cross_attention_norm, self.dropout_layer, training)

        # 3. Position-wise feed-forward.
        y = self.feedforward_output(self.feedforward_hidden(self._sublayer_input(x, self.feedforward_norm)))
        x = self._residual(x, y, self.feedforward_norm, self.dropout_layer, training)

        outputs = [x, *([scores] if return_attention_scores else [])]
        if cached:
            outputs += [self_attention_cache, *([cross_attention_cache] if self.has_cross_attention else [])]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def initial_caches(self, batch_size, max_length, encoder_sequence=None, copies=1):
        """The caches a generation loop starts from, so that it never reaches into a sub-layer.

        Args:
            batch_size: int (or int scalar tensor), B, the sequences decoded together (before ``copies``).
            max_length: int, L, the most target positions the self-attention cache holds.
            encoder_sequence: float ``(B, S, E)``, the encoder's output; required by a block with
                cross-attention, whose keys and values are projected here once.
            copies: int, K: each source's caches repeated K times (the beams of beam search).

        Returns:
            A block without cross-attention: the empty self-attention cache, float
            ``(B·K, 2, L, N, E // N)``. A block with it: ``(self_attention_cache,
            cross_attention_cache)``, the second float ``(B·K, 2, S, N, E // N)`` holding every
            source key and value. Pass them to :meth:`call` (the cross-attention cache with
            ``cross_attention_cache_update_index=None``).

        Raises:
            ValueError: for a block with cross-attention and no ``encoder_sequence``, or one
                without it given an ``encoder_sequence``.

        Example:
            >>> block = TransformerDecoder(intermediate_dim=64, num_heads=2)
            >>> _ = block(keras.ops.ones((1, 3, 32)))
            >>> tuple(block.initial_caches(4, 10).shape)
            (4, 2, 10, 2, 16)
        """
        self_cache = self.self_attention.initial_cache(batch_size * copies, max_length)
        if not self.has_cross_attention:
            if encoder_sequence is not None:
                raise ValueError(
                    "This block has no cross-attention (it was built without an encoder sequence); "
                    "received an `encoder_sequence`."
                )
            return self_cache
        if encoder_sequence is None:
            raise ValueError("`encoder_sequence` is required: this block has cross-attention.")
        cross_cache = self.cross_attention.initial_cache(ops.shape(encoder_sequence)[0], ops.shape(encoder_sequence)[1])
        # Writing at index 0 with the whole encoder output projects every source key and value,
        # once per source; the K copies of a source then share them.
        cross_cache = self.cross_attention(
            encoder_sequence[:, :1], encoder_sequence, cache=cross_cache, cache_update_index=0
        )[1]
        return self_cache, ops.repeat(cross_cache, copies, axis=0)

    def compute_output_shape(self, decoder_sequence_shape, encoder_sequence_shape=None):
        return tuple(decoder_sequence_shape)


# --- output layers: a softmax over the vocabulary whose output carries no Keras mask ---


@keras.saving.register_keras_serializable(package="transformer_course")
class TokenDistribution(keras.layers.Dense):
    """A dense softmax over the target vocabulary whose output carries no Keras mask.

    Keras would turn a mask on the model's output into sample weights for the loss; the course's
    ``masked_loss`` and ``masked_accuracy`` already skip padding (label id 0), so the mask stops
    here and exactly one mechanism decides which positions count.

    Args:
        units: int, the target vocabulary size V.
        **kwargs: passed to ``keras.layers.Dense`` (``activation`` defaults to ``"softmax"``).

    Call arguments:
        inputs: float ``(B, T, E)``.

    Returns:
        float32 ``(B, T, V)``, each row a probability distribution; no mask.

    Example:
        >>> import numpy as np
        >>> tuple(TokenDistribution(11)(np.ones((1, 3, 8), "float32")).shape)
        (1, 3, 11)
    """

    def __init__(self, units, **kwargs):
        kwargs.setdefault("activation", "softmax")
        super().__init__(units, **kwargs)

    def compute_mask(self, inputs, mask=None):
        return None


@keras.saving.register_keras_serializable(package="transformer_course")
class TiedTokenDistribution(keras.layers.Layer):
    """The softmax of a tied output layer: scores against the token embeddings, plus a bias.

    With tied embeddings the output weights *are* the target embedding table (its transpose):
    ``PositionalEmbedding(..., reverse=True)`` computes the scores, this layer adds a learned bias
    per token and takes the softmax. Like :class:`TokenDistribution`, its output carries no mask.

    Args:
        units: int, the target vocabulary size V.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: float ``(B, T, V)`` scores.

    Returns:
        float ``(B, T, V)``, each row a probability distribution; no mask.

    Example:
        >>> import numpy as np
        >>> probabilities = TiedTokenDistribution(11)(np.zeros((1, 3, 11), "float32"))  # scores from an embedding
        >>> tuple(probabilities.shape), round(float(keras.ops.sum(probabilities[0, 0])), 5)
        ((1, 3, 11), 1.0)
    """

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = check_integer("units", units)

    def build(self, inputs_shape):
        self.bias = self.add_weight(name="bias", shape=(self.units,), initializer="zeros")
        super().build(inputs_shape)

    def call(self, inputs):
        return ops.softmax(inputs + self.bias, axis=-1)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(units=self.units)
        return config


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


@keras.saving.register_keras_serializable(package="transformer_course")
class RMSNorm(keras.layers.Layer):
    """Root-mean-square normalisation: ``x / sqrt(mean(x²) + ε) · scale`` over the last axis.

    LayerNorm without its two extra steps: no mean is subtracted and no bias added, so each
    vector is only rescaled to unit root mean square, then by a learned ``scale``. Cheaper, and
    as good in practice (Zhang and Sennrich, 2019); Llama and most decoders since use it.

    Args:
        epsilon: float, added to the mean square (1e-6, Keras' and Llama's default).
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: float ``(..., E)``.

    Returns:
        float ``(..., E)``, the same dtype; computed in float32 whatever the dtype policy.

    Source: Zhang and Sennrich, 2019, "Root Mean Square Layer Normalization", equation (4); equal
    to ``keras.layers.RMSNormalization`` where Keras has it (tested).

    Example:
        >>> normalised = RMSNorm()(keras.ops.convert_to_tensor([[3.0, 4.0]]))  # root mean square 3.5355
        >>> [round(float(value), 4) for value in keras.ops.convert_to_numpy(normalised)[0]]
        [0.8485, 1.1314]
    """

    def __init__(self, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon
        self.supports_masking = True

    def build(self, inputs_shape):
        self.scale = self.add_weight(name="scale", shape=(inputs_shape[-1],), initializer="ones")
        super().build(inputs_shape)

    def call(self, inputs):
        x = ops.cast(inputs, "float32")
        x = x * ops.rsqrt(ops.mean(ops.square(x), axis=-1, keepdims=True) + self.epsilon)
        return ops.cast(x * ops.cast(self.scale, "float32"), inputs.dtype)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}


@keras.saving.register_keras_serializable(package="transformer_course")
class SwiGLUFeedForward(keras.layers.Layer):
    """The gated feed-forward network of Llama: ``W_down (SiLU(x W_gate) ⊙ x W_up)``, no biases.

    A gate, computed from the same input, scales each hidden unit. Three matrices instead of two:
    at equal parameters, F is 2/3 of the GELU network's (Shazeer, 2020, §2, keeps the count).

    Args:
        intermediate_dim: int, F.
        kernel_initializer: a Keras initializer for the three kernels.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: float ``(B, T, E)``.

    Returns:
        float ``(B, T, E)``.

    Raises:
        ValueError: for a non-positive ``intermediate_dim``.

    Source: Shazeer, 2020, "GLU Variants Improve Transformer", equation (6); Touvron et al.,
    2023, "LLaMA", §2.2.

    Example:
        >>> tuple(SwiGLUFeedForward(12)(keras.ops.ones((1, 3, 8))).shape)
        (1, 3, 8)
    """

    def __init__(self, intermediate_dim, kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.intermediate_dim = check_integer("intermediate_dim", intermediate_dim)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        dense = {"use_bias": False, "kernel_initializer": self.kernel_initializer, "dtype": self.dtype_policy}
        self.gate = keras.layers.Dense(self.intermediate_dim, name="gate", **dense)
        self.up = keras.layers.Dense(self.intermediate_dim, name="up", **dense)
        self.down = keras.layers.Dense(inputs_shape[-1], name="down", **dense)
        self.gate.build(inputs_shape)
        self.up.build(inputs_shape)
        self.down.build((*inputs_shape[:-1], self.intermediate_dim))
        super().build(inputs_shape)

    def call(self, inputs):
        return self.down(ops.silu(self.gate(inputs)) * self.up(inputs))

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "intermediate_dim": self.intermediate_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


@keras.saving.register_keras_serializable(package="transformer_course")
class LlamaDecoder(keras.layers.Layer):
    """A Llama-style decoder block: pre-norm RMSNorm, grouped-query causal attention with rotary
    positions, and a SwiGLU feed-forward network, each added back to the residual stream; no biases.

    ``x + attention(RMSNorm(x))``, then ``x + SwiGLU(RMSNorm(x))``. No positions enter the
    embeddings: :func:`~transformer_course.rotary.rotary_embedding` rotates the queries and keys.

    Args:
        intermediate_dim: int, F, the SwiGLU width.
        num_query_heads: int, N (dividing the width E).
        num_key_value_heads: int, G (dividing N).
        dropout: float in [0, 1), after each sub-layer and on the attention weights, in training.
        rotary_max_wavelength: float, the rotary embedding's longest wavelength; None rotates
            nothing (positions must then come from the embeddings: the learned-positions arm of
            an ablation).
        rotary_scaling_factor: float > 0, the rotation's positions divided by it (1: none;
            Position Interpolation, :func:`~transformer_course.rotary.rotary_embedding`).
        layer_norm_epsilon: float, both RMSNorms' epsilon.
        kernel_initializer: a Keras initializer.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        decoder_sequence: float ``(B, T, E)``.
        decoder_padding_mask: optional bool ``(B, T)``, True = real token (its Keras mask otherwise).
        self_attention_cache: optional float ``(B, 2, L, G, E // N)`` (:meth:`initial_caches`).
        self_attention_cache_update_index: int, with the cache: the position of the first new token.
        training: bool.

    Returns:
        float ``(B, T, E)``, and the updated cache when one is given.

    Raises:
        ValueError: for non-positive sizes, N not dividing E or G not dividing N, or a
            ``dropout`` outside [0, 1).

    Source: Touvron et al., 2023, "LLaMA: Open and Efficient Foundation Language Models", §2.2;
    equal to keras-hub's ``LlamaTransformerDecoder`` with the same weights (tested).

    Example:
        >>> block = LlamaDecoder(intermediate_dim=24, num_query_heads=4, num_key_value_heads=2)
        >>> tuple(block(keras.ops.ones((1, 5, 16))).shape)
        (1, 5, 16)
    """

    def __init__(
        self,
        intermediate_dim,
        num_query_heads,
        num_key_value_heads,
        dropout=0.0,
        rotary_max_wavelength=10_000.0,
        layer_norm_epsilon=1e-6,
        kernel_initializer="glorot_uniform",
        rotary_scaling_factor=1.0,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.intermediate_dim = check_integer("intermediate_dim", intermediate_dim)
        self.num_query_heads = check_integer("num_query_heads", num_query_heads)
        self.num_key_value_heads = check_integer("num_key_value_heads", num_key_value_heads)
        self.dropout = check_rate("dropout", dropout)
        self.rotary_max_wavelength, self.layer_norm_epsilon = rotary_max_wavelength, layer_norm_epsilon
        self.rotary_scaling_factor = check_positive("rotary_scaling_factor", rotary_scaling_factor)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, decoder_sequence_shape):
        width = decoder_sequence_shape[-1]
        if width % self.num_query_heads:
            raise ValueError(f"`num_query_heads` ({self.num_query_heads}) must divide the input width {width}.")
        common = {"dtype": self.dtype_policy}
        self.attention_norm = RMSNorm(self.layer_norm_epsilon, name="attention_norm", **common)
        self.attention = GroupedQueryAttention(
            width // self.num_query_heads,
            self.num_query_heads,
            self.num_key_value_heads,
            dropout=self.dropout,
            use_bias=False,
            rotary_max_wavelength=self.rotary_max_wavelength,
            rotary_scaling_factor=self.rotary_scaling_factor,
            kernel_initializer=self.kernel_initializer,
            name="attention",
            **common,
        )
        self.feedforward_norm = RMSNorm(self.layer_norm_epsilon, name="feedforward_norm", **common)
        self.feedforward = SwiGLUFeedForward(
            self.intermediate_dim, kernel_initializer=self.kernel_initializer, name="feedforward", **common
        )
        self.dropout_layer = keras.layers.Dropout(self.dropout, **common)
        for layer in (self.attention_norm, self.feedforward_norm, self.feedforward):
            layer.build(decoder_sequence_shape)
        self.attention.build(decoder_sequence_shape, decoder_sequence_shape)
        super().build(decoder_sequence_shape)

    def call(
        self,
        decoder_sequence,
        decoder_padding_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        training=None,
        decoder_sequence_mask=None,
    ):
        padding = decoder_sequence_mask if decoder_padding_mask is None else decoder_padding_mask  # (B, T)
        mask = None if self_attention_cache is not None else key_mask(padding)  # the cache holds real tokens
        y = self.attention_norm(decoder_sequence)
        y = self.attention(
            y,
            y,
            attention_mask=mask,
            use_causal_mask=True,
            cache=self_attention_cache,
            cache_update_index=self_attention_cache_update_index,
            training=training,
        )
        y, cache = y if self_attention_cache is not None else (y, None)
        x = decoder_sequence + self.dropout_layer(y, training=training)
        x = x + self.dropout_layer(self.feedforward(self.feedforward_norm(x)), training=training)
        return x if cache is None else (x, cache)

    def initial_caches(self, batch_size, max_length, encoder_sequence=None, copies=1):
        """The empty key/value cache a generation starts from: float ``(B·K, 2, L, G, E // N)``.

        The arguments of :meth:`TransformerDecoder.initial_caches`; this block has no
        cross-attention, so ``encoder_sequence`` must stay None.

        Raises:
            ValueError: for an ``encoder_sequence``.
        """
        if encoder_sequence is not None:
            raise ValueError("This block has no cross-attention; received an `encoder_sequence`.")
        return self.attention.initial_cache(batch_size * copies, max_length)

    def compute_output_shape(self, decoder_sequence_shape):
        return tuple(decoder_sequence_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "intermediate_dim": self.intermediate_dim,
            "num_query_heads": self.num_query_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "dropout": self.dropout,
            "rotary_max_wavelength": self.rotary_max_wavelength,
            "rotary_scaling_factor": self.rotary_scaling_factor,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
