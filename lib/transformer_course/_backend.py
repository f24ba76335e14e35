"""The quiet TensorFlow import: TensorFlow's C++ start-up log records dropped by severity.

With the TensorFlow backend, importing Keras imports TensorFlow, whose C++ start-up INFO records
(which differ by CPU, build and GPU driver) would reach the user's stderr. This module holds what
keeps them out, with the standard library alone, so that the subject modules (``masks``,
``attention``, ...) depend on nothing of the course's machinery: ``_quiet_keras``, imported before
Keras by every module that uses it, calls :func:`import_tensorflow_quietly` here.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import warnings

__all__ = ["drop_info_records", "configured_keras_backend", "import_tensorflow_quietly"]

# TensorFlow's C++ code logs through absl (TF >= 2.17) or its own logger (TF <= 2.16). Records
# written before logging is set up go straight to file descriptor 2, whatever TF_CPP_MIN_LOG_LEVEL
# says, and which ones appear depends on the CPU (oneDNN on Intel), the build and the GPU driver.
# So they are told apart by severity, the letter every record header carries:
#   absl:        "I0000 00:00:1795254552.358650    1974 cudart_stub.cc:31] Could not find ..."
#   TensorFlow:  "2024-03-08 10:00:00.123456: I tensorflow/core/util/port.cc:113] oneDNN ..."
_RECORD_HEADER = re.compile(
    r"^(?:(?P<absl>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<tensorflow>[IWEF]) \S+:\d+\])"
)
# absl's notice that records before initialisation go to stderr: it announces the records that
# follow and has no severity of its own.
_ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# A line Python itself wrote (a warning or a traceback) never continues a C++ record.
_PYTHON_LINE = re.compile(r"^(Traceback \(most recent call last\)|.*:\d+: \w*(Warning|Error)\b)")


def drop_info_records(text: str) -> str:
    """Remove TensorFlow's C++ INFO log records from ``text``; keep everything else.

    A record is INFO when its header's severity letter is ``I`` (see ``_RECORD_HEADER`` for
    both header formats). Lines after an INFO header that start no record of their own belong to
    it (cpu_feature_guard's record spans two lines) and go with it, unless they are Python's own
    output (a warning or a traceback). absl's one-line preamble goes too. Warnings (``W``),
    errors (``E``) and fatal records (``F``), and any line that is not a C++ record, are kept in
    their order.

    Args:
        text: str, what was written to stderr, possibly ending without a newline.

    Returns:
        str, the kept lines, each ending with a newline ("" when nothing is kept).
    """
    kept, inside_info = [], False
    for line in text.splitlines():
        header = _RECORD_HEADER.match(line)
        if header:
            inside_info = (header.group("absl") or header.group("tensorflow")) == "I"
            if not inside_info:
                kept.append(line)
        elif line == _ABSL_PREAMBLE:
            inside_info = False
        elif inside_info and line.strip() and not _PYTHON_LINE.match(line):
            continue  # the rest of an INFO record
        else:
            inside_info = False
            kept.append(line)
    return "".join(line + "\n" for line in kept)


def configured_keras_backend() -> str:
    """The backend Keras will load, read without importing Keras.

    Keras' own order: an already imported Keras, the ``KERAS_BACKEND`` variable, the ``backend``
    key of ``$KERAS_HOME/keras.json`` (default ``~/.keras/keras.json``), else ``"tensorflow"``.

    Returns:
        str, e.g. ``"tensorflow"``, ``"jax"``, ``"torch"`` or ``"numpy"``.
    """
    if "keras" in sys.modules and hasattr(sys.modules["keras"], "backend"):
        return sys.modules["keras"].backend.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as file:
            return json.load(file).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


def import_tensorflow_quietly():
    """Import TensorFlow without its start-up INFO records, and return the module.

    Sets ``TF_CPP_MIN_LOG_LEVEL=3`` unless already set, then imports TensorFlow with file
    descriptor 2 captured, and writes back to stderr whatever :func:`drop_info_records` keeps:
    warnings and errors stay visible on every machine, the INFO records (which differ by CPU,
    build and GPU driver) do not. It also filters TensorFlow's "retracing" warning, which every
    freshly built model triggers.

    Returns:
        The ``tensorflow`` module.

    Raises:
        ImportError: if TensorFlow is not installed.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = drop_info_records(captured.read().decode("utf-8", "replace"))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()
    import logging

    logging.getLogger("tensorflow").addFilter(_drop_retracing_warnings)
    # Keras' `fit` defaults to shuffle=True and warns that a tf.data.Dataset is not reshuffled by
    # it; the course's datasets shuffle themselves (`dataset.shuffle(...)`), so the warning is noise.
    warnings.filterwarnings("ignore", message=r"`shuffle=True` was passed, but will be ignored", category=UserWarning)
    return tensorflow


def _drop_retracing_warnings(record) -> bool:
    """Drop TensorFlow's warning that a tf.function was traced again.

    Every new Keras model traces its own training and prediction functions, so a notebook that
    trains one model per sequence length triggers this warning although nothing is wrong.
    """
    return "triggered tf.function retracing" not in record.getMessage()
