"""Today's decoder parts, each equal to the library's: rotary positions (keras-hub), grouped-query attention
(Keras), RMSNorm (Keras), and the Llama-style block (keras-hub's LlamaTransformerDecoder) — with caches."""

import keras
import numpy as np
import pytest
from keras import ops

from transformer_course.attention import GroupedQueryAttention, MultiHeadAttention
from transformer_course.rotary import rotary_embedding
from transformer_course.transformer import LlamaDecoder, RMSNorm, SwiGLUFeedForward

rng = np.random.default_rng(0)
X = rng.normal(size=(2, 6, 16)).astype("float32")
SOURCE = rng.normal(size=(2, 7, 16)).astype("float32")


def numpy(x):
    return ops.convert_to_numpy(x)


def test_rotary_embedding_equals_keras_hubs_and_scores_see_only_offsets():
    keras_hub = pytest.importorskip("keras_hub")
    x = rng.normal(size=(2, 7, 3, 8)).astype("float32")
    reference = keras_hub.layers.RotaryEmbedding(max_wavelength=10_000, sequence_axis=1, feature_axis=-1)
    for start in (0, 5):
        np.testing.assert_allclose(numpy(rotary_embedding(x, start)), numpy(reference(x, start_index=start)), atol=1e-6)
    # Position Interpolation: keras-hub's scaling_factor divides the positions as ours does
    interpolated = keras_hub.layers.RotaryEmbedding(
        max_wavelength=10_000, scaling_factor=2.0, sequence_axis=1, feature_axis=-1
    )
    np.testing.assert_allclose(
        numpy(rotary_embedding(x, 5, scaling_factor=2.0)), numpy(interpolated(x, start_index=5)), atol=1e-6
    )
    with pytest.raises(ValueError, match="`scaling_factor` must be a positive number"):
        rotary_embedding(x, scaling_factor=-1.0)


def test_a_rotated_query_and_key_score_by_their_offset_alone():
    query, key = rng.normal(size=(1, 1, 1, 8)).astype("float32"), rng.normal(size=(1, 1, 1, 8)).astype("float32")

    def score(query_position, key_position):
        rotated_query, rotated_key = rotary_embedding(query, query_position), rotary_embedding(key, key_position)
        return float(np.sum(numpy(rotated_query) * numpy(rotated_key)))

    assert score(7, 3) == pytest.approx(score(12, 8), abs=1e-5) == pytest.approx(score(4, 0), abs=1e-5)
    assert score(7, 3) != pytest.approx(score(7, 4), abs=1e-3)  # a different offset, a different score
    with pytest.raises(ValueError, match="even head width"):
        rotary_embedding(np.ones((1, 2, 1, 3), "float32"))


def test_grouped_query_attention_equals_keras_with_copied_weights():
    reference = keras.layers.GroupQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
    ours = GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
    reference(X, SOURCE)
    ours(X, SOURCE)
    ours.set_weights(reference.get_weights())
    mask = rng.random((2, 6, 7)) > 0.3
    np.testing.assert_allclose(numpy(ours(X, SOURCE)), numpy(reference(X, SOURCE)), atol=1e-6)
    np.testing.assert_allclose(
        numpy(ours(X, SOURCE, attention_mask=mask)), numpy(reference(X, SOURCE, attention_mask=mask)), atol=1e-6
    )
    np.testing.assert_allclose(
        numpy(ours(X, X, use_causal_mask=True)), numpy(reference(X, X, use_causal_mask=True)), atol=1e-6
    )


def test_grouped_query_attention_takes_the_padding_masks_as_keras_does_and_multi_head_attention_does():
    """One mask convention for both layers: Keras' padding masks, given or filled from the inputs' masks."""
    reference = keras.layers.GroupQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
    ours = GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
    reference(X, SOURCE)
    ours(X, SOURCE)
    ours.set_weights(reference.get_weights())
    query_padding = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
    source_padding = np.array([[1, 1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0]], bool)
    masks = {"query_mask": query_padding, "value_mask": source_padding}
    np.testing.assert_allclose(numpy(ours(X, SOURCE, **masks)), numpy(reference(X, SOURCE, **masks)), atol=1e-6)
    # Filled by Keras from an embedding's mask, as for MultiHeadAttention.
    ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 16, mask_zero=True)(ids)
    model = keras.Model(ids, ours(embedded, embedded))
    tokens = np.array([[3, 4, 5, 0, 0, 0], [1, 2, 3, 4, 5, 6]], "int32")
    vectors = numpy(model.layers[1](tokens))
    padding = tokens != 0
    np.testing.assert_allclose(
        numpy(model(tokens))[padding],
        numpy(ours(vectors, vectors, query_mask=padding, value_mask=padding))[padding],
        atol=1e-6,
    )


def test_grouped_query_attention_fused_and_written_out_agree_and_weights_come_back():
    """The fused kernel (no weights, no dropout) and the written-out softmax give one output."""
    layer = GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2, rotary_max_wavelength=1e4)
    fused = layer(X, X, use_causal_mask=True)
    written_out, weights = layer(X, X, use_causal_mask=True, return_attention_scores=True)
    np.testing.assert_allclose(numpy(fused), numpy(written_out), atol=1e-5)
    assert tuple(weights.shape) == (2, 4, 6, 6)
    np.testing.assert_allclose(numpy(weights).sum(-1), 1.0, atol=1e-5)
    assert np.all(numpy(weights)[..., np.triu_indices(6, 1)[0], np.triu_indices(6, 1)[1]] == 0)


