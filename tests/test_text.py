"""Standardisation functions and length bucketing."""

import numpy as np
import pytest
import tensorflow as tf

from transformer_course.text import (
    bucket_by_length,
    standardize_review,
    standardize_translation,
    trim_padding,
)

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it


def decoded(tensor):
    return [value.decode("utf-8") for value in tensor.numpy()]


def test_review_standardisation_removes_line_breaks_and_punctuation():
    assert decoded(standardize_review(tf.constant(["Great!<br /><br />A MUST-see.<br/>Yes"]))) == [
        "great  a mustsee yes"
    ]


def test_translation_standardisation_keeps_spanish_marks_and_accents():
    assert decoded(standardize_translation(tf.constant(["¿Dónde está el BAÑO?", "¡Qué día, Ángel!"]))) == [
        "¿ dónde está el baño",
        "¡ qué día ángel",
    ]


def test_translation_standardisation_keeps_start_and_end_markers():
    assert decoded(standardize_translation(tf.constant(["[start] Hola. [end]"]))) == ["[start] hola [end]"]


@pytest.mark.parametrize("function", [standardize_review, standardize_translation])
def test_standardisation_rejects_numbers(function):
    with pytest.raises(TypeError, match="texts"):
        function(tf.constant([1, 2]))


def test_trim_padding():
    np.testing.assert_array_equal(trim_padding(tf.constant([4, 1, 9, 0, 0])).numpy(), [4, 1, 9])


def test_buckets_pad_to_their_boundary_and_keep_every_example():
    sequences = [np.arange(1, n + 1) for n in (3, 5, 9, 2, 12, 7)]
    dataset = tf.data.Dataset.from_generator(
        lambda: ((s, len(s)) for s in sequences),
        output_signature=(tf.TensorSpec((None,), tf.int64), tf.TensorSpec((), tf.int64)),
    )
    seen = []
    for ids, lengths in bucket_by_length(dataset, boundaries=[5, 10, 13], batch_size=2):
        assert ids.shape[1] in (4, 9, 12)
        for row, length in zip(ids.numpy(), lengths.numpy()):
            assert ids.shape[1] >= length and (row[length:] == 0).all()
            seen.append(int(length))
    assert sorted(seen) == sorted(len(s) for s in sequences)


@pytest.mark.parametrize("boundaries", [[], [10, 5], [1]])
def test_bucket_boundaries_are_checked(boundaries):
    dataset = tf.data.Dataset.from_tensor_slices(([[1, 2]], [0]))
    with pytest.raises(ValueError, match="boundaries"):
        bucket_by_length(dataset, boundaries, 2)


@pytest.mark.parametrize("boundaries", [None, [3, 5, 9]])
def test_vectorized_batches_know_their_length_and_keep_every_review(boundaries):
    import keras

    from transformer_course.text import vectorized_batches

    texts = ["a b", "a b c d", "a", "b c d e f g", "c", "a b c"]
    vectorizer = keras.layers.TextVectorization(output_sequence_length=8)
    vectorizer.adapt(texts)
    batches = vectorized_batches(texts, [0, 1, 0, 1, 0, 1], vectorizer, 2, bucket_boundaries=boundaries, shuffle=True)
    seen = [
        (int(np.count_nonzero(row)), int(label))
        for ids, labels in batches
        for row, label in zip(ids.numpy(), labels.numpy())
    ]
    assert sorted(seen) == sorted((len(text.split()), label) for text, label in zip(texts, [0, 1, 0, 1, 0, 1]))
    assert int(batches.cardinality()) == sum(1 for _ in batches)


@pytest.mark.parametrize("function", [standardize_review, standardize_translation])
def test_line_separators_inside_words_do_not_break_a_saved_vocabulary(tmp_path, function):
    import keras

    texts = ["good\x85film here", "bad\u2028acting\x0bthere", "nice\u00a0music"]
    vectorizer = keras.layers.TextVectorization(output_sequence_length=4, standardize=function)
    vectorizer.adapt(texts)
    model = keras.Sequential([keras.Input(shape=(), dtype="string"), vectorizer])
    model.save(tmp_path / "vectorizer.keras")
    reloaded = keras.models.load_model(tmp_path / "vectorizer.keras")
    np.testing.assert_array_equal(model(tf.constant(texts)), reloaded(tf.constant(texts)))
    assert "film" in vectorizer.get_vocabulary()


def test_translation_batches_shift_the_target_and_group_by_length():
    import keras

    from transformer_course.text import standardize_translation, translation_batches

    pairs = [("I see.", "Veo."), ("Where is the station?", "¿Dónde está la estación?"), ("Go.", "Ve.")]
    source = keras.layers.TextVectorization(output_sequence_length=8, standardize=standardize_translation)
    target = keras.layers.TextVectorization(output_sequence_length=9, standardize=standardize_translation)
    source.adapt([s for s, _ in pairs])
    target.adapt([f"[start] {t} [end]" for _, t in pairs])
    vocabulary = target.get_vocabulary()
    batches = list(translation_batches(pairs, source, target, batch_size=2, bucket_boundaries=(4, 7)))
    assert len(batches) == 2  # the two short pairs together, the long one alone
    for inputs, label in batches:
        decoder_input, label = inputs["target_ids"].numpy(), label.numpy()
        assert decoder_input.shape == label.shape
        assert all(vocabulary[row[0]] == "[start]" for row in decoder_input)
        np.testing.assert_array_equal(decoder_input[:, 1:][label[:, :-1] != 0], label[:, :-1][label[:, :-1] != 0])
        assert all(vocabulary[row[row != 0][-1]] == "[end]" for row in label)
    with pytest.raises(ValueError, match="`pairs` is empty"):
        translation_batches([], source, target, 2, (4,))


def test_running_text_keeps_sentence_marks_as_tokens_and_apostrophes_inside_words():
    from transformer_course.text import standardize_running_text

    texts = tf.constant(["Great film!<br />I didn't-like (the) END...", 'A "must-see"; 10/10:\u2028wow?'])
    assert [text.decode() for text in standardize_running_text(texts).numpy()] == [
        "great film ! i didn't like ( the ) end . . .",
        'a " must see " ; 10 10 : wow ?',
    ]
    with pytest.raises(TypeError, match="must hold strings"):
        standardize_running_text(tf.constant([1, 2]))
