import keras
import numpy as np
import pytest
from layer_checks import to_numpy

from transformer_course.masks import attention_mask, causal_mask, combine_masks, padding_mask


def test_padding_mask_marks_real_tokens():
    np.testing.assert_array_equal(to_numpy(padding_mask(np.array([[5, 3, 0, 0]]))), [[True, True, False, False]])


def test_causal_mask_is_lower_triangular():
    np.testing.assert_array_equal(to_numpy(causal_mask(3)), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert to_numpy(causal_mask(2, 4)).tolist() == [[True, False, False, False], [True, True, False, False]]
    with pytest.raises(ValueError, match="`query_length` must be a positive integer"):
        causal_mask(0)


def test_attention_mask_combines_with_and():
    query = np.array([[True, True, False]])
    key = np.array([[True, False, True, True]])
    mask = to_numpy(attention_mask(query, key))
    assert mask.shape == (1, 3, 4)
    np.testing.assert_array_equal(mask[0], [[1, 0, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]])
    causal = to_numpy(attention_mask(query, query, causal=True))
    np.testing.assert_array_equal(causal[0], [[1, 0, 0], [1, 1, 0], [0, 0, 0]])
    assert attention_mask() is None
    with pytest.raises(ValueError, match="needs `query_padding_mask`"):
        attention_mask(causal=True)


def test_combine_masks_skips_none():
    assert combine_masks(None, None) is None
    np.testing.assert_array_equal(to_numpy(combine_masks(np.array([1, 1, 0]), None, np.array([1, 0, 1]))), [1, 0, 0])


def test_masked_softmax_zeroes_masked_positions_and_fully_masked_rows():
    from transformer_course.masks import masked_softmax

    scores = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [5.0, -5.0, 0.0]], "float32")
    mask = np.array([[True, True, False], [False, False, False], [True, True, True]])
    weights = keras.ops.convert_to_numpy(masked_softmax(scores, mask))
    expected_first = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    np.testing.assert_allclose(weights[0], [*expected_first, 0.0], atol=1e-6)
    np.testing.assert_array_equal(weights[1], [0.0, 0.0, 0.0])  # nothing allowed: no weight anywhere
    np.testing.assert_allclose(weights[2], np.exp(scores[2]) / np.exp(scores[2]).sum(), atol=1e-6)


def test_masked_softmax_keeps_float16_finite():
    from transformer_course.masks import masked_softmax

    scores = keras.ops.convert_to_tensor(np.array([[1.0, 2.0, 3.0]], "float16"))
    weights = masked_softmax(scores, np.array([[True, False, True]]))
    assert keras.backend.standardize_dtype(weights.dtype) == "float16"
    weights = keras.ops.convert_to_numpy(weights).astype("float32")
    assert np.all(np.isfinite(weights)) and weights[0, 1] == 0.0
    np.testing.assert_allclose(weights.sum(), 1.0, atol=1e-3)
