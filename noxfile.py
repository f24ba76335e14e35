"""Test sessions beyond the default suite: other TensorFlow/Keras pairs, other backends, Pythons.

Run one with ``nox -s NAME`` (``pip install nox`` first); ``nox -l`` lists them. Each builds its own
virtual environment under ``.nox/`` and needs ``COURSE_DATA_DIR`` pointing at a filled data cache
for the notebooks (``export COURSE_DATA_DIR=../shared/data``). The README's "Tested with" section
says what each one covers and when to run it.

* ``versions(2.19)`` — TensorFlow 2.19 / Keras 3.10, the pair Colab shipped in 2025.
* ``versions(lowest)`` — the lower bounds declared in pyproject.toml.
  Both run the unit tests and notebooks 01, 04, 07 and 08 in the smoke profile.
* ``colab-2026`` — Colab's 2026 stack: Python 3.13, TensorFlow 2.20, Keras 3.13, keras-hub 0.26,
  NumPy 2.1; the unit tests and notebooks 01, 04, 07, 08 and 09 in the smoke profile.
* ``backend(jax)`` and ``backend(torch)`` — the layer modules' unit tests on another Keras backend,
  with no TensorFlow installed, and the notebooks that run there (smoke profile).
* ``python-3.12`` and ``python-3.13`` — the default suite's unit tests on other Pythons, with the
  pinned versions.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
nox.options.default_venv_backend = "venv"
nox.options.sessions = []  # nothing by default: the README's test command is the default suite

# Pairs of (TensorFlow, Keras) and what must come with them: tensorflow-text follows TensorFlow's
# minor version, keras-hub is the newest release that installs beside that pair, and NumPy is left
# to the resolver (older TensorFlow caps it).
VERSION_PAIRS = {
    "2.19": ["tensorflow==2.19.1", "keras==3.10.0", "tensorflow-text==2.19.0", "keras-hub==0.21.1"],
    "lowest": ["tensorflow==2.18.1", "keras==3.8.0", "tensorflow-text==2.18.1", "keras-hub==0.19.3"],
}
# Colab's own stack in 2026 (Python 3.13), as a Colab runtime reports it; tensorflow-text has no 2.20.0 and
# 2.20.1 follows TensorFlow 2.20.
COLAB_2026 = ["tensorflow==2.20.0", "keras==3.13.2", "tensorflow-text==2.20.1", "keras-hub==0.26.0", "numpy==2.1.3"]
# Notebooks that run on the backend too, in the smoke profile (01 and 02 on torch: not yet, their
# cells convert tensors that require grad with NumPy).
BACKEND_NOTEBOOKS = {
    "jax": [
        "notebooks/01_seq2seq_lstm.ipynb",
        "notebooks/02_attention_seq2seq.ipynb",
        "notebooks/04_self_attention.ipynb",
        "notebooks/10_vision_transformer.ipynb",
    ],
    "torch": ["notebooks/04_self_attention.ipynb", "notebooks/10_vision_transformer.ipynb"],
}
# 08 uses keras-hub's WordPiece vocabulary and tokenizer, whose versions move with TensorFlow's.
SMOKE_NOTEBOOKS = [
    "notebooks/01_seq2seq_lstm.ipynb",
    "notebooks/04_self_attention.ipynb",
    "notebooks/07_transformer_translation.ipynb",
    "notebooks/08_bert_pretraining.ipynb",
]
# Unit tests only: the notebooks, the release and grading of all thirteen are the default suite's job.
UNIT_TESTS = [
    "tests",
    "grader/tests",
    "--ignore=grader/tests/test_course_release.py",
    "--ignore=grader/tests/test_release_reruns.py",
]


def _pinned(without: tuple[str, ...]) -> list[str]:
    """requirements.txt's pins, less the named packages."""
    pins = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line and re.split(r"[=<>~!\[ ]", line, maxsplit=1)[0].lower() not in without:
            pins.append(line)
    return pins


def _environment() -> dict:
    data = os.environ.get("COURSE_DATA_DIR")
    return {"COURSE_DATA_DIR": str(Path(data).resolve())} if data else {}


