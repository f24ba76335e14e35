"""The Llama-style language model of notebook 11 and what the notebook does after training: its cache, its
classifier on the last real token, LoRA on its attention projections, int8, and data parallelism."""

import importlib.util
import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
from keras import ops
from layer_checks import check_model

from transformer_course.generation import CachedLanguageModel
from transformer_course.language_model import LanguageModel, forward_weights, language_model_classifier
from transformer_course.parallel import training_losses
from transformer_course.pooling import LastTokenPooling
from transformer_course.positional import PositionalEmbedding, TokenEmbedding
from transformer_course.rotary import rotary_embedding
from transformer_course.transformer import LlamaDecoder, RMSNorm

V, T = 40, 12
IDS = np.array([[5, 6, 7, 8, 9, 10, 11, 12, 0, 0], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]], dtype="int32")


def llama(**options):
    keras.utils.set_random_seed(0)
    return LanguageModel(
        V,
        T,
        embed_dim=16,
        intermediate_dim=24,
        num_heads=4,
        num_layers=options.pop("num_layers", 2),
        dropout=0.0,
        architecture="llama",
        num_key_value_heads=options.pop("num_key_value_heads", 2),
        **options,
    )


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def test_a_llama_model_is_made_of_llama_blocks_without_a_position_table(tmp_path):
    model = llama()
    assert isinstance(model.token_embedding, TokenEmbedding) and isinstance(model.final_norm, RMSNorm)
    assert all(isinstance(block, LlamaDecoder) for block in model.decoder_blocks)
    assert not any("position" in weight.path for weight in model.weights)
    small = np.array([[3, 4, 5, 0, 0], [1, 2, 3, 4, 5]], dtype="int32")  # the layer contract's sizes: V = 11, E = 8
    check_model(
        lambda: LanguageModel(
            11,
            5,
            embed_dim=8,
            intermediate_dim=12,
            num_heads=2,
            num_layers=2,
            dropout=0.0,
            architecture="llama",
            num_key_value_heads=1,
        ),
        small,
        tmp_path,
        atol=1e-5,
    )


def test_later_tokens_never_change_earlier_probabilities_and_padding_stays_out():
    model = llama()
    changed = IDS.copy()
    changed[1, 6:] = 7
    before, after = numpy(model(IDS)), numpy(model(changed))
    np.testing.assert_allclose(before[1, :6], after[1, :6], atol=1e-6)
    alone = numpy(model(IDS[:1, :8]))  # the padded row, without its padding
    np.testing.assert_allclose(before[0, :8], alone[0], atol=1e-5)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_cached_steps_equal_the_whole_model_with_g_heads_in_each_cache(groups):
    model = llama(num_key_value_heads=groups)
    whole = numpy(model(IDS))
    caches = model.initial_caches(2, IDS.shape[1])
    assert tuple(caches[0].shape) == (2, 2, IDS.shape[1], groups, 4)
    probabilities, caches = model.call_with_cache(IDS[:, :3], caches, 0)
    steps = [numpy(probabilities)]
    for position in range(3, IDS.shape[1]):
        probabilities, caches = model.call_with_cache(IDS[:, position : position + 1], caches, position)
        steps.append(numpy(probabilities))
    np.testing.assert_allclose(np.concatenate(steps, axis=1)[1], whole[1], atol=1e-5)
    np.testing.assert_allclose(np.concatenate(steps, axis=1)[0, :8], whole[0, :8], atol=1e-5)
    next_tokens = CachedLanguageModel(model, T).next_token_function(IDS[1:, :4])
    np.testing.assert_allclose(next_tokens(IDS[1:, :4])[0, 1:], whole[1, 3, 1:] / whole[1, 3, 1:].sum(), atol=1e-5)


def test_the_rotary_wavelength_reaches_every_blocks_attention_and_survives_the_config():
    default, long = llama(), llama(rotary_max_wavelength=500_000.0)  # Llama 3's base
    assert default.rotary_max_wavelength == 10_000.0
    assert {block.attention.rotary_max_wavelength for block in long.decoder_blocks} == {500_000.0}
    assert LanguageModel.from_config(long.get_config()).decoder_blocks[1].attention.rotary_max_wavelength == 500_000.0
    long.set_weights(default.get_weights())  # the same weights: only the positions' rotation differs
    assert not np.allclose(numpy(long(IDS)), numpy(default(IDS)), atol=1e-4)
    np.testing.assert_allclose(numpy(long(IDS))[:, 0], numpy(default(IDS))[:, 0], atol=1e-5)  # position 0: no turn
    with pytest.raises(ValueError, match="`rotary_max_wavelength` must be a positive number; received 0"):
        llama(rotary_max_wavelength=0)
    with pytest.raises(ValueError, match="`rotary_max_wavelength` is an option of architecture='llama'"):
        LanguageModel(V, T, embed_dim=16, intermediate_dim=24, num_heads=4, rotary_max_wavelength=1e4)


