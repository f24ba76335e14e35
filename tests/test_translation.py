"""The translation model, cached greedy decoding, and the exported Translator."""

import keras
import numpy as np
import pytest

from transformer_course.decoding import beam_search, greedy_decode
from transformer_course.generation import IncrementalDecoder
from transformer_course.masks import PADDING_ID, keras_mask
from transformer_course.text import standardize_translation
from transformer_course.translation import Translator, build_translation_model

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

SOURCE_LENGTH, TARGET_LENGTH = 8, 9


def small_model(num_layers=2, seed=0, source_vocabulary_size=30, target_vocabulary_size=40, tie_embeddings=False):
    keras.utils.set_random_seed(seed)
    return build_translation_model(
        source_vocabulary_size,
        target_vocabulary_size,
        SOURCE_LENGTH,
        TARGET_LENGTH,
        embed_dim=16,
        intermediate_dim=32,
        num_heads=2,
        num_layers=num_layers,
        tie_embeddings=tie_embeddings,
    )


def last_position_probabilities(model, source_ids, decoded):
    """The whole model run on the sources and every prefix: next-token probabilities (B, V), padding never."""
    probabilities = model({"source_ids": source_ids, "target_ids": decoded.astype("int32")})
    probabilities = keras.ops.convert_to_numpy(probabilities)[:, -1, :]
    probabilities[:, PADDING_ID] = 0.0
    return probabilities


def uncached_greedy(model, source_ids, start_id, end_id, max_length):
    def next_token_probabilities(decoded):
        return last_position_probabilities(model, source_ids, decoded)

    return greedy_decode(next_token_probabilities, np.full(len(source_ids), start_id), end_id, max_length)


def uncached_beam_search(model, source_ids, start_id, end_id, max_length, beam_width, alpha):
    """Beam search for one source (S,), the whole model rerun on every beam's prefix at every step."""

    def next_token_probabilities(decoded):
        return last_position_probabilities(model, np.repeat(source_ids[None], len(decoded), axis=0), decoded)

    return beam_search(next_token_probabilities, start_id, end_id, max_length, beam_width, alpha)[0]


def test_model_shapes_and_layer_names():
    model = small_model()
    probabilities = model({"source_ids": np.ones((3, 5), "int32"), "target_ids": np.ones((3, 7), "int32")})
    assert probabilities.shape == (3, 7, 40)
    names = [layer.name for layer in model.layers]
    for name in ("source_embedding", "encoder_1", "encoder_2", "target_embedding", "decoder_1", "decoder_2", "output"):
        assert name in names


def test_later_target_tokens_never_change_earlier_predictions():
    model = small_model()
    source = np.array([[3, 4, 5, 0]], "int32")
    target = np.array([[1, 7, 8, 9, 10]], "int32")
    changed = target.copy()
    changed[0, 3:] = [20, 21]
    before = keras.ops.convert_to_numpy(model({"source_ids": source, "target_ids": target}))
    after = keras.ops.convert_to_numpy(model({"source_ids": source, "target_ids": changed}))
    np.testing.assert_allclose(before[0, :3], after[0, :3], atol=1e-6)
    assert not np.allclose(before[0, 3:], after[0, 3:])


def test_source_padding_changes_nothing():
    model = small_model()
    target = np.array([[1, 7, 8]], "int32")
    short = model({"source_ids": np.array([[3, 4, 5]], "int32"), "target_ids": target})
    padded = model({"source_ids": np.array([[3, 4, 5, 0, 0, 0]], "int32"), "target_ids": target})
    np.testing.assert_allclose(short, padded, atol=1e-6)


@pytest.mark.parametrize("num_layers, tie_embeddings", [(1, False), (2, False), (2, True)])
def test_cached_greedy_equals_recomputing_everything(num_layers, tie_embeddings):
    model = small_model(num_layers, seed=num_layers, tie_embeddings=tie_embeddings)
    source = np.array([[3, 4, 5, 6, 0, 0, 0, 0], [7, 2, 9, 11, 12, 13, 0, 0], [0] * 8], "int32")
    expected = uncached_greedy(model, source, start_id=2, end_id=3, max_length=TARGET_LENGTH - 1)
    cached = IncrementalDecoder(model, max_length=TARGET_LENGTH - 1).decode(source, start_id=2, end_id=3)
    np.testing.assert_array_equal(cached, expected)


@pytest.mark.parametrize("num_layers, beam_width, alpha", [(1, 3, 0.6), (2, 4, 0.0), (2, 2, 1.0)])
def test_cached_batched_beam_search_equals_uncached_beam_search_per_sentence(num_layers, beam_width, alpha):
    model = small_model(num_layers, seed=10 + num_layers)
    output = model.get_layer("output")
    output.kernel.assign(output.kernel * 4.0)  # sharper distributions: no near-ties for rounding to flip
    source = np.array([[3, 4, 5, 6, 0, 0, 0, 0], [7, 2, 9, 11, 12, 13, 0, 0], [0] * 8, [5] * 8], "int32")
    decoded = IncrementalDecoder(model, max_length=TARGET_LENGTH - 1).beam_decode(source, 2, 3, beam_width, alpha)
    assert decoded.shape[0] == len(source)
    for row, ids in zip(decoded, source):
        expected = uncached_beam_search(model, ids, 2, 3, TARGET_LENGTH - 1, beam_width, alpha)
        np.testing.assert_array_equal(row[: len(expected)], expected)
        assert not row[len(expected) :].any()


def test_the_cached_next_tokens_of_a_prefix_fed_at_once_are_the_models_after_its_last_token():
    """NextTokens feeds the ids added since its last call: a prefix given whole continues from its end."""
    model = small_model(2, seed=5)
    source = np.array([[3, 4, 5, 6, 0, 0, 0, 0], [7, 2, 9, 11, 12, 13, 0, 0]], "int32")
    prefix = np.array([[2, 7, 8], [2, 9, 4]], "int32")
    full = keras.ops.convert_to_numpy(model({"source_ids": source, "target_ids": prefix}))
    next_tokens = IncrementalDecoder(model, max_length=TARGET_LENGTH - 1).next_token_function(source)
    probabilities = next_tokens(prefix)
    np.testing.assert_allclose(probabilities[:, 1:], full[:, -1, 1:], atol=1e-5)
    assert not probabilities[:, 0].any()  # padding is never generated
    longer = np.concatenate([prefix, [[5], [6]]], axis=1)
    expected = keras.ops.convert_to_numpy(model({"source_ids": source, "target_ids": longer}))[:, -1, 1:]
    np.testing.assert_allclose(next_tokens(longer)[:, 1:], expected, atol=1e-5)


def test_incremental_decoder_checks_max_length():
    with pytest.raises(ValueError, match="max_length"):
        IncrementalDecoder(small_model(1), max_length=TARGET_LENGTH + 1)


def make_translator():
    source = keras.layers.TextVectorization(
        max_tokens=30, output_sequence_length=SOURCE_LENGTH, standardize=standardize_translation
    )
    target = keras.layers.TextVectorization(
        max_tokens=40, output_sequence_length=TARGET_LENGTH, standardize=standardize_translation
    )
    source.adapt(["I like cats", "where is the station", "good morning"])
    target.adapt(
        ["[start] me gustan los gatos [end]", "[start] ¿ dónde está la estación [end]", "[start] buenos días [end]"]
    )
    model = small_model(
        1, source_vocabulary_size=source.vocabulary_size(), target_vocabulary_size=target.vocabulary_size()
    )
    return Translator(source, target, model, max_length=TARGET_LENGTH - 1)


def test_translator_checks_the_vocabulary_matches_the_model():
    translator = make_translator()
    mismatched = Translator(translator.source_vectorizer, translator.target_vectorizer, small_model(1), max_length=4)
    with pytest.raises(ValueError, match="target vocabulary"):
        mismatched.translate("I like cats")


def test_translator_round_trips_through_a_keras_file(tmp_path):
    translator = make_translator()
    sentences = ["I like cats", "where is the station?", ""]
    before = translator.translate(sentences)
    translator.save(tmp_path / "translator.keras")
    reloaded = keras.models.load_model(tmp_path / "translator.keras")
    assert reloaded.translate(sentences) == before
    assert reloaded.translate(sentences, beam_width=3) == translator.translate(sentences, beam_width=3)


def test_translator_accepts_any_string():
    translator = make_translator()
    for sentence in ["", "word " * 500, "😀🎉", "¿Qué?"]:
        assert isinstance(translator.translate(sentence), str)
    assert translator.translate([]) == []


@pytest.mark.parametrize("sentences, message", [(42, "`sentences` must be"), (["ok", 3], r"`sentences\[1\]`")])
def test_translator_names_bad_input(sentences, message):
    with pytest.raises(TypeError, match=message):
        make_translator().translate(sentences)


def test_batch_size_changes_no_translation():
    translator = make_translator()
    sentences = ["I like cats", "where is the station?", "", "good morning good morning"]
    for beam_width in (None, 3):
        expected = translator.translate(sentences, beam_width=beam_width)
        assert translator.translate(sentences, beam_width=beam_width, batch_size=1) == expected
        assert translator.translate(sentences, beam_width=beam_width, batch_size=3) == expected
    with pytest.raises(ValueError, match="`batch_size`"):
        translator.translate(sentences, batch_size=0)


