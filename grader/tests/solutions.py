"""What the tests look for when they prove that no solution reached students (the telling lines of
the instructor notebooks' solutions and hidden tests, :func:`solution_lines`), and the marked cells the
grading tests build notebooks from."""

from pathlib import Path

import nbformat

from transformer_course_grader.markup import solution_lines  # noqa: F401 - the tests' one name for it

ROOT = Path(__file__).resolve().parents[2]
# The course notebooks that hold graded exercises, by number ("01", ...).
WITH_EXERCISES = sorted(
    {
        path.name[:2]
        for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
        if '"grade_id": "exercise_' in path.read_text(encoding="utf-8")
    }
)


def _metadata(grade_id: str, solution: bool, grade: bool, locked: bool, points: int | None = None) -> dict:
    metadata = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked, "schema_version": 3}
    if points is not None:
        metadata["points"] = points
    return metadata


def solution_cell(exercise_id: str, source: str):
    """A code cell marked as the solution of ``exercise_id`` (its source holds the solution markers)."""
    notebook, number = exercise_id.split(".")
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = _metadata(f"exercise_{notebook}_{number}", solution=True, grade=False, locked=False)
    return cell


def check_cell(exercise_id: str, points: int, source: str):
    """A locked, graded code cell for ``exercise_id`` worth ``points``."""
    notebook, number = exercise_id.split(".")
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = _metadata(
        f"check_{notebook}_{number}", solution=False, grade=True, locked=True, points=points
    )
    return cell
