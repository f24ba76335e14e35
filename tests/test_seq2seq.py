import keras
import numpy as np
import pytest

from transformer_course.reversal import one_hot_decode, one_hot_encode, reversal_dataset
from transformer_course.seq2seq import (
    LSTMDecoder,
    build_encoder_decoder,
    build_teacher_forcing_encoder_decoder,
    shift_right,
)


@pytest.fixture(autouse=True)
def _seed():
    keras.utils.set_random_seed(7)


def _inputs(n=6, steps=4, features=10):
    X, y, _, _ = reversal_dataset(n, 1, steps, features, seed=0)
    return X, y


def test_encoder_decoder_outputs_one_distribution_per_step():
    model = build_encoder_decoder(4, 10, units=16)
    X, _ = _inputs()
    probabilities = keras.ops.convert_to_numpy(model(X))
    assert probabilities.shape == (6, 4, 10)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)
    assert model.count_params() == 2 * 4 * (16 * (10 + 16) + 16) + (16 * 10 + 10)


def test_output_length_can_differ_from_input_length():
    model = build_encoder_decoder(5, 7, units=8, n_timesteps_out=3)
    X, _ = _inputs(steps=5, features=7)
    assert tuple(model(X).shape) == (6, 3, 7)


def test_teacher_forcing_and_free_running_follow_the_same_recurrence():
    """Teacher-forced on the decoder's own argmax answers, the decoder must reproduce them."""
    training_model, inference_model = build_teacher_forcing_encoder_decoder(4, 10, units=16)
    X, _ = _inputs()
    free = keras.ops.convert_to_numpy(inference_model(X))
    own_answers = one_hot_encode(one_hot_decode(free), 10)
    forced = keras.ops.convert_to_numpy(training_model([X, shift_right(own_answers)]))
    np.testing.assert_allclose(forced, free, atol=1e-5)


def test_teacher_forcing_output_at_step_t_ignores_later_inputs():
    training_model, _ = build_teacher_forcing_encoder_decoder(4, 10, units=16)
    X, y = _inputs()
    decoder_inputs = shift_right(y)
    changed = decoder_inputs.copy()
    changed[:, 2:] = one_hot_encode(np.full((6, 2), 5), 10)  # rewrite steps 2 and 3
    before = keras.ops.convert_to_numpy(training_model([X, decoder_inputs]))
    after = keras.ops.convert_to_numpy(training_model([X, changed]))
    np.testing.assert_allclose(after[:, :2], before[:, :2], atol=1e-6)
    assert not np.allclose(after[:, 2:], before[:, 2:])


def test_training_and_inference_models_share_weights():
    training_model, inference_model = build_teacher_forcing_encoder_decoder(4, 10, units=8)
    assert inference_model.get_layer("decoder") is training_model.get_layer("decoder")
    assert inference_model.get_layer("encoder_lstm") is training_model.get_layer("encoder_lstm")


def test_shift_right_starts_with_zeros():
    targets = one_hot_encode([[6, 1, 8, 2]], 10)
    shifted = shift_right(targets)
    assert not shifted[0, 0].any()
    np.testing.assert_array_equal(shifted[0, 1:], targets[0, :-1])
    with pytest.raises(ValueError, match="`targets` must have shape"):
        shift_right(np.zeros((4, 10)))


@pytest.mark.parametrize("builder", ["free", "teacher"])
def test_keras_file_round_trip_without_custom_objects(tmp_path, builder):
    X, _ = _inputs()
    if builder == "free":
        model = build_encoder_decoder(4, 10, units=8)
    else:
        _, model = build_teacher_forcing_encoder_decoder(4, 10, units=8)
    path = tmp_path / "model.keras"
    model.save(path)
    restored = keras.models.load_model(path)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(restored(X)), keras.ops.convert_to_numpy(model(X)), atol=1e-6)


