"""Written answers: questions a student answers in words, which the instructor grades by hand.

**Markup** (nbgrader's manually graded answer cell). The question is a Markdown cell; the answer
is the Markdown cell after it, with the nbgrader metadata ``{"grade_id": "written_09_1",
"solution": true, "grade": true, "locked": false, "points": 2, "schema_version": 3}``. In the
instructor's copy its text between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is the
rubric; the student version replaces that region with nbgrader's ``YOUR ANSWER HERE``
(:func:`transformer_course_grader.markup.release_notebook`).

**Grading.** ``grade`` reads each answer (:func:`answers_of`), gives it 0 points for now with the
status ``"to be graded by hand"`` (``"not attempted"`` when it still says ``YOUR ANSWER HERE``),
keeps its text in ``grades.json`` and writes every student's answer to one question into one
file for the instructor, ``answers/09.w1.md`` and ``answers/09.w1.csv`` (:func:`write_answer_files`;
every character a student typed escaped for Markdown and for spreadsheets).

**Scores.** The instructor's scores come back in a CSV, ``student,question,points,comment``
(:func:`read_written_scores`; ``answers/written-scores.csv`` is the template, as Excel saves it or
not); ``transformer-course-grader score-written`` (and ``grade`` / ``merge-grades`` with
``--written-scores``) applies them (:func:`apply_written_scores`) as the whole of the hand scores
and rewrites the reports, so the totals, the Canvas column and Gradescope's results include them.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from transformer_course.tooling import write_text_atomically

from .safe_text import markdown_text, spreadsheet_cell

__all__ = [
    "WrittenQuestion",
    "WrittenScoreError",
    "ANSWER_PLACEHOLDER",
    "SCORE_COLUMNS",
    "written_id_of",
    "questions_of",
    "answers_of",
    "capped_answer",
    "status_of",
    "write_answer_files",
    "read_written_scores",
    "apply_written_scores",
    "MAX_ANSWER_CHARACTERS",
    "SCORES_TEMPLATE",
]

ANSWER_PLACEHOLDER = "YOUR ANSWER HERE"  # nbgrader's text in a released answer cell
SCORE_COLUMNS = ["student", "question", "points", "comment"]
SCORES_TEMPLATE = "written-scores.csv"  # in answers/: every student and question, points to fill in
MAX_ANSWER_CHARACTERS = 20_000  # an answer longer than this is cut (the rest is noted) in every report
_GRADE_ID = re.compile(r"^written_(\d\d)_(\d+)$")
_QUESTION_ID = re.compile(r"^(\d\d)\.w(\d+)$")


class WrittenScoreError(ValueError):
    """A written-scores file the grader will not apply; the message names the row."""


@dataclass(frozen=True)
class WrittenQuestion:
    """One question answered in words: ``id`` (``"09.w1"``), ``points``, and its cell's ``grade_id``."""

    id: str
    points: int
    grade_id: str


def written_id_of(cell) -> str | None:
    """``"09.w1"`` for a cell whose nbgrader ``grade_id`` is ``written_09_1``; else None.

    Example:
        >>> written_id_of({"cell_type": "markdown", "metadata": {"nbgrader": {"grade_id": "written_09_1"}}})
        '09.w1'
    """
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
    match = _GRADE_ID.match(grade_id) if isinstance(grade_id, str) else None
    return f"{match.group(1)}.w{match.group(2)}" if match else None


def questions_of(notebook) -> list[WrittenQuestion]:
    """The written questions of a (released or source) notebook, in order, with their points.

    Raises:
        ValueError: an answer cell that is not Markdown, or whose points are not a positive integer.
    """
    questions = []
    for index, cell in enumerate(notebook["cells"]):
        question = written_id_of(cell)
        if question is None:
            continue
        points = cell["metadata"]["nbgrader"].get("points")
        if cell.get("cell_type") != "markdown":
            raise ValueError(f"cell {index + 1}: the answer cell of {question} must be a Markdown cell")
        if isinstance(points, bool) or not isinstance(points, int) or points < 1:
            raise ValueError(
                f"cell {index + 1}: the answer cell of {question} needs points, a positive integer; received {points!r}"
            )
        questions.append(WrittenQuestion(question, points, cell["metadata"]["nbgrader"]["grade_id"]))
    return questions


