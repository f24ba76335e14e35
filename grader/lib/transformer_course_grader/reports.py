"""What a grading run writes: ``grades.csv``, ``grades.json`` and ``report.md``, safe for any name.

Student folder names and anything a student's code produced reach the reports only through
:mod:`.safe_text`: :func:`~.safe_text.visible` (every invisible or control character escaped, one
to one), :func:`~.safe_text.markdown_text` (no Markdown or HTML of its own) and
:func:`~.safe_text.spreadsheet_cell` (no formula).
:func:`report_texts` writes the three texts; near-identical solutions get a section of their own
(:mod:`.similarity`), which never changes a score.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict

from transformer_course.exercises import EXERCISES

from .safe_text import escaped, lookalike_groups, markdown_text, spreadsheet_cell

__all__ = ["report_texts", "points_sum"]


def points_sum(values) -> int | float:
    """The sum of points, some of them partial credit (2 decimals): rounded to 2 decimals, an int when whole.

    Example:
        >>> points_sum([0.67, 0.67, 0.67, 2])
        4.01
    """
    total = round(sum(values), 2)
    return int(total) if total == int(total) else total


def _similarity_lines(results: list) -> list[str]:
    """The report's section on near-identical solutions (see :mod:`.similarity`)."""
    from .similarity import COMMON_SHARE, MIN_SHINGLES, SIMILARITY_THRESHOLD, similar_solutions

    solutions = {}
    for result in results:
        solutions.setdefault(result.student, {}).update(result.solutions or {})
    found = similar_solutions(solutions)
    lines = [
        "## Near-identical solutions",
        "",
        f"A heuristic: each graded function with the helpers, constants and imports it uses, compared with "
        f"names, literals, comments and statements that change nothing set aside and imports resolved "
        f"(5-token sequences). Students whose programs are alike from {SIMILARITY_THRESHOLD} on are listed as "
        f"groups; a student is listed beside a known answer (the package's implementation, the grader's "
        f"reference, the instructor's solution) when the program holds {SIMILARITY_THRESHOLD:.0%} of it or "
        f"more. Programs under {MIN_SHINGLES} token sequences, and a program {COMMON_SHARE:.0%} of the class "
        f"wrote, are short, natural answers: not listed as copies. This never changes a score: read the cells "
        f"and decide.",
        "",
    ]
    if not found:
        return lines + ["None.", ""]
    for exercise, seen in found.items():
        for lowest, highest, group in seen["groups"]:
            names = ", ".join(markdown_text(student) for student in group)
            alike = f"similarity {highest:.2f}" if lowest == highest else f"similarity {lowest:.2f} to {highest:.2f}"
            lines.append(
                f"- {exercise}: {names} ({len(group)} students), {alike}"
                if len(group) > 2
                else f"- {exercise}: {names.replace(', ', ' and ')}, {alike}"
            )
        for size in seen.get("common", []):
            lines.append(f"- {exercise}: {size} students wrote one program, the usual answer (not listed as copies)")
        if seen.get("more_groups"):
            lines.append(f"- {exercise}: {seen['more_groups']} more groups not listed")
        for score, student, where in seen["package"]:
            lines.append(f"- {exercise}: {markdown_text(student)} holds {score:.0%} of {where}")
    return lines + [""]


