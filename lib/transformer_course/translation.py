"""A Transformer translator: the encoder-decoder model, cached greedy decoding, and an export.

* :func:`build_translation_model` — source ids and the target shifted right in, next-token
  probabilities out: ``PositionalEmbedding`` + ``TransformerEncoder`` stack for the source,
  ``PositionalEmbedding`` + ``TransformerDecoder`` stack for the target, softmax over the target
  vocabulary (Vaswani et al., 2017, §3, Figure 1).
* :class:`IncrementalDecoder` — greedy decoding that does not recompute what it already knows:
  the encoder runs once per batch, the cross-attention keys/values of the source are projected
  once, and each decoder block keeps the self-attention keys/values of the tokens generated so
  far (a *key/value cache*), so step t processes one new token instead of all t.
* :class:`Translator` — a Keras model holding both vectorisers and the translation model: it
  takes a string or a list of strings and returns translations, and saves to one ``.keras`` file.
"""

from __future__ import annotations

import math

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)
import keras
import numpy as np
from keras import ops

from .runtime import import_tensorflow_quietly
from ._validation import check_integer, check_texts
from .decoding import batch_beam_search, beam_search, greedy_decode
from .positional import PositionalEmbedding
from .transformer import TransformerDecoder, TransformerEncoder

# tf.data and tf.strings, whatever the Keras backend; imported without the start-up INFO records.
tf = import_tensorflow_quietly()

__all__ = ["TokenDistribution", "build_translation_model", "cross_attention_weights", "IncrementalDecoder", "Translator", "START_TOKEN", "END_TOKEN"]