def answers_of(submission, questions: list[WrittenQuestion], release=None) -> dict[str, str | None]:
    """question id -> the text of the student's answer (None when there is none to be found).

    The answer starts at the cell carrying the question's ``grade_id`` — Markdown, or turned into a
    code or raw cell — and, given the ``release``, goes on through the cells the student added after
    it, up to the next cell that is the release's own (one with nbgrader metadata, or the same text
    as a cell of the release): an answer typed in a new cell below the placeholder counts. Where the
    answer cell lost its metadata (Colab drops it on some copies) or was deleted, the answer is what
    the student wrote after the question's own cell (found by its text in the release). Placeholder
    and empty cells are left out; the parts are joined by a blank line.
    """
    answers: dict[str, str | None] = {question.id: None for question in questions}
    cells = [cell for cell in submission.get("cells", []) if isinstance(cell, dict)]
    if release is None:
        for cell in cells:
            question = written_id_of(cell)
            if question in answers and answers[question] is None:
                answers[question] = str(cell.get("source", ""))
        return answers
    release_cells = list(release.get("cells", []))
    release_texts = {str(cell.get("source", "")).strip() for cell in release_cells} - {"", ANSWER_PLACEHOLDER}

    def is_release_cell(cell) -> bool:
        metadata = cell.get("metadata")
        has_nbgrader = (
            isinstance(metadata, dict) and isinstance(metadata.get("nbgrader"), dict) and written_id_of(cell) is None
        )
        return has_nbgrader or str(cell.get("source", "")).strip() in release_texts

    for question in questions:
        where = next((index for index, cell in enumerate(release_cells) if written_id_of(cell) == question.id), None)
        prompt = next(
            (
                str(cell.get("source", "")).strip()
                for cell in reversed(release_cells[: where or 0])
                if str(cell.get("source", "")).strip()
            ),
            None,
        )
        start = next((index for index, cell in enumerate(cells) if written_id_of(cell) == question.id), None)
        by_prompt = start is None
        if by_prompt and prompt:
            start = next(
                (index + 1 for index, cell in enumerate(cells) if str(cell.get("source", "")).strip() == prompt), None
            )
        if start is None:
            continue
        parts = []
        for index in range(start, len(cells)):
            cell = cells[index]
            own = written_id_of(cell) == question.id
            if not own and (is_release_cell(cell) or written_id_of(cell) is not None):
                break
            text = str(cell.get("source", "")).strip()
            if text and text != ANSWER_PLACEHOLDER:
                parts.append(text)
        answers[question.id] = "\n\n".join(parts) if parts or not by_prompt else None  # None: nothing written
    return answers


def capped_answer(text: str) -> str:
    """``text`` cut at MAX_ANSWER_CHARACTERS, saying how much was cut."""
    if len(text) <= MAX_ANSWER_CHARACTERS:
        return text
    return f"{text[:MAX_ANSWER_CHARACTERS]}… ({len(text) - MAX_ANSWER_CHARACTERS:,} more characters cut)"


def status_of(answer: str | None) -> tuple[str, str]:
    """``(status, message)`` of an answer before the instructor scores it."""
    if answer is None:
        return "not attempted", "no answer cell (deleted, or its metadata changed)"
    if not answer.strip() or answer.strip() == ANSWER_PLACEHOLDER:
        return "not attempted", "the answer still says YOUR ANSWER HERE"
    return "to be graded by hand", f"{len(answer.split()):,} words, awaiting the instructor's score"


