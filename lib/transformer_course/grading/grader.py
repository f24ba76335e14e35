"""Grade a folder of submitted notebooks; write ``grades.csv``, ``grades.json`` and ``report.md``.

Layout: ``SUBMISSIONS/<student>/<NN_name>.ipynb``, one folder a student, notebooks named as in the
release. For every student and released notebook the grader

1. reads the submission (a file that is not a valid notebook scores 0, with the reason);
2. compares every locked cell with the release by nbgrader checksum; an edited or deleted one is
   restored from the release and the report says so;
3. inserts, after each exercise's solution cell, a line that records the student's function as
   it was then (later cells may rebind the name to the package's version);
4. runs the notebook in a sandboxed kernel (:mod:`.sandbox`), then asks that kernel for the
   outputs of each exercise function on cases drawn here, at grading time;
5. compares those outputs with the reference **in this process**, which never runs student code.

Scores are all or nothing per exercise and deterministic: the cases come from a fixed seed.
"""

from __future__ import annotations

import copy
import csv
import html
import io
import json
import re
import secrets
import time
import zlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

import nbformat
import numpy as np

from .._files import write_text_atomically
from ..exercises import EXERCISES
from . import protocol
from .markup import exercise_id_of, locked_cells
from .sandbox import Limits, run_submission

__all__ = ["ExerciseResult", "NotebookResult", "grade_notebook", "grade_folder", "GRADING_SEED"]

GRADING_SEED = 20261121  # cases drawn at grading time come from this seed (and the public seed 0)


@dataclass
class ExerciseResult:
    exercise: str
    points: int
    max_points: int
    status: str  # passed | failed | not attempted | error | not submitted
    message: str


@dataclass
class NotebookResult:
    student: str
    notebook: str
    exercises: list = field(default_factory=list)
    flags: list = field(default_factory=list)  # tampering and other things an instructor should see
    problems: list = field(default_factory=list)  # errors in the student's own cells
    isolated: bool | None = None  # None: no kernel was started for it
    seconds: float = 0.0


def _exercises_of(notebook_name: str) -> list:
    return [exercise for exercise in EXERCISES.values() if exercise.notebook == notebook_name[:2]]


def _cases(exercise, seed: int) -> list:
    salt = zlib.crc32(exercise.id.encode())
    return (exercise.cases(np.random.default_rng(0))
            + exercise.cases(np.random.default_rng(seed + salt)))


def _zero(notebook: NotebookResult, exercises, status: str, message: str) -> NotebookResult:
    notebook.exercises = [ExerciseResult(e.id, 0, e.points, status, message) for e in exercises]
    return notebook


def _restore_locked_cells(submission, release, flags: list) -> None:
    from nbgrader.utils import compute_checksum

    by_id = {}
    for index, cell in enumerate(submission.cells):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id:
            by_id.setdefault(grade_id, index)
    for grade_id, original in locked_cells(release).items():
        expected = original.metadata["nbgrader"].get("checksum") or compute_checksum(original)
        if grade_id not in by_id:
            flags.append(f"locked cell {grade_id!r} was deleted; restored from the release")
            submission.cells.append(copy.deepcopy(original))
            continue
        cell = submission.cells[by_id[grade_id]]
        try:
            unchanged = compute_checksum(cell) == expected
        except Exception:  # noqa: BLE001 - mangled metadata counts as an edit
            unchanged = False
        if not unchanged:
            flags.append(f"locked cell {grade_id!r} was edited; restored from the release")
            submission.cells[by_id[grade_id]] = copy.deepcopy(original)


def _insert_captures(notebook) -> None:
    cells = []
    for cell in notebook.cells:
        cells.append(cell)
        exercise = exercise_id_of(cell)
        if exercise in EXERCISES and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cells.append(nbformat.v4.new_code_cell(protocol.capture_code(exercise, EXERCISES[exercise].function_name)))
    notebook.cells = cells


