import keras
import numpy as np
import pytest
from layer_checks import to_numpy

from transformer_course.seq2seq_attention import BahdanauAttention, LuongDotAttention, LuongGeneralAttention

LAYERS = {
    "dot": lambda: LuongDotAttention(),
    "general": lambda: LuongGeneralAttention(),
    "bahdanau": lambda: BahdanauAttention(units=5),
}


@pytest.fixture
def inputs():
    generator = np.random.default_rng(0)
    query = generator.normal(size=(3, 4)).astype("float32")  # (B, H)
    value = generator.normal(size=(3, 6, 4)).astype("float32")  # (B, S, H)
    mask = np.ones((3, 6), bool)
    mask[0, 4:] = False  # the first sequence has 4 real tokens
    mask[1, 1:] = False  # the second has 1
    return query, value, mask


@pytest.mark.parametrize("kind", LAYERS)
def test_shapes_and_weights_sum_to_one(kind, inputs):
    query, value, _ = inputs
    context, weights = LAYERS[kind]()(query, value)
    assert tuple(context.shape) == (3, 4) and tuple(weights.shape) == (3, 6)
    np.testing.assert_allclose(to_numpy(weights).sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(to_numpy(context), np.einsum("bs,bsh->bh", to_numpy(weights), value), atol=1e-5)


@pytest.mark.parametrize("kind", LAYERS)
def test_masked_positions_get_exactly_zero_weight(kind, inputs):
    query, value, mask = inputs
    context, weights = LAYERS[kind]()(query, value, mask=mask)
    weights = to_numpy(weights)
    assert (weights[~mask] == 0).all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose(weights[1, 0], 1.0)  # one real token takes all the weight
    # Changing what sits at masked positions changes nothing.
    changed = value.copy()
    changed[~mask] = 100.0
    layer = LAYERS[kind]()
    first, _ = layer(query, value, mask=mask)
    second, _ = layer(query, changed, mask=mask)
    np.testing.assert_allclose(to_numpy(first), to_numpy(second), atol=1e-5)


def test_fully_masked_row_gives_zero_weights_and_context(inputs):
    query, value, mask = inputs
    mask[2] = False
    context, weights = LuongDotAttention()(query, value, mask=mask)
    assert (to_numpy(weights)[2] == 0).all() and (to_numpy(context)[2] == 0).all()


def test_dot_score_equals_numpy_reference(inputs):
    query, value, _ = inputs
    scores = np.einsum("bh,bsh->bs", query, value)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    _, weights = LuongDotAttention()(query, value)
    np.testing.assert_allclose(to_numpy(weights), expected, atol=1e-6)


def test_general_score_equals_numpy_reference(inputs):
    query, value, _ = inputs
    layer = LuongGeneralAttention()
    _, weights = layer(query, value)
    W = to_numpy(layer.W_a.kernel)  # (H, Q)
    scores = np.einsum("bq,bsq->bs", query, value @ W)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(to_numpy(weights), expected / expected.sum(-1, keepdims=True), atol=1e-6)


def test_bahdanau_score_equals_numpy_reference(inputs):
    query, value, _ = inputs
    layer = BahdanauAttention(units=5)
    _, weights = layer(query, value)
    W, U, v = (to_numpy(d.kernel) for d in (layer.W_a, layer.U_a, layer.v_a))
    scores = (np.tanh((query @ W)[:, None, :] + value @ U) @ v)[..., 0]
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(to_numpy(weights), expected / expected.sum(-1, keepdims=True), atol=1e-6)


def test_general_and_bahdanau_accept_different_query_and_value_widths():
    query, value = np.ones((2, 3), "float32"), np.ones((2, 5, 7), "float32")
    for layer in (LuongGeneralAttention(), BahdanauAttention(units=4)):
        context, _ = layer(query, value)
        assert tuple(context.shape) == (2, 7)
    with pytest.raises(ValueError, match="same width"):
        LuongDotAttention()(query, value)


@pytest.mark.parametrize("kind", LAYERS)
def test_keras_file_round_trip(kind, inputs, tmp_path):
    query, value, mask = inputs
    query_input = keras.Input((4,))
    value_input = keras.Input((6, 4))
    mask_input = keras.Input((6,), dtype="bool")
    outputs = LAYERS[kind]()(query_input, value_input, mask=mask_input)
    model = keras.Model([query_input, value_input, mask_input], outputs)
    model.save(tmp_path / "attention.keras")
    restored = keras.models.load_model(tmp_path / "attention.keras")
    for original, loaded in zip(model([query, value, mask]), restored([query, value, mask])):
        np.testing.assert_allclose(to_numpy(loaded), to_numpy(original), atol=1e-6)


@pytest.mark.parametrize("kind", LAYERS)
def test_rank_errors_name_the_argument(kind):
    layer = LAYERS[kind]()
    with pytest.raises(ValueError, match="`query` must have shape"):
        layer(np.ones((2, 3, 4), "float32"), np.ones((2, 5, 4), "float32"))
    with pytest.raises(ValueError, match="`value` must have shape"):
        layer(np.ones((2, 4), "float32"), np.ones((2, 4), "float32"))
    with pytest.raises(ValueError, match="`mask` must have shape"):
        layer(np.ones((2, 4), "float32"), np.ones((2, 5, 4), "float32"), mask=np.ones((2, 5, 1), bool))


def test_bahdanau_units_are_validated():
    with pytest.raises(ValueError, match="`units` must be a positive integer; received 0"):
        BahdanauAttention(units=0)