def write_answer_files(results: list, out_dir) -> list[Path]:
    """Write ``answers/<question>.md`` and ``.csv`` in ``out_dir``: every student's answer to each question;
    and ``answers/written-scores.csv``, the scores file to fill in (a row per student and question, the
    points empty: :func:`read_written_scores` leaves a row out until its points are filled).

    Args:
        results: :class:`~transformer_course_grader.grader.NotebookResult` items, whose ``answers``
            map question ids to the students' texts.
        out_dir: the report folder.

    Returns:
        the paths written, sorted. Nothing is written when no notebook has a written question.
    """
    by_question: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for result in sorted(results, key=lambda result: result.student):
        answers = result.answers or {}
        for question, answer in answers.items():
            by_question.setdefault(question, []).append((result.student, answer, None))
        for item in getattr(result, "exercises", None) or []:  # a notebook that was not read: listed, with why
            if _QUESTION_ID.match(str(item.exercise)) and item.exercise not in answers:
                why = f"{item.status}: {item.message}"
                by_question.setdefault(item.exercise, []).append((result.student, None, why))
    folder, written = Path(out_dir) / "answers", []
    for question, rows in sorted(by_question.items()):
        folder.mkdir(parents=True, exist_ok=True)
        lines = [
            f"# Written question {question}: every student's answer",
            "",
            "Every character a student typed is shown escaped. Score each answer in a CSV "
            f"`{','.join(SCORE_COLUMNS)}` (see the instructors' guide, docs/grading.md).",
            "",
        ]
        table = io.StringIO()
        writer = csv.writer(table)
        writer.writerow(["student", "question", "answer"])
        for student, answer, why in rows:
            lines += [f"## {markdown_text(student)}", ""]
            if why is not None:
                lines += [f"*no answer read: {markdown_text(why)}*", ""]
            elif answer is None or not answer.strip() or answer.strip() == ANSWER_PLACEHOLDER:
                lines += [f"*{status_of(answer)[1]}*", ""]
            else:
                lines += [
                    f"> {markdown_text(line)}" if line.strip() else ">" for line in capped_answer(answer).splitlines()
                ]
                lines.append("")
            text = f"(no answer read: {why})" if why is not None else "" if answer is None else capped_answer(answer)
            writer.writerow([spreadsheet_cell(student), question, spreadsheet_cell(text, keep_lines=True)])
        for suffix, text in ((".md", "\n".join(lines) + "\n"), (".csv", table.getvalue())):
            write_text_atomically(folder / f"{question}{suffix}", text)
            written.append(folder / f"{question}{suffix}")
    if by_question:  # the scores file to fill in: a row per student and question, points left empty
        template = io.StringIO()
        writer = csv.writer(template)
        writer.writerow(SCORE_COLUMNS)
        for question, rows in sorted(by_question.items()):
            writer.writerows([spreadsheet_cell(student), question, "", ""] for student, _, _ in rows)
        write_text_atomically(folder / SCORES_TEMPLATE, template.getvalue())
        written.append(folder / SCORES_TEMPLATE)
    return sorted(written)


_SAVE_AS = (
    'save it as CSV with commas between columns (Excel: File > Save As > "CSV UTF-8 (Comma delimited)"; '
    "LibreOffice: field delimiter ,)"
)


