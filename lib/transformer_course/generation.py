"""Generation that does not recompute the prefix: next-token functions over key/value caches.

Decoding strategies (:mod:`transformer_course.decoding`: greedy, beam search) need one thing
from a model: a function from the tokens decoded so far to next-token probabilities. Calling the
whole model on the whole prefix at every step gives it, at O(t) work for step t. The functions
here give the same probabilities with O(1) new positions per step:

* the encoder runs once per batch of sources, and every decoder block's cross-attention keys and
  values are projected once (its ``cross_attention_cache``);
* every decoder block keeps the keys and values of the target tokens so far (its
  ``self_attention_cache``), and step t embeds one token at position t and attends over the
  cache.

The caches live inside the course's layers (``MultiHeadAttention(cache=...,
cache_update_index=...)``, ``TransformerDecoder(self_attention_cache=..., ...)``, in
keras-hub's style): this module only threads them from step to step.

* :class:`IncrementalDecoder` — greedy decoding and batched beam search for a model from
  :class:`transformer_course.translation.TranslationModel`.
* :class:`CachedLanguageModel` — next-token probabilities of a decoder-only language model
  (:class:`transformer_course.language_model.LanguageModel`): the prompt in one pass, then
  one token per step.

Shape letters: B batch (sentences), K beams per sentence, S source length, L the most target
positions fed to the decoder (``max_length``: ``[start]`` and all generated tokens but the last), N heads, H head width,
V target vocabulary.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
from functools import partial

import keras
import numpy as np
from keras import ops

from ._validation import check_integer
from .decoding import batch_beam_search, check_beam_arguments, greedy_decode
from .masks import PADDING_ID

__all__ = ["NextTokens", "IncrementalDecoder", "CachedLanguageModel"]


def _compiled(function):
    """``function`` traced once per input signature on TensorFlow; as it is on other backends."""
    if keras.backend.backend() != "tensorflow":
        return function
    import tensorflow as tf  # only here: the other backends need no TensorFlow

    return tf.function(function, reduce_retracing=True)


class _CachedModel:
    """What both cached generators share: the model (which owns its passes) and a length limit."""

    def __init__(self, model: keras.Model, max_length: int, sequence_length: int):
        self.model = model
        self.max_length = check_integer("max_length", max_length)
        if self.max_length > sequence_length:
            raise ValueError(
                f"`max_length` must be at most the model's sequence length {sequence_length}; received {max_length}."
            )


class NextTokens:
    """One generation's next-token function over key/value caches: what both cached generators return.

    ``next_tokens(decoded)`` takes the int ids decoded so far ``(R, t)`` and returns float32
    NumPy ``(R, V)``, each row the next token's distribution, for
    :mod:`transformer_course.decoding`'s strategies. The caches hold the ids of the calls before,
    so each call feeds only the ids added since (the first call: all of them); call it once per
    step, in order. ``next_tokens.reorder(parents)`` makes row i continue from row ``parents[i]``
    (beam search): every block's self-attention cache rows are gathered.

    Args:
        step: callable ``(new_ids (R, n), start, self_caches) -> (probabilities (R, V), self_caches)``:
            the model on the n new ids at positions ``start ..``.
        self_caches: list of float ``(R, 2, L, N, H)``, one per decoder block.
        excluded_ids: ints given probability 0 (padding, id 0, among them).
        renormalize: bool, rescale each row to sum to 1 after the exclusion (False: the model's
            own probabilities of the other ids, as the uncached reference computes them).
    """

    def __init__(self, step, self_caches, excluded_ids=(PADDING_ID,), renormalize=True):
        self._step, self.self_caches, self.fed = step, self_caches, 0  # fed: positions already in the caches
        self._excluded, self._renormalize = np.asarray(excluded_ids, dtype="int64"), renormalize

    def __call__(self, decoded):
        decoded = np.asarray(decoded, dtype="int32")
        start, self.fed = self.fed, decoded.shape[1]
        probabilities, self.self_caches = self._step(
            ops.convert_to_tensor(decoded[:, start:]), ops.convert_to_tensor(start, dtype="int32"), self.self_caches
        )
        probabilities = np.array(ops.convert_to_numpy(probabilities), dtype="float32")
        probabilities[:, self._excluded] = 0.0  # never generate padding (or the excluded ids): not words
        return probabilities / probabilities.sum(axis=1, keepdims=True) if self._renormalize else probabilities

    def reorder(self, parents):
        parents = ops.convert_to_tensor(np.asarray(parents), dtype="int32")
        self.self_caches = [ops.take(cache, parents, axis=0) for cache in self.self_caches]


class IncrementalDecoder(_CachedModel):
    """Greedy decoding and beam search of a translation model with key/value caches.

    Step t embeds one target token at position t and runs each decoder block on that one
    position: its self-attention writes the token's key and value into the block's cache and
    attends over the cache; its cross-attention reads the source keys and values computed once.
    The probabilities equal the full model's on the whole prefix (up to float rounding); the
    tests check it token for token.

    Args:
        model: a :class:`~transformer_course.translation.TranslationModel`
            (used in inference mode: no dropout).
        max_length: int, the most tokens generated after ``[start]``, at most the target
            embedding's ``sequence_length`` (the last token generated is never fed back, so
            positions ``0 .. max_length - 1`` are embedded).

    Raises:
        ValueError: for a ``max_length`` above the target embedding's ``sequence_length``.
    """

    def __init__(self, model: keras.Model, max_length: int):
        super().__init__(model, max_length, model.target_embedding.sequence_length)
        self._start = _compiled(self._start_eagerly)
        self._step = _compiled(self._step_eagerly)

    def _start_eagerly(self, source_ids, copies):
        """Encode the sources; fill every block's cross-attention cache; empty self-attention caches.

        Returns ``(source_mask, self_caches, cross_caches)``: bool ``(B·K, S)`` and, per block,
        float ``(B·K, 2, L, N, H)`` and ``(B·K, 2, S, N, H)``.
        """
        encoded, source_mask = self.model.encode(source_ids)
        self_caches, cross_caches = self.model.initial_caches(ops.shape(encoded)[0], self.max_length, encoded, copies)
        return ops.repeat(source_mask, copies, axis=0), self_caches, cross_caches

    def _step_eagerly(self, token_ids, position, self_caches, source_mask, cross_caches):
        """New target ids, int (R, n) at ``position ..`` -> (probabilities (R, V) after the last, the caches)."""
        decoded = self.model.decode(
            token_ids,
            source_mask=source_mask,
            start_index=position,
            self_attention_caches=self_caches,
            cross_attention_caches=cross_caches,
            last_only=True,
        )
        return decoded.probabilities[:, 0, :], decoded.self_attention_caches

    def next_token_function(self, source_ids, copies: int = 1) -> NextTokens:
        """The :class:`NextTokens` of ``copies`` rows per source, sharing one encoding.

        Row ``b * copies + k`` belongs to source b. The encoder runs here, once; each call then
        feeds the columns of ``decoded`` (B·K, t) added since the call before (in decoding, the
        newest one, at position t - 1). Padding (id 0) gets
        probability 0; the other ids keep the model's probabilities (not renormalised, as the
        model's own output over a whole prefix gives them).
        """
        return self._next_tokens(source_ids, check_integer("copies", copies))

    def _next_tokens(self, source_ids, copies: int) -> NextTokens:
        source_ids = ops.convert_to_tensor(np.asarray(source_ids), dtype="int32")
        source_mask, self_caches, cross_caches = self._start(source_ids, copies)
        step = partial(self._step, source_mask=source_mask, cross_caches=cross_caches)
        return NextTokens(step, self_caches, renormalize=False)

    def decode(self, source_ids, start_id: int, end_id: int) -> np.ndarray:
        """Greedy-decode a batch of sources.

        Args:
            source_ids: int ``(B, S)`` source token ids, 0 = padding.
            start_id, end_id: ints, the target vocabulary's ``[start]`` and ``[end]`` ids.

        Returns:
            int64 ``(B, 1 + n)``, n <= ``max_length``: each row starts with ``start_id``; after
            its ``end_id`` a row holds padding (0). Decoding stops once every row has ended.
        """
        return greedy_decode(
            self.next_token_function(source_ids), np.full(len(source_ids), start_id), end_id, self.max_length
        )

    def beam_decode(
        self, source_ids, start_id: int, end_id: int, beam_width: int = 4, alpha: float = 0.6
    ) -> np.ndarray:
        """Beam-search a batch of sources: B·K rows share each decoder step and the caches.

        The encoder runs once per source. After every step each self-attention cache row is
        replaced by the row of the beam it extends (the source caches are the same for every
        beam of a sentence and stay). Each sentence gets what
        :func:`~transformer_course.decoding.beam_search` gives it alone with the uncached model
        (up to float rounding; the tests check it).

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
        _, beam_width = check_beam_arguments(self.max_length, beam_width, alpha)  # before the encoder runs
        next_tokens = self._next_tokens(source_ids, beam_width)
        ids, _ = batch_beam_search(
            next_tokens,
            np.full(len(source_ids), start_id),
            end_id,
            self.max_length,
            beam_width,
            alpha,
            reorder=next_tokens.reorder,
        )
        return ids


