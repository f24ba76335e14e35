"""`vocab_size` became `vocabulary_size`: the former name still works, with a warning, and files saved before load."""

import keras
import numpy as np
import pytest

from transformer_course.classifier import build_sentiment_classifier
from transformer_course.language_model import LanguageModel, build_language_model
from transformer_course.ngram import BigramModel, UnigramModel, scored_pairs
from transformer_course.positional import PositionalEmbedding, TokenEmbedding
from transformer_course.translation import TranslationModel, build_translation_model

SMALL = {"embed_dim": 8, "num_heads": 2, "intermediate_dim": 16}

BUILDERS = {
    "PositionalEmbedding": (lambda **size: PositionalEmbedding(sequence_length=6, embed_dim=8, **size), "vocab_size"),
    "TokenEmbedding": (lambda **size: TokenEmbedding(embed_dim=8, **size), "vocab_size"),
    "build_language_model": (
        lambda **size: build_language_model(sequence_length=6, num_layers=1, **SMALL, **size),
        "vocab_size",
    ),
    "build_sentiment_classifier": (
        lambda **size: build_sentiment_classifier(sequence_length=6, **SMALL, **size),
        "vocab_size",
    ),
    "UnigramModel": (lambda **size: UnigramModel(**size), "vocab_size"),
    "BigramModel": (lambda **size: BigramModel(**size), "vocab_size"),
}


@pytest.mark.parametrize("builder", BUILDERS)
def test_the_former_name_gives_the_same_object_with_a_deprecation_warning(builder):
    build, former = BUILDERS[builder]
    keras.utils.set_random_seed(0)
    new = build(vocabulary_size=12)
    keras.utils.set_random_seed(0)
    with pytest.warns(DeprecationWarning, match=f"`{former}` is now called `vocabulary_size`"):
        old = build(**{former: 12})
    if isinstance(new, keras.layers.Layer):
        ids = np.array([[3, 11, 0]])
        if not isinstance(new, keras.Model):  # a layer builds on its first call
            new(ids), old(ids)
        assert len(new.get_weights()) == len(old.get_weights()) > 0
        for new_weight, old_weight in zip(new.get_weights(), old.get_weights()):
            np.testing.assert_array_equal(new_weight, old_weight)
    else:
        assert new.vocabulary_size == old.vocabulary_size == 12


@pytest.mark.parametrize("builder", BUILDERS)
def test_both_names_at_once_or_neither_is_a_type_error_naming_them(builder):
    build, former = BUILDERS[builder]
    with pytest.raises(TypeError, match=f"`{former}` is the former name of `vocabulary_size`"):
        build(vocabulary_size=12, **{former: 12})
    with pytest.raises(TypeError, match="missing the argument `vocabulary_size`"):
        build()


def test_the_translation_model_takes_its_two_former_names():
    with pytest.warns(DeprecationWarning, match="`source_vocab_size` is now called `source_vocabulary_size`"):
        old = build_translation_model(
            source_vocab_size=11, target_vocabulary_size=13, source_length=5, target_length=6, num_layers=1, **SMALL
        )
    with pytest.warns(DeprecationWarning, match="`target_vocab_size` is now called `target_vocabulary_size`"):
        TranslationModel(11, target_vocab_size=13, source_length=5, target_length=6, num_layers=1, **SMALL)
    assert old.get_config()["source_vocabulary_size"] == 11 and old.output_shape == (None, None, 13)


def test_scored_pairs_takes_the_former_name():
    ids = np.array([[3, 4, 0]])
    with pytest.warns(DeprecationWarning):
        pairs = scored_pairs(ids, vocab_size=5)
    np.testing.assert_array_equal(pairs[0], scored_pairs(ids, 5)[0])


def test_configs_saved_under_the_former_names_load_without_a_warning(recwarn):
    """A `.keras` file written before the rename holds `vocab_size` in its configs: it still loads, silently."""
    language_model = LanguageModel(12, 6, num_layers=1, **SMALL)
    config = {
        ("vocab_size" if key == "vocabulary_size" else key): value for key, value in language_model.get_config().items()
    }
    assert LanguageModel.from_config(config).vocabulary_size == 12
    translator = TranslationModel(11, 13, 5, 6, num_layers=1, **SMALL)
    config = {key.replace("vocabulary_size", "vocab_size"): value for key, value in translator.get_config().items()}
    assert TranslationModel.from_config(config).target_vocabulary_size == 13
    for layer in (PositionalEmbedding(6, 12, 8), TokenEmbedding(12, 8)):
        config = {
            ("vocab_size" if key == "vocabulary_size" else key): value for key, value in layer.get_config().items()
        }
        assert type(layer).from_config(config).vocabulary_size == 12
    assert not [
        warning
        for warning in recwarn
        if issubclass(warning.category, DeprecationWarning) and "vocab_size" in str(warning.message)
    ]
