"""A Transformer translator: the encoder-decoder model and an export that takes strings.

* :class:`TranslationModel` (and :func:`build_translation_model`) — source ids and the target
  shifted right in, next-token probabilities out: ``PositionalEmbedding`` + ``TransformerEncoder`` stack for the source,
  ``PositionalEmbedding`` + ``TransformerDecoder`` stack for the target, softmax over the target
  vocabulary (Vaswani et al., 2017, §3, Figure 1).
* :class:`Translator` — a Keras model holding both vectorisers and the translation model: it
  takes a string or a list of strings and returns translations (greedy or beam search, decoded
  with the key/value caches of :class:`transformer_course.generation.IncrementalDecoder`), and
  saves to one ``.keras`` file.
"""

from __future__ import annotations

from typing import NamedTuple

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_model_sizes, check_texts, renamed, renamed_config
from .generation import IncrementalDecoder
from .masks import padding_mask
from .positional import PositionalEmbedding
from .transformer import TiedTokenDistribution, TokenDistribution, TransformerDecoder, TransformerEncoder

__all__ = [
    "TokenDistribution",
    "TiedTokenDistribution",
    "TranslationModel",
    "build_translation_model",
    "cross_attention_weights",
    "Translator",
    "START_TOKEN",
    "END_TOKEN",
]

START_TOKEN = "[start]"
END_TOKEN = "[end]"


class Decoded(NamedTuple):
    """What :meth:`TranslationModel.decode` returns."""

    probabilities: object  # float32 (B, T, V), or (B, 1, V) for the last position only
    self_attention_caches: list | None  # the updated caches, one per block (None without caches)
    attention_scores: object | None  # the last block's cross-attention weights (B, N, T, S), if asked


