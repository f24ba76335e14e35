"""What instructors do with grades besides reading the report: overrides, and exports for Canvas and Gradescope.

* **Overrides** (:func:`read_overrides`, :func:`apply_overrides`): an ``overrides.csv`` with the
  columns ``student,exercise,points,reason`` sets a student's points for an exercise by hand.
  ``grade`` and ``merge-grades`` apply it (``--overrides``) to the results they report, so a regrade
  keeps every override; ``report.md`` shows the automatic score beside the override and its reason.
* **Canvas** (:func:`canvas_gradebook`): a gradebook CSV in the layout Canvas imports — the columns
  ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``, then one assignment column
  whose header ends with the assignment's Canvas id in brackets, a ``Points Possible`` row first —
  from the grades and a roster file that maps each submission folder to the student's Canvas ids.
* **Gradescope** (:func:`gradescope_results`): an autograder's ``results.json`` for one student —
  ``score``, ``output``, ``visibility`` and one test per exercise with ``name``, ``score``,
  ``max_score``, ``status``, ``output`` and ``visibility`` — so that ``grade`` can run as a
  Gradescope autograder (grade the one submission, then write this file to
  ``/autograder/results/results.json``).

Every function reads the ``grades.json`` that ``grade`` and ``merge-grades`` write.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from transformer_course.exercises import EXERCISES

from .reports import points_sum
from .safe_text import spreadsheet_cell

__all__ = [
    "OverrideError",
    "read_overrides",
    "check_students",
    "apply_overrides",
    "canvas_gradebook",
    "gradescope_results",
]

OVERRIDE_COLUMNS = ["student", "exercise", "points", "reason"]
ROSTER_COLUMNS = ["folder", "Student", "ID", "SIS User ID", "SIS Login ID", "Section"]


class OverrideError(ValueError):
    """An overrides or roster file the grader will not apply; the message names the row."""


def read_overrides(path) -> list[dict]:
    """The rows of an ``overrides.csv``: ``[{"student", "exercise", "points", "reason"}, ...]``.

    Args:
        path: a CSV file with the header ``student,exercise,points,reason``; ``student`` is the
            name as the report shows it, ``exercise`` an id such as ``04.1``, ``points`` an integer
            from 0 to the exercise's points, ``reason`` a non-empty text.

    Raises:
        OverrideError: a wrong header, an unknown exercise, points that are not an integer in range,
            an empty reason, or a student and exercise overridden twice; the message names the row.
    """
    with open(path, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames != OVERRIDE_COLUMNS:
            raise OverrideError(
                f"{path}: the header must be {','.join(OVERRIDE_COLUMNS)}; received {reader.fieldnames}"
            )
        rows, seen = [], set()
        for number, row in enumerate(reader, start=2):
            exercise = EXERCISES.get(row["exercise"])
            if exercise is None:
                raise OverrideError(f"{path}, row {number}: unknown exercise {row['exercise']!r}")
            text = (row["points"] or "").strip()
            if not text.isdigit() or int(text) > exercise.points:
                raise OverrideError(
                    f"{path}, row {number}: points must be an integer from 0 to {exercise.points} "
                    f"for {exercise.id}; received {row['points']!r}"
                )
            if not (row["reason"] or "").strip():
                raise OverrideError(f"{path}, row {number}: every override needs a reason")
            key = (row["student"], row["exercise"])
            if key in seen:
                raise OverrideError(f"{path}, row {number}: {row['student']} {row['exercise']} is overridden twice")
            seen.add(key)
            rows.append(
                {
                    "student": row["student"],
                    "exercise": row["exercise"],
                    "points": int(text),
                    "reason": row["reason"].strip(),
                }
            )
    return rows


def check_students(overrides: list[dict], students: list[str]) -> None:
    """Raise :class:`OverrideError` if an override names a student who is not in ``students``."""
    unknown = sorted({row["student"] for row in overrides} - set(students))
    if unknown:
        raise OverrideError(f"overrides name students who are not in the class: {unknown}")


def apply_overrides(results: list, overrides: list[dict], students: list[str]) -> None:
    """Set the overridden points in ``results`` (in place), keeping the automatic points beside them.

    Args:
        results: list of :class:`~transformer_course_grader.grader.NotebookResult`.
        overrides: rows from :func:`read_overrides`.
        students: every student's name as the reports show it (a shard applies only the rows of
            its own students, but a name outside the class is an error).

    Raises:
        OverrideError: an override names a student who is not in the class.
    """
    check_students(overrides, students)
    wanted = {(row["student"], row["exercise"]): row for row in overrides}
    for result in results:
        for exercise in result.exercises:
            row = wanted.get((result.student, exercise.exercise))
            if row is not None:
                if exercise.automatic_points is None:
                    exercise.automatic_points = exercise.points
                exercise.points, exercise.override = row["points"], row["reason"]


def _report(report) -> dict:
    if isinstance(report, (str, Path)):
        return json.loads(Path(report, "grades.json").read_text(encoding="utf-8"))
    return report


def canvas_gradebook(
    report,
    roster_path,
    assignment: str,
    assignment_id: str | None,
    notebooks: list[str] | None = None,
    per_exercise: bool = False,
) -> tuple[str, list[str]]:
    """A Canvas gradebook CSV of every student's total, and the names that did not match.

    Args:
        report: a report folder (holding ``grades.json``) or the loaded ``grades.json`` dict.
        roster_path: a CSV with the header ``folder,Student,ID,SIS User ID,SIS Login ID,Section``
            (Canvas' own columns, from its gradebook export, plus the submission folder's name as
            the report shows it).
        assignment: str, the assignment's name in Canvas.
        assignment_id: str, its Canvas id (the number in the column header Canvas exports); None
            for a new assignment, which Canvas creates on import.
        notebooks: the notebooks of one assignment (``["04", "05"]``): only their exercises
            count; None counts every exercise of the report.
        per_exercise: bool, one column per exercise (``"<assignment>: 04.1"``, new assignments
            in Canvas) instead of one column for the total.

    Returns:
        ``(csv_text, unmatched)``: the CSV to import (one row per roster student, the credited points
        where the report was graded with a due time; a student without a submission gets an empty
        cell, which Canvas leaves ungraded), and the sorted names of the
        graded folders that are not in the roster and of the roster folders never graded.

    Raises:
        OverrideError: a roster without the expected header, or a folder listed twice.
    """
    report = _report(report)
    points = report.get("points") or {exercise: EXERCISES[exercise].points for exercise in report["exercises"]}
    exercises = [exercise for exercise in report["exercises"] if notebooks is None or exercise[:2] in notebooks]
    if notebooks is not None and not exercises:
        raise OverrideError(f"the report holds no exercise of notebooks {', '.join(notebooks)}")
    scores = {
        student: {x["exercise"]: x["points"] for item in items for x in item["exercises"]}
        for student, items in report["students"].items()
    }
    kept = {
        student: next((item["late_share"] for item in items if item.get("late_share") is not None), 1.0)
        for student, items in report["students"].items()
    }  # a late submission's credited share
    # utf-8-sig: Excel writes a byte-order mark before the header of a CSV it saves as UTF-8.
    with open(roster_path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        received = [name.strip() for name in reader.fieldnames or []]
        if sorted(received) != sorted(ROSTER_COLUMNS):  # the columns in any order
            raise OverrideError(
                f"{roster_path}: the header must name the columns {','.join(ROSTER_COLUMNS)} (in any order); "
                f"received {reader.fieldnames}"
            )
        reader.fieldnames = received
        roster = list(reader)
    folders = [row["folder"] for row in roster]
    if len(set(folders)) != len(folders):
        raise OverrideError(f"{roster_path}: a folder is listed twice")
    if per_exercise:
        columns = [(f"{assignment}: {exercise}", [exercise]) for exercise in exercises]
    else:
        columns = [(f"{assignment} ({assignment_id})" if assignment_id else assignment, exercises)]
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow([*ROSTER_COLUMNS[1:], *(spreadsheet_cell(name) for name, _ in columns)])
    writer.writerow(["Points Possible", "", "", "", "", *(sum(points[e] for e in items) for _, items in columns)])
    for row in roster:
        mine = scores.get(row["folder"])
        cells = [
            "" if mine is None else points_sum([points_sum(mine.get(e, 0) for e in items) * kept[row["folder"]]])
            for _, items in columns
        ]
        writer.writerow([*(spreadsheet_cell(row[name]) for name in ROSTER_COLUMNS[1:]), *cells])
    unmatched = sorted((set(scores) - set(folders)) | (set(folders) - set(scores)))
    return table.getvalue(), unmatched


def gradescope_results(report, student: str, notebooks: list[str] | None = None, written: bool = True) -> dict:
    """Gradescope's autograder ``results.json`` for ``student``: one test per exercise.

    Args:
        report: a report folder (holding ``grades.json``) or the loaded ``grades.json`` dict.
        student: the name as the report shows it.
        notebooks: the notebooks of one assignment (``["04", "05"]``); None: every notebook.
        written: bool, whether written answers are tests too (their points as scored by hand,
            ``score-written``); False for the autograder, where each is a manually graded question of
            Gradescope's own, never a failed test inside the autograder's total.

    Returns:
        dict with ``score`` (float, the total), ``output`` (one line), ``output_format``
        (``"text"``: nothing a student's code printed is rendered as Markdown or HTML),
        ``visibility`` and ``stdout_visibility`` (``"visible"`` / ``"hidden"``) and ``tests``: one
        per exercise with ``name``, ``number`` (the exercise id), ``score``, ``max_score``,
        ``status`` (``"passed"`` or ``"failed"``), ``output`` (the verdict, with an override's
        reason), ``output_format`` (``"text"``) and ``visibility``.

    Raises:
        KeyError: ``student`` is not in the report.
    """
    report = _report(report)
    items = [item for item in report["students"][student] if notebooks is None or item["notebook"][:2] in notebooks]
    tests, by_hand = [], []
    for item in items:
        for x in item["exercises"]:
            if not written and x["exercise"] not in EXERCISES:
                by_hand.append(x["exercise"])
                continue
            output = f"{x['status']}: {x['message']}"
            if x.get("override"):
                output += f" — set by hand from {x.get('automatic_points')} to {x['points']}: {x['override']}"
            title = (
                f"Exercise {x['exercise']}: {EXERCISES[x['exercise']].title}"
                if x["exercise"] in EXERCISES
                else f"Written answer {x['exercise']} (graded by hand)"
            )
            tests.append(
                {
                    "name": title,
                    "number": x["exercise"],
                    "score": float(x["points"]),
                    "max_score": float(x["max_points"]),
                    "status": "passed" if x["points"] == x["max_points"] else "failed",
                    "output": output,
                    "visibility": "visible",
                }
            )
    score = float(points_sum(test["score"] for test in tests))
    maximum = sum(test["max_score"] for test in tests)
    for test in tests:  # what a student's code printed is shown as text, never rendered as Markdown or HTML
        test["output_format"] = "text"
    return {
        "score": score,
        "output": f"{score:g} / {maximum:g} points over {len(tests)} exercises"
        + (
            f"; the written answers ({', '.join(by_hand)}) are graded by hand, as questions of their own"
            if by_hand
            else ""
        ),
        "output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }
