import math

import numpy as np
import pytest
from layer_checks import to_numpy

from transformer_course.attention import MultiHeadAttention
from transformer_course.masks import keras_mask
from transformer_course.positional import PositionalEmbedding, RelativePositionBias, sinusoidal_encoding


def test_sinusoidal_values_by_hand():
    table = sinusoidal_encoding(50, 128)
    assert table.shape == (50, 128) and table.dtype == np.float32
    np.testing.assert_allclose(table[0, :6], [0, 1, 0, 1, 0, 1])
    small = sinusoidal_encoding(3, 4)  # frequencies 1 and 1/100
    np.testing.assert_allclose(small[1], [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)], atol=1e-7)
    np.testing.assert_allclose(small[2], [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)], atol=1e-7)
    assert np.abs(table).max() <= 1.0


def test_sinusoidal_arguments_are_checked():
    with pytest.raises(ValueError, match="`depth` must be even"):
        sinusoidal_encoding(10, 5)
    with pytest.raises(ValueError, match="`length` must be a positive integer"):
        sinusoidal_encoding(0, 4)


def test_positional_embedding_sums_token_and_position():
    layer = PositionalEmbedding(sequence_length=6, vocabulary_size=10, embed_dim=4)
    tokens = np.array([[3, 3, 0, 0], [5, 1, 2, 0]])
    output = to_numpy(layer(tokens))
    token_table = to_numpy(layer.token_embedding.embeddings)
    position_table = to_numpy(layer.position_embedding.embeddings)
    np.testing.assert_allclose(output, token_table[tokens] + position_table[:4], atol=1e-6)
    assert not np.allclose(output[0, 0], output[0, 1])  # same token, different positions


def test_positional_embedding_padding_mask_reaches_attention():
    tokens = np.array([[3, 4, 0, 0], [5, 1, 2, 7]])
    embedded = PositionalEmbedding(sequence_length=4, vocabulary_size=10, embed_dim=8)(tokens)
    np.testing.assert_array_equal(to_numpy(keras_mask(embedded)), tokens != 0)
    _, weights = MultiHeadAttention(num_heads=2, key_dim=4)(embedded, embedded, return_attention_scores=True)
    assert to_numpy(weights)[0, :, :2, 2:].max() < 1e-6
    unmasked = PositionalEmbedding(sequence_length=4, vocabulary_size=10, embed_dim=8, mask_zero=False)(tokens)
    assert keras_mask(unmasked) is None


def test_positional_embedding_refuses_bad_sizes_and_sequences_longer_than_its_table():
    with pytest.raises(ValueError, match="sequence_length=5"):
        PositionalEmbedding(5, 20, 8)(np.ones((1, 6), "int32"))
    with pytest.raises(ValueError, match="`embed_dim`"):
        PositionalEmbedding(5, 20, 0)


def test_relative_bias_depends_only_on_the_clipped_offset():
    layer = RelativePositionBias(num_heads=2, max_distance=2)
    layer.table.assign(np.arange(10, dtype="float32").reshape(2, 5))  # head 0: offsets -2..2 -> 0..4
    bias = to_numpy(layer.bias(4))
    assert bias.shape == (2, 4, 4)
    scores = np.ones((3, 2, 4, 4), "float32")
    np.testing.assert_allclose(to_numpy(layer(scores)), scores + bias[None])
    np.testing.assert_array_equal(bias[0], [[2, 3, 4, 4], [1, 2, 3, 4], [0, 1, 2, 3], [0, 0, 1, 2]])
    np.testing.assert_array_equal(bias[1], bias[0] + 5)
