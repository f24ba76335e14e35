import keras
import numpy as np
import pytest

from transformer_course.positional import PositionalEmbedding
from transformer_course.transformer import TransformerEncoder

E, F, N = 16, 32, 4


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _mask_of(x):
    return keras.src.backend.get_keras_mask(x)


@pytest.fixture
def features():
    return np.random.default_rng(0).normal(size=(2, 6, E)).astype("float32")


@pytest.mark.parametrize("norm_first", [False, True])
def test_shape_and_parameter_count(features, norm_first):
    encoder = TransformerEncoder(intermediate_dim=F, num_heads=N, norm_first=norm_first)
    assert tuple(encoder(features).shape) == features.shape
    # attention 4(E*E + E), two LayerNorms 2*2E, feed-forward E*F + F + F*E + E
    assert encoder.count_params() == 4 * (E * E + E) + 4 * E + (E * F + F) + (F * E + E)


def test_heads_must_divide_the_width(features):
    with pytest.raises(ValueError, match="`num_heads`=5 must divide the input width 16"):
        TransformerEncoder(intermediate_dim=F, num_heads=5)(features)
    with pytest.raises(ValueError, match="`intermediate_dim` must be a positive integer"):
        TransformerEncoder(intermediate_dim=0, num_heads=2)
    with pytest.raises(ValueError, match="`dropout` must be in"):
        TransformerEncoder(intermediate_dim=F, num_heads=2, dropout=1.5)


def test_padding_mask_propagates_and_matches_an_explicit_one():
    tokens = np.array([[4, 5, 6, 0, 0, 0], [7, 8, 9, 3, 2, 1]])
    embedding = PositionalEmbedding(sequence_length=6, vocab_size=10, embed_dim=E)
    encoder = TransformerEncoder(intermediate_dim=F, num_heads=N)
    from_mask_zero = encoder(embedding(tokens))
    np.testing.assert_array_equal(_numpy(_mask_of(from_mask_zero)), tokens != 0)
    plain = _numpy(embedding(tokens))  # a NumPy copy carries no Keras mask
    explicit = encoder(plain, padding_mask=tokens != 0)
    np.testing.assert_allclose(_numpy(explicit)[tokens != 0], _numpy(from_mask_zero)[tokens != 0], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_adding_padding_changes_nothing_for_real_tokens(norm_first):
    embedding = PositionalEmbedding(sequence_length=8, vocab_size=10, embed_dim=E)
    encoder = TransformerEncoder(intermediate_dim=F, num_heads=N, norm_first=norm_first)
    short = encoder(embedding(np.array([[4, 5, 6]])))
    padded = encoder(embedding(np.array([[4, 5, 6, 0, 0, 0, 0, 0]])))
    np.testing.assert_allclose(_numpy(padded)[:, :3], _numpy(short), atol=1e-5)


def test_round_trip(tmp_path, features):
    inputs = keras.Input((6, E))
    model = keras.Model(inputs, TransformerEncoder(intermediate_dim=F, num_heads=N, dropout=0.1, norm_first=True)(inputs))
    model.save(tmp_path / "encoder.keras")
    restored = keras.models.load_model(tmp_path / "encoder.keras")
    np.testing.assert_allclose(_numpy(restored(features)), _numpy(model(features)), atol=1e-6)
    assert restored.layers[-1].get_config()["norm_first"] is True


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("with_padding", [False, True])
def test_equal_to_keras_hub(features, norm_first, with_padding):
    keras_hub = pytest.importorskip("keras_hub")
    reference = keras_hub.layers.TransformerEncoder(intermediate_dim=F, num_heads=N, normalize_first=norm_first)
    ours = TransformerEncoder(intermediate_dim=F, num_heads=N, norm_first=norm_first)
    reference(features)
    ours(features)
    assert [w.shape for w in ours.get_weights()] == [w.shape for w in reference.get_weights()]
    ours.set_weights(reference.get_weights())
    padding = np.array([[True] * 4 + [False] * 2, [True] * 6]) if with_padding else None
    expected = _numpy(reference(features, padding_mask=padding))
    got = _numpy(ours(features, padding_mask=padding))
    np.testing.assert_allclose(got, expected, atol=1e-5)
