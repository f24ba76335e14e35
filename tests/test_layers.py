"""Every layer the package registers passes the shared checks of ``layer_checks.py``.

A new layer needs an entry in ``EXAMPLES``: ``test_every_registered_layer_has_an_example`` fails
until it has one.
"""

import inspect

import keras
import numpy as np
import pytest
from layer_checks import check_layer, subject_modules

from transformer_course import (
    attention,
    bert,
    classifier,
    positional,
    seq2seq,
    seq2seq_attention,
    transformer,
    vision,
)

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

B, T, S, E, V = 2, 5, 4, 8, 11
rng = np.random.default_rng(0)
FEATURES = rng.normal(size=(B, T, E)).astype("float32")
SOURCE = rng.normal(size=(B, S, E)).astype("float32")
IDS = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5]], dtype="int32")
STATES = (rng.normal(size=(B, E)).astype("float32"), rng.normal(size=(B, E)).astype("float32"))

# class -> (make the layer, positional inputs, call keyword arguments)
EXAMPLES = {
    attention.MultiHeadAttention: (lambda: attention.MultiHeadAttention(2, 4), (FEATURES, SOURCE), {}),
    classifier.MaskedGlobalMaxPooling1D: (classifier.MaskedGlobalMaxPooling1D, (FEATURES,), {}),
    classifier.PrependClassToken: (lambda: classifier.PrependClassToken(7), (IDS,), {}),
    classifier.ClassTokenOutput: (classifier.ClassTokenOutput, (FEATURES,), {}),
    positional.PositionalEmbedding: (lambda: positional.PositionalEmbedding(T, V, E), (IDS,), {}),
    positional.RelativePositionBias: (lambda: positional.RelativePositionBias(2, 3),
                                      (rng.normal(size=(B, 2, T, T)).astype("float32"),), {}),
    bert.SegmentEmbedding: (lambda: bert.SegmentEmbedding(2, E), (FEATURES, (IDS > 2).astype("int32")),
                                   {}),
    bert.GatherPositions: (bert.GatherPositions, ((FEATURES, np.array([[0, 2], [1, 4]], "int32")),),
                                  {}),
    bert.SpanHead: (bert.SpanHead, (FEATURES,), {}),
    seq2seq.LSTMDecoder: (lambda: seq2seq.LSTMDecoder(units=E, n_features=V, output_length=3), (STATES,), {}),
    seq2seq.AttentionLSTMDecoder: (lambda: seq2seq.AttentionLSTMDecoder(units=E, n_features=V, output_length=3),
                                   (SOURCE, STATES), {}),
    seq2seq_attention.LuongDotAttention: (seq2seq_attention.LuongDotAttention, (STATES[0], SOURCE), {}),
    seq2seq_attention.LuongGeneralAttention: (seq2seq_attention.LuongGeneralAttention, (STATES[0], SOURCE), {}),
    seq2seq_attention.BahdanauAttention: (lambda: seq2seq_attention.BahdanauAttention(6), (STATES[0], SOURCE), {}),
    transformer.TransformerEncoder: (lambda: transformer.TransformerEncoder(16, 2), (FEATURES,), {}),
    transformer.TransformerDecoder: (lambda: transformer.TransformerDecoder(16, 2), (FEATURES, SOURCE), {}),
    transformer.TokenDistribution: (lambda: transformer.TokenDistribution(V), (FEATURES,), {}),
    transformer.TiedTokenDistribution: (lambda: transformer.TiedTokenDistribution(V),
                                        (rng.normal(size=(B, T, V)).astype("float32"),), {}),
    vision.PatchEmbedding: (lambda: vision.PatchEmbedding(patch_size=2, embed_dim=E),
                            (rng.normal(size=(B, 4, 4, 1)).astype("float32"),), {}),
    vision.ClassTokenAndPositions: (vision.ClassTokenAndPositions, (FEATURES,), {}),
}


def _registered_layers():
    """Every public Layer (not Model) class of the subject modules that the package registers for ``.keras`` files."""
    found = set()
    for module in subject_modules():
        for name, value in vars(module).items():
            if (inspect.isclass(value) and value.__module__ == module.__name__ and not name.startswith("_")
                    and issubclass(value, keras.layers.Layer) and not issubclass(value, keras.Model)
                    and keras.saving.get_registered_object(keras.saving.get_registered_name(value)) is value):
                found.add(value)
    return found


def test_every_registered_layer_has_an_example():
    missing = sorted(layer.__name__ for layer in _registered_layers() - set(EXAMPLES))
    assert not missing, f"add these layers to EXAMPLES: {missing}"


@pytest.mark.parametrize("layer_class", list(EXAMPLES), ids=lambda layer_class: layer_class.__name__)
def test_layer_passes_the_shared_checks(layer_class, tmp_path):
    make_layer, inputs, call_kwargs = EXAMPLES[layer_class]
    check_layer(make_layer, inputs, call_kwargs, tmp_path)
