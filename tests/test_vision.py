"""Patches and attention rollout for the Vision Transformer."""

import keras
import numpy as np
import pytest

from transformer_course.vision import attention_rollout, extract_patches


@pytest.mark.parametrize(
    "shape, patch_size", [((2, 8, 8, 1), 2), ((1, 8, 8, 1), 4), ((3, 6, 9, 3), 3), ((1, 8, 8, 1), 1)]
)
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


# --- the Vision Transformer's layers -------------------------------------------------------

from transformer_course.vision import (  # noqa: E402
    ClassTokenAndPositions,
    PatchEmbedding,
    VisionTransformer,
    attention_maps,
    shift_images,
)


def small_vit(**overrides):
    arguments = dict(
        image_size=8,
        channels=1,
        patch_size=2,
        num_classes=10,
        embed_dim=16,
        num_heads=2,
        intermediate_dim=32,
        num_layers=2,
        dropout=0.1,
    )
    return VisionTransformer(**{**arguments, **overrides})


def digits_like(count, seed=0, size=8, channels=1):
    return np.random.default_rng(seed).random((count, size, size, channels)).astype("float32")


@pytest.mark.parametrize("patch_size, channels", [(2, 1), (4, 3), (1, 1)])
def test_patch_embedding_equals_a_convolution_with_kernel_and_stride_of_the_patch_size(patch_size, channels):
    images = digits_like(3, channels=channels)
    embedding = PatchEmbedding(patch_size, 5)
    embedding(images)  # builds the projection
    convolution = keras.layers.Conv2D(5, kernel_size=patch_size, strides=patch_size)
    convolution.build(images.shape)
    kernel, bias = embedding.projection.get_weights()
    convolution.set_weights([kernel.reshape(patch_size, patch_size, channels, 5), bias + 0.5])
    embedding.projection.set_weights([kernel, bias + 0.5])
    ours = keras.ops.convert_to_numpy(embedding(images))
    theirs = keras.ops.convert_to_numpy(convolution(images))  # (B, rows, columns, E)
    assert ours.shape == (3, (8 // patch_size) ** 2, 5)
    np.testing.assert_allclose(ours, theirs.reshape(3, -1, 5), atol=1e-5)


def test_patch_embedding_is_a_linear_map_of_extract_patches():
    images = digits_like(2)
    embedding = PatchEmbedding(4, 6)
    embedding(images)
    kernel, bias = embedding.projection.get_weights()
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(embedding(images)), extract_patches(images, 4) @ kernel + bias, atol=1e-5
    )


def test_bad_images_and_sizes_get_clear_errors_naming_both_numbers():
    with pytest.raises(ValueError, match="height 9 is not divisible by `patch_size` 2"):
        PatchEmbedding(2, 4)(np.zeros((1, 9, 8, 1), "float32"))
    with pytest.raises(ValueError, match=r"shape \(batch, height, width, channels\); received shape \(8, 8, 1\)"):
        PatchEmbedding(2, 4).build((8, 8, 1))
    with pytest.raises(ValueError, match="height 8 is not divisible by `patch_size` 3"):
        small_vit(patch_size=3)
    with pytest.raises(ValueError, match="`patch_size` must be a positive integer; received 0"):
        PatchEmbedding(0, 4)
    with pytest.raises(ValueError, match=r"`num_heads` \(3\) must divide `embed_dim` \(16\)"):
        small_vit(num_heads=3)
    with pytest.raises(ValueError, match="`image_size` must be a positive integer; received -8"):
        small_vit(image_size=-8)


def test_class_token_goes_first_and_positions_are_added():
    layer = ClassTokenAndPositions()
    patches = np.random.default_rng(2).normal(size=(2, 4, 3)).astype("float32")
    layer.build(patches.shape)
    layer.class_token.assign(np.array([1.0, 2.0, 3.0], "float32"))
    tokens = keras.ops.convert_to_numpy(layer(patches))
    positions = keras.ops.convert_to_numpy(layer.position_embedding)
    assert tokens.shape == (2, 5, 3)
    np.testing.assert_allclose(tokens[:, 0], np.broadcast_to([1.0, 2.0, 3.0] + positions[0], (2, 3)), atol=1e-6)
    np.testing.assert_allclose(tokens[:, 1:], patches + positions[1:], atol=1e-6)


def test_vision_transformer_shapes_layers_and_a_training_step():
    model = small_vit()
    assert [layer.name for layer in model.layers][1:4] == [
        "patch_embedding",
        "class_token_and_positions",
        "embedding_dropout",
    ]
    images, labels = digits_like(16), np.arange(16) % 10
    probabilities = keras.ops.convert_to_numpy(model(images))
    assert probabilities.shape == (16, 10) and probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(images, labels, epochs=1, batch_size=8, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_a_vision_transformer_takes_images_that_are_not_square():
    model = small_vit(image_size=(8, 4), patch_size=4, num_classes=3)
    images = digits_like(5, size=8)[:, :, :4]
    config = model.get_config()
    assert config["image_size"] == (8, 4) and config["num_classes"] == 3
    assert VisionTransformer.from_config(config).predict(images, verbose=0).shape == (5, 3)


def test_prediction_does_not_depend_on_how_the_batch_is_split():
    model = small_vit()
    images = digits_like(24, seed=3)
    whole = model.predict(images, batch_size=24, verbose=0)
    for batch_size in (1, 5, 7):
        np.testing.assert_allclose(model.predict(images, batch_size=batch_size, verbose=0), whole, atol=1e-5)


def test_attention_maps_are_distributions_and_roll_out_to_distributions():
    model = small_vit(num_layers=3)
    maps = attention_maps(model, digits_like(4))
    assert maps.shape == (3, 4, 2, 17, 17)
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(attention_rollout(maps).sum(-1), 1.0, atol=1e-9)


def test_shift_images_moves_pixels_and_fills_with_zeros():
    images = np.arange(2 * 4 * 4, dtype="float32").reshape(2, 4, 4, 1) + 1
    np.testing.assert_array_equal(shift_images(images, np.random.default_rng(0), max_shift=0), images)
    shifted = shift_images(images, np.random.default_rng(1), max_shift=1)
    assert shifted.shape == images.shape and shifted.dtype == images.dtype
    for original, moved in zip(images[..., 0], shifted[..., 0]):
        matches = [
            (down, right)
            for down in (-1, 0, 1)
            for right in (-1, 0, 1)
            if np.array_equal(moved, np.pad(original, 1)[1 - down : 5 - down, 1 - right : 5 - right])
        ]
        assert matches, "each image is its original moved by at most one pixel, zeros shifted in"
    with pytest.raises(ValueError, match="`max_shift` must be smaller than the image"):
        shift_images(images, np.random.default_rng(0), max_shift=4)


def test_image_batches_visit_every_image_once_per_epoch_in_a_new_order():
    from transformer_course.vision import ImageBatches

    images = np.arange(10, dtype="float32").reshape(10, 1, 1, 1) * np.ones((1, 4, 4, 1), "float32")
    batches = ImageBatches(images, np.arange(10), batch_size=4, seed=0)
    assert len(batches) == 3
    first = np.concatenate([batches[index][1] for index in range(3)])
    batches.on_epoch_end()
    second = np.concatenate([batches[index][1] for index in range(3)])
    assert sorted(first) == sorted(second) == list(range(10)) and list(first) != list(second)
    for index in range(3):  # without shifts, each image stays with its label
        pictures, labels = batches[index]
        np.testing.assert_array_equal(pictures[:, 0, 0, 0], labels)
    with pytest.raises(ValueError, match=r"`labels` must have one entry per image \(10\); received 9"):
        ImageBatches(images, np.arange(9), batch_size=4)


def test_image_batches_without_remainder_keep_one_batch_shape_and_rotate_who_sits_out():
    from transformer_course.vision import ImageBatches

    images = np.arange(10, dtype="float32").reshape(10, 1, 1, 1) * np.ones((1, 4, 4, 1), "float32")
    batches = ImageBatches(images, np.arange(10), batch_size=4, seed=0, drop_remainder=True)
    assert len(batches) == 2
    seen = set()
    for _ in range(6):
        labels = [batches[index][1] for index in range(len(batches))]
        assert all(len(part) == 4 for part in labels), "every batch is full"
        flat = np.concatenate(labels)
        assert len(set(flat)) == 8, "no image appears twice in one epoch"
        seen |= set(flat.tolist())
        batches.on_epoch_end()
    assert seen == set(range(10)), "over several epochs every image is used"
    with pytest.raises(ValueError, match=r"`drop_remainder` needs at least `batch_size` \(16\) images; received 10"):
        ImageBatches(images, np.arange(10), batch_size=16, drop_remainder=True)
