"""What the tests look for when they prove that no solution reached students (the telling lines of
the instructor notebooks' solutions and hidden tests), and the marked cells the grading tests build
notebooks from."""

import re
from pathlib import Path

import nbformat

from transformer_course.grading.markup import HIDDEN_BEGIN, HIDDEN_END, SOLUTION_BEGIN, SOLUTION_END

ROOT = Path(__file__).resolve().parents[1]
# The course notebooks that hold graded exercises, by number ("01", ...).
WITH_EXERCISES = sorted({path.name[:2] for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
                         if '"grade_id": "exercise_' in path.read_text(encoding="utf-8")})


def solution_lines(notebook) -> set:
    """The lines of the solutions and hidden tests of a source notebook that are long enough to be telling."""
    lines = set()
    for cell in notebook.cells:
        for begin, end in ((SOLUTION_BEGIN, SOLUTION_END), (HIDDEN_BEGIN, HIDDEN_END)):
            for region in re.findall(re.escape(begin) + r"(.*?)" + re.escape(end), cell.source, flags=re.S):
                lines |= {line.strip() for line in region.splitlines() if len(line.strip()) >= 24}
    return lines


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
    cell.metadata["nbgrader"] = _metadata(f"check_{notebook}_{number}", solution=False, grade=True, locked=True,
                                          points=points)
    return cell