def _judge(exercise, cases, replies, stopped, timed_out=frozenset(), cell_seconds=0.0) -> ExerciseResult:
    def result(status, message):
        return ExerciseResult(exercise.id, exercise.points if status == "passed" else 0, exercise.points, status, message)

    for number, (label, arguments, nonce, key) in enumerate(cases, start=1):
        kind, value = protocol.parse_reply(replies.get(key, ""), nonce)
        if kind == "no-reply" and key in timed_out:
            return result("error", f"case {number} ({label}) ran past the {cell_seconds:.0f} s limit — an endless loop?")
        if kind == "no-reply":
            return result("error", stopped or f"case {number} ({label}): no answer from the kernel")
        if kind == "missing":
            return result("not attempted", f"`{exercise.function_name}` is not defined — did its cell run without errors?")
        if kind == "not-attempted":
            return result("not attempted", "not attempted (the stub still raises NotImplementedError)")
        if kind == "raised":
            return result("error", f"case {number} ({label}) raised {value}")
        if kind == "unencodable":
            return result("failed", f"case {number} ({label}): returned a {value}, not numbers, strings or arrays")
        module, received = value
        if module.split(".")[0] in ("transformer_course", "keras", "keras_hub"):
            return result("failed", f"`{exercise.function_name}` is the library's own ({module}), not your code")
        problem = exercise.judge(arguments, received)
        if problem:
            return result("failed", f"case {number} ({label}): {problem}")
    return result("passed", f"all {len(cases)} cases match")


def grade_notebook(student: str, path, release_path, limits: Limits, hide=(), seed: int = GRADING_SEED,
                   environment: dict | None = None) -> NotebookResult:
    """Grade one submitted notebook against its released version; never raises for the submission.

    Args:
        student: str, the student's name (their folder).
        path: the submitted ``.ipynb`` (it may be missing or invalid).
        release_path: the released notebook it should be a completed copy of.
        limits: :class:`~.sandbox.Limits`.
        hide: folders the student's kernel must not see.
        seed: int, the grading seed.
        environment: extra environment variables for the kernel (``COURSE_PROFILE`` defaults to smoke).

    Returns:
        :class:`NotebookResult`.
    """
    start = time.perf_counter()
    path, release_path = Path(path), Path(release_path)
    exercises = _exercises_of(release_path.name)
    outcome = NotebookResult(student, release_path.name)
    if not path.exists():
        return _zero(outcome, exercises, "not submitted", "no such notebook in the submission")
    try:
        submission = nbformat.read(path, as_version=4)
        nbformat.validate(submission)
    except Exception as error:  # noqa: BLE001 - any unreadable file scores 0 with the reason
        return _zero(outcome, exercises, "error", f"not a valid notebook ({type(error).__name__}: {str(error)[:150]})")
    release = nbformat.read(release_path, as_version=4)
    _restore_locked_cells(submission, release, outcome.flags)
    _insert_captures(submission)

    cases, requests = {}, {}
    for exercise in exercises:
        cases[exercise.id] = []
        for number, (label, arguments) in enumerate(_cases(exercise, seed)):
            key, nonce = f"{exercise.id}#{number}", secrets.token_hex(16)
            cases[exercise.id].append((label, arguments, nonce, key))
            requests[key] = protocol.request_code(exercise.id, exercise.function_name, arguments, nonce)
    env = {"COURSE_PROFILE": "smoke", "TF_CPP_MIN_LOG_LEVEL": "3", "MPLBACKEND": "Agg", **(environment or {})}
    run = run_submission(submission, requests, list(hide), limits, env)
    outcome.problems, outcome.isolated = run.problems, run.isolated
    if run.stopped:
        outcome.flags.append(f"stopped: {run.stopped}")
    outcome.exercises = [_judge(exercise, cases[exercise.id], run.replies, run.stopped, run.timed_out, limits.cell_seconds)
                         for exercise in exercises]
    outcome.seconds = round(time.perf_counter() - start, 1)
    return outcome


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def markdown_text(text: str) -> str:
    """``text`` as plain inline Markdown: HTML and Markdown syntax escaped, line breaks made spaces.

    Student folder names and anything a student's code produced (exception messages, values) go
    through this before they reach ``report.md``, so none of it can add a link, an image, a
    script, a table cell or a heading of its own.
    """
    text = html.escape(str(text), quote=False)
    text = re.sub(r"[\r\n\t\x0b\x0c\x85\u2028\u2029]+", " ", text)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def spreadsheet_cell(value):
    """``value`` for ``grades.csv``: a string a spreadsheet would run as a formula gets a leading ``'``."""
    return f"'{value}" if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def _reports(results: list, exercise_ids: list) -> tuple[str, str, str]:
    students = sorted({result.student for result in results})
    by_student = {student: [r for r in results if r.student == student] for student in students}
    maximum = sum(EXERCISES[e].points for e in exercise_ids)
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["student", *exercise_ids, "total", "max"])
    for student in students:
        points = {x.exercise: x.points for r in by_student[student] for x in r.exercises}
        writer.writerow([spreadsheet_cell(student), *[points.get(e, 0) for e in exercise_ids], sum(points.values()), maximum])
    details = {student: [asdict(r) for r in by_student[student]] for student in students}
    lines = ["# Grading report", "", f"{len(students)} student(s), exercises {', '.join(exercise_ids)} "
             f"({maximum} points in all).", ""]
    if any(r.isolated is False for r in results):
        lines += ["**Warning:** this machine does not allow unprivileged namespaces (`unshare -rmn`), so "
                  "submissions ran without network and folder isolation.", ""]
    for student in students:
        total = sum(x.points for r in by_student[student] for x in r.exercises)
        lines += [f"## {markdown_text(student)}: {total} / {maximum}", "", "| exercise | points | result |", "|---|---|---|"]
        for result in by_student[student]:
            for x in result.exercises:
                lines.append(f"| {x.exercise} | {x.points} / {x.max_points} | {x.status}: {markdown_text(x.message)} |")
        notes = [f"{r.notebook}: {note}" for r in by_student[student] for note in r.flags + r.problems]
        lines += [""] + [f"- {markdown_text(note)}" for note in notes] + ([""] if notes else [])
    return table.getvalue(), json.dumps({"exercises": exercise_ids, "students": details}, indent=2), "\n".join(lines) + "\n"