def test_decoder_config_round_trip():
    decoder = LSTMDecoder(units=8, n_features=5, output_length=3, feedback="argmax", name="d")
    clone = LSTMDecoder.from_config(decoder.get_config())
    assert (clone.units, clone.n_features, clone.output_length, clone.feedback) == (8, 5, 3, "argmax")


def test_one_training_step_lowers_the_loss():
    model = build_encoder_decoder(4, 10, units=16)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="categorical_crossentropy")
    X, y = _inputs(n=64)
    first = model.train_on_batch(X, y)
    for _ in range(20):
        last = model.train_on_batch(X, y)
    assert last < first


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(units=0, n_features=5, output_length=3), "`units` must be a positive integer; received 0"),
        (dict(units=4, n_features=5, output_length=-1), "`output_length`"),
        (dict(units=4, n_features=5, output_length=3, feedback="sample"), "`feedback` must be one of"),
    ],
)
def test_decoder_rejects_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        LSTMDecoder(**arguments)


def test_decoder_rejects_mismatched_teacher_forcing_inputs():
    decoder = LSTMDecoder(units=4, n_features=5, output_length=3)
    states = (keras.ops.zeros((2, 4)), keras.ops.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"`decoder_inputs` must have shape \(batch, 3, 5\)"):
        decoder(states, decoder_inputs=keras.ops.zeros((2, 4, 5)))


def test_builder_rejects_bad_sizes():
    with pytest.raises(ValueError, match="`n_timesteps_in`"):
        build_encoder_decoder(0, 10, units=8)


# --- with attention ---------------------------------------------------------------------------

from transformer_course.seq2seq import ATTENTION_SCORES, AttentionLSTMDecoder, build_attention_encoder_decoder  # noqa: E402


@pytest.mark.parametrize("score", ATTENTION_SCORES)
def test_attention_model_shapes_and_weights(score):
    model, attention_model = build_attention_encoder_decoder(5, 7, units=8, score=score)
    X, _ = _inputs(steps=5, features=7)
    probabilities, weights = (keras.ops.convert_to_numpy(t) for t in attention_model(X))
    assert probabilities.shape == (6, 5, 7) and weights.shape == (6, 5, 5)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model(X)), probabilities, atol=1e-6)
    assert attention_model.get_layer("decoder") is model.get_layer("decoder")


@pytest.mark.parametrize("score", ATTENTION_SCORES)
def test_attention_model_round_trip(score, tmp_path):
    _, attention_model = build_attention_encoder_decoder(4, 6, units=8, score=score)
    X, _ = _inputs(steps=4, features=6)
    attention_model.save(tmp_path / "m.keras")
    restored = keras.models.load_model(tmp_path / "m.keras")
    for original, loaded in zip(attention_model(X), restored(X)):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded), keras.ops.convert_to_numpy(original), atol=1e-6)


def test_attention_decoder_never_attends_to_masked_source_positions():
    decoder = AttentionLSTMDecoder(units=8, n_features=5, output_length=3, score="general")
    generator = np.random.default_rng(0)
    encoder_outputs = generator.normal(size=(2, 6, 8)).astype("float32")
    states = (encoder_outputs[:, -1], encoder_outputs[:, -1])
    mask = np.array([[True] * 4 + [False] * 2, [True] * 6])
    probabilities, weights = decoder(encoder_outputs, states, encoder_mask=mask)
    weights = keras.ops.convert_to_numpy(weights)
    assert (weights[0, :, 4:] == 0).all()
    changed = encoder_outputs.copy()
    changed[0, 4:] = 50.0  # what sits in the padding cannot matter
    probabilities_changed, _ = decoder(changed, states, encoder_mask=mask)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(probabilities_changed)[0], keras.ops.convert_to_numpy(probabilities)[0], atol=1e-6
    )


def test_attention_decoder_rejects_unknown_score():
    with pytest.raises(ValueError, match="`score` must be one of"):
        AttentionLSTMDecoder(units=4, n_features=5, output_length=3, score="cosine")