def _test_stack(session, stack: list[str], notebooks: list[str]) -> None:
    """Install ``stack`` (TensorFlow, Keras and what moves with them) beside the other pins; run the unit
    tests and ``notebooks`` in the smoke profile."""
    # JAX is left out: its pin needs a newer ml-dtypes than older TensorFlow allows (notebook 12 says so and
    # skips its section on several devices; the test that needs JAX skips too).
    replaced = ("tensorflow", "keras", "tensorflow-text", "keras-hub", "numpy", "jax")
    session.install(*stack, *_pinned(without=replaced))
    session.install("--no-deps", "-e", ".", "-e", "grader")  # the grader: the notebooks' hidden tests import it
    session.run("python", "-m", "pip", "check")
    session.run("python", "-m", "pytest", "-q", *UNIT_TESTS, *notebooks, env=_environment())


@nox.session(name="versions", python="3.11")
@nox.parametrize("pair", list(VERSION_PAIRS), ids=list(VERSION_PAIRS))
def versions(session, pair):
    """Unit tests and notebooks 01, 04, 07, 08 (smoke) on an older TensorFlow/Keras pair."""
    _test_stack(session, VERSION_PAIRS[pair], SMOKE_NOTEBOOKS)


@nox.session(name="colab-2026", python="3.13")
def colab_2026(session):
    """Unit tests and notebooks 01, 04, 07, 08, 09, 11, 12 (smoke) on Colab's 2026 stack."""
    _test_stack(
        session,
        COLAB_2026,
        [
            *SMOKE_NOTEBOOKS,
            "notebooks/09_language_model.ipynb",
            "notebooks/11_modern_decoders.ipynb",
            "notebooks/12_adapting_decoders.ipynb",
        ],
    )


@nox.session(name="backend", python="3.11")
@nox.parametrize("backend", ["jax", "torch"], ids=["jax", "torch"])
def backend(session, backend):
    """The unit tests not marked ``tensorflow`` and notebooks 01, 02, 04, 10 (jax) or 04, 10 (torch), with no
    TensorFlow installed (conftest.py leaves the marked modules uncollected)."""
    frameworks = {"jax": ["jax[cpu]"], "torch": ["torch==2.13.0"]}[backend]
    without = ("tensorflow", "tensorflow-text", "keras-hub", "nbgrader", *(("jax",) if backend == "torch" else ()))
    session.install(*frameworks, *_pinned(without=without))
    session.install("--no-deps", "-e", ".", "-e", "grader")  # without nbgrader: its tests are marked tensorflow
    environment = {**_environment(), "KERAS_BACKEND": backend}
    session.run("python", "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('tensorflow') is not None)")
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-m",
        "not tensorflow",
        *UNIT_TESTS,
        *BACKEND_NOTEBOOKS[backend],
        env=environment,
    )


# The layer and model contract and the layers' own tests: the push workflow's job on each backend.
LAYER_TESTS = [
    "tests/test_layers.py",
    "tests/test_llama_language_model.py",
    "tests/test_attention.py",
    "tests/test_transformer.py",
    "tests/test_llama_blocks.py",
    "tests/test_positional.py",
    "tests/test_saved_encoders.py",
    "tests/test_cache.py",
    "tests/test_lora.py",
    "tests/test_post_training.py",
]


@nox.session(name="layers", python="3.11")
@nox.parametrize("backend", ["jax", "torch"], ids=["jax", "torch"])
def layers(session, backend):
    """The layer and model tests alone, on JAX or PyTorch with no TensorFlow installed: minutes, for every push
    (.github/workflows/checks.yml); ``backend(...)`` runs every unit test and four notebooks."""
    frameworks = {"jax": ["jax[cpu]"], "torch": ["torch==2.13.0"]}[backend]
    without = ("tensorflow", "tensorflow-text", "keras-hub", "nbgrader", *(("jax",) if backend == "torch" else ()))
    session.install(*frameworks, *_pinned(without=without))
    session.install("--no-deps", "-e", ".")
    session.run(
        "python",
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "-n",
        "auto",
        "-m",
        "not tensorflow",
        *LAYER_TESTS,
        env={**_environment(), "KERAS_BACKEND": backend},
    )


@nox.session(name="python", python=["3.12", "3.13"])
def python(session):
    """The unit tests on another Python, with the pinned versions."""
    session.install("-r", "requirements.txt")
    session.install("--no-deps", "-e", ".", "-e", "grader")
    session.run("python", "-m", "pytest", "-q", *UNIT_TESTS, env=_environment())
