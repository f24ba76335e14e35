"""What a notebook does first, and what a result record says about the machine it ran on."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import warnings
import tempfile
from importlib import metadata
from pathlib import Path

from .profiles import Settings, profile

__all__ = ["start_notebook", "epoch_progress", "progress", "import_tensorflow_quietly", "hardware", "library_versions", "git_commit"]

# Lines TensorFlow writes straight to file descriptor 2 while it loads, before its own logging
# is set up, so TF_CPP_MIN_LOG_LEVEL cannot silence them. They say that no GPU was found.
_IMPORT_NOISE = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR"
    r"|I0000 .*cudart_stub\.cc:\d+\] Could not find cuda drivers on your machine.*)$"
)


def import_tensorflow_quietly():
    """Import TensorFlow without its start-up noise, and return the module.

    Sets ``TF_CPP_MIN_LOG_LEVEL=3`` unless already set, then imports TensorFlow with file
    descriptor 2 captured. Afterwards every captured line is written back to stderr except the
    known lines that only say no CUDA driver was found. It also filters TensorFlow's "retracing"
    warning, which every freshly built model triggers. Real errors and warnings still show.

    Returns:
        The ``tensorflow`` module.
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
            kept = [
                line
                for line in captured.read().decode("utf-8", "replace").splitlines()
                if not _IMPORT_NOISE.match(line)
            ]
            if kept:
                print("\n".join(kept), file=sys.stderr)
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


def start_notebook(notebook_id: str, seed: int = 42) -> Settings:
    """Set a notebook up: quiet TensorFlow, seed every generator, print the run's settings.

    Args:
        notebook_id: str, the notebook's two-digit id (``"01"``).
        seed: int, passed to ``keras.utils.set_random_seed`` (Python, NumPy and TensorFlow).

    Returns:
        The notebook's :class:`~transformer_course.profiles.Settings` in the active profile.

    Raises:
        ValueError: for an unknown profile in ``COURSE_PROFILE`` or an unknown notebook id.
    """
    active = profile()
    settings = active.notebook(notebook_id)
    tensorflow = import_tensorflow_quietly()
    import keras

    keras.utils.set_random_seed(seed)
    devices = hardware()
    print(f"Profile: {active.name}" + ("" if active.is_full else " (quick check; numbers mean nothing)"))
    print(f"Seed: {seed}; TensorFlow {tensorflow.__version__}, Keras {keras.__version__}")
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
