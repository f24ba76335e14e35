"""OpenAI's GPT-2 inside the course's own decoder-only language model (notebook 09).

:func:`language_model_from_keras_hub` copies the weights of a keras-hub ``GPT2Backbone`` into a
model built by :func:`~transformer_course.language_model.build_language_model` with GPT-2's
choices — pre-norm blocks without cross-attention, the tanh approximation of GELU, LayerNorm
epsilon 1e-5, learned positions, a final LayerNorm, the output tied to the token embedding:

=====================================  ==========================================
keras-hub ``GPT2Backbone``             the course's language model
=====================================  ==========================================
``token_embedding``                    ``token_embedding`` (its token table, from row 1)
``position_embedding``                 ``token_embedding`` (its position table)
``transformer_layer_0`` …              ``decoder_1`` … (same weight order)
``layer_norm``                         ``final_norm``
(none: GPT-2's output has no bias)     ``output`` (bias 0, and -1e9 for padding)
=====================================  ==========================================

**Ids.** The course's models keep id 0 for padding, while GPT-2's id 0 is the token ``"!"``; so
the course's id of every GPT-2 token is its GPT-2 id + 1. Row 0 of the token table is zeros and
the output bias of id 0 is -1e9, so padding is never predicted and every other probability
equals GPT-2's. :func:`bpe_from_keras_hub` builds the matching tokenizer (the course's
:class:`~transformer_course.bpe.BytePairEncoding`, with ``id_offset=1``).

:func:`load_gpt2_preset` downloads a preset (``"gpt2_base_en"``: 124,439,808 parameters;
Radford et al., 2019, *Language Models are Unsupervised Multitask Learners*). It needs keras-hub
and the network; offline it raises
:class:`~transformer_course.gpt2_checkpoints.PresetUnavailableError` (the same class as `bert_checkpoints`').
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np

from ._presets import PresetUnavailableError, download_preset  # the error is part of this API
from .bpe import BytePairEncoding
from .language_model import build_language_model
from .transformer import gelu_approximate

__all__ = [
    "language_model_from_keras_hub",
    "bpe_from_keras_hub",
    "load_gpt2_preset",
    "ID_OFFSET",
    "PresetUnavailableError",
]

ID_OFFSET = 1  # the course's id = GPT-2's id + 1; 0 is padding


def language_model_from_keras_hub(backbone, sequence_length: int | None = None, dropout: float = 0.0) -> keras.Model:
    """The course's language model holding the weights of a keras-hub ``GPT2Backbone``.

    Args:
        backbone: a built ``keras_hub.models.GPT2Backbone`` (from a preset or built by hand).
        sequence_length: int T, the longest input; defaults to the backbone's
            ``max_sequence_length`` (the first T position embeddings are kept).
        dropout: float in [0, 1), the converted model's dropout.

    Returns:
        ``keras.Model`` from int ``(B, T)`` ids (GPT-2's + 1; 0 = padding) to float32
        ``(B, T, V + 1)`` next-token probabilities: at every real position, column ``i + 1``
        equals GPT-2's softmax at its id ``i``, and column 0 is 0.

    Raises:
        ValueError: for a ``sequence_length`` longer than the backbone's position table.

    Example:
        >>> import keras_hub  # doctest: +SKIP
        >>> backbone = keras_hub.models.GPT2Backbone(vocabulary_size=300, num_layers=2, num_heads=2,
        ...     hidden_dim=16, intermediate_dim=32, max_sequence_length=24)  # doctest: +SKIP
        >>> model = language_model_from_keras_hub(backbone)  # doctest: +SKIP
    """
    length = backbone.max_sequence_length if sequence_length is None else int(sequence_length)
    if not 0 < length <= backbone.max_sequence_length:
        raise ValueError(
            f"`sequence_length` must be in [1, {backbone.max_sequence_length}] (the backbone's position "
            f"table); received {sequence_length!r}."
        )
    model = build_language_model(
        backbone.vocabulary_size + ID_OFFSET,
        length,
        embed_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        num_heads=backbone.num_heads,
        num_layers=backbone.num_layers,
        dropout=dropout,
        normalize_first=True,
        final_norm=True,
        activation=gelu_approximate,
        layer_norm_epsilon=1e-5,
    )
    source = backbone.get_layer  # keras-hub's layer names, stable across its releases
    table = np.asarray(source("token_embedding").embeddings)
    embedding = model.token_embedding
    embedding.token_embedding.set_weights([np.concatenate([np.zeros((ID_OFFSET, table.shape[1]), table.dtype), table])])
    embedding.position_embedding.set_weights([np.asarray(source("position_embedding").position_embeddings)[:length]])
    for index, block in enumerate(model.decoder_blocks):
        block.set_weights(source(f"transformer_layer_{index}").get_weights())
    model.final_norm.set_weights(source("layer_norm").get_weights())
    bias = np.zeros(backbone.vocabulary_size + ID_OFFSET, dtype="float32")
    bias[:ID_OFFSET] = -1e9  # padding is never predicted
    model.output_layer.set_weights([bias])
    return model


def bpe_from_keras_hub(tokenizer) -> BytePairEncoding:
    """The course's byte-level BPE with a keras-hub ``GPT2Tokenizer``'s vocabulary and merges.

    Args:
        tokenizer: a ``keras_hub.tokenizers.GPT2Tokenizer`` (its ``vocabulary`` dict and
            ``merges`` list).

    Returns:
        :class:`~transformer_course.bpe.BytePairEncoding` giving GPT-2's ids + 1, with
        ``"<|endoftext|>"`` as a special token.
    """
    vocabulary = tokenizer.vocabulary
    if not isinstance(vocabulary, dict):
        vocabulary = {token: index for index, token in enumerate(vocabulary)}
    return BytePairEncoding.from_vocabulary_and_merges(
        vocabulary, list(tokenizer.merges), special_tokens=["<|endoftext|>"], id_offset=ID_OFFSET
    )


def load_gpt2_preset(preset: str = "gpt2_base_en", sequence_length: int | None = None, dropout: float = 0.0):
    """Download a keras-hub GPT-2 preset and convert it: the course's model and tokenizer.

    Args:
        preset: a keras-hub GPT-2 preset name (``"gpt2_base_en"``) or a local preset folder.
        sequence_length, dropout: as :func:`language_model_from_keras_hub`.

    Returns:
        ``(model, bpe)``: the converted ``keras.Model`` and the course's
        :class:`~transformer_course.bpe.BytePairEncoding` with GPT-2's merges (ids + 1).

    Raises:
        PresetUnavailableError: keras-hub is not installed, or the preset cannot be downloaded.
    """
    backbone, tokenizer = download_preset(preset, "GPT2Backbone", "GPT2Tokenizer")
    return language_model_from_keras_hub(backbone, sequence_length, dropout), bpe_from_keras_hub(tokenizer)
