"""Hooks the test files share: the ``tensorflow`` marker.

A test module that needs Keras on TensorFlow (tf.data pipelines, the grader's kernels, the wheel's
notebooks, the TensorFlow start-up log) says so with ``pytestmark = pytest.mark.tensorflow``.
``pytest -m "not tensorflow"`` deselects it anywhere; where TensorFlow is not installed (the
noxfile's jax and torch sessions) it is not even collected, since importing it would fail: the
marker is read from the module's source, which is never imported.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

TENSORFLOW_INSTALLED = importlib.util.find_spec("tensorflow") is not None


@cache
def marked_tensorflow(path: Path) -> bool:
    """Whether the test module at ``path`` assigns ``pytestmark`` a value that names the ``tensorflow`` marker."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "pytestmark" for target in node.targets):
            return any(isinstance(part, ast.Attribute) and part.attr == "tensorflow" for part in ast.walk(node.value))
    return False


def pytest_ignore_collect(collection_path: Path, config):
    if (not TENSORFLOW_INSTALLED and collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and marked_tensorflow(collection_path)):
        return True
    return None
