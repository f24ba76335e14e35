"""The BERT-style model: its outputs, the tied masked-LM layer, padding, round trips, and the
fine-tuning heads built on its layers."""

import keras
import numpy as np
import pytest

from transformer_course.bert import (
    build_bert_classifier,
    build_bert_encoder,
    build_bert_pretrainer,
    build_span_finder,
    build_token_tagger,
    gelu_approximate,
)
from transformer_course.metrics import MaskedCrossEntropy
from transformer_course.pretraining import PretrainingBatches, contiguous_segments

MASK, CLS, SEP = 3, 1, 2


def small_bert(**overrides):
    arguments = dict(
        vocabulary_size=40,
        sequence_length=12,
        max_predictions=3,
        embed_dim=16,
        num_heads=2,
        intermediate_dim=32,
        num_layers=2,
        dropout=0.1,
    )
    return build_bert_pretrainer(**{**arguments, **overrides})


def bert_inputs(rows=4, length=10, seed=0):
    generator = np.random.default_rng(seed)
    token_ids = generator.integers(5, 40, size=(rows, length)).astype("int32")
    token_ids[:, 0] = CLS
    segment_ids = np.zeros_like(token_ids)
    segment_ids[:, 5:] = 1
    positions = np.tile(np.array([[1, 3, 6]], dtype="int32"), (rows, 1))
    return {"token_ids": token_ids, "segment_ids": segment_ids, "mask_positions": positions}


def test_pretrainer_outputs_and_a_training_step():
    model = small_bert()
    outputs = model(bert_inputs())
    assert tuple(outputs["mlm"].shape) == (4, 3, 40) and tuple(outputs["nsp"].shape) == (4, 2)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs["mlm"]).sum(-1), 1.0, atol=1e-5)
    model.compile(
        optimizer="adam",
        loss={"mlm": MaskedCrossEntropy(), "nsp": "sparse_categorical_crossentropy"},
        run_eagerly=True,  # tests/layer_checks.py trains the pretrainer traced; the step is what is checked here
    )
    labels = {"mlm": np.array([[7, 8, 0]] * 4, dtype="int32"), "nsp": np.array([0, 1, 1, 0])}
    history = model.fit(bert_inputs(), labels, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_the_masked_lm_output_layer_is_the_token_embedding():
    model = small_bert()
    table = model.get_layer("token_embedding").token_embedding.embeddings
    assert not any(weight.shape == (16, 40) for weight in model.trainable_weights)  # no separate output matrix
    assert any(weight is table for weight in model.trainable_weights)


def test_padding_changes_nothing_on_real_tokens():
    model = small_bert(dropout=0.0)
    inputs = bert_inputs(rows=2, length=8)
    padded = {key: value.copy() for key, value in inputs.items()}
    padded["token_ids"] = np.pad(inputs["token_ids"], ((0, 0), (0, 4)))
    padded["segment_ids"] = np.pad(inputs["segment_ids"], ((0, 0), (0, 4)))
    short, long = model(inputs), model(padded)
    for key in ("mlm", "nsp"):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(short[key]), keras.ops.convert_to_numpy(long[key]), atol=1e-5
        )


def test_the_classifier_shares_the_encoder():
    reloaded = small_bert()
    inputs = bert_inputs()
    classifier = build_bert_classifier(reloaded, num_classes=2)
    shared = {id(weight) for weight in reloaded.get_layer("encoder_2").weights}
    assert shared <= {id(weight) for weight in classifier.weights}
    probabilities = classifier({"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]})
    assert tuple(probabilities.shape) == (4, 2)
    assert len([layer for layer in classifier.layers if layer.name.startswith("encoder_")]) == 2


def test_pretraining_batches_mask_afresh_every_epoch_and_train_the_pretrainer():

    inputs = bert_inputs(rows=10, length=12, seed=5)
    inputs["token_ids"][:, 5] = SEP
    batches = PretrainingBatches(
        inputs["token_ids"],
        inputs["segment_ids"],
        np.arange(10) % 2,
        batch_size=4,
        vocabulary_size=40,
        mask_token_id=MASK,
        special_token_ids=(CLS, SEP),
        max_predictions=3,
    )
    assert len(batches) == 3
    features, labels = batches[0]
    assert features["mask_positions"].shape == labels["mlm"].shape == (4, 3)
    first = batches[0][0]["token_ids"].copy()
    batches.on_epoch_end()
    assert not np.array_equal(first, batches[0][0]["token_ids"])
    model = small_bert()
    model.compile(
        optimizer="adam",
        loss={"mlm": MaskedCrossEntropy(), "nsp": "sparse_categorical_crossentropy"},
        run_eagerly=True,  # tests/layer_checks.py trains the pretrainer traced; the step is what is checked here
    )
    assert np.isfinite(model.fit(batches, epochs=1, verbose=0).history["loss"][0])


def test_token_tagger_and_span_finder_heads_shapes_padding_and_round_trip(tmp_path):
    pretrainer = small_bert(dropout=0.0)
    inputs = {key: value for key, value in bert_inputs(rows=3, length=8).items() if key != "mask_positions"}
    inputs["token_ids"][0, 6:] = 0  # a padded row
    tags = build_token_tagger(pretrainer, num_tags=3)(inputs)
    assert tuple(tags.shape) == (3, 8, 3)
    finder = build_span_finder(pretrainer)
    spans = finder(inputs)
    for key in ("start", "end"):
        values = keras.ops.convert_to_numpy(spans[key])
        assert values.shape == (3, 8)
        np.testing.assert_allclose(values.sum(-1), 1.0, atol=1e-5)
        assert (values[0, 6:] == 0).all()
    finder.save(tmp_path / "finder.keras")
    reloaded = keras.models.load_model(tmp_path / "finder.keras")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(inputs)["start"]), keras.ops.convert_to_numpy(spans["start"]), atol=1e-6
    )