def read_written_scores(path) -> list[dict]:
    """The rows of a written-scores CSV: ``[{"student", "question", "points", "comment"}, ...]``.

    The file as spreadsheets save it is read: UTF-8 with or without Excel's byte-order mark, and
    columns separated by commas or, as Excel saves "CSV" in locales whose decimal mark is a comma,
    by semicolons (the header decides which). A row whose points are empty is not scored yet and is
    left out, so the template :func:`write_answer_files` writes can be filled in a bit at a time.

    Args:
        path: a CSV with the header ``student,question,points,comment``; ``student`` is the name as
            the report shows it, ``question`` an id such as ``09.w1``, ``points`` a non-negative
            integer in ASCII digits, ``comment`` optional feedback for the student (a comment
            holding the separator must be quoted, as spreadsheets do).

    Returns:
        the scored rows, in the file's order, each with its ``row`` number and ``path``.

    Raises:
        WrittenScoreError: a file that is not UTF-8, a wrong header, a row with more columns than
            the header (an unquoted separator in a comment) or with no student, a question id that
            is not one, points that are not a non-negative integer (``²`` or a full-width ``２``
            included), or a student and question scored twice; the message names the row and, for
            the file's form, how to save it. (Unknown students and questions, and points above a
            question's maximum, are checked against the report by :func:`apply_written_scores`.)

    Example:
        >>> read_written_scores("scores.csv")  # doctest: +SKIP
        [{'student': 'ada', 'question': '09.w1', 'points': 2, 'comment': 'good', 'row': 2, 'path': 'scores.csv'}]
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            text = handle.read()
    except UnicodeDecodeError as error:
        raise WrittenScoreError(f"{path} is not UTF-8 (byte {error.start} cannot be read): {_SAVE_AS}") from None
    first_line = text.splitlines()[0] if text.strip() else ""
    delimiter = ";" if first_line.split(";") == SCORE_COLUMNS else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    if reader.fieldnames != SCORE_COLUMNS:
        raise WrittenScoreError(
            f"{path}: the header must be {','.join(SCORE_COLUMNS)}; received {first_line!r}; {_SAVE_AS}"
        )
    rows, seen = [], set()
    for number, row in enumerate(reader, start=2):
        if None in row:  # DictReader's key for the fields past the header's
            raise WrittenScoreError(
                f"{path}, row {number}: {len(SCORE_COLUMNS) + len(row[None])} columns, the header "
                f"has {len(SCORE_COLUMNS)}: a comment holding {delimiter!r} must be in quotes "
                "(a spreadsheet saves it so); the extra text was "
                f"{delimiter.join(row[None])!r}"
            )
        student, question = (row["student"] or "").strip(), (row["question"] or "").strip()
        text = (row["points"] or "").strip()
        if not student:
            raise WrittenScoreError(f"{path}, row {number}: no student named")
        if not _QUESTION_ID.match(question):
            raise WrittenScoreError(
                f"{path}, row {number}: {row['question']!r} is not a written question's id (like 09.w1)"
            )
        if not text:
            continue  # not scored yet
        if not re.fullmatch(r"[0-9]+", text):
            raise WrittenScoreError(
                f"{path}, row {number}: points must be a non-negative integer in the digits "
                f"0-9; received {row['points']!r}"
            )
        key = (student, question)
        if key in seen:
            raise WrittenScoreError(f"{path}, row {number}: {student} {question} is scored twice")
        seen.add(key)
        rows.append(
            {
                "student": student,
                "question": question,
                "points": int(text),
                "comment": (row["comment"] or "").strip(),
                "row": number,
                "path": str(path),
            }
        )
    return rows


def apply_written_scores(results: list, rows: list[dict], students: list[str]) -> None:
    """Set the instructor's scores of written answers in ``results`` (in place).

    Args:
        results: :class:`~transformer_course_grader.grader.NotebookResult` items.
        rows: from :func:`read_written_scores`.
        students: every student's name as the reports show it.

    Raises:
        WrittenScoreError: a row names a student not in the class, a question no notebook of the
            report asks, or more points than the question is worth; the message names the row.
    """
    known = set(students)
    items = {(result.student, x.exercise): x for result in results for x in result.exercises}
    questions = {
        x.exercise: x.max_points for result in results for x in result.exercises if _QUESTION_ID.match(x.exercise)
    }
    for row in rows:
        where = f"{row.get('path', 'written scores')}, row {row.get('row', '?')}"
        if row["student"] not in known:
            raise WrittenScoreError(f"{where}: {row['student']!r} is not a student of this class")
        if row["question"] not in questions:
            raise WrittenScoreError(
                f"{where}: no graded notebook asks question {row['question']!r}; "
                f"the questions are {sorted(questions) or 'none'}"
            )
        if row["points"] > questions[row["question"]]:
            raise WrittenScoreError(
                f"{where}: {row['points']} points for {row['question']}, which is worth {questions[row['question']]}"
            )
    for row in rows:
        item = items.get((row["student"], row["question"]))
        if item is None:  # a student of another shard
            continue
        item.points, item.status = row["points"], "graded by hand"
        item.message = row["comment"] or "scored by the instructor"