START_TOKEN = "[start]"
END_TOKEN = "[end]"


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
    """

    def __init__(self, units, **kwargs):
        kwargs.setdefault("activation", "softmax")
        super().__init__(units, **kwargs)

    def compute_mask(self, inputs, mask=None):
        return None


def build_translation_model(
    source_vocab_size: int,
    target_vocab_size: int,
    source_length: int,
    target_length: int,
    embed_dim: int = 256,
    intermediate_dim: int = 2048,
    num_heads: int = 8,
    num_layers: int = 1,
    dropout: float = 0.1,
    name: str | None = None,
) -> keras.Model:
    """An encoder-decoder Transformer trained with teacher forcing.

    Args:
        source_vocab_size, target_vocab_size: ints, ids ``0 .. size - 1`` (0 = padding).
        source_length: int, the longest source accepted, S.
        target_length: int, the longest decoder input accepted, T.
        embed_dim, intermediate_dim, num_heads: ints, E, F and N (N divides E).
        num_layers: int, encoder blocks and decoder blocks (the same number of each).
        dropout: float in [0, 1), inside every block and before the output layer.
        name: optional model name.

    Returns:
        ``keras.Model`` with inputs ``{"source_ids": int (B, S), "target_ids": int (B, T)}`` —
        the decoder input, the target shifted right (starting with ``[start]``) — and output
        float32 ``(B, T, target_vocab_size)``: at position t, P(next target token | source,
        target tokens ≤ t). Padding (id 0) is masked everywhere: the encoder ignores source
        padding, cross-attention uses the **source** padding mask, self-attention the target
        padding mask AND the causal mask. Layers are named ``source_embedding``,
        ``encoder_1`` …, ``target_embedding``, ``decoder_1`` …, ``output``.

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), or ``num_heads`` not
            dividing ``embed_dim``.
    """
    for argument, value in (("source_vocab_size", source_vocab_size), ("target_vocab_size", target_vocab_size),
                            ("source_length", source_length), ("target_length", target_length),
                            ("embed_dim", embed_dim), ("num_layers", num_layers)):
        check_integer(argument, value)
    if check_integer("num_heads", num_heads) and embed_dim % num_heads:
        raise ValueError(f"`num_heads` ({num_heads}) must divide `embed_dim` ({embed_dim}).")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1); received {dropout!r}.")
    source_ids = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target_ids = keras.Input(shape=(None,), dtype="int32", name="target_ids")
    x = PositionalEmbedding(source_length, source_vocab_size, embed_dim, name="source_embedding")(source_ids)
    for index in range(num_layers):
        x = TransformerEncoder(intermediate_dim, num_heads, dropout=dropout, name=f"encoder_{index + 1}")(x)
    encoded = x
    y = PositionalEmbedding(target_length, target_vocab_size, embed_dim, name="target_embedding")(target_ids)
    for index in range(num_layers):
        y = TransformerDecoder(intermediate_dim, num_heads, dropout=dropout, name=f"decoder_{index + 1}")(y, encoded)
    y = keras.layers.Dropout(dropout, name="output_dropout")(y)
    probabilities = TokenDistribution(target_vocab_size, name="output")(y)
    return keras.Model({"source_ids": source_ids, "target_ids": target_ids}, probabilities, name=name)


def _layers(model: keras.Model, prefix: str) -> list:
    found = []
    while True:
        try:
            found.append(model.get_layer(f"{prefix}_{len(found) + 1}"))
        except ValueError:
            return found


def _encode(model: keras.Model, source_ids):
    """Run the source embedding and encoder stack: int (B, S) -> (float (B, S, E), bool mask (B, S))."""
    source_mask = ops.not_equal(source_ids, 0)  # True = real source token
    x = model.get_layer("source_embedding")(source_ids)
    for encoder in _layers(model, "encoder"):
        x = encoder(x, padding_mask=source_mask)
    return x, source_mask


def cross_attention_weights(model: keras.Model, source_ids, target_ids):
    """Where the last decoder block looks in the source, for each target position.

    Args:
        model: a model from :func:`build_translation_model`.
        source_ids: int ``(B, S)``, 0 = padding.
        target_ids: int ``(B, T)``, the decoder input (``[start]`` then the target so far).

    Returns:
        float32 NumPy ``(B, N, T, S)``: row t of head n sums to 1 over the real source tokens;
        source padding gets exactly 0.
    """
    source_ids = ops.convert_to_tensor(np.asarray(source_ids), dtype="int32")
    target_ids = ops.convert_to_tensor(np.asarray(target_ids), dtype="int32")
    target_mask = ops.not_equal(target_ids, 0)
    x, source_mask = _encode(model, source_ids)
    y = model.get_layer("target_embedding")(target_ids)
    decoders = _layers(model, "decoder")
    for decoder in decoders[:-1]:
        y = decoder(y, x, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask)
    _, weights = decoders[-1](y, x, decoder_padding_mask=target_mask, encoder_padding_mask=source_mask,
                              return_attention_scores=True)
    return ops.convert_to_numpy(weights)


class IncrementalDecoder:
    """Greedy decoding of a :func:`build_translation_model` model with a key/value cache.

    Without a cache, step t runs the encoder again and the decoder over all t tokens so far:
    O(t) work per step, O(T²) per sentence. Here the encoder runs once, the source keys/values of
    every cross-attention are projected once, and each decoder block appends the new token's
    self-attention key and value to a cache: step t computes one position. Outputs equal the
    uncached model's (up to float rounding); the tests check it.

    Args:
        model: a model from :func:`build_translation_model` (in inference mode: no dropout).
        max_length: int, the most tokens generated after ``[start]``, at most the model's
            target length.

    Raises:
        ValueError: for a ``max_length`` above the target embedding's ``sequence_length``.
    """

    def __init__(self, model: keras.Model, max_length: int):
        self.model = model
        self.max_length = check_integer("max_length", max_length)
        self.target_embedding = model.get_layer("target_embedding")
        self.decoders = _layers(model, "decoder")
        self.output_layer = model.get_layer("output")
        if self.max_length > self.target_embedding.sequence_length:
            raise ValueError(f"`max_length` must be at most the target length "
                             f"{self.target_embedding.sequence_length}; received {max_length}.")
        self._step = tf.function(self._step_eagerly, reduce_retracing=True)
        self._start = tf.function(self._start_eagerly, reduce_retracing=True)

    @staticmethod
    def _heads(attention, x, which):
        kernel, bias = getattr(attention, f"{which}_kernel"), getattr(attention, f"{which}_bias")
        projected = ops.einsum("bte,enh->btnh", x, kernel)  # (B, T, N, H)
        return projected if bias is None else projected + bias

    @staticmethod
    def _merge(attention, heads):
        output = ops.einsum("btnh,nhe->bte", heads, attention.output_kernel)  # (B, T, E)
        return output if attention.output_bias is None else output + attention.output_bias

    @staticmethod
    def _attend(attention, query, key, value, mask):
        # The fused kernel, as MultiHeadAttention uses it at inference, so results match the model.
        return ops.dot_product_attention(query, key, value, mask=mask, scale=1.0 / math.sqrt(attention.key_dim))

    def _start_eagerly(self, source_ids):
        """Encode the source once; project every decoder's cross-attention keys and values once."""
        x, source_mask = _encode(self.model, source_ids)
        cross = [(self._heads(d.cross_attention, x, "key"), self._heads(d.cross_attention, x, "value"))
                 for d in self.decoders]
        return source_mask, cross

    def _step_eagerly(self, token_ids, position, source_mask, cross, cache):
        """One new target token per sentence: (B,) ids at ``position`` -> (B, V) probabilities."""
        x = self.target_embedding.token_embedding(token_ids[:, None])  # (B, 1, E)
        x = x + self.target_embedding.position_embedding(ops.reshape(position, (1,)))
        seen = ops.reshape(ops.arange(self.max_length + 1) <= position, (1, 1, 1, -1))  # cached positions so far
        seen = ops.broadcast_to(seen, (ops.shape(x)[0], 1, 1, self.max_length + 1))  # (B, 1, 1, L)
        cross_mask = source_mask[:, None, None, :]  # (B, 1, 1, S)
        new_cache = []
        for decoder, (cross_keys, cross_values), (keys, values) in zip(self.decoders, cross, cache):
            def self_attention(h, decoder=decoder, keys=keys, values=values):
                attention = decoder.self_attention
                keys = ops.slice_update(keys, (0, position, 0, 0), self._heads(attention, h, "key"))
                values = ops.slice_update(values, (0, position, 0, 0), self._heads(attention, h, "value"))
                new_cache.append((keys, values))
                heads = self._attend(attention, self._heads(attention, h, "query"), keys, values, seen)
                return self._merge(attention, heads)

            def cross_attention(h, decoder=decoder, cross_keys=cross_keys, cross_values=cross_values):
                attention = decoder.cross_attention
                heads = self._attend(attention, self._heads(attention, h, "query"), cross_keys, cross_values, cross_mask)
                return self._merge(attention, heads)

            x = decoder._sublayer(x, decoder.self_attention_norm, self_attention, False)
            x = decoder._sublayer(x, decoder.cross_attention_norm, cross_attention, False)
            x = decoder._sublayer(x, decoder.feedforward_norm,
                                  lambda h, d=decoder: d.feedforward_output(d.feedforward_hidden(h)), False)
        return self.output_layer(x)[:, 0, :], new_cache

    def _cached_model(self, source_ids, copies: int):
        """``(next_token_probabilities, reorder)`` for ``copies`` rows per source, sharing one encoding.

        Row ``b * copies + k`` belongs to source b. ``next_token_probabilities(decoded)`` reads only
        the last column: the cache holds the rest. ``reorder(parents)`` gathers the cache rows.
        """
        source_ids = ops.convert_to_tensor(np.asarray(source_ids), dtype="int32")
        source_mask, cross = self._start(source_ids)
        if copies > 1:
            source_mask = ops.repeat(source_mask, copies, axis=0)
            cross = [(ops.repeat(keys, copies, axis=0), ops.repeat(values, copies, axis=0)) for keys, values in cross]
        rows = int(source_ids.shape[0]) * copies
        cache = []
        for decoder in self.decoders:
            heads, width = decoder.self_attention.num_heads, decoder.self_attention.key_dim
            empty = ops.zeros((rows, self.max_length + 1, heads, width))
            cache.append((empty, empty))

        def next_token_probabilities(decoded):
            nonlocal cache
            probabilities, cache = self._step(ops.convert_to_tensor(decoded[:, -1], dtype="int32"),
                                              ops.convert_to_tensor(decoded.shape[1] - 1, dtype="int32"),
                                              source_mask, cross, cache)
            probabilities = ops.convert_to_numpy(probabilities)
            probabilities[:, 0] = 0.0  # never generate padding (id 0)
            return probabilities

        def reorder(parents):
            nonlocal cache
            parents = ops.convert_to_tensor(parents, dtype="int32")
            cache = [(ops.take(keys, parents, axis=0), ops.take(values, parents, axis=0)) for keys, values in cache]

        return next_token_probabilities, reorder

    def decode(self, source_ids, start_id: int, end_id: int) -> np.ndarray:
        """Greedy-decode a batch of sources.

        Args:
            source_ids: int ``(B, S)`` source token ids, 0 = padding.
            start_id, end_id: ints, the target vocabulary's ``[start]`` and ``[end]`` ids.

        Returns:
            int64 ``(B, 1 + n)``, n <= ``max_length``: each row starts with ``start_id``; after
            its ``end_id`` a row holds padding (0). Decoding stops once every row has ended.
            The padding id is never generated (it is not a word; the model never learns it).
        """
        next_token_probabilities, _ = self._cached_model(source_ids, 1)
        return greedy_decode(next_token_probabilities, np.full(len(source_ids), start_id), end_id, self.max_length)

    def beam_decode(self, source_ids, start_id: int, end_id: int, beam_width: int = 4,
                    alpha: float = 0.6) -> np.ndarray:
        """Beam-search a batch of sources: B * K rows share each decoder step and the cache.

        The encoder runs once per source; after every step each cache row is replaced by the row
        of the beam it extends. Each sentence gets what :func:`~transformer_course.decoding.beam_search`
        gives it alone with the uncached model (up to float rounding; the tests check it).

        Args:
            source_ids: int ``(B, S)``, 0 = padding.
            start_id, end_id: ints, the ``[start]`` and ``[end]`` ids.
            beam_width: int, K, beams per sentence.
            alpha: float >= 0, the GNMT length-penalty exponent.

        Returns:
            int64 ``(B, 1 + n)``: each row the best hypothesis of its sentence, padded with 0.

        Raises:
            ValueError: for a non-positive ``beam_width`` or a negative ``alpha``.
        """
        beam_width = check_integer("beam_width", beam_width)
        next_token_probabilities, reorder = self._cached_model(source_ids, beam_width)
        ids, _ = batch_beam_search(next_token_probabilities, np.full(len(source_ids), start_id), end_id,
                                   self.max_length, beam_width, alpha, reorder=reorder)
        return ids


