"""Group-wise absmax quantization: equal to Keras' per-row int8, its error bound, packing, and what groups buy."""

import keras
import numpy as np
import pytest

from transformer_course.quantization import (
    absmax_dequantize,
    absmax_quantize,
    bits_per_weight,
    pack_int4,
    quantize_model_weights,
    unpack_int4,
)

rng = np.random.default_rng(0)


def test_one_scale_a_row_in_int8_is_keras_absmax_quantization():
    weights = rng.normal(0.0, 0.02, size=(6, 64)).astype("float32")
    integers, scales = absmax_quantize(weights, bits=8)
    theirs, multiplier = (keras.ops.convert_to_numpy(value) for value in keras.quantizers.abs_max_quantize(weights, -1))
    assert scales.shape == (6, 1) and integers.dtype == np.int8
    np.testing.assert_allclose(1.0 / scales, multiplier, rtol=1e-5)  # Keras adds an epsilon to the largest |w|
    # the same integers, but for a weight that falls within rounding of a half step (none here, stated by the count)
    assert np.mean(integers == theirs) > 0.999
    np.testing.assert_allclose(absmax_dequantize(integers, scales), theirs / multiplier, atol=1e-6)


@pytest.mark.parametrize("bits, group_size", [(8, None), (4, None), (4, 16), (4, 8), (3, 4)])
def test_every_weight_within_half_a_step_and_the_largest_of_each_group_exact(bits, group_size):
    weights = rng.normal(size=(5, 32)).astype("float32")
    integers, scales = absmax_quantize(weights, bits, group_size)
    largest_integer = 2 ** (bits - 1) - 1
    assert np.abs(integers).max() <= largest_integer
    assert scales.shape == (5, 32 // (group_size or 32))
    restored = absmax_dequantize(integers, scales)
    steps = np.repeat(scales, group_size or 32, axis=-1)
    assert np.all(np.abs(restored - weights) <= steps / 2 + 1e-6)
    grouped = np.abs(weights).reshape(5, -1, group_size or 32)
    peaks = np.take_along_axis(grouped, grouped.argmax(-1)[..., None], -1)[..., 0]  # each group's largest |w|
    np.testing.assert_allclose(peaks, scales * largest_integer, rtol=1e-6)


def test_groups_keep_an_outlier_from_coarsening_the_whole_row():
    row = rng.normal(0.0, 0.02, size=(1, 256)).astype("float32")
    row[0, 0] = 1.0  # one outlier
    errors = {size: np.abs(absmax_dequantize(*absmax_quantize(row, 4, size)) - row)[0, 128:].mean()
              for size in (None, 128, 32)}  # fmt: skip
    assert errors[None] > 5 * errors[32]  # the outlier's group alone pays: the others keep a fine step
    assert errors[128] == pytest.approx(errors[32], rel=0.5)  # columns 128+: outside the outlier's group for both


def test_a_row_that_groups_do_not_divide_ends_with_a_shorter_group():
    weights = rng.normal(size=(3, 10)).astype("float32")  # 688, the SwiGLU width, is no multiple of 32 either
    integers, scales = absmax_quantize(weights, 4, group_size=4)
    assert integers.shape == (3, 10) and scales.shape == (3, 3)
    np.testing.assert_allclose(scales[:, 2] * 7, np.abs(weights[:, 8:]).max(axis=1), rtol=1e-6)  # the last 2 alone
    restored = absmax_dequantize(integers, scales, group_size=4)
    assert np.all(np.abs(restored - weights) <= np.repeat(scales, 4, axis=1)[:, :10] / 2 + 1e-6)
    with pytest.raises(ValueError, match="one scale for each group of `group_size` \\(None\\)"):
        absmax_dequantize(integers, scales)  # 3 scales do not divide 10: the group size must be given


def test_bits_per_weight_counts_each_groups_scale():
    assert bits_per_weight(4, 32) == 4.5 and bits_per_weight(4, 128) == 4.125 and bits_per_weight(8, 256, 32) == 8.125
    with pytest.raises(ValueError, match="`bits` must be an integer from 2 to 8; received 16"):
        bits_per_weight(16, 32)


def test_packing_two_integers_a_byte_round_trips():
    integers = rng.integers(-8, 8, size=(3, 10)).astype("int8")
    packed = pack_int4(integers)
    assert packed.shape == (3, 5) and packed.dtype == np.uint8 and packed.nbytes == integers.nbytes // 2
    np.testing.assert_array_equal(unpack_int4(packed), integers)
    with pytest.raises(ValueError, match="must lie in \\[-8, 7\\]; received \\[-9"):
        pack_int4(np.array([[-9, 0]]))
    with pytest.raises(ValueError, match="even last axis"):
        pack_int4(np.array([[1, 2, 3]]))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`group_size` must be"):
        absmax_quantize(np.ones((2, 10)), 4, group_size=0)
    with pytest.raises(ValueError, match="`bits` must be an integer from 2 to 8; received 1"):
        absmax_quantize(np.ones((2, 10)), bits=1)
    with pytest.raises(ValueError, match="must have `integers`' leading axes"):
        absmax_dequantize(np.ones((2, 10)), np.ones((3, 2)))
    zeros, scales = absmax_quantize(np.zeros((1, 4)), 4)
    assert zeros.tolist() == [[0, 0, 0, 0]] and scales.tolist() == [[1.0]]  # a group of zeros: scale 1


def test_a_quantized_model_computes_what_its_stored_integers_and_scales_say():
    from transformer_course.language_model import LanguageModel

    def model():
        keras.utils.set_random_seed(0)
        return LanguageModel(40, 8, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="llama")

    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6]], dtype="int32")
    original = keras.ops.convert_to_numpy(model()(ids))
    errors = {}
    for bits, group_size in ((8, None), (4, None), (4, 8)):
        quantized = model()
        stored = quantize_model_weights(quantized, bits, group_size)
        errors[bits, group_size] = np.abs(keras.ops.convert_to_numpy(quantized(ids)) - original).max()
        query = "decoder_1/attention/query/kernel"  # (16, 4, 4): 16 inputs, 16 output units
        integers = stored[query + "/integers"]
        integers = unpack_int4(integers) if bits <= 4 else integers
        restored = absmax_dequantize(integers, stored[query + "/scales"], group_size or 16).T.reshape(16, 4, 4)
        weight = next(w for w in quantized.weights if w.path == query)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(weight), restored, rtol=2e-3)  # float16 scales
        assert stored["final_norm/scale"].dtype == np.float32  # norms stay float
    assert errors[8, None] < min(errors[4, 8], errors[4, None]) / 5  # 8 bits: far closer to the float model


def test_exercise_12_4s_reference_is_the_packages_group_wise_int4_on_its_public_and_secret_cases():
    # The grader's reference is written independently of the package; on every case they agree (float32 against
    # float64: the integers exactly, the scales and dequantized weights to float32's rounding).
    from transformer_course_grader import references

    registration = references.REGISTRY["12.4"]
    for seed in (0, 7):
        for _, arguments in registration.cases(np.random.default_rng(seed)):
            integers, scales, dequantized = registration.reference(**arguments)
            ours, our_scales = absmax_quantize(arguments["weights"], bits=4, group_size=arguments["group_size"])
            np.testing.assert_array_equal(integers, ours)
            np.testing.assert_allclose(scales, our_scales, rtol=1e-6)
            np.testing.assert_allclose(dequantized, absmax_dequantize(ours, our_scales), rtol=1e-6, atol=1e-7)