def test_masked_lm_only_pretrainer_trains_and_its_classifier_gets_a_fresh_pooler(tmp_path):
    model = small_bert(next_sentence=False)
    assert set(model.output) == {"mlm"} and not any(layer.name == "pooler" for layer in model.layers)
    token_ids = contiguous_segments([np.arange(5, 40)] * 3, 12, CLS, SEP)
    batches = PretrainingBatches(
        token_ids,
        None,
        None,
        batch_size=4,
        vocabulary_size=40,
        mask_token_id=MASK,
        special_token_ids=(CLS, SEP),
        max_predictions=3,
    )
    features, labels = batches[0]
    assert set(labels) == {"mlm"} and (features["segment_ids"] == 0).all()
    model.compile(optimizer="adam", loss={"mlm": MaskedCrossEntropy()}, run_eagerly=True)  # traced: layer_checks
    assert np.isfinite(model.fit(batches, epochs=1, verbose=0).history["loss"][0])
    model.save(tmp_path / "mlm.keras")
    classifier = build_bert_classifier(keras.models.load_model(tmp_path / "mlm.keras"), num_classes=2)
    assert classifier.get_layer("pooler").count_params() == 16 * 16 + 16
    assert tuple(classifier({"token_ids": token_ids[:2], "segment_ids": np.zeros_like(token_ids[:2])}).shape) == (2, 2)


def test_a_mean_pooled_classifier_reads_the_mean_of_the_real_positions_and_ignores_padding(tmp_path):
    model = small_bert(next_sentence=False, dropout=0.0)
    inputs = bert_inputs(rows=2, length=8)
    features = {"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]}
    classifier = build_bert_classifier(model, num_classes=2, dropout=0.0, pooling="mean")
    assert not any(layer.name == "pooler" for layer in classifier.layers)
    padded = {key: np.pad(value, ((0, 0), (0, 4))) for key, value in features.items()}
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(classifier(features)), keras.ops.convert_to_numpy(classifier(padded)), atol=1e-5
    )
    # the same as the softmax layer on the hand-computed mean of the encoder's outputs at the real positions
    encoded = keras.ops.convert_to_numpy(build_bert_encoder(model)(padded))
    real = (padded["token_ids"] != 0)[..., None]
    mean = (encoded * real).sum(axis=1) / real.sum(axis=1)
    expected = keras.ops.convert_to_numpy(classifier.get_layer("classifier_output")(mean))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(classifier(padded)), expected, atol=1e-5)
    classifier.save(tmp_path / "mean.keras")
    reloaded = keras.models.load_model(tmp_path / "mean.keras")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(padded)), keras.ops.convert_to_numpy(classifier(padded)), atol=1e-6
    )
    with pytest.raises(ValueError, match="`pooling` must be one of .*received 'max'"):
        build_bert_classifier(model, num_classes=2, pooling="max")


def test_encoder_outputs_do_not_depend_on_padding_and_approximate_gelu_round_trips(tmp_path):
    model = small_bert(dropout=0.0, activation=gelu_approximate)
    encoder = build_bert_encoder(model)
    inputs = bert_inputs(rows=2, length=8)
    short = keras.ops.convert_to_numpy(
        encoder({"token_ids": inputs["token_ids"], "segment_ids": inputs["segment_ids"]})
    )
    long = keras.ops.convert_to_numpy(
        encoder(
            {
                "token_ids": np.pad(inputs["token_ids"], ((0, 0), (0, 4))),
                "segment_ids": np.pad(inputs["segment_ids"], ((0, 0), (0, 4))),
            }
        )
    )
    np.testing.assert_allclose(long[:, :8], short, atol=1e-5)
    model.save(tmp_path / "approximate.keras")
    reloaded = keras.models.load_model(tmp_path / "approximate.keras")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(reloaded(inputs)["mlm"]), keras.ops.convert_to_numpy(model(inputs)["mlm"]), atol=1e-6
    )
    np.testing.assert_allclose(float(gelu_approximate(keras.ops.convert_to_tensor(1.0))), 0.8411920, atol=1e-6)


def test_the_pretrainer_names_its_parts_and_reloads_as_itself(tmp_path):
    model = small_bert(dropout=0.0, next_sentence=False)
    assert [block.name for block in model.encoder_blocks] == ["encoder_1", "encoder_2"] and model.pooler is None
    assert small_bert().pooler.name == "pooler"
    features = {key: value for key, value in bert_inputs().items() if key != "mask_positions"}
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model.encode(features)),
        keras.ops.convert_to_numpy(build_bert_encoder(model)(features)),
        atol=1e-6,
    )
    model.save(tmp_path / "mlm.keras")
    reloaded = keras.models.load_model(tmp_path / "mlm.keras")
    assert type(reloaded) is type(model) and reloaded.pooler is None and not reloaded.next_sentence
    assert len(reloaded.weights) == len(model.weights)
    with pytest.raises(TypeError):
        build_bert_pretrainer(40, 12, 3, 16)
