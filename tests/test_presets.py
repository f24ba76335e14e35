"""Published checkpoints that cannot be loaded: one error, from either converter, with its cause whole."""

import pytest

pytest.importorskip("keras_hub")

from transformer_course import bert_checkpoints, gpt2_checkpoints
from transformer_course._presets import PresetUnavailableError


@pytest.mark.parametrize(
    "load", [bert_checkpoints.load_bert_preset, gpt2_checkpoints.load_gpt2_preset], ids=["bert", "gpt2"]
)
def test_a_preset_that_cannot_be_loaded_raises_one_clear_error_with_its_cause_whole(tmp_path, load):
    missing = str(tmp_path / ("no_such_preset_" + "x" * 200))
    with pytest.raises(PresetUnavailableError, match="could not be loaded") as raised:
        load(missing)
    cause = raised.value.__cause__
    assert f"{type(cause).__name__}: {cause}" in str(raised.value)  # never cut mid-word
    # The notebooks catch the error by the name each converter module gives it.
    assert bert_checkpoints.PresetUnavailableError is gpt2_checkpoints.PresetUnavailableError is PresetUnavailableError