def test_learned_positions_change_only_where_positions_enter(tmp_path):
    # The single-factor ablation of rotary positions: GPT's table in the embeddings, no rotation in attention,
    # every other part Llama's (RMSNorm, SwiGLU, grouped queries, no biases): the same weights but the table.
    learned, rotary = llama(positions="learned"), llama()
    assert isinstance(learned.token_embedding, PositionalEmbedding) and learned.rotary_max_wavelength is None
    assert {block.attention.rotary_max_wavelength for block in learned.decoder_blocks} == {None}
    table = [weight for weight in learned.weights if "position" in weight.path]
    assert [tuple(weight.shape) for weight in table] == [(T, 16)]
    assert learned.count_params() - rotary.count_params() == T * 16
    assert LanguageModel.from_config(learned.get_config()).positions == "learned" and rotary.positions == "rotary"
    caches = learned.initial_caches(2, IDS.shape[1])  # the cache reads the table from the step's position
    probabilities, caches = learned.call_with_cache(IDS[:, :4], caches, 0)
    step, _ = learned.call_with_cache(IDS[:, 4:5], caches, 4)
    np.testing.assert_allclose(numpy(step)[1, 0], numpy(learned(IDS))[1, 4], atol=1e-5)
    check_model(lambda: llama(positions="learned"), IDS, tmp_path, atol=1e-5)
    with pytest.raises(ValueError, match="`positions` must be one of \\('rotary', 'learned', 'none'\\); received"):
        llama(positions="alibi")
    with pytest.raises(ValueError, match="`rotary_max_wavelength` belongs to rotary positions; received 500000"):
        llama(positions="learned", rotary_max_wavelength=500_000.0)
    with pytest.raises(ValueError, match="`positions` is an option of architecture='llama'"):
        LanguageModel(V, T, embed_dim=16, intermediate_dim=24, num_heads=4, positions="learned")


def test_no_positions_leaves_only_the_causal_mask(tmp_path):
    # NoPE (Kazemnejad et al., 2023): neither a table nor a rotation; the same weights as the rotary model's.
    none, rotary = llama(positions="none"), llama()
    assert not isinstance(none.token_embedding, PositionalEmbedding) and none.rotary_max_wavelength is None
    assert {block.attention.rotary_max_wavelength for block in none.decoder_blocks} == {None}
    assert none.count_params() == rotary.count_params()
    none.set_weights(rotary.get_weights())
    np.testing.assert_allclose(numpy(none(IDS))[:, 0], numpy(rotary(IDS))[:, 0], atol=1e-5)  # position 0: no turn
    assert not np.allclose(numpy(none(IDS))[:, 1:], numpy(rotary(IDS))[:, 1:], atol=1e-4)
    # One block without positions reads the set of the tokens before it, not their order; a second block
    # reads order again, from the causal mask (a prefix's states differ with its order): NoPE's point.
    swapped = IDS.copy()
    swapped[:, [0, 1]] = swapped[:, [1, 0]]
    one_block = llama(positions="none", num_layers=1)
    np.testing.assert_allclose(numpy(one_block(swapped))[:, 2:], numpy(one_block(IDS))[:, 2:], atol=1e-5)
    assert not np.allclose(numpy(none(swapped))[:, 2:], numpy(none(IDS))[:, 2:], atol=1e-4)
    check_model(lambda: llama(positions="none"), IDS, tmp_path, atol=1e-5)
    with pytest.raises(ValueError, match="`rotary_scaling_factor` belongs to rotary positions; received 2.0"):
        llama(positions="none", rotary_scaling_factor=2.0)


