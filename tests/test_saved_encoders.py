"""BERT's pre-trainer and ELECTRA's discriminator share one encoder body; files saved before they did still load.

``tests/data/`` holds a small BERT and a small ELECTRA pre-trainer saved (``.keras``) by the code before the
body was shared, with their outputs (``make_encoder_files.py`` wrote them). Loaded by today's code they give
those outputs; built today from the same seed they have the same weights, in the same order; and the
fine-tuning builders take either model, and refuse anything else by name.
"""

from pathlib import Path

import keras
import numpy as np
import pytest

from transformer_course.bert import BertPretrainer, build_bert_classifier, build_bert_encoder
from transformer_course.electra import ElectraPretrainer
from transformer_course.transformer import BertStyleEncoder

DATA = Path(__file__).resolve().parent / "data"
TOKEN_IDS = np.array([[2, 5, 9, 7, 3, 0], [2, 4, 4, 8, 6, 3]], "int32")
SEGMENT_IDS = np.array([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1]], "int32")
MASK_POSITIONS = np.array([[1, 3], [2, 4]], "int32")
INPUTS = {"token_ids": TOKEN_IDS, "segment_ids": SEGMENT_IDS}
# Float32 arithmetic of a different CPU or backend: the outputs agree to rounding, not to the bit.
TOLERANCE = 1e-5


def _numpy(value):
    return keras.ops.convert_to_numpy(value)


@pytest.fixture(scope="module")
def saved():
    return np.load(DATA / "encoder_outputs.npz")


def test_a_saved_bert_pretrainer_loads_and_gives_its_outputs(saved):
    model = keras.models.load_model(DATA / "bert_pretrainer.keras")
    assert type(model) is BertPretrainer and isinstance(model, BertStyleEncoder)
    outputs = model({**INPUTS, "mask_positions": MASK_POSITIONS})
    np.testing.assert_allclose(_numpy(outputs["mlm"]), saved["bert_mlm"], atol=TOLERANCE)
    np.testing.assert_allclose(_numpy(outputs["nsp"]), saved["bert_nsp"], atol=TOLERANCE)
    np.testing.assert_allclose(_numpy(model.encode(INPUTS)), saved["bert_encoded"], atol=TOLERANCE)
    encoder = build_bert_encoder(model)
    np.testing.assert_allclose(_numpy(encoder(INPUTS)), saved["bert_encoded"], atol=TOLERANCE)


def test_a_saved_electra_pretrainer_loads_and_gives_its_outputs(saved):
    model = keras.models.load_model(DATA / "electra_pretrainer.keras")
    assert type(model) is ElectraPretrainer and isinstance(model, BertStyleEncoder)
    outputs = model(
        {
            **INPUTS,
            "original_ids": TOKEN_IDS,
            "mask_positions": MASK_POSITIONS,
            "mask_labels": np.take_along_axis(TOKEN_IDS, MASK_POSITIONS, axis=1),
        }
    )
    np.testing.assert_allclose(_numpy(outputs["generator"]), saved["electra_generator"], atol=TOLERANCE)
    np.testing.assert_allclose(_numpy(model.encode(INPUTS)), saved["electra_encoded"], atol=TOLERANCE)
    assert build_bert_classifier(model, 3, pooling="mean")(INPUTS).shape == (2, 3)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the files' weights were drawn on TensorFlow")
@pytest.mark.parametrize("name", ["bert_pretrainer", "electra_pretrainer"])
def test_built_from_the_same_seed_today_the_weights_are_the_saved_ones(name):
    keras.utils.set_random_seed(0)
    bert = BertPretrainer(12, 6, 2, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=2, dropout=0.1)
    electra = ElectraPretrainer(
        12,
        6,
        2,
        embed_dim=8,
        num_heads=2,
        intermediate_dim=16,
        num_layers=2,
        generator_fraction=0.5,
        dropout=0.1,
        seed=3,
    )
    built = {"bert_pretrainer": bert, "electra_pretrainer": electra}[name]
    loaded = keras.models.load_model(DATA / f"{name}.keras")
    assert [weight.path for weight in built.weights] == [weight.path for weight in loaded.weights]
    for mine, theirs in zip(built.weights, loaded.weights, strict=True):
        np.testing.assert_allclose(_numpy(mine), _numpy(theirs), atol=1e-7, err_msg=mine.path)


def test_the_builders_refuse_what_is_not_a_bert_style_encoder():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with pytest.raises(TypeError, match=r"`pretrainer` must be a BERT-style encoder .*received Sequential"):
        build_bert_classifier(model, 2)