@pytest.mark.parametrize("layer_class", [GroupedQueryAttention, MultiHeadAttention])
def test_reading_a_cache_as_it_is_projects_no_keys_or_values(layer_class):
    """Cross-attention reads the source's keys and values from the cache: the inputs are not projected again."""
    layer = (
        GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)
        if layer_class is GroupedQueryAttention
        else MultiHeadAttention(num_heads=4, key_dim=4)
    )
    whole = numpy(layer(X, SOURCE))
    cache = layer.initial_cache(2, 7)
    _, cache = layer(SOURCE[:, :1], SOURCE, cache=cache, cache_update_index=0)  # writes the 7 source positions
    wrong_width = np.zeros((2, 7, 3), "float32")  # would fail in a projection of width 16
    read, unchanged = layer(X, wrong_width, cache=cache)
    np.testing.assert_allclose(numpy(read), whole, atol=1e-5)
    np.testing.assert_array_equal(numpy(unchanged), numpy(cache))


def test_one_key_value_head_per_query_head_is_multi_head_attention():
    grouped = GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=4)
    heads = MultiHeadAttention(num_heads=4, key_dim=4)
    grouped(X, X)
    heads(X, X)
    grouped.set_weights(heads.get_weights())
    np.testing.assert_allclose(
        numpy(grouped(X, X, use_causal_mask=True)), numpy(heads(X, X, use_causal_mask=True)), atol=1e-6
    )
    with pytest.raises(ValueError, match="must divide `num_query_heads`"):
        GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=3)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_a_cache_holds_the_key_value_heads_only_and_cached_steps_equal_the_whole_sequence(groups):
    layer = GroupedQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=groups, rotary_max_wavelength=1e4)
    whole = numpy(layer(X, X, use_causal_mask=True))
    cache = layer.initial_cache(2, 6)
    assert tuple(cache.shape) == (2, 2, 6, groups, 4)  # G/N of multi-head attention's cache, per token
    first, cache = layer(X[:, :3], X[:, :3], use_causal_mask=True, cache=cache, cache_update_index=0)
    steps = [numpy(first)]
    for position in range(3, 6):
        step, cache = layer(
            X[:, position : position + 1],
            X[:, position : position + 1],
            use_causal_mask=True,
            cache=cache,
            cache_update_index=position,
        )
        steps.append(numpy(step))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), whole, atol=1e-5)


def test_rms_norm_equals_keras_where_keras_has_it():
    if not hasattr(keras.layers, "RMSNormalization"):
        pytest.skip(f"Keras {keras.__version__} has no RMSNormalization (it came in a later Keras 3 release)")
    reference, ours = keras.layers.RMSNormalization(epsilon=1e-6), RMSNorm(1e-6)
    reference(X)
    ours(X)
    reference.set_weights([rng.normal(size=(16,)).astype("float32")])
    ours.set_weights(reference.get_weights())
    np.testing.assert_allclose(numpy(ours(X)), numpy(reference(X)), atol=1e-6)


def test_rms_norm_rescales_without_centring_and_swiglu_is_its_formula():
    normalised = numpy(RMSNorm(0.0)(X))
    np.testing.assert_allclose(np.sqrt((normalised**2).mean(-1)), 1.0, atol=1e-5)  # unit root mean square
    assert np.abs(normalised.mean(-1)).max() > 1e-2  # the mean is not removed, as LayerNorm would
    feedforward = SwiGLUFeedForward(24)
    output = numpy(feedforward(X))
    gate, up, down = (numpy(layer.kernel) for layer in (feedforward.gate, feedforward.up, feedforward.down))
    hidden = X @ gate
    np.testing.assert_allclose(output, (hidden / (1 + np.exp(-hidden)) * (X @ up)) @ down, atol=1e-5)
    # three F×E matrices: at 2/3 of a two-matrix network's width, the same parameters
    assert feedforward.count_params() == 3 * 16 * 24 == 2 * 16 * 36


def test_the_llama_block_equals_keras_hubs_with_the_same_weights_cached_or_not():
    pytest.importorskip("keras_hub")
    from keras_hub.src.models.llama.llama_decoder import LlamaTransformerDecoder

    reference = LlamaTransformerDecoder(
        intermediate_dim=24,
        num_query_heads=4,
        num_key_value_heads=2,
        rope_max_wavelength=10_000,
        layer_norm_epsilon=1e-6,
    )
    block = LlamaDecoder(24, 4, 2)
    reference(X)
    block(X)
    q, k, v, o, attention_norm, up, gate, down, feedforward_norm = reference.get_weights()
    block.set_weights([attention_norm, q, k, v, o, feedforward_norm, gate, up, down])
    padding = np.array([[True] * 6, [True] * 4 + [False] * 2])
    expected = numpy(reference(X, decoder_padding_mask=padding))
    np.testing.assert_allclose(numpy(block(X, decoder_padding_mask=padding)), expected, atol=1e-5)
    # the cached pass: the first four positions at once, then one at a time
    cache = block.initial_caches(2, 6)
    prefix, cache = block(X[:, :4], self_attention_cache=cache, self_attention_cache_update_index=0)
    steps = [numpy(prefix)]
    for position in (4, 5):
        step, cache = block(
            X[:, position : position + 1], self_attention_cache=cache, self_attention_cache_update_index=position
        )
        steps.append(numpy(step))
    np.testing.assert_allclose(np.concatenate(steps, axis=1)[0], numpy(block(X))[0], atol=1e-5)