def report_texts(
    results: list, exercise_ids: list, seed: int | None = None, extra: dict | None = None
) -> tuple[str, str, str]:
    """The three reports of a grading run: ``grades.csv``, ``grades.json`` and ``report.md``, as text.

    Args:
        results: list of :class:`~.grader.NotebookResult`, one per student and notebook.
        exercise_ids: list of str, the exercises graded, in column order.
        seed: the secret seed of the run (recorded in ``grades.json`` only), or None.
        extra: more keys for ``grades.json`` (the release's checksums, every student's name).

    Returns:
        ``(csv_text, json_text, markdown)``. Every name and message a student controls goes
        through :func:`spreadsheet_cell` or :func:`markdown_text` first.
    """
    students = sorted({result.student for result in results})
    by_student = {student: [r for r in results if r.student == student] for student in students}
    lookalikes = lookalike_groups(students)
    shown = {name: f"{name} ({escaped(name)})" for group in lookalikes for name in group if escaped(name) != name}
    # Each item's points: a written question's come from its cell (every result holds them), an exercise's
    # from the catalogue (also for a report in which nobody submitted that notebook).
    maxima = {x.exercise: x.max_points for r in results for x in r.exercises}
    maxima.update({e: EXERCISES[e].points for e in exercise_ids if e in EXERCISES})
    maximum = sum(maxima.get(e, 0) for e in exercise_ids)
    table = io.StringIO()
    writer = csv.writer(table)
    totals = {student: points_sum(x.points for r in by_student[student] for x in r.exercises) for student in students}
    late = {
        student: next(((r.hours_late, r.late_share) for r in by_student[student] if r.late_share is not None), None)
        for student in students
    }
    credited = {student: points_sum([totals[student] * late[student][1]]) for student in students if late[student]}
    dated = bool(credited)  # graded with a due time: credited beside raw
    writer.writerow(["student", *exercise_ids, "total", "max", *(["hours_late", "credited"] if dated else [])])
    for student in students:
        points = {x.exercise: x.points for r in by_student[student] for x in r.exercises}
        total = totals[student]
        late_columns = [] if not dated else ["", ""] if late[student] is None else [late[student][0], credited[student]]
        writer.writerow(
            [spreadsheet_cell(student), *[points.get(e, 0) for e in exercise_ids], total, maximum, *late_columns]
        )
    details = {student: [asdict(r) for r in by_student[student]] for student in students}
    lines = [
        "# Grading report",
        "",
        f"{len(students)} student(s), exercises {', '.join(exercise_ids)} ({maximum} points in all).",
        "",
    ]
    if lookalikes:
        lines += [
            "**Names that look alike** (their Unicode skeletons, UTS #39, coincide; characters outside ASCII "
            "shown as escapes): check that each is the student it seems."
        ]
        lines += [f"- {', '.join(markdown_text(escaped(name)) for name in group)}" for group in lookalikes] + [""]
    kept = sorted({r.accounting for r in results if r.accounting})
    if kept:
        lines += [
            "Memory limits kept by: "
            + "; ".join(
                f"the sandbox's memory control group ({kind}) and the watchdog"
                if kind.startswith("cgroup")
                else "the watchdog alone (this host gives the grader no memory control group: socket buffers and "
                "kernel objects are not counted)"
                for kind in kept
            )
            + ".",
            "",
        ]
    if any(r.isolated is False for r in results):
        lines += [
            "**Warning:** graded with `--unsafe-no-sandbox`: students' code ran without the sandbox, with "
            "network and with the grading machine's files in reach.",
            "",
        ]
    for student in students:
        total = totals[student]
        lateness = (
            ""
            if late[student] is None or (not late[student][0] and late[student][1] >= 1)
            else (f"; credited {credited[student]} ({late[student][0]:g} hours late, {late[student][1]:.0%} kept)")
        )
        lines += [
            f"## {markdown_text(shown.get(student, student))}: {total} / {maximum}{lateness}",
            "",
            "| exercise | points | result |",
            "|---|---|---|",
        ]
        for result in by_student[student]:
            for x in result.exercises:
                points = f"{x.points} / {x.max_points}"
                if x.override:
                    points += f" (set by hand; automatic {x.automatic_points}: {markdown_text(x.override)})"
                lines.append(f"| {x.exercise} | {points} | {x.status}: {markdown_text(x.message)} |")
        notes = [f"{r.notebook}: {note}" for r in by_student[student] for note in r.flags + r.problems]
        lines += [""] + [f"- {markdown_text(note)}" for note in notes] + ([""] if notes else [])
    lines += _similarity_lines(results)
    summary = {
        "seed": seed,
        **(extra or {}),
        "exercises": exercise_ids,
        "points": {e: maxima.get(e, 0) for e in exercise_ids},
        "students": details,
    }
    return table.getvalue(), json.dumps(summary, indent=2), "\n".join(lines) + "\n"