def test_beam_width_one_equals_greedy():
    translator = make_translator()
    sentences = ["I like cats", "good morning"]
    assert translator.translate(sentences, beam_width=1) == translator.translate(sentences)


def test_cross_attention_never_looks_at_source_padding():
    from transformer_course.translation import cross_attention_weights

    weights = cross_attention_weights(small_model(2), np.array([[3, 4, 5, 0, 0]]), np.array([[2, 7, 8]]))
    assert weights.shape == (1, 2, 3, 5)
    assert np.all(weights[..., 3:] == 0.0)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)


def test_model_trains_with_the_masked_loss_and_keeps_padding_out():
    from transformer_course.metrics import masked_accuracy, masked_loss

    model = small_model(1)
    # Eagerly: tests/layer_checks.py trains every model traced; here the steps are what is checked.
    model.compile(optimizer="adam", loss=masked_loss, metrics=[masked_accuracy], run_eagerly=True)
    source = np.array([[3, 4, 5, 0], [6, 7, 0, 0]], "int32")
    decoder_input = np.array([[2, 8, 9, 0], [2, 10, 0, 0]], "int32")
    labels = np.array([[8, 9, 3, 0], [10, 3, 0, 0]], "int32")
    history = model.fit({"source_ids": source, "target_ids": decoder_input}, labels, epochs=3, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    probabilities = model({"source_ids": source, "target_ids": decoder_input})
    assert keras_mask(probabilities) is None
    expected = float(masked_loss(labels, probabilities))
    evaluated = model.evaluate({"source_ids": source, "target_ids": decoder_input}, labels, verbose=0)[0]
    assert evaluated == pytest.approx(expected, rel=1e-5)


def test_tied_embeddings_share_the_target_table_and_survive_a_round_trip(tmp_path):
    untied, tied = small_model(1), small_model(1, tie_embeddings=True)
    assert untied.count_params() - tied.count_params() == 16 * 40  # the E x V output matrix, gone
    table = tied.get_layer("target_embedding").token_embedding.embeddings
    assert not [w for w in tied.get_layer("output").weights if tuple(w.shape) == tuple(table.shape)]
    inputs = {"source_ids": np.array([[3, 4, 0]], "int32"), "target_ids": np.array([[1, 7, 8]], "int32")}
    probabilities = keras.ops.convert_to_numpy(tied(inputs))
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    tied.save(tmp_path / "tied.keras")
    restored = keras.models.load_model(tmp_path / "tied.keras")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(restored(inputs)), probabilities, atol=1e-6)


@pytest.mark.parametrize("tie_embeddings", [False, True])
def test_the_model_names_its_parts_and_reloads_as_itself(tie_embeddings, tmp_path):
    model = small_model(tie_embeddings=tie_embeddings)
    assert [block.name for block in model.encoder_blocks] == ["encoder_1", "encoder_2"]
    assert [block.name for block in model.decoder_blocks] == ["decoder_1", "decoder_2"]
    assert model.source_embedding.name == "source_embedding" and model.output_layer.units == 40
    inputs = {"source_ids": np.array([[3, 4, 5, 0]], "int32"), "target_ids": np.array([[1, 6, 7]], "int32")}
    # its own passes at inference, encode then decode, give what the whole model gives
    encoded, source_mask = model.encode(inputs["source_ids"])
    decoded = model.decode(inputs["target_ids"], encoded, source_mask)
    expected = keras.ops.convert_to_numpy(model(inputs))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(decoded.probabilities), expected, atol=1e-6)
    assert decoded.self_attention_caches is None and decoded.attention_scores is None
    # and step by step through the caches, position after position
    self_caches, cross_caches = model.initial_caches(1, 3, encoded)
    for position in range(3):
        step = model.decode(
            inputs["target_ids"][:, position : position + 1],
            source_mask=source_mask,
            start_index=position,
            self_attention_caches=self_caches,
            cross_attention_caches=cross_caches,
            last_only=True,
        )
        self_caches = step.self_attention_caches
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(step.probabilities)[:, 0], expected[:, position], atol=1e-5
        )
    model.save(tmp_path / "model.keras")
    reloaded = keras.models.load_model(tmp_path / "model.keras")
    assert type(reloaded) is type(model) and reloaded.tie_embeddings == tie_embeddings
    assert len(reloaded.weights) == len(model.weights)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(inputs)), keras.ops.convert_to_numpy(model(inputs)), atol=1e-6
    )


def test_sizes_come_first_and_everything_else_by_keyword():
    with pytest.raises(TypeError):
        build_translation_model(30, 40, 8, 9, 16)
    with pytest.raises(ValueError, match="num_heads"):
        build_translation_model(30, 40, 8, 9, embed_dim=16, num_heads=3)
