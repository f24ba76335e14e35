"""The course's own notebooks: the release is current, runs, scores 0; the source scores full marks."""

import shutil
from pathlib import Path

import pytest
from solutions import WITH_EXERCISES
from solutions import solution_lines as solution_lines_of

from transformer_course.exercises import EXERCISES
from transformer_course_grader.cli import main
from transformer_course_grader.grader import grade_folder
from transformer_course_grader.sandbox import Limits, sandbox_available

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

ROOT = Path(__file__).resolve().parents[2]
LIMITS = Limits(cell_seconds=300, notebook_seconds=900, memory_mb=6144)


def test_release_folder_is_up_to_date(capsys):
    arguments = ["release", "--notebooks-dir", str(ROOT / "notebooks"), "--out", str(ROOT / "release"), "--check"]
    assert main(arguments) == 0, capsys.readouterr().err


def test_every_check_cell_matches_the_catalogue():
    import nbformat

    from transformer_course_grader.markup import exercise_id_of

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            exercise = exercise_id_of(cell)
            if exercise and cell.metadata["nbgrader"].get("grade"):
                assert cell.metadata["nbgrader"]["points"] == EXERCISES[exercise].points, (path.name, exercise)
                assert f'check("{exercise}", {EXERCISES[exercise].function_name})' in cell.source


def test_every_notebook_carries_its_catalogued_exercises_with_check_cells():
    import nbformat

    from transformer_course_grader.markup import exercise_id_of
    from transformer_course_grader.written import written_id_of

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    numbers = [path.name[:2] for path in notebooks]
    assert numbers[0] == "01" and len(set(numbers)) == len(numbers), numbers
    assert {exercise.split(".")[0] for exercise in EXERCISES} == set(numbers)  # no exercise without its notebook
    for path in notebooks:
        cells = nbformat.read(path, as_version=4).cells
        solutions = [
            exercise_id_of(c)
            for c in cells
            if c.metadata.get("nbgrader", {}).get("solution") and written_id_of(c) is None
        ]
        checks = [
            exercise_id_of(c) for c in cells if c.metadata.get("nbgrader", {}).get("grade") and written_id_of(c) is None
        ]
        catalogued = sorted(e for e in EXERCISES if e.startswith(path.name[:2] + "."))
        assert len(catalogued) >= 2, path.name
        assert sorted(solutions) == catalogued and sorted(checks) == catalogued, (path.name, solutions, checks)


def _without_lesson_cells(path: Path, out: Path, release: Path, keep_setup: bool = True) -> None:
    """A copy of a notebook whose code is its setup cell (unless ``keep_setup`` is False), its exercise and check
    cells, and, of its other cells, the statements its graded functions need (their imports, found as the grader
    finds them: :func:`.slicing.program_for`), each in the cell it came from."""
    import nbformat

    from transformer_course_grader import grader

    notebook = nbformat.read(path, as_version=4)
    exercises = grader._exercises_of(nbformat.read(release, as_version=4))
    needed: dict[int, set] = {}
    for program in grader._programs(notebook, exercises).values():
        for unit in program.units:
            needed.setdefault(unit.cell, set()).add((unit.line, unit.text))
    first_code = next(cell for cell in notebook.cells if cell.cell_type == "code")
    kept = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or (keep_setup and cell is first_code) or cell.metadata.get("nbgrader"):
            kept.append(cell)
        elif index in needed:  # a lesson cell: only what a graded function needs of it (an import of Keras is not)
            cell.source = "\n".join(text for _, text in sorted(needed[index]))
            kept.append(cell)
    notebook.cells = kept
    nbformat.write(notebook, out)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The instructor's notebooks and the untouched student versions, graded in the sandbox.

    Both are graded without their lesson cells, keeping the exercise and check cells and the statements
    the graded functions need (their imports): the grader neither locks nor inspects the lesson, so what it
    says of the copy is what it says of the notebook, and the lessons run in full elsewhere (nbval runs
    each source notebook, tests/test_release_reruns.py a release). The first notebook's instructor copy keeps
    its setup cell, so that it is seen to run in the sandbox (it imports Keras); the other copies keep no setup
    cell and, of a lesson cell, only the statements a graded function needs. The setup cells differ only in
    the notebook's number, and each import of Keras costs about 5 s of a core: with twelve more of them the
    fixture's tests took 132 core-seconds instead of 50 (measured alone), and no graded function needs Keras."""
    root = tmp_path_factory.mktemp("course")
    release = root / "release"
    release.mkdir()
    for student in ("instructor", "untouched"):
        (root / "submissions" / student).mkdir(parents=True)
    for notebook in WITH_EXERCISES:
        released = next((ROOT / "release").glob(f"{notebook}_*.ipynb"))
        shutil.copy(released, release)
        _without_lesson_cells(
            ROOT / "notebooks" / released.name,
            root / "submissions" / "instructor" / released.name,
            released,
            keep_setup=notebook == WITH_EXERCISES[0],
        )
        _without_lesson_cells(released, root / "submissions" / "untouched" / released.name, released, keep_setup=False)
    results = grade_folder(
        root / "submissions", root / "report", release, LIMITS, workers=2, progress=False, sandbox=sandbox_available()
    )
    return {(r.student, r.notebook[:2]): r for r in results}


