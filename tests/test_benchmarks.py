"""The benchmark scripts run from their folder, and the benchmarks' guide lists every one.

``python benchmarks/NAME.py`` puts ``benchmarks/`` first on ``sys.path``: a script named like a module that a
library imports hides it. ``benchmarks/compression.py`` once hid the ``compression`` package that JAX's
compilation cache tries (TensorFlow imports JAX), and every benchmark that imported TensorFlow failed at start.
"""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tensorflow  # the libraries the scripts import: TensorFlow, and JAX through it

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(path for path in BENCHMARKS.glob("*.py") if not path.name.startswith("_"))


def test_the_libraries_import_with_the_benchmarks_folder_first_on_the_path():
    installed = [name for name in ("tensorflow", "keras", "jax") if importlib.util.find_spec(name)]  # no JAX: skip it
    code = f"import sys; sys.path.insert(0, sys.argv[1]); import {', '.join(installed)}; print('imported')"
    done = subprocess.run([sys.executable, "-c", code, str(BENCHMARKS)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("imported"), done.stderr[-2000:]


def test_every_script_is_in_the_guide():
    guide = (BENCHMARKS / "README.md").read_text(encoding="utf-8")
    missing = [path.name for path in SCRIPTS if f"benchmarks/{path.name}" not in guide]
    assert not missing, f"benchmarks/README.md does not list {missing}"
