"""Exercise markup in the source notebooks, in nbgrader's format, and the student release.

A source notebook marks an exercise with two cells, using nbgrader's cell metadata
(``metadata.nbgrader``, schema 3) and markers:

* a **solution cell** (``solution: true``, ``grade_id: "exercise_04_1"``) whose code between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is the instructor's answer;
* a **check cell** (``grade: true``, ``locked: true``, ``points``, ``grade_id: "check_04_1"``)
  that calls ``transformer_course.exercises.check(...)``; code between ``### BEGIN HIDDEN TESTS``
  and ``### END HIDDEN TESTS`` is for the instructor's copy only.

:func:`release_notebook` makes the student version: each solution region becomes
``raise NotImplementedError("Exercise 04.1")``, hidden-test regions go, and every locked cell gets
nbgrader's checksum (``nbgrader.utils.compute_checksum``) so the grader can tell when one was
edited. A **written answer** cell (a Markdown cell with ``grade_id: "written_09_1"``,
:mod:`transformer_course_grader.written`) keeps nbgrader's ``YOUR ANSWER HERE`` in place of its
rubric. The **recorded outputs** of the lesson stay: every code cell before the notebook's first
exercise cell keeps the outputs of the recorded full-profile run (figures, tables, printed
results), so a student reads the whole lesson with real numbers before running anything. From the
first exercise cell on — solutions, checks, and any cell after them that could show what a
solution computes — outputs are cleared.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

from transformer_course.tooling import write_text_atomically

from .written import ANSWER_PLACEHOLDER, written_id_of

__all__ = [
    "solution_lines",
    "SOLUTION_BEGIN",
    "SOLUTION_END",
    "HIDDEN_BEGIN",
    "HIDDEN_END",
    "exercise_id_of",
    "release_notebook",
    "release_folder",
    "locked_cells",
    "MarkupError",
]

SOLUTION_BEGIN, SOLUTION_END = "### BEGIN SOLUTION", "### END SOLUTION"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def solution_lines(notebook, shortest: int = 24) -> set[str]:
    """The telling lines of a source notebook's solutions and hidden tests: what must reach no student.

    A check that a release, a website or any page built for students leaks nothing looks for these.

    Args:
        notebook: an nbformat notebook (a source notebook, with its solution and hidden-test markers).
        shortest: int, the fewest characters a stripped line needs to count (shorter ones, ``return x``,
            occur in honest lesson code too).

    Returns:
        set of str, each a stripped line.

    Example:
        >>> import nbformat
        >>> cell = nbformat.v4.new_code_cell("### BEGIN SOLUTION\nreturn np.triu(np.ones((n, n)), k=1) == 0\n"
        ...                                  "### END SOLUTION")
        >>> solution_lines(nbformat.v4.new_notebook(cells=[cell]))
        {'return np.triu(np.ones((n, n)), k=1) == 0'}
    """
    lines = set()
    for cell in notebook.cells:
        for begin, end in ((SOLUTION_BEGIN, SOLUTION_END), (HIDDEN_BEGIN, HIDDEN_END)):
            for region in re.findall(re.escape(begin) + r"(.*?)" + re.escape(end), cell.source, flags=re.S):
                lines |= {line.strip() for line in region.splitlines() if len(line.strip()) >= shortest}
    return lines


_GRADE_ID = re.compile(r"^(exercise|check)_(\d\d)_(\d+)$")


class MarkupError(ValueError):
    """A source notebook's exercise markup is malformed; the message names the cell."""


def _nbgrader():
    try:
        from nbgrader import utils
    except ImportError as error:  # a dependency of this distribution, missing from a broken install
        raise ImportError(
            "release and grade need nbgrader, a dependency of transformer-course-grader: reinstall "
            "it (in a checkout: pip install -e grader)"
        ) from error
    return utils


