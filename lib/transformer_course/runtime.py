"""What a notebook does first, and what a result record says about the machine it ran on."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import warnings
from importlib import metadata
from pathlib import Path

from .profiles import Settings, profile

__all__ = [
    "start_notebook", "epoch_progress", "progress", "import_tensorflow_quietly", "drop_info_records",
    "configured_keras_backend", "TENSORFLOW_NOTEBOOKS", "hardware", "library_versions", "git_commit",
]

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


# Notebooks whose cells use TensorFlow itself, and what for; the others run on any Keras backend.
TENSORFLOW_NOTEBOOKS = {
    "03": "keras.layers.TextVectorization and tf.data",
    "05": "tf.GradientTape for the gradient measurements",
    "06": "tf.data pipelines, TextVectorization and a model on raw strings",
    "07": "tf.data pipelines, TextVectorization and a translator on raw strings",
    "08": "TextVectorization (and tf.strings inside its standardisation)",
    "09": "TextVectorization (and tf.strings inside its standardisation)",
}


def start_notebook(notebook_id: str, seed: int = 42) -> Settings:
    """Set a notebook up: quiet TensorFlow, seed every generator, print the run's settings.

    With the TensorFlow backend (Keras' default), TensorFlow is imported through
    :func:`import_tensorflow_quietly`. With another backend (``KERAS_BACKEND=jax`` or ``torch``),
    TensorFlow is not imported, and a notebook listed in :data:`TENSORFLOW_NOTEBOOKS` stops here
    with an error that says what it needs.

    Args:
        notebook_id: str, the notebook's two-digit id (``"01"``).
        seed: int, passed to ``keras.utils.set_random_seed`` (Python, NumPy and the backend).

    Returns:
        The notebook's :class:`~transformer_course.profiles.Settings` in the active profile.

    Raises:
        ValueError: for an unknown profile in ``COURSE_PROFILE`` or an unknown notebook id.
        RuntimeError: for a notebook that needs TensorFlow when Keras is set to another backend.
    """
    active = profile()
    settings = active.notebook(notebook_id)
    backend = configured_keras_backend()
    if backend == "tensorflow":
        tensorflow = import_tensorflow_quietly()
        framework = f"TensorFlow {tensorflow.__version__}"
    elif notebook_id in TENSORFLOW_NOTEBOOKS:
        raise RuntimeError(
            f"Notebook {notebook_id} needs the TensorFlow backend ({TENSORFLOW_NOTEBOOKS[notebook_id]}), "
            f"but Keras is set to {backend!r}. Set KERAS_BACKEND=tensorflow before starting Python "
            "(in Jupyter: restart the kernel after setting it)."
        )
    else:
        framework = f"backend {backend}"
    import keras

    keras.utils.set_random_seed(seed)
    devices = hardware()
    print(f"Profile: {active.name}" + ("" if active.is_full else " (quick check; numbers mean nothing)"))
    print(f"Seed: {seed}; {framework}, Keras {keras.__version__}")
    print(f"Hardware: {devices['accelerator'] or 'CPU only'}; {devices['cpu_count']} CPU cores")
    from .results import report_environment

    report_environment(devices, library_versions())
    return settings


def hardware() -> dict:
    """Describe this machine for a result record.

    Returns:
        dict with ``platform`` (str), ``processor`` (str), ``cpu_count`` (int) and
        ``accelerator`` (str naming the GPUs TensorFlow sees, or None).
    """
    accelerator = None
    tensorflow = sys.modules.get("tensorflow")
    if tensorflow is not None:
        gpus = tensorflow.config.list_physical_devices("GPU")
        if gpus:
            names = []
            for gpu in gpus:
                details = tensorflow.config.experimental.get_device_details(gpu)
                names.append(details.get("device_name", gpu.name))
            accelerator = ", ".join(names)
    processor = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            if line.startswith("model name"):
                processor = line.split(":", 1)[1].strip()
                break
    return {
        "platform": platform.platform(),
        "processor": processor,
        "cpu_count": os.cpu_count(),
        "accelerator": accelerator,
    }


def library_versions() -> dict:
    """Versions of Python and the libraries a result depends on (None where not installed)."""
    versions = {"python": platform.python_version()}
    for name in ("transformer-course", "tensorflow", "keras", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit(directory: str | os.PathLike = ".", ignore: tuple = ()) -> dict:
    """The git commit of ``directory`` and whether its tracked files had uncommitted changes.

    Args:
        directory: a folder inside the checkout.
        ignore: paths whose changes do not count (the results folder the runner itself writes).

    Returns:
        dict with ``commit`` (40-hex str, or None outside a git checkout) and ``dirty`` (bool or
        None).
    """

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=directory, capture_output=True, text=True, timeout=10
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    excluded = [f":(exclude){Path(path).resolve()}" for path in ignore]
    status = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", *excluded)
    return {"commit": commit, "dirty": bool(status)}


def progress(iterable=None, **kwargs):
    """A text progress bar on stdout (``tqdm``) that reads well live and in a saved notebook.

    Args:
        iterable: what to loop over, as with ``tqdm``.
        **kwargs: passed to ``tqdm.tqdm`` (``desc``, ``total``, ...).
    """
    from tqdm import tqdm

    kwargs.setdefault("file", sys.stdout)
    kwargs.setdefault("ncols", 90)
    kwargs.setdefault("mininterval", 1.0)
    return tqdm(iterable, **kwargs)


def epoch_progress():
    """A Keras callback showing one text progress bar over all epochs, with the latest loss.

    Returns:
        A ``tqdm.keras.TqdmCallback``; pass it in ``fit(..., verbose=0, callbacks=[...])``.
    """
    from tqdm import tqdm
    from tqdm.keras import TqdmCallback

    return TqdmCallback(verbose=0, tqdm_class=tqdm, file=sys.stdout, ncols=110, mininterval=1.0)
