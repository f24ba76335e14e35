"""Our MultiHeadAttention against keras.layers.MultiHeadAttention, number for number."""

import keras
import numpy as np
import pytest
from layer_checks import to_numpy

from transformer_course.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer_course.masks import attention_mask, causal_mask, keras_mask

B, T, S, E, N = 2, 5, 7, 8, 2


@pytest.fixture
def data():
    generator = np.random.default_rng(0)
    query = generator.normal(size=(B, T, E)).astype("float32")
    value = generator.normal(size=(B, S, E)).astype("float32")
    query_padding = np.array([[True] * T, [True] * 3 + [False] * 2])
    value_padding = np.array([[True] * 5 + [False] * 2, [True] * S])
    return query, value, query_padding, value_padding


def _pair(query, value, **kwargs):
    keras.utils.set_random_seed(1)
    reference = keras.layers.MultiHeadAttention(num_heads=N, key_dim=E // N, **kwargs)
    ours = MultiHeadAttention(num_heads=N, key_dim=E // N, **kwargs)
    reference(query, value)
    ours(query, value)
    assert [w.shape for w in ours.get_weights()] == [w.shape for w in reference.get_weights()]
    ours.set_weights(reference.get_weights())
    return reference, ours


@pytest.mark.parametrize("with_scores", [False, True], ids=["fused", "explicit"])
@pytest.mark.parametrize("masking", ["none", "padding", "causal", "padding+causal"])
def test_equal_to_keras(data, masking, with_scores):
    query, value, query_padding, value_padding = data
    if "causal" in masking:
        value = query  # self-attention: T == S
        value_padding = query_padding
    reference, ours = _pair(query, value)
    mask = None
    if "padding" in masking:
        mask = to_numpy(attention_mask(query_padding, value_padding))
    causal = "causal" in masking
    expected = reference(
        query, value, attention_mask=mask, use_causal_mask=causal, return_attention_scores=with_scores
    )  # the same code path in both
    got = ours(
        query,
        value,
        query_mask=query_padding if mask is not None else None,
        value_mask=value_padding if mask is not None else None,
        use_causal_mask=causal,
        return_attention_scores=with_scores,
    )
    # Rows of padded queries attend to nothing. Ours gives them zero weights (the mask contract);
    # so does Keras from 3.10 on, but Keras 3.8 spreads them evenly over the keys. On such a Keras
    # only the rows of real queries are compared; they must agree exactly on every version.
    compared = slice(None)
    if "padding" in masking and not _keras_zeroes_fully_masked_rows():
        compared = query_padding  # (B, T): real queries only
    if with_scores:
        np.testing.assert_allclose(
            np.moveaxis(to_numpy(got[1]), 1, 2)[compared], np.moveaxis(to_numpy(expected[1]), 1, 2)[compared], atol=1e-5
        )
        got, expected = got[0], expected[0]
    np.testing.assert_allclose(to_numpy(got)[compared], to_numpy(expected)[compared], atol=1e-5)


def _keras_zeroes_fully_masked_rows() -> bool:
    """Whether Keras' masked softmax gives a row with no allowed position all zeros (Keras >= 3.10)."""
    row = keras.layers.Softmax()(np.zeros((1, 2), "float32"), mask=np.array([[False, False]]))
    return bool(np.all(to_numpy(row) == 0))


def test_equal_to_keras_with_an_explicit_attention_mask_and_a_separate_key(data):
    query, value, _, _ = data
    key = np.random.default_rng(5).normal(size=(B, S, E)).astype("float32")
    mask = np.random.default_rng(6).random((B, T, S)) > 0.3
    mask[..., 0] = True
    reference, ours = _pair(query, value)
    expected = reference(query, value, key=key, attention_mask=mask, return_attention_scores=True)
    got = ours(query, value, key=key, attention_mask=mask, return_attention_scores=True)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(to_numpy(a), to_numpy(b), atol=1e-5)


def test_masked_keys_and_future_positions_get_no_weight(data):
    query, _, query_padding, _ = data
    _, ours = _pair(query, query)
    _, weights = ours(
        query,
        query,
        query_mask=query_padding,
        value_mask=query_padding,
        use_causal_mask=True,
        return_attention_scores=True,
    )
    weights = to_numpy(weights)  # (B, N, T, S)
    future = ~np.tril(np.ones((T, T), bool))
    assert weights[:, :, future].max() < 1e-6
    padded_keys = ~query_padding[:, None, None, :] & query_padding[:, None, :, None]  # real queries only
    assert weights[np.broadcast_to(padded_keys, weights.shape)].max() < 1e-6


def test_changing_a_future_token_never_changes_earlier_outputs(data):
    query, *_ = data
    _, ours = _pair(query, query)
    changed = query.copy()
    changed[:, 3:] += 10.0
    before = to_numpy(ours(query, query, use_causal_mask=True))
    after = to_numpy(ours(changed, changed, use_causal_mask=True))
    np.testing.assert_allclose(after[:, :3], before[:, :3], atol=1e-5)
    assert not np.allclose(after[:, 3:], before[:, 3:])


def test_keras_masks_from_mask_zero_are_used():
    tokens = np.array([[3, 4, 5, 0, 0], [6, 7, 8, 9, 1]])
    embedding = keras.layers.Embedding(10, E, mask_zero=True)
    reference, ours = _pair(embedding(tokens), embedding(tokens))
    embedded = embedding(tokens)  # a fresh tensor: Keras' layer clears the masks of its inputs
    _, weights = ours(embedded, embedded, return_attention_scores=True)
    assert to_numpy(weights)[0, :, :3, 3:].max() < 1e-6  # real queries never look at padding
    output = ours(embedded, embedded)
    np.testing.assert_array_equal(to_numpy(keras_mask(output)), tokens != 0)
    fresh = embedding(tokens)
    np.testing.assert_allclose(to_numpy(output), to_numpy(reference(fresh, fresh)), atol=1e-5)


def test_scaled_dot_product_attention_matches_a_loop():
    generator = np.random.default_rng(2)
    q, k, v = (generator.normal(size=shape).astype("float32") for shape in ((3, 4), (5, 4), (5, 2)))
    expected_weights = np.zeros((3, 5))
    for t in range(3):
        scores = np.array([q[t] @ k[s] / 2.0 for s in range(5)])  # √d_k = 2
        expected_weights[t] = np.exp(scores) / np.exp(scores).sum()
    output, weights = scaled_dot_product_attention(q, k, v)
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-6)
    np.testing.assert_allclose(to_numpy(output), expected_weights @ v, atol=1e-5)
    _, masked = scaled_dot_product_attention(q, k, v, mask=to_numpy(causal_mask(3, 5)))
    assert to_numpy(masked)[0, 1:].max() < 1e-6


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(num_heads=0, key_dim=4), "`num_heads`"),
        (dict(num_heads=2, key_dim=-1), "`key_dim`"),
        (dict(num_heads=2, key_dim=4, dropout=1.0), "`dropout` must be in"),
    ],
)
def test_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**arguments)


def test_bad_ranks():
    with pytest.raises(ValueError, match="`query` must have shape"):
        MultiHeadAttention(num_heads=2, key_dim=4)(np.ones((2, 8), "float32"), np.ones((2, 3, 8), "float32"))
    with pytest.raises(ValueError, match="same last dimension"):
        scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 3)), np.ones((5, 2)))
