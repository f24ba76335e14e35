"""Published BERT checkpoints inside the course's own BERT-style model (notebook 08).

:func:`bert_pretrainer_from_keras_hub` copies the weights of a keras-hub ``BertBackbone`` into a
model built by :class:`~transformer_course.bert.BertPretrainer`, layer for layer:

=====================================  ==========================================
keras-hub ``BertBackbone``             the course's pretrainer
=====================================  ==========================================
``token_embedding``                    ``token_embedding`` (its token table)
``position_embedding``                 ``token_embedding`` (its position table)
``segment_embedding``                  ``segment_embedding``
``embeddings_layer_norm``              ``embedding_norm``
``transformer_layer_0`` …              ``encoder_1`` … (post-norm blocks, same weight order)
``pooled_dense``                       ``pooler``
=====================================  ==========================================

The blocks use the tanh approximation of GELU, as Google's checkpoints do. A backbone preset
holds no masked-LM or next-sentence head: those layers of the converted model keep their fresh
initialisation (fine-tune or probe the encoder; do not read its fill-in-the-blank answers).

:func:`load_bert_preset` downloads a preset (``"bert_tiny_en_uncased"``: Turc et al., 2019,
*Well-Read Students Learn Better*; 2 layers, width 128, 2 heads, 4,385,920 parameters) and its
WordPiece vocabulary. It needs keras-hub and the network; offline it raises
:class:`PresetUnavailableError`, which a notebook catches to say so in one line.

Source: Devlin et al., 2019, "BERT", §3; keras-hub's ``BertBackbone``.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import numpy as np

from ._presets import PresetUnavailableError, download_preset
from .bert import BertPretrainer
from .transformer import gelu_approximate

__all__ = ["bert_pretrainer_from_keras_hub", "load_bert_preset", "download_preset", "PresetUnavailableError"]


def bert_pretrainer_from_keras_hub(
    backbone, max_predictions: int = 20, sequence_length: int | None = None, dropout: float = 0.0
) -> BertPretrainer:
    """The course's BERT-style pretrainer holding the weights of a keras-hub ``BertBackbone``.

    Args:
        backbone: a built ``keras_hub.models.BertBackbone`` (from a preset or built by hand) with
            two segments.
        max_predictions: int P, masked positions the (untrained) masked-LM head scores.
        sequence_length: int T, the longest input; defaults to the backbone's
            ``max_sequence_length`` (the first T position embeddings are kept).
        dropout: float in [0, 1), the converted model's dropout.

    Returns:
        ``keras.Model`` as :class:`~transformer_course.bert.BertPretrainer` builds it
        (with the next-sentence head), whose encoder and pooler equal the backbone's: on the
        same ``token_ids`` and ``segment_ids``, with padding id 0, its encoder outputs equal the
        backbone's ``sequence_output`` at every real position, and its pooler the backbone's
        ``pooled_output``.

    Raises:
        ValueError: for a backbone whose segments are not two, or a ``sequence_length`` longer
            than the backbone's position table.

    Example:
        >>> import keras_hub  # doctest: +SKIP
        >>> backbone = keras_hub.models.BertBackbone(vocabulary_size=100, num_layers=2, num_heads=2,
        ...     hidden_dim=16, intermediate_dim=32, max_sequence_length=24)  # doctest: +SKIP
        >>> model = bert_pretrainer_from_keras_hub(backbone, max_predictions=4)  # doctest: +SKIP
    """
    if backbone.num_segments != 2:
        raise ValueError(f"`backbone` must have 2 segments, as the course's model; it has {backbone.num_segments}.")
    length = backbone.max_sequence_length if sequence_length is None else int(sequence_length)
    if not 0 < length <= backbone.max_sequence_length:
        raise ValueError(
            f"`sequence_length` must be in [1, {backbone.max_sequence_length}] (the backbone's position "
            f"table); received {sequence_length!r}."
        )
    model = BertPretrainer(
        backbone.vocabulary_size,
        length,
        max_predictions,
        embed_dim=backbone.hidden_dim,
        num_heads=backbone.num_heads,
        intermediate_dim=backbone.intermediate_dim,
        num_layers=backbone.num_layers,
        dropout=dropout,
        activation=gelu_approximate,
    )
    source = backbone.get_layer  # keras-hub's layer names, stable across its releases
    model.token_embedding.token_embedding.set_weights([np.asarray(source("token_embedding").embeddings)])
    model.token_embedding.position_embedding.set_weights(
        [np.asarray(source("position_embedding").position_embeddings)[:length]]
    )
    model.segment_embedding.set_weights(source("segment_embedding").get_weights())
    model.embedding_norm.set_weights(source("embeddings_layer_norm").get_weights())
    for index, block in enumerate(model.encoder_blocks):
        block.set_weights(source(f"transformer_layer_{index}").get_weights())
    model.pooler.set_weights(source("pooled_dense").get_weights())
    return model


def load_bert_preset(
    preset: str = "bert_tiny_en_uncased",
    max_predictions: int = 20,
    sequence_length: int | None = None,
    dropout: float = 0.0,
):
    """Download a keras-hub BERT preset and convert it: the model, and its WordPiece vocabulary.

    Args:
        preset: a keras-hub BERT preset name (e.g. ``"bert_tiny_en_uncased"``) or a local preset
            folder.
        max_predictions, sequence_length, dropout: as :func:`bert_pretrainer_from_keras_hub`.

    Returns:
        ``(model, tokenizer)``: the converted ``keras.Model`` and keras-hub's ``BertTokenizer``
        for the preset (its ``vocabulary``: ``[PAD]`` = 0, as the course's padding).

    Raises:
        PresetUnavailableError: keras-hub is not installed, or the preset cannot be downloaded
            (offline); the message names the preset and the cause.
    """
    backbone, tokenizer = download_preset(preset, "BertBackbone", "BertTokenizer")
    return bert_pretrainer_from_keras_hub(backbone, max_predictions, sequence_length, dropout), tokenizer
