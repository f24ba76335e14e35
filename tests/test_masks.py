import keras
import numpy as np
import pytest

from transformer_course.masks import attention_mask, causal_mask, combine_masks, padding_mask


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_padding_mask_marks_real_tokens():
    np.testing.assert_array_equal(_numpy(padding_mask(np.array([[5, 3, 0, 0]]))), [[True, True, False, False]])


def test_causal_mask_is_lower_triangular():
    np.testing.assert_array_equal(_numpy(causal_mask(3)), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    assert _numpy(causal_mask(2, 4)).tolist() == [[True, False, False, False], [True, True, False, False]]
    with pytest.raises(ValueError, match="`query_length` must be a positive integer"):
        causal_mask(0)


def test_attention_mask_combines_with_and():
    query = np.array([[True, True, False]])
    key = np.array([[True, False, True, True]])
    mask = _numpy(attention_mask(query, key))
    assert mask.shape == (1, 3, 4)
    np.testing.assert_array_equal(mask[0], [[1, 0, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]])
    causal = _numpy(attention_mask(query, query, causal=True))
    np.testing.assert_array_equal(causal[0], [[1, 0, 0], [1, 1, 0], [0, 0, 0]])
    assert attention_mask() is None
    with pytest.raises(ValueError, match="needs `query_padding_mask`"):
        attention_mask(causal=True)


def test_combine_masks_skips_none():
    assert combine_masks(None, None) is None
    np.testing.assert_array_equal(_numpy(combine_masks(np.array([1, 1, 0]), None, np.array([1, 0, 1]))), [1, 0, 0])