def exercise_id_of(cell) -> str | None:
    """``"04.1"`` for a cell whose nbgrader ``grade_id`` is ``exercise_04_1`` or ``check_04_1``; else None."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    match = _GRADE_ID.match(grade_id) if isinstance(grade_id, str) else None
    return f"{match.group(2)}.{match.group(3)}" if match else None


def _replace_regions(source: str, begin: str, end: str, replacement, where: str) -> str:
    lines, output, inside = source.splitlines(), [], None
    for line in lines:
        stripped = line.strip()
        if stripped == begin:
            if inside is not None:
                raise MarkupError(f"{where}: {begin!r} inside another region.")
            inside = line[: len(line) - len(line.lstrip())]
            output.extend(replacement(inside))
        elif stripped == end:
            if inside is None:
                raise MarkupError(f"{where}: {end!r} without {begin!r}.")
            inside = None
        elif inside is None:
            output.append(line)
    if inside is not None:
        raise MarkupError(f"{where}: {begin!r} is never closed by {end!r}.")
    return "\n".join(output)


def release_notebook(notebook):
    """The student version of a source notebook (the argument is not modified).

    Raises:
        MarkupError: for a solution cell without a solution region, unbalanced markers, or a
            grade_id that does not name an exercise.
    """
    utils = _nbgrader()
    released = copy.deepcopy(notebook)
    exercises_begun = False
    for index, cell in enumerate(released.cells):
        where = f"cell {index + 1}"
        if written_id_of(cell) is not None:  # an answer in words: the rubric goes, nbgrader's placeholder stays
            if cell.cell_type != "markdown" or SOLUTION_BEGIN not in cell.source:
                raise MarkupError(
                    f"{where}: the answer cell of {written_id_of(cell)} must be a Markdown cell with "
                    f"its rubric in a {SOLUTION_BEGIN!r} region."
                )
            cell.source = _replace_regions(
                cell.source, SOLUTION_BEGIN, SOLUTION_END, lambda indent: [ANSWER_PLACEHOLDER], where
            ).strip()
            continue
        if cell.cell_type != "code":
            continue
        exercise = exercise_id_of(cell)
        if utils.is_solution(cell):
            if exercise is None:
                raise MarkupError(f"{where}: a solution cell needs a grade_id like 'exercise_04_1'.")
            if SOLUTION_BEGIN not in cell.source:
                raise MarkupError(f"{where}: solution cell for {exercise} has no {SOLUTION_BEGIN!r} region.")
            stub = lambda indent, exercise=exercise: [f'{indent}raise NotImplementedError("Exercise {exercise}")']  # noqa: E731
            cell.source = _replace_regions(cell.source, SOLUTION_BEGIN, SOLUTION_END, stub, where)
        cell.source = _replace_regions(cell.source, HIDDEN_BEGIN, HIDDEN_END, lambda indent: [], where).rstrip()
        exercises_begun = exercises_begun or utils.is_solution(cell) or utils.is_grade(cell)
        if exercises_begun:  # the lesson's recorded outputs stay; nothing of an exercise's does
            cell.outputs, cell.execution_count = [], None
        if utils.is_locked(cell):
            cell.metadata["nbgrader"]["checksum"] = utils.compute_checksum(cell)
    return released


def locked_cells(notebook) -> dict:
    """grade_id -> cell, for every locked nbgrader cell of ``notebook``."""
    utils = _nbgrader()
    return {
        cell.metadata["nbgrader"]["grade_id"]: cell
        for cell in notebook.cells
        if "nbgrader" in cell.get("metadata", {}) and utils.is_locked(cell)
    }


def release_folder(source_dir, release_dir, pattern: str = "[0-9][0-9]_*.ipynb") -> list[Path]:
    """Write the student version of every source notebook in ``source_dir`` into ``release_dir``.

    Each file is written atomically: a failure leaves the previous release in place.

    Returns:
        the paths written, sorted.

    Raises:
        FileNotFoundError: if ``source_dir`` holds no notebook matching ``pattern``.
        MarkupError: for malformed markup (nothing is written for that notebook).
    """
    source_dir, release_dir = Path(source_dir), Path(release_dir)
    sources = sorted(source_dir.glob(pattern))
    if not sources:
        raise FileNotFoundError(f"no notebooks matching {pattern!r} in {source_dir}")
    release_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for source in sources:
        released = release_notebook(nbformat.read(source, as_version=4))
        text = nbformat.writes(released)
        write_text_atomically(release_dir / source.name, text if text.endswith("\n") else text + "\n")
        written.append(release_dir / source.name)
    return written