@keras.saving.register_keras_serializable(package="transformer_course")
class Translator(keras.Model):
    """Strings in, translations out: both vectorisers and a translation model in one ``.keras`` file.

    Args:
        source_vectorizer: adapted ``TextVectorization`` for the source language, with
            ``output_sequence_length`` S (longer sentences are cut there).
        target_vectorizer: adapted ``TextVectorization`` for the target language; its vocabulary
            must contain ``[start]`` and ``[end]``.
        model: a model from :func:`build_translation_model`.
        max_length: int, the most target tokens generated, at most the model's target length.

    Call arguments (the model itself, used for training and saving):
        inputs: ``{"source_ids", "target_ids"}`` as for :func:`build_translation_model`.

    Raises:
        ValueError: (when translating) if the target vocabulary lacks ``[start]`` or ``[end]`` or
            its size differs from the model's output width, or ``max_length`` is too long.
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
        outputs = self.model.get_layer("output").units
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
        decoded = [row for begin in range(0, len(source_ids), batch_size)
                   for row in decode(source_ids[begin:begin + batch_size])]
        texts = [self._to_text([int(t) for t in row], vocabulary, end_id) for row in decoded]
        return texts[0] if single else texts

    def beam_search_ids(self, source_ids, start_id, end_id, beam_width, alpha):
        """Beam search for one source ``(S,)`` without a cache: the decoder reruns on every prefix.

        The plain reference that :meth:`IncrementalDecoder.beam_decode` must agree with, and the
        slow baseline of ``benchmarks/translation_decoding.py``.
        """
        encoded, mask = _encode(self.model, ops.convert_to_tensor(np.asarray(source_ids)[None], dtype="int32"))
        embedding, decoders = self.model.get_layer("target_embedding"), _layers(self.model, "decoder")
        output = self.model.get_layer("output")

        def next_token_probabilities(decoded):
            beams = decoded.shape[0]
            y = embedding(ops.convert_to_tensor(decoded, dtype="int32"))
            memory, memory_mask = ops.repeat(encoded, beams, axis=0), ops.repeat(mask, beams, axis=0)
            for decoder in decoders:
                y = decoder(y, memory, encoder_padding_mask=memory_mask)
            probabilities = ops.convert_to_numpy(output(y[:, -1:, :])[:, 0, :])
            probabilities[:, 0] = 0.0  # never emit padding (id 0)
            return probabilities

        ids, _ = beam_search(next_token_probabilities, start_id, end_id, self.max_length, beam_width, alpha)
        return ids

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
