"""A keras-hub BertBackbone converted into the course's BERT-style model computes the same thing."""

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

import keras  # noqa: E402

from transformer_course.bert import build_bert_classifier, build_bert_encoder  # noqa: E402
from transformer_course.bert_checkpoints import (  # noqa: E402
    bert_pretrainer_from_keras_hub,
    load_bert_preset,
)


@pytest.fixture(scope="module")
def backbone():
    keras.utils.set_random_seed(3)
    return keras_hub.models.BertBackbone(
        vocabulary_size=60,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=24,
        dropout=0.0,
    )


@pytest.fixture
def batch():
    """Two rows, [CLS] A [SEP] B [SEP] with two segments; the second padded after 7 tokens."""
    token_ids = np.array([[2, 11, 12, 13, 3, 21, 22, 23, 24, 3], [2, 31, 32, 3, 41, 42, 3, 0, 0, 0]], dtype="int32")
    segment_ids = np.array([[0, 0, 0, 0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1, 0, 0, 0]], dtype="int32")
    return token_ids, segment_ids


def test_converted_encoder_and_pooler_equal_keras_hub(backbone, batch):
    token_ids, segment_ids = batch
    reference = backbone(
        {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": (token_ids != 0).astype("int32")}
    )
    ours = bert_pretrainer_from_keras_hub(backbone, max_predictions=4)
    encoder = build_bert_encoder(ours)
    sequence = keras.ops.convert_to_numpy(encoder({"token_ids": token_ids, "segment_ids": segment_ids}))
    real = token_ids != 0
    np.testing.assert_allclose(
        sequence[real], keras.ops.convert_to_numpy(reference["sequence_output"])[real], atol=1e-5
    )
    pooled = keras.ops.convert_to_numpy(ours.get_layer("pooler")(sequence[:, 0]))
    np.testing.assert_allclose(pooled, keras.ops.convert_to_numpy(reference["pooled_output"]), atol=1e-5)
    assert ours.count_params() > backbone.count_params()  # plus the (untrained) masked-LM and next-sentence heads


def test_a_shorter_position_table_keeps_the_first_positions(backbone, batch):
    token_ids, segment_ids = batch
    full = bert_pretrainer_from_keras_hub(backbone, max_predictions=4)
    short = bert_pretrainer_from_keras_hub(backbone, max_predictions=4, sequence_length=10)
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids}
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(build_bert_encoder(short)(inputs)),
        keras.ops.convert_to_numpy(build_bert_encoder(full)(inputs)),
        atol=1e-6,
    )
    with pytest.raises(ValueError, match="sequence_length"):
        bert_pretrainer_from_keras_hub(backbone, sequence_length=25)


def test_converted_model_fine_tunes_and_round_trips(backbone, batch, tmp_path):
    token_ids, segment_ids = batch
    ours = bert_pretrainer_from_keras_hub(backbone, max_predictions=4, sequence_length=10)
    path = tmp_path / "converted.keras"
    ours.save(path)
    restored = keras.models.load_model(path)
    inputs = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "mask_positions": np.array([[1, 2, 0, 0], [1, 0, 0, 0]]),
    }
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(restored(inputs)["mlm"]), keras.ops.convert_to_numpy(ours(inputs)["mlm"]), atol=1e-6
    )
    classifier = build_bert_classifier(restored, num_classes=2)
    classifier.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    loss = classifier.train_on_batch({"token_ids": token_ids, "segment_ids": segment_ids}, np.array([0, 1]))
    assert np.isfinite(loss)


def test_a_local_copy_of_a_preset_loads_and_rebuilds_as_08s_borrowed_arm(backbone, batch, tmp_path, monkeypatch):
    """08's COURSE_BERT_PRESET: a preset folder loads offline, and the arm's fresh model takes its weights."""
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[f"word{i}" for i in range(55)]]
    backbone.save_to_preset(tmp_path / "preset")
    keras_hub.tokenizers.BertTokenizer(vocabulary=vocabulary).save_to_preset(tmp_path / "preset")
    monkeypatch.setenv("COURSE_BERT_PRESET", str(tmp_path / "preset"))
    import os

    borrowed, tokenizer = load_bert_preset(os.environ["COURSE_BERT_PRESET"], max_predictions=4, sequence_length=16)
    assert tokenizer.vocabulary[:5] == vocabulary[:5]
    fresh = type(borrowed).from_config({**borrowed.get_config(), "dropout": 0.1})  # the arm's "build"
    fresh.set_weights(borrowed.get_weights())
    token_ids, segment_ids = batch
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids}
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(build_bert_encoder(fresh)(inputs)),
        keras.ops.convert_to_numpy(build_bert_encoder(borrowed)(inputs)),
        atol=1e-6,
    )
    assert fresh.dropout == 0.1
