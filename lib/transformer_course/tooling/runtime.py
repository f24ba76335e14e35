"""What a notebook does first, and what a result record says about the machine it ran on.

``import_tensorflow_quietly`` and the progress bars live outside the machinery (``_backend``,
``_progress``), where the subject modules may use them; they are re-exported here.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from .._backend import configured_keras_backend, drop_info_records, import_tensorflow_quietly
from .._progress import epoch_progress, progress
from .profiles import Settings, profile

__all__ = [
    "start_notebook",
    "epoch_progress",
    "progress",
    "import_tensorflow_quietly",
    "drop_info_records",
    "configured_keras_backend",
    "TENSORFLOW_NOTEBOOKS",
    "hardware",
    "library_versions",
    "git_commit",
]

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
    :func:`import_tensorflow_quietly`, and in the smoke profile its functions run eagerly
    (:attr:`~transformer_course.tooling.profiles.Profile.eager_functions`). With another backend
    (``KERAS_BACKEND=jax`` or ``torch``), TensorFlow is not imported, and a notebook listed in
    :data:`TENSORFLOW_NOTEBOOKS` stops here with an error that says what it needs.

    Args:
        notebook_id: str, the notebook's two-digit id (``"01"``).
        seed: int, passed to ``keras.utils.set_random_seed`` (Python, NumPy and the backend).

    Returns:
        The notebook's :class:`~transformer_course.tooling.profiles.Settings` in the active profile.

    Raises:
        ValueError: for an unknown profile in ``COURSE_PROFILE`` or an unknown notebook id.
        RuntimeError: for a notebook that needs TensorFlow when Keras is set to another backend.
    """
    active = profile()
    settings = active.notebook(notebook_id)
    backend = configured_keras_backend()
    if backend == "tensorflow":
        tensorflow = import_tensorflow_quietly()
        tensorflow.config.run_functions_eagerly(active.eager_functions)
        framework = f"TensorFlow {tensorflow.__version__}"
        if active.eager_functions:
            framework += ", functions run eagerly"
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

    The accelerator is read from whichever framework is already imported (TensorFlow, JAX or
    PyTorch), so describing the machine never loads one.

    Returns:
        dict with ``platform`` (str), ``processor`` (str), ``cpu_count`` (int), ``vectors`` (the CPU's
        class by its vector extensions, :func:`vector_extensions`) and ``accelerator`` (str naming the
        GPUs the imported framework sees, or None).

    Example:
        >>> sorted(hardware())
        ['accelerator', 'cpu_count', 'platform', 'processor', 'vectors']
    """
    accelerator = _gpu_names()
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
        "vectors": vector_extensions(),
        "accelerator": accelerator,
    }


def vector_extensions() -> str | None:
    """The CPU's class by its vector extensions, which set TensorFlow's speed on it: ``"AVX-512"``, ``"AVX2, no
    AVX-512"`` (where ``benchmarks/electra_step.py`` measured TensorFlow's update 4.4 times slower) or
    ``"no AVX2"``; None where ``/proc/cpuinfo`` cannot be read (not Linux).

    Example:
        >>> vector_extensions() in ("AVX-512", "AVX2, no AVX-512", "no AVX2", None)
        True
    """
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), None)
    if flags is None:
        return None
    return "AVX-512" if "avx512f" in flags else "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"


def _gpu_names() -> str | None:
    """The GPUs seen by the frameworks already imported, comma-separated; None without any."""
    names = []
    tensorflow, jax, torch = (sys.modules.get(name) for name in ("tensorflow", "jax", "torch"))
    if tensorflow is not None and hasattr(tensorflow, "config"):
        for gpu in tensorflow.config.list_physical_devices("GPU"):
            names.append(tensorflow.config.experimental.get_device_details(gpu).get("device_name", gpu.name))
    if not names and jax is not None and hasattr(jax, "devices"):
        try:
            names = [device.device_kind for device in jax.devices() if device.platform == "gpu"]
        except RuntimeError:  # no backend could start
            names = []
    if not names and torch is not None and hasattr(torch, "cuda") and torch.cuda.is_available():
        names = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
    return ", ".join(names) or None


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
            done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    excluded = [f":(exclude){Path(path).resolve()}" for path in ignore]
    status = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)", *excluded)
    return {"commit": commit, "dirty": bool(status)}
