"""A student who runs an earlier cell again after the exercises: the release notebooks survive it.

Apart from tests/test_course_release.py so that, with the test files spread over workers, these
whole-notebook runs go beside the grading of the course's notebooks rather than after it."""

from pathlib import Path

import pytest
from solutions import WITH_EXERCISES

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

ROOT = Path(__file__).resolve().parents[1]


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


# Re-running a whole notebook costs its smoke run again (08: 88 s, 11: 49 s, 10: 41 s on 2 cores). What the run
# guards, that no lesson cell depends on an exercise's name, the static test above checks for every notebook; the
# run itself is kept for the notebooks whose smoke run is short (under 25 s here).
QUICK_TO_RERUN = [notebook for notebook in WITH_EXERCISES if notebook not in {"08", "10", "11"}]


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
    NotebookClient(release, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    body = release.cells[1 + len(stubs):1 + len(stubs) + first_exercise - 1]
    assert not [output for cell in body for output in cell.outputs if output.output_type == "error"]
    # One verdict per check cell: a kernel may deliver a cell's printed text in several stream chunks.
    verdicts = ["".join(output["text"] for output in cell.outputs if output.output_type == "stream")
                for cell in release.cells if "check(" in cell.source]
    assert verdicts and all("not attempted yet" in text for text in verdicts), verdicts