def test_notebooks_from_06_on_end_with_a_written_question():
    import nbformat

    from transformer_course_grader.written import questions_of

    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        questions = questions_of(notebook)
        assert bool(questions) == (path.name[:2] >= "06"), path.name
        if questions:
            answer = next(
                cell
                for cell in notebook.cells
                if cell.metadata.get("nbgrader", {}).get("grade_id") == questions[-1].grade_id
            )
            assert notebook.cells[-1] is answer and "Rubric" in answer.source, path.name


@pytest.mark.parametrize("notebook", WITH_EXERCISES)
def test_source_notebook_runs_and_scores_full_marks(graded, notebook):
    """Every exercise passes; a written answer (the instructor's rubric) waits for the instructor's score."""
    result = graded[("instructor", notebook)]
    automatic = [x for x in result.exercises if ".w" not in x.exercise]
    assert [(x.exercise, x.status) for x in automatic] == [(x.exercise, "passed") for x in automatic]
    assert {x.status for x in result.exercises if ".w" in x.exercise} <= {"to be graded by hand"}
    assert automatic and not result.problems, result.problems


@pytest.mark.parametrize("notebook", WITH_EXERCISES)
def test_an_untouched_release_scores_zero_and_is_never_flagged(graded, notebook):
    result = graded[("untouched", notebook)]
    assert {x.status for x in result.exercises} == {"not attempted"}
    assert sum(x.points for x in result.exercises) == 0
    assert not result.problems and not result.flags, (result.problems, result.flags)


@pytest.mark.parametrize("notebook", WITH_EXERCISES)
def test_release_keeps_the_lesson_outputs_and_leaks_no_solution(notebook):
    """The student version carries the recorded run's outputs up to the first exercise, and nothing of
    a solution anywhere: no solution or hidden-test line in any source, output, metadata or attachment,
    no output in or after an exercise cell, no verdict of the instructor's run."""
    import json

    import nbformat

    source = nbformat.read(next((ROOT / "notebooks").glob(f"{notebook}_*.ipynb")), as_version=4)
    path = next((ROOT / "release").glob(f"{notebook}_*.ipynb"))
    released, text = nbformat.read(path, as_version=4), path.read_text(encoding="utf-8")
    solution_lines = solution_lines_of(source)
    assert solution_lines  # something to look for: the scan cannot pass for want of it
    assert all(
        json.dumps(line)[1:-1] in source_text or line in source_text
        for line in solution_lines
        for source_text in [next((ROOT / "notebooks").glob(f"{notebook}_*.ipynb")).read_text(encoding="utf-8")]
    )
    leaked = [line for line in solution_lines if json.dumps(line)[1:-1] in text or line in text]
    assert not leaked, f"solution lines in the release: {leaked[:3]}"
    assert "✓ Exercise" not in text and "\\u2713 Exercise" not in text
    code = [cell for cell in released.cells if cell.cell_type == "code"]
    first = next(index for index, cell in enumerate(code) if cell.metadata.get("nbgrader"))
    assert not any(cell.outputs for cell in code[first:])
    lesson = [cell for cell in code[:first] if cell.outputs]
    originals = [cell for cell in source.cells if cell.cell_type == "code"][:first]
    assert len(lesson) == sum(bool(cell.outputs) for cell in originals) > 0
