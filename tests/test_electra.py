"""Replaced-token detection (ELECTRA): the samples, the labels, the loss, and that no gradient crosses the draw."""

import keras
import numpy as np
import pytest
from keras import ops

from transformer_course.bert import build_bert_classifier
from transformer_course.electra import (
    DISCRIMINATOR_WEIGHT,
    ElectraPretrainer,
    ReplacedTokenDetectionLoss,
    ReplaceWithSamples,
    constant_guess_loss,
    detection_quality,
    replaced_rate,
)
from transformer_course.metrics import MaskedCrossEntropy
from transformer_course.pretraining import gather_selected, mask_tokens

V, T, P = 30, 8, 3
MASK = 29
ORIGINAL = np.array([[1, 5, 6, 7, 8, 9, 2, 0], [1, 10, 11, 12, 13, 14, 15, 2]], dtype="int32")
POSITIONS = np.array([[2, 4, 0], [1, 3, 6]], dtype="int32")
LABELS = np.array([[6, 8, 0], [10, 12, 15]], dtype="int32")  # row 0's third slot is unused


def numpy(x):
    return np.asarray(ops.convert_to_numpy(x))


def inputs():
    masked = ORIGINAL.copy()
    for row in range(2):
        for position, label in zip(POSITIONS[row], LABELS[row]):
            if label:
                masked[row, position] = MASK
    return {
        "token_ids": masked,
        "original_ids": ORIGINAL,
        "segment_ids": np.zeros_like(ORIGINAL),
        "mask_positions": POSITIONS,
        "mask_labels": LABELS,
    }


def test_samples_replace_only_the_chosen_positions_and_a_draw_of_the_original_counts_as_original():
    probabilities = np.zeros((2, P, V), "float32")
    probabilities[0, 0, 6] = 1.0  # certain of the original (6 at position 2): not a replacement
    probabilities[0, 1, 20] = 1.0  # certain of another token at position 4: a replacement
    probabilities[0, 2, 21] = 1.0  # an unused slot (label 0, position 0): must change nothing
    probabilities[1, :, 22] = 1.0
    corrupted, replaced = (
        numpy(value) for value in ReplaceWithSamples(seed=0)(probabilities, ORIGINAL, POSITIONS, LABELS)
    )
    expected = ORIGINAL.copy()
    expected[0, 4] = 20
    expected[1, [1, 3, 6]] = 22
    np.testing.assert_array_equal(corrupted, expected)
    np.testing.assert_array_equal(replaced, (expected != ORIGINAL).astype("float32"))
    assert replaced[0, 2] == 0 and replaced[0, 0] == 0


def test_draws_follow_the_generators_distribution():
    probabilities = np.tile(np.array([0.0, 0.7, 0.2, 0.1], "float32"), (1, 2000, 1))  # (1, 2000, 4)
    original = np.full((1, 2000), 3, "int32")
    positions = np.arange(2000, dtype="int32")[None]
    corrupted, _ = ReplaceWithSamples(seed=1)(probabilities, original, positions, np.ones((1, 2000), "int32"))
    shares = np.bincount(numpy(corrupted)[0], minlength=4) / 2000
    np.testing.assert_allclose(shares, [0.0, 0.7, 0.2, 0.1], atol=0.04)  # about 4 standard errors


def test_the_loss_equals_a_hand_computation_and_padding_never_counts():
    y_pred = np.array([[[0.9, 1, 1], [0.2, 0, 1], [0.6, 1, 0]]], "float32")  # the third token is padding
    expected = -(np.log(0.9) + np.log(0.8)) / 2
    loss = float(numpy(ReplacedTokenDetectionLoss()(np.zeros((1,)), y_pred)))
    assert loss == pytest.approx(expected, rel=1e-5)


def test_the_pretrainer_shares_embeddings_and_its_discriminator_never_sees_mask(tmp_path):
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(
        V, T, P, embed_dim=16, num_heads=4, intermediate_dim=32, num_layers=2, dropout=0.0, seed=3
    )
    outputs = model(inputs())
    assert tuple(outputs["generator"].shape) == (2, P, V)
    assert tuple(outputs["discriminator"].shape) == (2, T, 3)
    discriminator = numpy(outputs["discriminator"])
    np.testing.assert_array_equal(discriminator[..., 2], (ORIGINAL != 0).astype("float32"))  # real tokens
    assert model.generator_width == 4
    names = [weight.path for weight in model.weights]
    assert sum("token_embedding/token_embedding" in name for name in names) == 1  # one table, shared
    copy = ElectraPretrainer.from_config(model.get_config())
    assert copy.count_params() == model.count_params()