def _grade_job(arguments):
    return grade_notebook(*arguments[:4], hide=arguments[4], seed=arguments[5], environment=arguments[6])


def grade_folder(submissions_dir, out_dir, release_dir, limits: Limits = Limits(), workers: int = 1,
                 hide=(), seed: int = GRADING_SEED, environment: dict | None = None, progress: bool = True) -> list:
    """Grade every student's notebooks; write ``grades.csv``, ``grades.json``, ``report.md`` to ``out_dir``.

    Args:
        submissions_dir: folder of ``<student>/<NN_name>.ipynb``.
        out_dir: where the three reports go (created; files written atomically).
        release_dir: the released notebooks (``transformer-course release``).
        limits: :class:`~.sandbox.Limits` for each notebook.
        workers: int, notebooks graded at once (each in its own process and kernel).
        hide: extra folders kernels must not see; the submissions and output folders always are.
        seed: int, the grading seed.
        environment: extra environment variables for the kernels.
        progress: bool, show a progress bar.

    Returns:
        list of :class:`NotebookResult`, sorted by student then notebook.

    Raises:
        FileNotFoundError: if ``submissions_dir`` or ``release_dir`` does not exist or has nothing to grade.
    """
    from tqdm.auto import tqdm

    submissions_dir, out_dir, release_dir = Path(submissions_dir), Path(out_dir), Path(release_dir)
    releases = sorted(release_dir.glob("[0-9][0-9]_*.ipynb"))
    if not submissions_dir.is_dir():
        raise FileNotFoundError(f"`submissions_dir` {submissions_dir} is not a folder")
    if not releases:
        raise FileNotFoundError(f"no released notebooks NN_*.ipynb in {release_dir}")
    students = sorted(p.name for p in submissions_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise FileNotFoundError(f"no student folders in {submissions_dir}")
    out_dir.mkdir(parents=True, exist_ok=True)
    hidden = [str(submissions_dir.resolve()), str(out_dir.resolve()), *map(str, hide)]
    jobs = [(student, submissions_dir / student / release.name, release, limits, hidden, seed, environment)
            for student in students for release in releases]
    bar = tqdm(total=len(jobs), desc="grading", unit="notebook", disable=not progress)
    results = []
    if workers <= 1:
        for job in jobs:
            results.append(_grade_job(job))
            bar.update(1)
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            for result in pool.map(_grade_job, jobs):
                results.append(result)
                bar.update(1)
    bar.close()
    exercise_ids = [e.id for release in releases for e in _exercises_of(release.name)]
    csv_text, json_text, markdown = _reports(results, exercise_ids)
    write_text_atomically(out_dir / "grades.csv", csv_text)
    write_text_atomically(out_dir / "grades.json", json_text)
    write_text_atomically(out_dir / "report.md", markdown)
    return results
