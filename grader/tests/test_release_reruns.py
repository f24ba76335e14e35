"""A student who runs an earlier cell again after the exercises: the release notebooks survive it.

Apart from tests/test_course_release.py so that, with the test files spread over workers, these
whole-notebook runs go beside the grading of the course's notebooks rather than after it."""

from pathlib import Path

import pytest
from solutions import WITH_EXERCISES

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

ROOT = Path(__file__).resolve().parents[2]


def _exercise_names(cells) -> set[str]:
    import ast

    names = set()
    for cell in cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            names |= {node.name for node in ast.parse(cell.source).body if isinstance(node, ast.FunctionDef)}
    return names


@pytest.mark.parametrize("notebook", WITH_EXERCISES)
def test_the_notebook_body_never_names_an_exercise_function(notebook):
    """A student who re-runs an earlier cell after the exercises must not break it, nor rebind their answer.

    The lesson, before the first exercise, names no exercise function at all; a cell after the
    exercises may call one (run the student's function on the notebook's own data) but never binds
    its name (no def, class, import or assignment of it)."""
    import ast

    import nbformat

    cells = nbformat.read(next((ROOT / "notebooks").glob(f"{notebook}_*.ipynb")), as_version=4).cells
    exercise_names = _exercise_names(cells)
    assert exercise_names
    first_exercise = next(index for index, cell in enumerate(cells) if cell.metadata.get("nbgrader"))
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or cell.metadata.get("nbgrader"):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            named = {node.id} if isinstance(node, ast.Name) else set()
            if isinstance(node, ast.Name) and index > first_exercise and not isinstance(node.ctx, ast.Store):
                named = set()  # after the exercises: calling the student's function is fine, binding it is not
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                named = {node.name}
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                named = {(alias.asname or alias.name).split(".")[0] for alias in node.names}
            assert not named & exercise_names, f"cell {index + 1} uses {named & exercise_names}"


def _unguarded_calls(source: str, exercise_names: set[str]) -> list[str]:
    """The calls of an exercise function in ``source`` that a stub's ``NotImplementedError`` would escape:
    those outside the body of a ``try`` with a bare ``except`` or one naming NotImplementedError,
    RuntimeError (its base) or Exception."""
    import ast

    def catches(handler) -> bool:
        caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        return handler.type is None or any(
            isinstance(name, ast.Name) and name.id in {"NotImplementedError", "RuntimeError", "Exception"}
            for name in caught
        )

    tree, guarded = ast.parse(source), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(catches(handler) for handler in node.handlers):
            guarded |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return [
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in exercise_names
        and id(node) not in guarded
    ]


@pytest.mark.parametrize("notebook", WITH_EXERCISES)
def test_a_lesson_cell_calls_an_exercise_function_only_where_a_stub_is_caught(notebook):
    """The release runs to its end before the student has done anything: every call of an exercise function
    outside the exercise and check cells sits in the body of a ``try`` that catches the stubs'
    ``NotImplementedError`` (and says "not attempted yet")."""
    import nbformat

    cells = nbformat.read(next((ROOT / "notebooks").glob(f"{notebook}_*.ipynb")), as_version=4).cells
    exercise_names = _exercise_names(cells)
    for index, cell in enumerate(cells):
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader"):
            unguarded = _unguarded_calls(cell.source, exercise_names)
            assert not unguarded, f"cell {index + 1} calls {unguarded}, and a stub's NotImplementedError stops it"


def test_the_guard_check_tells_a_caught_call_from_a_bare_one():
    names = {"causal_mask"}
    assert _unguarded_calls("print(causal_mask(3))", names) == ["causal_mask"]
    assert _unguarded_calls("try:\n    x = causal_mask(3)\nexcept ValueError:\n    pass", names) == ["causal_mask"]
    assert _unguarded_calls("try:\n    pass\nexcept NotImplementedError:\n    causal_mask(3)", names) == ["causal_mask"]
    assert (
        _unguarded_calls("try:\n    x = [causal_mask(n) for n in (2, 3)]\nexcept NotImplementedError:\n    pass", names)
        == []
    )
    assert _unguarded_calls("try:\n    causal_mask(3)\nexcept (KeyError, Exception):\n    pass", names) == []
    assert _unguarded_calls("other(3)", names) == []


# Re-running a whole release notebook costs its smoke run again, beside nbval's run of the source notebook,
# whose lesson cells are the same text (tests/test_course_release.py checks the release is current): 09 took
# 68 s, 02 59 s, 07 52 s, 06 38 s, 03 26 s on 2 cores, 08, 10 and 11 more. What a rerun guards is checked
# statically for every notebook: no lesson cell before the exercises names an exercise function, none after
# binds one (the test above), and every call of one outside the exercises catches a stub's NotImplementedError
# (the test before). The run itself is kept for 01, whose lesson cell after its exercises calls the student's
# lstm_step, as the check that the static tests describe what a kernel does (04's and 05's reruns, which had
# no such cell, cost 25 s more of the suite and checked nothing the static tests do not).
QUICK_TO_RERUN = ["01"]


@pytest.mark.parametrize("notebook", QUICK_TO_RERUN)
def test_a_release_notebook_survives_its_earlier_cells_run_after_the_exercises(notebook, tmp_path, monkeypatch):
    """The student version, its exercise stubs defined first: every earlier cell then runs after them."""
    import nbformat
    from nbclient import NotebookClient

    release = nbformat.read(next((ROOT / "release").glob(f"{notebook}_*.ipynb")), as_version=4)
    code = [cell for cell in release.cells if cell.cell_type == "code"]
    stubs = [cell for cell in code if cell.metadata.get("nbgrader", {}).get("solution")]
    first_exercise = code.index(stubs[0])
    # setup cell, the stubs, then the whole notebook again from its second cell, checks included
    release.cells = [code[0], *stubs, *code[1:]]
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    NotebookClient(
        release, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    body = release.cells[1 + len(stubs) : 1 + len(stubs) + first_exercise - 1]
    assert not [output for cell in body for output in cell.outputs if output.output_type == "error"]
    # One verdict per check cell: a kernel may deliver a cell's printed text in several stream chunks.
    verdicts = [
        "".join(output["text"] for output in cell.outputs if output.output_type == "stream")
        for cell in release.cells
        if "check(" in cell.source
    ]
    assert verdicts and all("not attempted yet" in text for text in verdicts), verdicts