def test_position_interpolation_reads_positions_divided_by_the_factor():
    # Chen et al., 2023: the trained weights, every position divided by s. At s = 2, position 2p of the
    # interpolated model turns as position p of the plain one, so rows with every other token doubled agree.
    plain, interpolated = llama(), llama(rotary_scaling_factor=2.0)
    interpolated.set_weights(plain.get_weights())
    assert {block.attention.rotary_scaling_factor for block in interpolated.decoder_blocks} == {2.0}
    assert LanguageModel.from_config(interpolated.get_config()).decoder_blocks[0].attention.rotary_scaling_factor == 2.0
    np.testing.assert_allclose(numpy(interpolated(IDS))[:, 0], numpy(plain(IDS))[:, 0], atol=1e-5)
    assert not np.allclose(numpy(interpolated(IDS))[:, 1:], numpy(plain(IDS))[:, 1:], atol=1e-4)
    rng = np.random.default_rng(3)
    queries, keys = rng.normal(size=(2, 1, 6, 2, 8)).astype("float32")
    plain_scores = np.einsum(
        "tnh,snh->nts", numpy(rotary_embedding(queries, 0, 1e4))[0], numpy(rotary_embedding(keys, 0, 1e4))[0]
    )
    spread = [
        numpy(rotary_embedding(np.repeat(x, 2, axis=1), 0, 1e4, scaling_factor=2.0))[0, ::2] for x in (queries, keys)
    ]
    # each vector at positions 2p (and 2p + 1): at s = 2, position 2p turns as position p does at s = 1
    np.testing.assert_allclose(np.einsum("tnh,snh->nts", *spread), plain_scores, atol=1e-4)
    with pytest.raises(ValueError, match="`rotary_scaling_factor` must be a positive number; received 0"):
        llama(rotary_scaling_factor=0)
    with pytest.raises(ValueError, match="`rotary_scaling_factor` is an option of architecture='llama'"):
        LanguageModel(V, T, embed_dim=16, intermediate_dim=24, num_heads=4, rotary_scaling_factor=2.0)


def test_options_of_the_other_architecture_are_refused_by_name():
    with pytest.raises(ValueError, match="`architecture` must be one of"):
        LanguageModel(V, T, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="mamba")
    with pytest.raises(ValueError, match="`num_key_value_heads` is an option of architecture='llama'"):
        LanguageModel(V, T, embed_dim=16, intermediate_dim=24, num_heads=4, num_key_value_heads=2)
    with pytest.raises(ValueError, match="`normalize_first`, `activation` belong"):
        llama(normalize_first=True, activation="gelu")
    with pytest.raises(ValueError, match="must divide `num_query_heads`"):
        llama(num_key_value_heads=3)(IDS)
    with pytest.raises(ValueError, match="must be a GPT model"):
        forward_weights(llama())


def test_the_token_embedding_turns_around_for_the_tied_output_in_float_and_in_int8():
    layer = TokenEmbedding(V, 16)
    hidden = np.random.default_rng(0).normal(size=(2, 3, 16)).astype("float32")
    layer(IDS)
    table = numpy(layer.token_embedding.embeddings)
    np.testing.assert_allclose(numpy(layer(hidden, reverse=True)), hidden @ table.T, atol=1e-5)
    assert numpy(layer.compute_mask(IDS)).tolist() == (IDS != 0).tolist()
    layer.token_embedding.quantize("int8")
    # int8 keeps each row to half a step of its grid: |error| <= the row's largest |weight| / 127 / 2
    row_error = np.abs(table).max(axis=1) / 127 / 2  # (V,)
    bound = np.abs(hidden).sum(axis=-1, keepdims=True) * row_error * 1.01 + 1e-6  # (B, T, V)
    error = np.abs(numpy(layer(hidden, reverse=True)) - hidden @ table.T)
    assert 0 < error.max() and np.all(error <= bound)


def test_an_int8_model_stays_close_and_its_weights_reload_into_a_quantized_copy(tmp_path):
    model = llama()
    float_probabilities = numpy(model(IDS))
    model.quantize("int8")
    int8_probabilities = numpy(model(IDS))
    assert 0 < np.abs(int8_probabilities - float_probabilities).max() < 0.02
    model.save_weights(tmp_path / "int8.weights.h5")
    copy = llama()
    copy.quantize("int8")
    copy.load_weights(tmp_path / "int8.weights.h5")
    np.testing.assert_allclose(numpy(copy(IDS)), int8_probabilities, rtol=0, atol=1e-6)


def test_last_token_pooling_reads_the_last_real_position():
    x = np.arange(2 * 4 * 3, dtype="float32").reshape(2, 4, 3)
    mask = np.array([[True, True, False, False], [True, True, True, True]])
    np.testing.assert_array_equal(numpy(LastTokenPooling()(x, mask=mask)), np.stack([x[0, 1], x[1, 3]]))
    np.testing.assert_array_equal(numpy(LastTokenPooling()(x)), x[:, -1])
    with pytest.raises(ValueError, match="batch, length, width"):
        LastTokenPooling()(x[0])


