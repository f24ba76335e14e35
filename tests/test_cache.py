"""The key/value cache inside MultiHeadAttention and TransformerDecoder: one position per step,
the same numbers as recomputing the whole prefix."""

import numpy as np
import pytest
from keras import ops
from layer_checks import to_numpy

from transformer_course.attention import MultiHeadAttention
from transformer_course.masks import causal_mask
from transformer_course.positional import PositionalEmbedding
from transformer_course.transformer import TransformerDecoder

B, T, S, E, N, F = 2, 6, 5, 16, 4, 32


@pytest.fixture
def sequences():
    generator = np.random.default_rng(3)
    return (generator.normal(size=(B, T, E)).astype("float32"), generator.normal(size=(B, S, E)).astype("float32"))


def test_causal_mask_with_an_offset_places_the_queries_later():
    np.testing.assert_array_equal(
        to_numpy(causal_mask(2, 5, offset=2)), [[True, True, True, False, False], [True, True, True, True, False]]
    )
    with pytest.raises(ValueError, match="`offset`"):
        causal_mask(2, 5, offset=-1)


def test_cached_self_attention_one_position_at_a_time_equals_the_whole_sequence(sequences):
    target, _ = sequences
    attention = MultiHeadAttention(N, E // N)
    full = to_numpy(attention(target, target, use_causal_mask=True))
    cache = attention.initial_cache(B, T)
    assert tuple(cache.shape) == (B, 2, T, N, E // N)
    for position in range(T):
        step = target[:, position : position + 1]
        output, cache = attention(step, step, use_causal_mask=True, cache=cache, cache_update_index=position)
        np.testing.assert_allclose(to_numpy(output)[:, 0], full[:, position], atol=1e-5)
    # the cache now holds every position's key projection
    keys = np.einsum("bte,enh->btnh", target, to_numpy(attention.key_kernel)) + to_numpy(attention.key_bias)
    np.testing.assert_allclose(to_numpy(cache)[:, 0], keys, atol=1e-5)


def test_cached_attention_never_reads_unwritten_positions(sequences):
    target, _ = sequences
    attention = MultiHeadAttention(N, E // N)
    step = target[:, :1]
    empty = attention.initial_cache(B, T)
    garbage = ops.convert_to_tensor(np.full((B, 2, T, N, E // N), 1e3, "float32"))
    clean, _ = attention(step, step, use_causal_mask=True, cache=empty, cache_update_index=0)
    dirty, _ = attention(step, step, use_causal_mask=True, cache=garbage, cache_update_index=0)
    np.testing.assert_allclose(to_numpy(dirty), to_numpy(clean), atol=1e-6)


def test_a_cache_update_index_without_a_cache_is_refused(sequences):
    target, _ = sequences
    with pytest.raises(ValueError, match="`cache_update_index` needs a `cache`"):
        MultiHeadAttention(N, E // N)(target, target, cache_update_index=0)


def test_equal_to_keras_hub_cached_multi_head_attention(sequences):
    keras_hub = pytest.importorskip("keras_hub")
    target, _ = sequences
    reference = keras_hub.layers.CachedMultiHeadAttention(num_heads=N, key_dim=E // N)
    ours = MultiHeadAttention(N, E // N)
    reference(target, target)
    ours(target, target)
    ours.set_weights(reference.get_weights())
    cache = np.random.default_rng(4).normal(size=(B, 2, T, N, E // N)).astype("float32")
    step = target[:, 2:3]
    mask = to_numpy(causal_mask(1, T, offset=2))[None]  # keras-hub takes the mask from the caller
    expected, expected_cache = reference(step, step, attention_mask=mask, cache=cache, cache_update_index=2)
    output, new_cache = ours(step, step, use_causal_mask=True, cache=cache, cache_update_index=2)
    np.testing.assert_allclose(to_numpy(output), to_numpy(expected), atol=1e-5)
    np.testing.assert_allclose(to_numpy(new_cache), to_numpy(expected_cache), atol=1e-6)


@pytest.mark.parametrize("normalize_first", [False, True])
@pytest.mark.parametrize("with_cross_attention", [False, True])
def test_cached_decoder_steps_equal_the_full_decoder(sequences, normalize_first, with_cross_attention):
    target, source = sequences
    decoder = TransformerDecoder(F, N, normalize_first=normalize_first)
    source_mask = np.array([[True] * S, [True] * 3 + [False] * 2])
    context = dict(encoder_padding_mask=source_mask) if with_cross_attention else {}
    full = to_numpy(decoder(target, source, **context) if with_cross_attention else decoder(target))
    if with_cross_attention:  # the source keys and values, projected once
        self_cache, cross_cache = decoder.initial_caches(B, T, source)
        caches = dict(self_attention_cache=self_cache, cross_attention_cache=cross_cache)
    else:
        caches = dict(self_attention_cache=decoder.initial_caches(B, T))
    for position in range(T):
        outputs = decoder(
            target[:, position : position + 1], self_attention_cache_update_index=position, **caches, **context
        )
        caches["self_attention_cache"] = outputs[1]
        np.testing.assert_allclose(to_numpy(outputs[0])[:, 0], full[:, position], atol=1e-4)
    assert len(outputs) == (3 if with_cross_attention else 2)


def test_positional_embedding_start_index_gives_the_later_positions():
    embedding = PositionalEmbedding(10, 20, 8)
    ids = np.array([[3, 4, 5, 6]])
    whole = to_numpy(embedding(ids))
    np.testing.assert_allclose(to_numpy(embedding(ids[:, 2:3], start_index=2))[:, 0], whole[:, 2], atol=1e-6)
    with pytest.raises(ValueError, match="sequence_length=10"):
        embedding(np.ones((1, 3), "int32"), start_index=8)


def test_initial_caches_repeat_each_source_for_its_beams_and_refuse_the_wrong_block(sequences):
    target, source = sequences
    translator_block, language_block = TransformerDecoder(F, N), TransformerDecoder(F, N)
    translator_block(target, source)
    language_block(target)
    self_cache, cross_cache = translator_block.initial_caches(B, T, source, copies=3)
    assert tuple(self_cache.shape) == (B * 3, 2, T, N, target.shape[-1] // N)
    single = to_numpy(translator_block.initial_caches(B, T, source)[1])
    np.testing.assert_allclose(to_numpy(cross_cache), np.repeat(single, 3, axis=0))  # source b's copies side by side
    assert not to_numpy(self_cache).any()
    with pytest.raises(ValueError, match="`encoder_sequence` is required"):
        translator_block.initial_caches(B, T)
    with pytest.raises(ValueError, match="no cross-attention"):
        language_block.initial_caches(B, T, source)


def test_every_initial_caches_takes_the_same_arguments_and_refuses_what_it_cannot_use():
    """One signature for the decoder blocks', the language model's and the translation model's caches."""
    import inspect

    from transformer_course.language_model import LanguageModel
    from transformer_course.transformer import LlamaDecoder
    from transformer_course.translation import TranslationModel

    owners = (TransformerDecoder, LlamaDecoder, LanguageModel, TranslationModel)
    signatures = {owner.__name__: list(inspect.signature(owner.initial_caches).parameters) for owner in owners}
    assert all(
        names == ["self", "batch_size", "max_length", "encoder_sequence", "copies"] for names in signatures.values()
    ), signatures
    model = LanguageModel(11, 6, embed_dim=8, intermediate_dim=16, num_heads=2, num_layers=1, dropout=0.0)
    assert tuple(model.initial_caches(2, 6, copies=3)[0].shape) == (6, 2, 6, 2, 4)
    with pytest.raises(ValueError, match="no cross-attention"):
        model.initial_caches(2, 6, np.zeros((2, 4, 8), "float32"))
    translator = TranslationModel(
        11, 11, 4, 6, embed_dim=8, intermediate_dim=16, num_heads=2, num_layers=1, dropout=0.0
    )
    encoded, _ = translator.encode(np.array([[3, 4, 0, 0], [5, 6, 7, 0]], "int32"))
    with pytest.raises(TypeError, match=r"`batch_size` must be an int; received a tensor of shape \(2, 4, 8\)"):
        translator.initial_caches(encoded, 6)
    with pytest.raises(ValueError, match=r"`batch_size` \(3\) must be the batch of `encoder_sequence` \(2\)"):
        translator.initial_caches(3, 6, encoded)
    self_caches, cross_caches = translator.initial_caches(2, 6, encoded, copies=2)
    assert tuple(self_caches[0].shape) == (4, 2, 6, 2, 4) and tuple(cross_caches[0].shape) == (4, 2, 4, 2, 4)
