"""Patches and attention rollout for the Vision Transformer."""

import keras
import numpy as np
import pytest

from transformer_course.vision import attention_rollout, extract_patches


@pytest.mark.parametrize("shape, patch_size", [((2, 8, 8, 1), 2), ((1, 8, 8, 1), 4), ((3, 6, 9, 3), 3), ((1, 8, 8, 1), 1)])
def test_patches_equal_keras_extract_patches(shape, patch_size):
    images = np.random.default_rng(0).normal(size=shape).astype("float32")
    ours = extract_patches(images, patch_size)
    theirs = keras.ops.convert_to_numpy(keras.ops.image.extract_patches(images, patch_size))
    np.testing.assert_array_equal(ours, theirs.reshape(shape[0], -1, theirs.shape[-1]))


def test_bad_images_get_a_clear_error():
    with pytest.raises(ValueError, match=r"shape \(batch, height, width, channels\); received shape \(8, 8\)"):
        extract_patches(np.zeros((8, 8)), 2)
    with pytest.raises(ValueError, match="width 9 is not divisible by `patch_size` 2"):
        extract_patches(np.zeros((1, 8, 9, 1)), 2)


def test_rollout_rows_sum_to_one_and_identity_attention_rolls_out_to_identity():
    generator = np.random.default_rng(1)
    weights = generator.random((3, 2, 4, 5, 5))
    weights /= weights.sum(-1, keepdims=True)
    rollout = attention_rollout(weights)
    assert rollout.shape == (2, 5, 5)
    np.testing.assert_allclose(rollout.sum(-1), 1.0, atol=1e-12)
    identity = np.broadcast_to(np.eye(5), (2, 2, 4, 5, 5))
    np.testing.assert_allclose(attention_rollout(identity), np.broadcast_to(np.eye(5), (2, 5, 5)), atol=1e-12)


def test_rollout_of_one_layer_is_the_residual_mix_by_hand():
    weights = np.array([[[[0.5, 0.5], [0.2, 0.8]]]])  # 1 layer, 1 example, 1 head, T = 2
    expected = (weights[0, 0] + np.eye(2)) / 2  # (A + I), rows renormalised (each row of A + I sums to 2)
    np.testing.assert_allclose(attention_rollout(weights[None])[0], expected, atol=1e-12)