def test_the_classifier_shares_the_language_models_layers_and_ignores_padding():
    model = llama()
    classifier = language_model_classifier(model)
    shared = {id(weight) for weight in model.weights if not weight.path.startswith("output/")}  # not the LM's head
    assert shared <= {id(weight) for weight in classifier.weights}
    assert classifier.output_shape == (None, 1)
    padded = np.array([[5, 6, 7, 0, 0, 0]], "int32")
    np.testing.assert_allclose(numpy(classifier(padded)), numpy(classifier(padded[:, :3])), atol=1e-6)
    assert language_model_classifier(model, num_classes=3).output_shape == (None, 3)
    with pytest.raises(ValueError, match="num_classes"):
        language_model_classifier(model, num_classes=0)


def test_mean_pooling_averages_the_real_tokens_final_states_and_ignores_padding():
    model = llama()
    classifier = language_model_classifier(model, pooling="mean", dropout=0.1)
    padded = np.array([[5, 6, 7, 0, 0, 0]], "int32")
    np.testing.assert_allclose(numpy(classifier(padded)), numpy(classifier(padded[:, :3])), atol=1e-6)
    states = model.token_embedding(padded[:, :3])
    for block in model.decoder_blocks:
        states = block(states)
    head = classifier.get_layer("class_output")
    kernel, bias = (numpy(weight) for weight in head.weights)
    by_hand = 1 / (1 + np.exp(-(numpy(model.final_norm(states)).mean(axis=1) @ kernel + bias)))
    np.testing.assert_allclose(numpy(classifier(padded)), by_hand, atol=1e-6)
    with pytest.raises(ValueError, match="pooling"):
        language_model_classifier(model, pooling="max")
    with pytest.raises(ValueError, match="dropout"):
        language_model_classifier(model, dropout=1.0)


def test_lora_on_the_attention_projections_starts_as_the_identity_and_trains_only_its_matrices():
    model = llama()
    classifier = language_model_classifier(model)
    before = numpy(classifier(IDS))
    model.token_embedding.trainable = model.final_norm.trainable = False
    for block in model.decoder_blocks:
        block.attention_norm.trainable = block.feedforward_norm.trainable = block.feedforward.trainable = False
        for projection in (
            block.attention.query_dense,
            block.attention.key_dense,
            block.attention.value_dense,
            block.attention.output_dense,
        ):
            projection.enable_lora(2)
    np.testing.assert_allclose(numpy(classifier(IDS)), before, atol=1e-6)  # B starts at zero
    names = sorted({weight.path.rsplit("/", 1)[-1] for weight in classifier.trainable_weights})
    assert names == ["bias", "kernel", "lora_kernel_a", "lora_kernel_b"]  # the class head's, then LoRA's
    assert len([w for w in classifier.trainable_weights if "lora" in w.path]) == 2 * 4 * 2


def test_training_steps_run_under_no_distribution():
    result = training_losses(None, steps=2, batch_size=4, length=8)
    assert len(result["losses"]) == len(result["seconds"]) == 2
    assert all(np.isfinite(result["losses"]))
    with pytest.raises(ValueError, match="`steps`"):
        training_losses(None, steps=0)


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_data_parallel_on_four_virtual_devices_gives_one_devices_losses():
    # XLA compiles without LLVM's optimisations (level 0): the test compares losses, not speed, and compiling took
    # most of the program's time (14 core-seconds against 22 for the whole run here).
    flags = "--xla_force_host_platform_device_count=4 --xla_backend_optimization_level=0"
    environment = {**os.environ, "KERAS_BACKEND": "jax", "XLA_FLAGS": flags}
    finished = subprocess.run(
        [sys.executable, "-m", "transformer_course.parallel", "--steps", "3", "--batch-size", "8"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    result = json.loads(finished.stdout.strip().splitlines()[-1])
    assert len(result["devices"]) == 4
    np.testing.assert_allclose(result["data_parallel"]["losses"], result["one_device"]["losses"], atol=1e-5)


def test_the_program_refuses_another_backend():
    if keras.backend.backend() == "jax":
        pytest.skip("this backend is JAX")
    from transformer_course.parallel import main

    with pytest.raises(SystemExit, match="KERAS_BACKEND=jax"):
        main(["--steps", "1"])