def test_no_gradient_flows_from_the_discriminators_loss_into_the_generator():
    tf = pytest.importorskip("tensorflow")
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the gradient is read with TensorFlow's GradientTape")
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(V, T, P, embed_dim=16, num_heads=4, intermediate_dim=32, num_layers=1, dropout=0.0)
    with tf.GradientTape() as tape:
        loss = ReplacedTokenDetectionLoss()(np.zeros((2,)), model(inputs())["discriminator"])
    generator_only = [weight for weight in model.trainable_weights if "generator" in weight.path]
    assert generator_only
    gradients = tape.gradient(loss, [weight.value for weight in generator_only])
    assert all(gradient is None or float(tf.reduce_max(tf.abs(gradient))) == 0.0 for gradient in gradients)


def test_one_training_step_moves_both_encoders_and_the_discriminator_fine_tunes_as_bert():
    keras.utils.set_random_seed(0)
    model = ElectraPretrainer(V, T, P, embed_dim=16, num_heads=4, intermediate_dim=32, num_layers=1, dropout=0.0)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss={"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()},
        loss_weights={"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT},
    )
    rng = np.random.default_rng(0)
    masked, labels, selected = mask_tokens(
        ORIGINAL, rng, V, MASK, mask_token_rate=1.0, random_token_rate=0.0, unselectable_token_ids=(0, 1, 2)
    )
    positions, position_labels = gather_selected(selected, labels, P)
    before = [numpy(weight).copy() for weight in model.trainable_weights]
    model.train_on_batch(
        {
            "token_ids": masked,
            "original_ids": ORIGINAL,
            "segment_ids": np.zeros_like(ORIGINAL),
            "mask_positions": positions,
            "mask_labels": position_labels,
        },
        {"generator": position_labels, "discriminator": np.zeros((2,), "float32")},
    )
    moved = {
        weight.path.split("/")[0]
        for weight, old in zip(model.trainable_weights, before)
        if not np.allclose(numpy(weight), old)
    }
    assert {"generator_1", "encoder_1", "discriminator_head", "token_embedding"} <= moved
    classifier = build_bert_classifier(model, 2)
    assert classifier({"token_ids": ORIGINAL, "segment_ids": np.zeros_like(ORIGINAL)}).shape == (2, 2)


def test_bad_sizes_are_refused_by_name():
    with pytest.raises(ValueError, match="generator_fraction"):
        ElectraPretrainer(V, T, P, embed_dim=16, num_heads=4, intermediate_dim=32, generator_fraction=0.0)


def test_electra_batches_mask_every_scored_position_and_nothing_else():
    from transformer_course.electra import ElectraBatches

    rows = np.random.default_rng(0).integers(5, 200, size=(64, 40)).astype("int32")
    rows[:, 0], rows[:, -1] = 1, 2  # [CLS] ... [SEP]
    batches = ElectraBatches(rows, None, 16, 200, 4, special_token_ids=(1, 2), max_predictions=4, seed=3)
    inputs, targets = batches[1]
    masked, original = inputs["token_ids"], inputs["original_ids"]
    scored = np.zeros(masked.shape, bool)
    for row, (positions, labels) in enumerate(zip(inputs["mask_positions"], inputs["mask_labels"])):
        scored[row, positions[labels != 0]] = True
        np.testing.assert_array_equal(original[row, positions[labels != 0]], labels[labels != 0])
    np.testing.assert_array_equal(masked == 4, scored)  # [MASK] exactly where the generator is scored
    np.testing.assert_array_equal(masked[~scored], original[~scored])
    assert not scored[:, [0, -1]].any() and scored.sum(axis=1).max() == 4  # 15% of 38 is more than 4: capped
    np.testing.assert_array_equal(targets["generator"], inputs["mask_labels"])
    assert targets["discriminator"].shape == (16,)


def test_electra_inputs_choose_the_positions_berts_masking_chooses_with_the_same_seed():
    """The held-out blanks of both objectives can be the same: the same draws choose the same positions."""
    from transformer_course.electra import electra_inputs

    rows = np.random.default_rng(1).integers(5, 300, size=(32, 30)).astype("int32")
    _, labels, selected = mask_tokens(rows, np.random.default_rng(9), 300, 4, unselectable_token_ids=(0, 4))
    positions, position_labels = gather_selected(selected, labels, 6)
    inputs, _ = electra_inputs(rows, np.random.default_rng(9), 300, 4, (0, 4), 6)
    np.testing.assert_array_equal(inputs["mask_positions"], positions)
    np.testing.assert_array_equal(inputs["mask_labels"], position_labels)


def test_a_compiled_pretrainer_saves_and_reloads_with_its_losses(tmp_path):
    """Fine-tuning starts from a saved, compiled checkpoint: its losses must deserialize."""
    model = ElectraPretrainer(V, T, P, embed_dim=16, num_heads=4, intermediate_dim=32, num_layers=1, dropout=0.0)
    losses = {"generator": MaskedCrossEntropy(), "discriminator": ReplacedTokenDetectionLoss()}
    model.compile(optimizer="adam", loss=losses, loss_weights={"generator": 1.0, "discriminator": DISCRIMINATOR_WEIGHT})
    model.save(tmp_path / "electra.keras")
    reloaded = keras.models.load_model(tmp_path / "electra.keras")
    for saved, loaded in zip(model.get_weights(), reloaded.get_weights()):
        np.testing.assert_array_equal(saved, loaded)


def test_an_id_of_probability_zero_is_never_drawn():
    """Padding (id 0) and every id the generator rules out stay out of the draws, even at the edges of the sum."""
    probabilities = np.zeros((1, 4000, 6), "float32")
    probabilities[..., [1, 3, 4]] = [0.5, 0.25, 0.25]  # ids 0, 2 and 5 impossible
    draws = numpy(ReplaceWithSamples(seed=3).draw(probabilities))
    assert set(np.unique(draws)) == {1, 3, 4}
    np.testing.assert_allclose(np.bincount(draws[0], minlength=6)[[1, 3, 4]] / 4000, [0.5, 0.25, 0.25], atol=0.03)


def test_the_floor_is_the_binary_entropy_and_no_constant_guess_beats_it():
    assert constant_guess_loss(0.15) == pytest.approx(0.15 * np.log(1 / 0.15) + 0.85 * np.log(1 / 0.85), rel=1e-12)
    assert constant_guess_loss(0.15) == pytest.approx(0.42271, abs=1e-5)  # by hand: 0.28457 + 0.13814
    assert constant_guess_loss(0.0) == constant_guess_loss(1.0) == 0.0
    labels = np.array([1.0] * 15 + [0.0] * 85)  # a replaced rate of 0.15
    guesses = np.linspace(0.01, 0.99, 99)
    losses = [-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)) for p in guesses]
    assert guesses[int(np.argmin(losses))] == pytest.approx(0.15) and min(losses) == pytest.approx(0.42271, abs=1e-5)
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ValueError, match="`rate` must lie in \\[0, 1\\]"):
            constant_guess_loss(bad)