class CachedLanguageModel(_CachedModel):
    """Next-token probabilities of a decoder-only language model, never recomputing the prefix.

    ``start(prompt_ids)`` runs the whole prompt once, writing every position's keys and values
    into each block's cache; each later call embeds one new token at its position and attends
    over the cache. The probabilities equal the full model's on the whole sequence (up to float
    rounding; the tests check it token for token).

    Args:
        model: a :class:`~transformer_course.language_model.LanguageModel`.
        max_length: int, the most tokens a sequence may reach, prompt included (at most the
            model's ``sequence_length``).

    Raises:
        ValueError: for a ``max_length`` above the model's ``sequence_length``.
    """

    def __init__(self, model: keras.Model, max_length: int):
        super().__init__(model, max_length, model.sequence_length)
        self._run = _compiled(self._run_eagerly)

    def _run_eagerly(self, token_ids, start, caches):
        """Tokens ``(R, t)`` at positions ``start ..``: probabilities of the next token ``(R, V)``."""
        probabilities, caches = self.model.call_with_cache(token_ids, caches, start, last_only=True)
        return probabilities[:, 0, :], caches

    def next_token_function(self, prompt_ids, excluded_ids=()) -> NextTokens:
        """The :class:`NextTokens` of a batch of prompts, for :mod:`transformer_course.decoding`'s strategies.

        Args:
            prompt_ids: int ``(B, t0)``, every row a prompt of the same length t0 >= 1 (no padding).
            excluded_ids: ints, ids never to generate besides padding, such as ``[UNK]`` (id 1 of a
                ``TextVectorization`` vocabulary): a model trained on text with unknown words
                predicts ``[UNK]`` often, and it is not a word a reader can use.

        Returns:
            :class:`NextTokens`: int ``(B, t)`` decoded so far (the prompt, then the generated
            ids) -> float32 NumPy ``(B, V)``, padding (id 0) and ``excluded_ids`` given
            probability 0 and each row renormalised to sum to 1. The first call runs the prompt;
            each later call feeds only the ids added since the call before.

        Raises:
            ValueError: for prompts longer than ``max_length`` or containing padding (id 0), or
                ``excluded_ids`` outside the vocabulary.
        """
        excluded = np.array([PADDING_ID, *(check_integer("excluded_ids", value, minimum=0) for value in excluded_ids)])
        vocabulary_size = self.model.output_shape[-1]
        if excluded.max() >= vocabulary_size:
            raise ValueError(
                f"`excluded_ids` must be ids below the vocabulary size {vocabulary_size}; "
                f"received {sorted(excluded_ids)}."
            )
        prompt_ids = np.asarray(prompt_ids, dtype="int32")
        if prompt_ids.ndim != 2 or prompt_ids.shape[1] < 1 or prompt_ids.shape[1] > self.max_length:
            raise ValueError(
                f"`prompt_ids` must have shape (batch, t0) with 1 <= t0 <= {self.max_length}; "
                f"received shape {prompt_ids.shape}."
            )
        if (prompt_ids == PADDING_ID).any():
            raise ValueError(
                "`prompt_ids` must not contain padding (id 0): every prompt in a batch needs the same length."
            )
        return NextTokens(
            self._run, self.model.initial_caches(prompt_ids.shape[0], self.max_length), excluded_ids=excluded
        )
