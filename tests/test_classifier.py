"""The sentiment classifier: masked pooling, the [CLS] token, padding invariance, saving."""

from importlib.util import find_spec

import keras
import numpy as np
import pytest

from transformer_course.classifier import (
    MaskedGlobalMaxPooling1D,
    PrependClassToken,
    build_sentiment_classifier,
)

# A model on raw strings needs TensorFlow whatever the Keras backend: TextVectorization and the
# review standardisation run on tf.strings. The other backends' sessions have no TensorFlow.
needs_tensorflow = pytest.mark.skipif(
    find_spec("tensorflow") is None, reason="string models need TensorFlow (TextVectorization, tf.strings)"
)


def test_masked_max_pooling_ignores_padded_positions():
    values = np.array([[[1.0, -5.0], [2.0, -3.0], [9.0, 9.0]]], dtype="float32")  # last is padding
    mask = np.array([[True, True, False]])
    pooled = MaskedGlobalMaxPooling1D()(values, mask=mask)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(pooled), [[2.0, -3.0]])


def test_masked_max_pooling_of_an_empty_sequence_is_zero():
    values = np.full((1, 3, 2), 7.0, dtype="float32")
    pooled = MaskedGlobalMaxPooling1D()(values, mask=np.zeros((1, 3), bool))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(pooled), [[0.0, 0.0]])


def test_masked_max_pooling_rejects_rank_2():
    with pytest.raises(ValueError, match="inputs"):
        MaskedGlobalMaxPooling1D()(np.ones((2, 3), "float32"))


def test_prepend_class_token():
    ids = PrependClassToken(50)(np.array([[4, 5, 0]], dtype="int32"))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(ids), [[50, 4, 5, 0]])


@pytest.mark.parametrize("positions", [True, False])
@pytest.mark.parametrize("pooling", ["max", "cls"])
def test_prediction_does_not_depend_on_padding(positions, pooling):
    keras.utils.set_random_seed(0)
    model = build_sentiment_classifier(
        100, 20, embed_dim=16, num_heads=2, intermediate_dim=8, positions=positions, pooling=pooling
    )
    short = np.array([[5, 17, 3, 99, 2]], dtype="int32")
    padded = np.pad(short, ((0, 0), (0, 12)))
    # convert_to_numpy: on the torch backend outputs require grad, and NumPy refuses them.
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model(short)), keras.ops.convert_to_numpy(model(padded)), atol=1e-6
    )


def test_output_shape_and_layer_names():
    model = build_sentiment_classifier(100, 20, embed_dim=16, num_heads=2, intermediate_dim=8, num_layers=2)
    assert model(np.ones((3, 7), "int32")).shape == (3, 1)
    assert [layer.name for layer in model.layers[1:]] == [
        "embedding",
        "encoder_1",
        "encoder_2",
        "pooling",
        "dropout",
        "output",
    ]


@pytest.mark.parametrize(
    "argument, value, message",
    [
        ("pooling", "mean", "pooling"),
        ("num_heads", 3, "num_heads"),
        ("dropout", 1.0, "dropout"),
        ("vocabulary_size", 0, "vocabulary_size"),
    ],
)
def test_bad_arguments_are_named(argument, value, message):
    kwargs = dict(vocabulary_size=100, sequence_length=20, embed_dim=16)
    kwargs[argument] = value
    with pytest.raises(ValueError, match=message):
        build_sentiment_classifier(**kwargs)


@pytest.mark.parametrize("pooling", ["max", "cls"])
def test_keras_file_round_trip(tmp_path, pooling):
    model = build_sentiment_classifier(100, 20, embed_dim=16, num_heads=2, intermediate_dim=8, pooling=pooling)
    ids = np.array([[5, 17, 3, 0, 0], [1, 2, 3, 4, 5]], dtype="int32")
    model.save(tmp_path / "classifier.keras")
    reloaded = keras.models.load_model(tmp_path / "classifier.keras")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model(ids)), keras.ops.convert_to_numpy(reloaded(ids)), atol=1e-6
    )


def _end_to_end():
    from transformer_course.classifier import build_end_to_end_classifier
    from transformer_course.text import standardize_review

    keras.utils.set_random_seed(0)
    vectorizer = keras.layers.TextVectorization(
        max_tokens=50, output_sequence_length=12, standardize=standardize_review
    )
    vectorizer.adapt(["a good film", "a bad film<br />really bad", "good acting, good story"])
    return build_end_to_end_classifier(
        vectorizer, build_sentiment_classifier(50, 12, embed_dim=8, num_heads=2, intermediate_dim=4)
    )


@needs_tensorflow
def test_end_to_end_model_round_trips_with_its_vocabulary(tmp_path):
    from transformer_course.classifier import predict_sentiment

    model = _end_to_end()
    reviews = ["A good film.", "bad<br />bad", ""]
    model.save(tmp_path / "reviews.keras")
    reloaded = keras.models.load_model(tmp_path / "reviews.keras")
    np.testing.assert_array_equal(predict_sentiment(model, reviews), predict_sentiment(reloaded, reviews))


@needs_tensorflow
def test_predict_sentiment_accepts_any_string():
    from transformer_course.classifier import predict_sentiment

    model = _end_to_end()
    for review in ["", "これは映画です", "good " * 10000, "😀"]:
        assert 0.0 <= predict_sentiment(model, review) <= 1.0
    assert predict_sentiment(model, []).shape == (0,)
    assert predict_sentiment(model, ("good", "bad")).shape == (2,)


@needs_tensorflow
@pytest.mark.parametrize(
    "reviews, message",
    [(42, "`reviews` must be"), (["fine", None], r"`reviews\[1\]`"), (b"bytes", "`reviews` must be")],
)
def test_predict_sentiment_names_bad_input(reviews, message):
    from transformer_course.classifier import predict_sentiment

    with pytest.raises(TypeError, match=message):
        predict_sentiment(_end_to_end(), reviews)