@keras.saving.register_keras_serializable(package="transformer_course")
class TranslationModel(keras.Model):
    """An encoder-decoder Transformer trained with teacher forcing (Vaswani et al., 2017, §3, Figure 1).

    A functional model with its parts as attributes (``source_embedding``, ``encoder_blocks``, a
    list, ``target_embedding``, ``decoder_blocks``, a list, ``output_dropout`` and ``output_layer``)
    that owns its passes: the whole graph, :meth:`encode`, and :meth:`decode`, which
    :func:`cross_attention_weights` and :class:`~transformer_course.generation.IncrementalDecoder`
    call. ``get_config`` returns the arguments below, so a
    ``.keras`` file reloads with no ``custom_objects``.

    Args:
        source_vocabulary_size, target_vocabulary_size: ints, ids ``0 .. size - 1`` (0 = padding).
            Their former names, ``source_vocab_size`` and ``target_vocab_size``, still work, with a
            DeprecationWarning.
        source_length: int, the longest source accepted, S.
        target_length: int, the longest decoder input accepted, T.
        embed_dim, intermediate_dim, num_heads: ints, E, F and N (N divides E); keyword only, as
            every argument after them.
        num_layers: int, encoder blocks and decoder blocks (the same number of each).
        dropout: float in [0, 1), inside every block and before the output layer.
        tie_embeddings: bool, the output layer reuses the target embedding table (its
            transpose) instead of a weight matrix of its own: ``V × E`` fewer parameters, and
            words that are embedded alike are predicted alike (Press and Wolf, 2017; Vaswani et
            al., 2017, §3.4). The output layer is then a :class:`TiedTokenDistribution`.
        **kwargs: ``name``, ``trainable``, passed to ``keras.Model``.

    Call arguments:
        inputs: ``{"source_ids": int (B, S), "target_ids": int (B, T)}``, the decoder input being
            the target shifted right (starting with ``[start]``).

    Returns:
        float32 ``(B, T, target_vocabulary_size)``: at position t, P(next target token | source,
        target tokens ≤ t). Padding (id 0) is masked everywhere: the encoder ignores source
        padding, cross-attention uses the **source** padding mask, self-attention the target
        padding mask AND the causal mask.

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), or ``num_heads`` not
            dividing ``embed_dim``.

    Example:
        >>> model = TranslationModel(30, 40, 8, 9, embed_dim=16, intermediate_dim=32, num_heads=2, num_layers=2)
        >>> len(model.encoder_blocks), len(model.decoder_blocks), model.output_shape
        (2, 2, (None, None, 40))
    """

    def __init__(
        self,
        source_vocabulary_size=None,
        target_vocabulary_size=None,
        source_length=None,
        target_length=None,
        *,
        embed_dim=256,
        intermediate_dim=2048,
        num_heads=8,
        num_layers=1,
        dropout=0.1,
        tie_embeddings=False,
        source_vocab_size=None,
        target_vocab_size=None,
        **kwargs,
    ):
        source_vocabulary_size = renamed(
            "source_vocabulary_size", source_vocabulary_size, "source_vocab_size", source_vocab_size
        )
        target_vocabulary_size = renamed(
            "target_vocabulary_size", target_vocabulary_size, "target_vocab_size", target_vocab_size
        )
        check_model_sizes(
            embed_dim,
            num_heads,
            dropout,
            source_vocabulary_size=source_vocabulary_size,
            target_vocabulary_size=target_vocabulary_size,
            source_length=source_length,
            target_length=target_length,
            num_layers=num_layers,
        )
        source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
        target_ids = keras.Input(shape=(None,), dtype="int32", name="target_ids")
        source_embedding = PositionalEmbedding(
            source_length, source_vocabulary_size, embed_dim, name="source_embedding"
        )
        x = source_embedding(source_ids)
        encoder_blocks = []
        for index in range(num_layers):
            encoder_blocks.append(
                TransformerEncoder(intermediate_dim, num_heads, dropout=dropout, name=f"encoder_{index + 1}")
            )
            x = encoder_blocks[-1](x)
        target_embedding = PositionalEmbedding(
            target_length, target_vocabulary_size, embed_dim, name="target_embedding"
        )
        y = target_embedding(target_ids)
        decoder_blocks = []
        for index in range(num_layers):
            decoder_blocks.append(
                TransformerDecoder(intermediate_dim, num_heads, dropout=dropout, name=f"decoder_{index + 1}")
            )
            y = decoder_blocks[-1](y, x)
        output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        y = output_dropout(y)
        # The softmax in float32 whatever the policy: under mixed_bfloat16 a bfloat16 probability has
        # 3 significant digits, too few for the log-likelihood of a 15,000-word vocabulary.
        if tie_embeddings:
            output_layer = TiedTokenDistribution(target_vocabulary_size, name="output", dtype="float32")
            probabilities = output_layer(target_embedding(y, reverse=True))  # the table that embedded the target
        else:
            output_layer = TokenDistribution(target_vocabulary_size, name="output", dtype="float32")
            probabilities = output_layer(y)
        super().__init__({"source_ids": source_ids, "target_ids": target_ids}, probabilities, **kwargs)
        self.source_embedding, self.encoder_blocks = source_embedding, encoder_blocks
        self.target_embedding, self.decoder_blocks = target_embedding, decoder_blocks
        self.output_dropout, self.output_layer = output_dropout, output_layer
        self.source_vocabulary_size, self.target_vocabulary_size = source_vocabulary_size, target_vocabulary_size
        self.source_length, self.target_length = source_length, target_length
        self.embed_dim, self.intermediate_dim, self.num_heads = embed_dim, intermediate_dim, num_heads
        self.num_layers, self.dropout, self.tie_embeddings = num_layers, dropout, tie_embeddings

    def encode(self, source_ids):
        """The source embedding and the encoder stack, at inference (no dropout).

        Args:
            source_ids: int ``(B, S)``, 0 = padding.

        Returns:
            ``(encoded, source_mask)``: float ``(B, S, E)`` and bool ``(B, S)`` (True = real token).
        """
        source_mask = padding_mask(source_ids)
        x = self.source_embedding(source_ids)
        for block in self.encoder_blocks:
            x = block(x, padding_mask=source_mask)
        return x, source_mask

    def output_distribution(self, hidden):
        """The output layer on decoder states: float ``(B, T, E)`` -> float32 ``(B, T, V)``.

        With tied embeddings the scores come from the target embedding turned around, then the
        output layer's bias and softmax.
        """
        return self.output_layer(self.target_embedding(hidden, reverse=True) if self.tie_embeddings else hidden)

    def initial_caches(self, batch_size, max_length: int, encoder_sequence=None, copies: int = 1) -> tuple[list, list]:
        """Every decoder block's caches for a generation over ``encoder_sequence`` (see :meth:`decode`).

        The one signature of every ``initial_caches`` of the course (the decoder blocks' and the
        language model's take the same arguments).

        Args:
            batch_size: int (or int scalar tensor), B, the sources decoded together (before ``copies``).
            max_length: int, L, the most target positions the self-attention caches hold.
            encoder_sequence: float ``(B, S, E)``, the encoder's output (:meth:`encode`); required.
            copies: int, K: each source's caches repeated K times (the beams of beam search).

        Returns:
            ``(self_attention_caches, cross_attention_caches)``: lists, one per block, of float
            ``(B·K, 2, L, N, H)`` (empty) and ``(B·K, 2, S, N, H)`` (every source key and value,
            projected once).

        Raises:
            TypeError: if ``batch_size`` is a tensor of rank above 0 (the encoder's output goes in
                ``encoder_sequence``).
            ValueError: without an ``encoder_sequence``, or with a ``batch_size`` other than its
                batch.
        """
        if len(getattr(batch_size, "shape", ())) > 0:
            raise TypeError(
                f"`batch_size` must be an int; received a tensor of shape {tuple(batch_size.shape)} "
                "(the encoder's output goes in `encoder_sequence`)."
            )
        if encoder_sequence is None:
            raise ValueError("`encoder_sequence` is required: the cross-attention caches hold its keys and values.")
        rows = encoder_sequence.shape[0]
        if isinstance(batch_size, int) and rows is not None and rows != batch_size:
            raise ValueError(f"`batch_size` ({batch_size}) must be the batch of `encoder_sequence` ({rows}).")
        caches = [
            block.initial_caches(batch_size, max_length, encoder_sequence, copies) for block in self.decoder_blocks
        ]
        return [cache[0] for cache in caches], [cache[1] for cache in caches]

    def decode(
        self,
        target_ids,
        encoded=None,
        source_mask=None,
        *,
        start_index=0,
        target_mask=None,
        self_attention_caches=None,
        cross_attention_caches=None,
        last_only=False,
        return_attention_scores=False,
    ) -> Decoded:
        """The target side at inference (no dropout): embedding, every decoder block, the output layer.

        The one pass over the decoder blocks besides the model's own graph: cached generation
        (:class:`~transformer_course.generation.IncrementalDecoder`, greedy and beam search) and
        the cross-attention heatmaps call it.

        Args:
            target_ids: int ``(B, T)``, the target ids at positions ``start_index ..``.
            encoded: float ``(B, S, E)``, the encoder's output; None when ``cross_attention_caches``
                hold the source keys and values.
            source_mask: bool ``(B, S)``, True = real source token.
            start_index: int (or int scalar tensor), the position of ``target_ids[:, 0]``; with
                caches, where the new keys and values are written.
            target_mask: optional bool ``(B, T)`` padding mask of the target; by default the
                embedding's own (id 0 is padding).
            self_attention_caches, cross_attention_caches: lists from :meth:`initial_caches`, both
                or neither.
            last_only: bool, the output distribution at the last position only.
            return_attention_scores: bool, also the last block's cross-attention weights.

        Returns:
            :class:`Decoded`: ``probabilities`` float32 ``(B, T, V)`` (``(B, 1, V)`` with
            ``last_only``), ``self_attention_caches`` (the updated list; None without caches) and
            ``attention_scores`` float ``(B, N, T, S)`` (None unless asked).

        Raises:
            ValueError: from the blocks, for caches given one without the other, or no source.
        """
        y = self.target_embedding(target_ids, start_index=start_index)
        cached = self_attention_caches is not None
        updated, scores = [], None
        for index, block in enumerate(self.decoder_blocks):
            scored = return_attention_scores and index == len(self.decoder_blocks) - 1
            caches = (
                dict(
                    self_attention_cache=self_attention_caches[index],
                    self_attention_cache_update_index=start_index,
                    cross_attention_cache=cross_attention_caches[index],
                    cross_attention_cache_update_index=None,
                )
                if cached
                else {}
            )
            outputs = block(
                y,
                encoded,
                decoder_padding_mask=target_mask,
                encoder_padding_mask=source_mask,
                return_attention_scores=scored,
                **caches,
            )
            outputs = outputs if isinstance(outputs, tuple) else (outputs,)
            y, outputs = outputs[0], outputs[1:]
            if scored:
                scores, outputs = outputs[0], outputs[1:]
            if cached:
                updated.append(outputs[0])
        probabilities = self.output_distribution(y[:, -1:, :] if last_only else y)
        return Decoded(probabilities, updated if cached else None, scores)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "source_vocabulary_size": self.source_vocabulary_size,
            "target_vocabulary_size": self.target_vocabulary_size,
            "source_length": self.source_length,
            "target_length": self.target_length,
            "embed_dim": self.embed_dim,
            "intermediate_dim": self.intermediate_dim,
            "num_heads": self.num_heads,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
            "tie_embeddings": self.tie_embeddings,
        }

    @classmethod
    def from_config(cls, config):
        return cls(
            **renamed_config(
                config, source_vocab_size="source_vocabulary_size", target_vocab_size="target_vocabulary_size"
            )
        )


