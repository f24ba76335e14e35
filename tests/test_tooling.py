"""The package's parts: no subject module imports the machinery (``tooling``) or the exercises, and no
module at all imports the grader (a distribution of its own), read from every import statement;
importing a layer module loads none of the machinery; the notebook helpers are reachable from the
package itself."""

import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "transformer_course"
# Every module but the machinery's own and the package's __init__ (which re-exports the notebook
# helpers lazily); the subject does not use the exercises.
OUTSIDE_TOOLING = sorted(
    path for path in PACKAGE.rglob("*.py") if path.parent != PACKAGE / "tooling" and path != PACKAGE / "__init__.py"
)
SUBJECT = [path for path in OUTSIDE_TOOLING if path.parent == PACKAGE]


def test_the_rule_is_read_from_real_imports(import_graph):
    """The reader resolves relative imports: the runner's own imports of the machinery are seen."""

    def imported(path):
        return import_graph.imported_modules(path, PACKAGE)

    assert "transformer_course.tooling.results" in imported(PACKAGE / "tooling" / "runner.py")
    assert "transformer_course._quiet_keras" in imported(PACKAGE / "masks.py")
    assert "transformer_course.exercises.values" in imported(PACKAGE / "exercises" / "catalog.py")
    graph = import_graph.module_graph(PACKAGE)
    assert "transformer_course.tooling.results" in graph["transformer_course.tooling.runner"]


@pytest.fixture
def reached(import_graph):
    """reached(path, parts): the modules under transformer_course.<part> that ``path`` imports, sorted."""

    def reached(path: Path, parts: tuple[str, ...]) -> list[str]:
        return sorted(
            name
            for name in import_graph.imported_modules(path, PACKAGE)
            for part in parts
            if name == f"transformer_course.{part}" or name.startswith(f"transformer_course.{part}.")
        )

    return reached


@pytest.mark.parametrize("path", OUTSIDE_TOOLING, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_nothing_outside_the_machinery_imports_it(path, reached):
    assert not reached(path, ("tooling",)), f"{path.relative_to(PACKAGE)} imports {reached(path, ('tooling',))}"


@pytest.mark.parametrize("path", SUBJECT, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_subject_module_imports_the_exercises(path, reached):
    found = reached(path, ("exercises",))
    assert not found, f"{path.relative_to(PACKAGE)} imports {found}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_no_module_of_the_course_package_imports_the_grader(path, import_graph):
    """The grader is a distribution of its own (``grader/``) that students never install."""
    reached = sorted(
        name
        for name in import_graph.imported_modules(path, PACKAGE)
        if name.split(".")[0] == "transformer_course_grader"
    )
    assert not reached, f"{path.relative_to(PACKAGE)} imports {reached}"


def test_a_layer_module_loads_nothing_of_the_machinery():
    code = (
        "import sys, transformer_course.masks, transformer_course.attention; "
        "print(sorted(name for name in sys.modules if name.startswith('transformer_course.tooling')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_notebook_helpers_come_from_the_package():
    import transformer_course as course
    from transformer_course.tooling import profiles, results, runtime

    assert course.start_notebook is runtime.start_notebook and course.report_metric is results.report_metric
    assert course.checkpoint_path is profiles.checkpoint_path and course.load_record is results.load_record
    assert set(course.__all__) <= set(dir(course))
    with pytest.raises(AttributeError, match="no attribute 'no_such_helper'"):
        course.no_such_helper  # noqa: B018


# The modules that each hold one model of the course; the layers they share live in their own modules.
MODEL_MODULES = ("seq2seq", "classifier", "translation", "language_model", "bert", "electra", "vision")


@pytest.mark.parametrize("model", MODEL_MODULES)
def test_no_model_module_imports_another(model, import_graph):
    """Each model sits beside the others: what two models share (pooling, blocks, activations) is a layer module."""
    others = {f"transformer_course.{other}" for other in MODEL_MODULES if other != model}
    reached = sorted(import_graph.module_graph(PACKAGE)[f"transformer_course.{model}"] & others)
    assert not reached, f"{model} imports {reached}"


def test_the_import_graph_of_the_package_is_at_most_seven_modules_deep(import_graph):
    """Counted on the imports that run when a module is imported (a function's own import runs later)."""
    graph = import_graph.module_graph(PACKAGE, top_level_only=True)
    assert "transformer_course.attention" in graph["transformer_course.transformer"]

    def longest(module, seen=()):
        if module in seen:  # a cycle (an import inside a function): not a floor
            return []
        return [module, *max((longest(imported, (*seen, module)) for imported in graph[module]), key=len, default=[])]

    deepest = max((longest(module) for module in graph), key=len)
    assert len(deepest) <= 7, " -> ".join(deepest)


def test_no_two_modules_of_the_package_import_each_other_in_a_circle(import_graph):
    """An import circle (each module reaching the other, directly or through others) makes a module's
    meaning depend on import order; the package has none, imports inside functions included."""
    assert import_graph.circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c"]
    assert import_graph.circles(import_graph.module_graph(PACKAGE)) == []


def test_the_suite_runs_its_files_in_the_order_pyproject_lists_them(pytestconfig):
    """Longest first, so that the workers end together: a file listed by name comes before the folder that
    holds it, and a file's tests keep their order."""
    import importlib.util
    from types import SimpleNamespace

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("root_conftest", root / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    listed = pytestconfig.getini("testpaths")
    assert listed[0] == "grader/tests/test_grading.py" and listed[-3:] == ["notebooks", "tests", "grader/tests"]
    names = ["tests/test_masks.py", "grader/tests/test_grading.py", "notebooks/08_bert_pretraining.ipynb",
             "notebooks/04_self_attention.ipynb", "tests/test_masks.py", "elsewhere/test_x.py"]  # fmt: skip
    items = [SimpleNamespace(path=root / name, order=index) for index, name in enumerate(names)]
    module.pytest_collection_modifyitems(None, SimpleNamespace(rootpath=root, getini=lambda name: listed), items)
    assert [(str(item.path.relative_to(root)), item.order) for item in items] == [
        ("grader/tests/test_grading.py", 1),
        ("notebooks/08_bert_pretraining.ipynb", 2),
        ("notebooks/04_self_attention.ipynb", 3),
        ("tests/test_masks.py", 0),
        ("tests/test_masks.py", 4),
        ("elsewhere/test_x.py", 5),
    ]
