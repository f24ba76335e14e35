"""Test-wide settings, for the course's tests (``tests/``), the grader's (``grader/tests/``) and the
notebooks nbval runs: every test and notebook uses the smoke profile; every temporary file
(TensorFlow's autograph leaves one per traced function) goes into one folder of the test run's own,
removed when the run ends; and the ``tensorflow`` marker.

The ``import_graph`` fixture reads a package's imports from its source, for the tests that hold the
course package and the grader to their shapes (``tests/test_tooling.py``, ``grader/tests/test_structure.py``).

A test module that needs Keras on TensorFlow (tf.data pipelines, the grader's kernels, the wheel's
notebooks, the TensorFlow start-up log) says so with ``pytestmark = pytest.mark.tensorflow``.
``pytest -m "not tensorflow"`` deselects it anywhere; where TensorFlow is not installed (the
noxfile's jax and torch sessions) it is not even collected, since importing it would fail: the
marker is read from the module's source, which is never imported.
"""

import ast
import importlib.util
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path
from types import SimpleNamespace

import pytest

# Each test worker (pytest-xdist) and the notebook kernels it starts share the machine's cores with the
# other workers: the thread pools of TensorFlow, OpenBLAS (NumPy's and SciPy's matrix products) and OpenMP
# (scikit-learn), each as wide as the machine by default, are narrowed to each worker's share. On 2 cores
# with 2 workers, notebooks 07 and 10 ran in 0.91 of the time with one TensorFlow thread each; with one
# OpenBLAS and OpenMP thread as well, notebooks 03, 06, 08 and 10 took 145 core-seconds of user time
# against 168 (one of notebook 10's logistic regressions alone: 6.5 core-seconds with two OpenBLAS threads,
# 0.2 with one). Set before NumPy and TensorFlow start (the import below loads NumPy); a value already in the
# environment is kept.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _SHARE = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _VARIABLE in ("TF_NUM_INTRAOP_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ.setdefault(_VARIABLE, _SHARE)
    os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")

from transformer_course.datasets import pin_data_directory  # noqa: E402 - after the thread settings

# Set before any kernel starts: nbval's kernels inherit this environment.
os.environ["COURSE_PROFILE"] = "smoke"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("MPLBACKEND", "Agg")
# A relative COURSE_DATA_DIR means "relative to where pytest was started", also for nbval's
# kernels, which run in the notebooks' folder.
pin_data_directory()

_TEMPORARY_FOLDER = tempfile.mkdtemp(prefix="transformer-course-tests-")
os.environ["TMPDIR"] = _TEMPORARY_FOLDER
# Kept stages of resumable runs (transformer_course.tooling.stages): the tests' own, never a user's, and gone after.
os.environ["COURSE_RUNS_DIR"] = os.path.join(_TEMPORARY_FOLDER, "runs")
tempfile.tempdir = _TEMPORARY_FOLDER


def pytest_unconfigure(config):
    shutil.rmtree(_TEMPORARY_FOLDER, ignore_errors=True)


TENSORFLOW_INSTALLED = importlib.util.find_spec("tensorflow") is not None


@cache
def marked_tensorflow(path: Path) -> bool:
    """Whether the test module at ``path`` assigns ``pytestmark`` a value that names the ``tensorflow`` marker."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", None) == "pytestmark" for target in node.targets):
            return any(isinstance(part, ast.Attribute) and part.attr == "tensorflow" for part in ast.walk(node.value))
    return False


def pytest_ignore_collect(collection_path: Path, config):
    if (
        not TENSORFLOW_INSTALLED
        and collection_path.suffix == ".py"
        and collection_path.name.startswith("test_")
        and marked_tensorflow(collection_path)
    ):
        return True
    return None


def pytest_collection_modifyitems(session, config, items):
    """The tests in the order of their files in ``testpaths`` (pyproject.toml: the longest first), each
    file's in the order collected. pytest collects a directory tree in its own order, whatever the order
    of ``testpaths``; pytest-xdist hands out the files in the order collected (``--no-loadscope-reorder``)."""
    listed = [Path(config.rootpath, entry) for entry in config.getini("testpaths")]

    def place(item) -> int:
        return next(
            (index for index, path in enumerate(listed) if item.path == path or path in item.path.parents),
            len(listed),
        )

    items.sort(key=place)  # stable: a file's tests keep their order


def _imports(path: Path, root: Path, top_level_only: bool = False) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every import statement of ``path``, a module of the package at ``root``
    (whose folder name is the package's), relative imports resolved inside it; with ``top_level_only``,
    only the imports that run when the module is imported (not those inside functions)."""
    package = [root.name, *path.parent.relative_to(root).parts]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    statements = (
        [
            node
            for statement in tree.body
            for node in (ast.walk(statement) if isinstance(statement, (ast.If, ast.Try)) else [statement])
        ]
        if top_level_only
        else ast.walk(tree)
    )
    found = []
    for node in statements:
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            found.append(
                (".".join([*base, *([node.module] if node.module else [])]), [alias.name for alias in node.names])
            )
    return found


def _imported_modules(path: Path, root: Path, top_level_only: bool = False) -> set[str]:
    """Every dotted name an import statement of ``path`` reaches: each module, and each module.name it imports."""
    return {
        name
        for module, names in _imports(path, root, top_level_only)
        for name in [module, *(f"{module}.{alias}" for alias in names)]
    }


def _module_graph(root: Path, top_level_only: bool = False) -> dict[str, set[str]]:
    """Module name -> the package's own modules it imports (``from . import x`` naming the module's own
    package is not an import of that package's ``__init__``)."""
    paths = {
        ".".join([root.name, *path.relative_to(root).with_suffix("").parts]).removesuffix(".__init__"): path
        for path in root.rglob("*.py")
    }
    return {
        name: {
            imported
            for imported in _imported_modules(path, root, top_level_only)
            if imported in paths and imported != name and not name.startswith(imported + ".")
        }
        for name, path in paths.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[str]:
    """The modules of ``graph`` that reach themselves through their imports, directly or through others."""
    circles = []
    for start in graph:
        seen, stack = set(), list(graph[start])
        while stack:
            module = stack.pop()
            if module == start:
                circles.append(start)
                break
            if module not in seen:
                seen.add(module)
                stack.extend(graph.get(module, ()))
    return circles


@pytest.fixture(scope="session")
def import_graph():
    """The import reader: ``imports(path, root)``, ``imported_modules(path, root)``, ``module_graph(root)``
    and ``circles(graph)``, each taking ``top_level_only`` where it reads a file."""
    return SimpleNamespace(
        imports=_imports, imported_modules=_imported_modules, module_graph=_module_graph, circles=_circles
    )