def build_translation_model(
    source_vocabulary_size: int | None = None,
    target_vocabulary_size: int | None = None,
    source_length: int | None = None,
    target_length: int | None = None,
    **options,
) -> TranslationModel:
    """A :class:`TranslationModel`: the four sizes, then its keyword arguments (``embed_dim=``, …).

    Example:
        >>> build_translation_model(30, 40, 8, 9, embed_dim=16, intermediate_dim=32, num_heads=2).output_shape
        (None, None, 40)
    """
    return TranslationModel(source_vocabulary_size, target_vocabulary_size, source_length, target_length, **options)


def cross_attention_weights(model: keras.Model, source_ids, target_ids):
    """Where the last decoder block looks in the source, for each target position.

    Args:
        model: a :class:`TranslationModel`.
        source_ids: int ``(B, S)``, 0 = padding.
        target_ids: int ``(B, T)``, the decoder input (``[start]`` then the target so far).

    Returns:
        float32 NumPy ``(B, N, T, S)``: row t of head n sums to 1 over the real source tokens;
        source padding gets exactly 0.
    """
    source_ids = ops.convert_to_tensor(np.asarray(source_ids), dtype="int32")
    target_ids = ops.convert_to_tensor(np.asarray(target_ids), dtype="int32")
    encoded, source_mask = model.encode(source_ids)
    decoded = model.decode(
        target_ids,
        encoded,
        source_mask,
        target_mask=padding_mask(target_ids),
        last_only=True,
        return_attention_scores=True,
    )
    return ops.convert_to_numpy(decoded.attention_scores)


