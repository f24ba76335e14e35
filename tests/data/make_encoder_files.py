"""Writes the saved BERT and ELECTRA pre-trainers that ``tests/test_saved_encoders.py`` loads, and their outputs.

The files were written by the code before BERT's pre-trainer and ELECTRA's discriminator shared one encoder
body; the test holds every later version of that code to them: the files still load, and give these outputs.
Run from the repository's root: ``python tests/data/make_encoder_files.py``.
"""

from pathlib import Path

import keras
import numpy as np

from transformer_course.bert import BertPretrainer
from transformer_course.electra import ElectraPretrainer

HERE = Path(__file__).resolve().parent
TOKEN_IDS = np.array([[2, 5, 9, 7, 3, 0], [2, 4, 4, 8, 6, 3]], "int32")
SEGMENT_IDS = np.array([[0, 0, 0, 1, 1, 0], [0, 0, 1, 1, 1, 1]], "int32")
MASK_POSITIONS = np.array([[1, 3], [2, 4]], "int32")


def main():
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
    inputs = {"token_ids": TOKEN_IDS, "segment_ids": SEGMENT_IDS}
    bert_outputs = bert({**inputs, "mask_positions": MASK_POSITIONS})
    electra_outputs = electra(
        {
            **inputs,
            "original_ids": TOKEN_IDS,
            "mask_positions": MASK_POSITIONS,
            "mask_labels": np.take_along_axis(TOKEN_IDS, MASK_POSITIONS, axis=1),
        }
    )
    bert.save(HERE / "bert_pretrainer.keras")
    electra.save(HERE / "electra_pretrainer.keras")
    np.savez(
        HERE / "encoder_outputs.npz",
        bert_encoded=keras.ops.convert_to_numpy(bert.encode(inputs)),
        bert_mlm=keras.ops.convert_to_numpy(bert_outputs["mlm"]),
        bert_nsp=keras.ops.convert_to_numpy(bert_outputs["nsp"]),
        electra_encoded=keras.ops.convert_to_numpy(electra.encode(inputs)),
        electra_generator=keras.ops.convert_to_numpy(electra_outputs["generator"]),
    )


if __name__ == "__main__":
    main()
