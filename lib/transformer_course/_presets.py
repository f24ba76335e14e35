"""Published checkpoints from keras-hub's preset cache, for the converters of :mod:`.bert_checkpoints` and
:mod:`.gpt2_checkpoints`: one download and one error for both."""

from __future__ import annotations

__all__ = ["PresetUnavailableError", "download_preset"]


class PresetUnavailableError(RuntimeError):
    """A published checkpoint could not be loaded (no keras-hub, or no network to download it)."""


def download_preset(preset: str, backbone_class: str, tokenizer_class: str):
    """A keras-hub preset's backbone and tokenizer (``keras_hub.models.<backbone_class>``,
    ``keras_hub.tokenizers.<tokenizer_class>``), downloaded or read from keras-hub's cache.

    Raises:
        PresetUnavailableError: keras-hub is not installed, or the preset cannot be downloaded
            (offline); the message names the preset and the cause.
    """
    try:
        import keras_hub
    except ImportError as error:
        raise PresetUnavailableError(f"loading {preset!r} needs keras-hub (pip install keras-hub)") from error
    try:
        backbone = getattr(keras_hub.models, backbone_class).from_preset(preset)
        tokenizer = getattr(keras_hub.tokenizers, tokenizer_class).from_preset(preset)
    except Exception as error:  # keras-hub raises many kinds of errors for a failed download
        raise PresetUnavailableError(f"{preset!r} could not be loaded ({type(error).__name__}: {error})") from error
    return backbone, tokenizer