@keras.saving.register_keras_serializable(package="transformer_course")
class Translator(keras.Model):
    """Strings in, translations out: both vectorisers and a translation model in one ``.keras`` file.

    Args:
        source_vectorizer: adapted ``TextVectorization`` for the source language, with
            ``output_sequence_length`` S (longer sentences are cut there).
        target_vectorizer: adapted ``TextVectorization`` for the target language; its vocabulary
            must contain ``[start]`` and ``[end]``.
        model: a :class:`TranslationModel`.
        max_length: int, the most target tokens generated, at most the model's target length.

    Call arguments (the model itself, used for training and saving):
        inputs: ``{"source_ids", "target_ids"}`` as for :func:`build_translation_model`.

    Raises:
        ValueError: (when translating) if the target vocabulary lacks ``[start]`` or ``[end]`` or
            its size differs from the model's output width, or ``max_length`` is too long.

    Example:
        >>> source = keras.layers.TextVectorization(output_sequence_length=6)
        >>> source.adapt(["where is the station"])
        >>> target = keras.layers.TextVectorization(standardize=None)
        >>> target.adapt(["[start] donde esta la estacion [end]"])
        >>> model = TranslationModel(source.vocabulary_size(), target.vocabulary_size(), 6, 8, embed_dim=16,
        ...                          intermediate_dim=32, num_heads=2)
        >>> translator = Translator(source, target, model, max_length=8)
        >>> isinstance(translator.translate("where is the station"), str)  # untrained: any words
        True
    """

    def __init__(self, source_vectorizer, target_vectorizer, model, max_length, **kwargs):
        super().__init__(**kwargs)
        self.source_vectorizer, self.target_vectorizer, self.model = source_vectorizer, target_vectorizer, model
        self.max_length = check_integer("max_length", max_length)
        self._decoder = None
        self.built = True  # every part arrives built: the vectorisers adapted, the model made

    def call(self, inputs, training=None):
        return self.model(inputs, training=training)

    def _vocabulary(self):
        vocabulary = [str(word) for word in self.target_vectorizer.get_vocabulary()]
        outputs = self.model.output_layer.units
        if len(vocabulary) != outputs:
            raise ValueError(f"the target vocabulary has {len(vocabulary)} words but the model predicts {outputs} ids.")
        for marker in (START_TOKEN, END_TOKEN):
            if marker not in vocabulary:
                raise ValueError(f"the target vocabulary has no {marker!r} token.")
        return vocabulary

    def _source_ids(self, sentences):
        single, items = check_texts("sentences", sentences)
        return single, (ops.convert_to_numpy(self.source_vectorizer(np.array(items, dtype=object))) if items else None)

    def _to_text(self, ids, vocabulary, end_id):
        words = []
        for token in ids[1:]:
            if token in (0, end_id):
                break
            words.append(vocabulary[token])
        return " ".join(words)

    def translate(self, sentences, beam_width: int | None = None, alpha: float = 0.6, batch_size: int = 256):
        """Translate one sentence or a list of sentences.

        Args:
            sentences: ``str`` or list/tuple of ``str``; any string (empty, very long, emoji)
                gets a translation — unknown words become ``[UNK]``, long inputs are cut at S.
            beam_width: None for greedy decoding; an int for beam search with that many beams.
                Both are batched and use the key/value cache.
            alpha: float, beam search's length-penalty exponent (GNMT).
            batch_size: int, sentences decoded together (each with ``beam_width`` rows).

        Returns:
            ``str`` for a string, list of ``str`` for a list: lower-case words separated by
            spaces, without ``[start]`` / ``[end]``.

        Raises:
            TypeError: if ``sentences`` is not a string or a list/tuple of strings.
        """
        single, source_ids = self._source_ids(sentences)
        if source_ids is None:
            return []
        vocabulary = self._vocabulary()
        start_id, end_id = vocabulary.index(START_TOKEN), vocabulary.index(END_TOKEN)
        batch_size = check_integer("batch_size", batch_size)
        if self._decoder is None:
            self._decoder = IncrementalDecoder(self.model, self.max_length)
        if beam_width is None:
            decode = lambda ids: self._decoder.decode(ids, start_id, end_id)  # noqa: E731
        else:
            decode = lambda ids: self._decoder.beam_decode(ids, start_id, end_id, beam_width, alpha)  # noqa: E731
        decoded = [
            row
            for begin in range(0, len(source_ids), batch_size)
            for row in decode(source_ids[begin : begin + batch_size])
        ]
        texts = [self._to_text([int(t) for t in row], vocabulary, end_id) for row in decoded]
        return texts[0] if single else texts

    def get_config(self):
        config = super().get_config()
        config.update(
            source_vectorizer=keras.saving.serialize_keras_object(self.source_vectorizer),
            target_vectorizer=keras.saving.serialize_keras_object(self.target_vectorizer),
            model=keras.saving.serialize_keras_object(self.model),
            max_length=self.max_length,
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("source_vectorizer", "target_vectorizer", "model"):
            config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)