def test_the_replaced_rate_counts_real_tokens_only():
    judged = np.zeros((2, 4, 3), "float32")
    judged[0, :, 2] = [1, 1, 1, 0]  # three real tokens, the last one padding (and "replaced": never counted)
    judged[0, :, 1] = [1, 0, 0, 1]
    judged[1, :, 2] = 1
    judged[1, :, 1] = [1, 1, 0, 0]
    np.testing.assert_allclose(numpy(replaced_rate(None, judged)), [1 / 3, 1 / 2], rtol=1e-6)


class _Judge:
    """Stands in for an ElectraPretrainer: replaces the first two real tokens of every row and judges them."""

    def __init__(self, probability):
        self.probability = probability

    def __call__(self, batch, training=False):
        rows, length = batch["original_ids"].shape
        judged = np.zeros((rows, length, 3), "float32")
        judged[..., 2] = batch["original_ids"] != 0
        judged[:, :2, 1] = 1.0
        judged[..., 0] = self.probability(judged[..., 1])
        generator = np.zeros((rows, batch["mask_labels"].shape[1], V), "float32")
        generator[..., 7] = 1.0  # always guesses token 7
        return {"discriminator": judged, "generator": generator}


def test_detection_quality_scores_a_perfect_judge_and_a_constant_guess():
    batch = {
        "original_ids": np.tile(np.arange(1, 11, dtype="int32"), (6, 1)),
        "mask_labels": np.array([[7, 3], [7, 0], [4, 4], [7, 7], [1, 0], [2, 7]], "int32"),
    }
    batch["token_ids"] = batch["original_ids"]
    perfect = detection_quality(_Judge(lambda label: np.where(label > 0, 0.999, 0.001)), batch, batch_size=4)
    assert perfect["rate"] == pytest.approx(0.2) and perfect["floor"] == pytest.approx(constant_guess_loss(0.2))
    assert perfect["auc"] == 1.0 and perfect["recall"] == 1.0 and perfect["below_floor"] > 0.99
    assert perfect["generator_accuracy"] == pytest.approx(5 / 10)  # five of the ten used slots hold a 7
    constant = detection_quality(_Judge(lambda label: np.full_like(label, 0.2)), batch)
    assert constant["loss"] == pytest.approx(constant["floor"], rel=1e-5) and abs(constant["below_floor"]) < 1e-5
    assert constant["auc"] == 0.5 and constant["recall"] == 0.0
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer"):
        detection_quality(_Judge(lambda label: label), batch, batch_size=0)
