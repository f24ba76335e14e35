"""A keras-hub GPT2Backbone in the course's decoder-only model: the same probabilities, cached or not."""

import numpy as np
import pytest

keras_hub = pytest.importorskip("keras_hub")

import keras  # noqa: E402

from transformer_course.bpe import BytePairEncoding  # noqa: E402
from transformer_course.decoding import greedy_decode  # noqa: E402
from transformer_course.generation import CachedLanguageModel  # noqa: E402
from transformer_course.gpt2_checkpoints import (  # noqa: E402
    ID_OFFSET,
    bpe_from_keras_hub,
    language_model_from_keras_hub,
)

VOCABULARY = 300


@pytest.fixture(scope="module")
def backbone():
    keras.utils.set_random_seed(4)
    return keras_hub.models.GPT2Backbone(
        vocabulary_size=VOCABULARY,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=40,
        dropout=0.0,
    )


def _log_softmax(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def test_converted_model_gives_gpt2s_probabilities_on_a_padded_batch(backbone):
    generator = np.random.default_rng(0)
    gpt2_ids = generator.integers(0, VOCABULARY, size=(2, 9)).astype("int32")
    gpt2_ids[:, 0] = 0  # GPT-2's id 0 ("!") is a real token: the course's id 1
    padding = np.array([[1] * 9, [1] * 6 + [0] * 3], dtype="int32")
    hidden = backbone({"token_ids": gpt2_ids, "padding_mask": padding})
    logits = keras.ops.convert_to_numpy(backbone.token_embedding(hidden, reverse=True))
    ours = language_model_from_keras_hub(backbone, sequence_length=16)
    probabilities = keras.ops.convert_to_numpy(ours(np.where(padding == 1, gpt2_ids + ID_OFFSET, 0)))
    real = padding == 1
    assert probabilities.shape == (2, 9, VOCABULARY + ID_OFFSET)
    assert np.abs(probabilities[..., 0]).max() == 0.0  # padding is never predicted
    np.testing.assert_allclose(np.log(probabilities[..., ID_OFFSET:])[real], _log_softmax(logits)[real], atol=1e-4)


def test_cached_greedy_decoding_equals_uncached_over_twenty_steps(backbone):
    ours = language_model_from_keras_hub(backbone, sequence_length=40)
    prompt = np.array([[5, 17, 42], [9, 9, 250]], dtype="int32")

    def uncached(decoded):
        probabilities = keras.ops.convert_to_numpy(ours(np.asarray(decoded, dtype="int32")))[:, -1, :].copy()
        probabilities[:, 0] = 0.0
        return probabilities / probabilities.sum(axis=1, keepdims=True)

    cached = CachedLanguageModel(ours, max_length=40).next_token_function(prompt)
    np.testing.assert_array_equal(greedy_decode(cached, prompt, None, 20), greedy_decode(uncached, prompt, None, 20))


def test_the_tokenizer_converts_with_gpt2s_ids_plus_one():
    corpus = ["the cat sat on the mat, the dog sat on the log"] * 4 + ["café 🐈"]
    trained = BytePairEncoding.train(corpus, num_merges=30)
    vocabulary, merges = trained.vocabulary_and_merges()
    vocabulary["<|endoftext|>"] = len(vocabulary)
    reference = keras_hub.tokenizers.GPT2Tokenizer(vocabulary=vocabulary, merges=merges)
    ours = bpe_from_keras_hub(reference)
    for text in ("the cat sat on the mat", "a dog, a log; café 🐈!", "the end<|endoftext|>next"):
        expected = np.asarray(reference(text)) + ID_OFFSET
        assert ours.encode(text) == expected.tolist(), text
        assert ours.decode(ours.encode(text)) == text
    assert ours.special_ids["<|endoftext|>"] == vocabulary["<|endoftext|>"] + ID_OFFSET


def test_the_converted_model_round_trips_through_a_keras_file(backbone, tmp_path):
    ours = language_model_from_keras_hub(backbone, sequence_length=12)
    ours.save(tmp_path / "gpt2.keras")
    restored = keras.models.load_model(tmp_path / "gpt2.keras")
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6]], dtype="int32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(restored(ids)), keras.ops.convert_to_numpy(ours(ids)), atol=1e-6
    )
    assert restored.get_layer("decoder_1").normalize_first and restored.get_layer("final_norm") is not None


def _sections(cells):
    """(number of the section each cell is in, the cell): 0 before the first heading "## 1."."""
    import re

    section = 0
    for cell in cells:
        heading = re.search(r"^## (\d+)\.", cell.source, re.MULTILINE) if cell.cell_type == "markdown" else None
        section = int(heading.group(1)) if heading else section
        yield section, cell


def test_notebook_09_runs_its_gpt2_section_on_a_local_copy_of_a_preset(tmp_path, monkeypatch):
    """Where a GPT-2 preset is at hand, 09's section 9 loads it into the course's model, samples, scores, times it."""
    from pathlib import Path

    import nbformat
    from nbclient import NotebookClient

    corpus = ["This is a story about me and my brothers. The film was good, the acting bad."] * 4
    vocabulary, merges = BytePairEncoding.train(corpus, num_merges=40).vocabulary_and_merges()
    vocabulary["<|endoftext|>"] = len(vocabulary)
    keras.utils.set_random_seed(1)
    keras_hub.models.GPT2Backbone(
        vocabulary_size=len(vocabulary),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=256,
    ).save_to_preset(tmp_path / "preset")
    keras_hub.tokenizers.GPT2Tokenizer(vocabulary=vocabulary, merges=merges).save_to_preset(tmp_path / "preset")
    monkeypatch.setenv("COURSE_GPT2_PRESET", str(tmp_path / "preset"))
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    root = Path(__file__).resolve().parents[1]
    notebook = nbformat.read(root / "notebooks" / "09_language_model.ipynb", as_version=4)
    # The set-up, then the sections GPT-2's (section 9) reads: the reviews and their tokenizer (2) and our model (4),
    # untrained; the whole notebook runs in its own smoke test, where no preset is at hand.
    notebook.cells = [cell for section, cell in _sections(notebook.cells) if section in {0, 2, 4, 9}]
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    text = "".join(
        output.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    )
    assert "is not loaded here" not in text
    for expected in (
        "GPT-2 in the course's decoder",
        "seed 1: This is a story about me and my brothers",
        "bits per character of the first",
        "GPT-2 ",
        "recomputed",
        "cached",
    ):
        assert expected in text, expected
