"""Grade a folder of submitted notebooks; write ``grades.csv``, ``grades.json`` and ``report.md``.

Layout: ``SUBMISSIONS/<student>/<NN_name>.ipynb``, one folder a student, notebooks named as in the
release. For every student and released notebook the grader

1. reads the submission (a file that is not a valid notebook scores 0, with the reason);
2. compares every locked cell with the release by nbgrader checksum; an edited or deleted one is
   restored from the release and the report says so;
3. reads, for each exercise, the top-level statements its function needs as the check cell sees
   it (``exercises.slicing``: its last definition before the check, the helpers, constants and imports
   it uses); a function that needs a statement importing the course package scores 0;
4. runs those statements — their source — in a sandboxed kernel (:mod:`.sandbox`) where the package
   holds only the grading protocol (:func:`.sandbox.graded_snapshot`) and an audit hook refuses code
   built at run time (:mod:`.guard`), and calls the functions there on cases drawn here, at grading
   time: this kernel alone decides the score, within the notebook's limit;
5. compares those outputs with the reference **in this process**, which never runs student code;
6. only when asked (``run_notebooks``), runs the whole notebook in a kernel of its own, as the
   student did, under a limit of its own: its errors are reported, and no score depends on it.

An exercise whose function fails some cases scores the share of its **secret** cases it passes
(:func:`credited_points`; public cases earn nothing, since they are known in advance, and a wrong
one counts against the share), every failing case listed; an exercise with fewer than three secret
cases, or marked all or nothing in the catalogue, scores 0 unless every case passes. The cases come
from the public seed 0 (the cases a student's instant check uses) and a secret seed drawn for each
grading run (``--seed`` replays one); the seed is recorded in ``grades.json``, which is for the
instructor only. The same seed gives the same scores.

The grader also reads the code of every cell a student wrote or changed (never running it) and
flags, for the instructor, code that reaches into the course package, stack frames, builtins, the
IPython shell or the grading protocol (:mod:`.inspection`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path

import nbformat
import numpy as np

from transformer_course.exercises import EXERCISES, policy, slicing
from transformer_course.exercises.catalog import HINT_ALTERNATIVE
from transformer_course.exercises.values import encode
from transformer_course.tooling import write_text_atomically

from . import inspection, protocol, references, written
from .markup import exercise_id_of, locked_cells
from .reports import points_sum, report_texts
from .safe_text import display_name
from .sandbox import Limits, SandboxResult, SandboxUnavailable, graded_snapshot, run_submission, sandbox_available
from .workers import run_jobs

__all__ = [
    "ExerciseResult",
    "NotebookResult",
    "grade_notebook",
    "grade_folder",
    "draw_seed",
    "shard_of",
    "parse_shard",
    "merge_grades",
    "MergeError",
    "locate_submission",
    "decode_submission",
    "secret_case_seed",
]


# A submitted file is read up to MAX_SUBMISSION_BYTES (outputs included: an honest notebook run to the
# end with its figures can hold tens of MiB); its outputs are dropped at once, and what is left — the
# code and text a student wrote — may hold at most MAX_SOURCE_BYTES, far more than any honest work.
MAX_SUBMISSION_BYTES = 200 * 2**20
MAX_SOURCE_BYTES = 8 * 2**20
SLICING_SHARE = 0.25  # the share of the notebook's limit that reading its code (``exercises.slicing``) may take


class SubmissionError(ValueError):
    """A submitted file the grader will not read; the message never quotes its bytes."""


def read_submission(path, max_bytes: int = MAX_SUBMISSION_BYTES) -> str:
    """The text of a submitted notebook, read only if it is a regular UTF-8 file of sane size.

    Raises:
        FileNotFoundError: nothing at ``path``.
        SubmissionError: a link, a FIFO, a device or a folder; more than ``max_bytes``; not UTF-8.
    """
    try:
        return read_submission_bytes(path, max_bytes).decode("utf-8")
    except UnicodeDecodeError:
        raise SubmissionError("the submitted notebook is not UTF-8 text") from None


def decode_submission(data: bytes) -> tuple[str, int]:
    """``(text, how many bytes were not UTF-8)``: a stray byte (an editor's Latin-1 "é") becomes U+FFFD and the
    rest of the notebook is read as it is, instead of the whole notebook being void.

    Example:
        >>> text, replaced = decode_submission("José".encode("latin-1"))
        >>> replaced, text.endswith("\\N{REPLACEMENT CHARACTER}")
        (1, True)
    """
    text = data.decode("utf-8", errors="surrogateescape")  # each byte that is not UTF-8: one lone surrogate
    text, bad = _ESCAPED_BYTE.subn("\ufffd", text)
    return text, bad


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")


def read_submission_bytes(path, max_bytes: int = MAX_SUBMISSION_BYTES) -> bytes:
    """The bytes of a submitted notebook, read only if it is a regular file of sane size.

    Opened without following a symbolic link (``O_NOFOLLOW``) and without waiting on a FIFO or a
    device (``O_NONBLOCK``); checked with ``fstat`` on what was opened.

    Raises:
        FileNotFoundError: nothing at ``path``.
        SubmissionError: a link, a FIFO, a device or a folder; more than ``max_bytes``.
    """
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise
    except OSError as error:
        kind = "a symbolic link" if os.path.islink(path) else f"unreadable ({type(error).__name__})"
        raise SubmissionError(f"the submitted notebook is {kind}; only regular files are graded") from None
    status = os.fstat(handle)  # before wrapping it: Python refuses to wrap a folder's descriptor
    if not stat.S_ISREG(status.st_mode):
        os.close(handle)
        raise SubmissionError("the submitted notebook is not a regular file (a FIFO, a device or a folder)")
    with os.fdopen(handle, "rb") as file:
        if status.st_size > max_bytes:
            raise SubmissionError(f"the submitted notebook is larger than {max_bytes // 2**20} MiB")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise SubmissionError(f"the submitted notebook is larger than {max_bytes // 2**20} MiB")
    return data


_COPY_SUFFIX = re.compile(r"^(?:copy of )?(?P<stem>.+?)(?:[ _]?\(\d+\)|-copy\d*| copy(?: \d+)?)*$", re.IGNORECASE)


def _release_stem(name: str) -> str:
    """``"04_self_attention (1).ipynb"``, ``"04_self_attention-Copy1.ipynb"``, ``"Copy of 04_Self_Attention.ipynb"``
    -> ``"04_self_attention"``: a notebook's name as a browser's download, Jupyter's copy or Colab's copy leaves it."""
    stem = name[: -len(".ipynb")] if name.lower().endswith(".ipynb") else name
    match = _COPY_SUFFIX.match(stem.strip())
    return (match.group("stem") if match else stem).strip().lower()


def locate_submission(path, grade_ids=frozenset()) -> tuple[Path | None, list[str]]:
    """``(the notebook to grade, notes for the instructor)`` for the released name ``path`` in a student's folder.

    The exact name when it is there (a near-named twin beside it is noted); else the one notebook whose name
    is the release's under a browser's, Jupyter's or Colab's copy name (``(1)``, ``-Copy1``, ``Copy of``),
    named in the notes; of several such, the most recently changed, the others named; else a notebook under a
    name of the student's own that holds one of the release's locked cells (``grade_ids``: a check cell's id,
    ``check_04_1``), named in the notes. None, with the folder's notebooks named, when there is none.

    Example:
        >>> locate_submission(Path("/nonexistent/alice/04_self_attention.ipynb"))
        (None, [])
    """
    path = Path(path)
    try:
        entries = [entry for entry in os.scandir(path.parent) if entry.name.lower().endswith(".ipynb")]
    except OSError:
        return (path if path.exists() or path.is_symlink() else None), []
    wanted, own_name = _release_stem(path.name), False
    twins = sorted(entry.name for entry in entries if entry.name != path.name and _release_stem(entry.name) == wanted)
    if any(entry.name == path.name for entry in entries):
        return path, (
            [f"graded {path.name}; also in the folder: {', '.join(map(display_name, twins))} (not graded)"]
            if twins
            else []
        )
    if not twins and grade_ids:  # a name of the student's own: the release's own cells say which notebook it is
        marks = [f'"{grade_id}"'.encode() for grade_id in sorted(grade_ids)]

        def holds_the_release(name) -> bool:
            try:
                data = read_submission_bytes(path.parent / name)
            except (OSError, SubmissionError):
                return False
            return any(mark in data for mark in marks)

        owned = sorted(entry.name for entry in entries if holds_the_release(entry.name))
        if owned:
            twins = owned
            own_name = True
    if not twins:
        others = sorted(display_name(entry.name) for entry in entries)
        return None, (
            [f"the folder holds {', '.join(others[:10])}{' …' * (len(others) > 10)}, none of them {path.name}"]
            if others
            else []
        )

    def changed(name):
        try:
            return os.lstat(path.parent / name).st_mtime
        except OSError:
            return 0.0

    chosen = max(twins, key=lambda name: (changed(name), name))
    note = (
        f"graded {display_name(chosen)}, a name of the student's own: it holds the cells of the release {path.name}"
        if own_name
        else f"graded {display_name(chosen)}, under the release's name {path.name}"
    )
    if len(twins) > 1:
        note += (
            f"; two or more candidates, the most recently changed graded (also: "
            f"{', '.join(display_name(name) for name in twins if name != chosen)})"
        )
    return path.parent / chosen, [note]


def shard_of(student: str, count: int) -> int:
    """The shard (1..count) that grades ``student``: a hash of the folder name, the same on every machine."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/3"`` -> ``(2, 3)``.

    Raises:
        ValueError: naming ``--shard`` and the text received, unless 1 <= K <= N.
    """
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise ValueError(f"`--shard` must be K/N with 1 <= K <= N, such as 2/3; received {text!r}.")
    return int(match[1]), int(match[2])


def draw_seed() -> int:
    """A fresh secret seed for one grading run: 128 random bits from the operating system.

    No search over seeds is feasible: a student who learnt one secret input (a printed argument)
    can no more find the seed, and with it the other cases, than guess a 128-bit key.
    """
    return secrets.randbits(128)


def secret_case_seed(seed: int, student: str, exercise_id: str) -> int:
    """The seed of one student's secret cases of one exercise: HMAC-SHA-256 keyed with the run's seed, over the
    student's folder name and the exercise id, 128 bits of it.

    Each student gets cases of their own, so a case one student learnt tells nothing of another's; the same
    seed gives the same cases again (a regrade, another shard).

    Example:
        >>> ada = secret_case_seed(7, "ada", "04.1")
        >>> ada == secret_case_seed(7, "ada", "04.1") != secret_case_seed(7, "bo", "04.1")
        True
    """
    import hmac

    key = int(seed).to_bytes(max(16, (int(seed).bit_length() + 7) // 8), "big")
    message = f"{student}\0{exercise_id}".encode("utf-8", "surrogateescape")
    return int.from_bytes(hmac.new(key, message, hashlib.sha256).digest()[:16], "big")


@dataclass
class ExerciseResult:
    exercise: str
    points: int | float  # a float only for partial credit (:func:`credited_points`, 2 decimals)
    max_points: int
    status: str  # passed | partial credit | failed | not attempted | error | not submitted
    message: str
    automatic_points: int | None = None  # set when an instructor's override changed the points
    override: str | None = None  # the override's reason
    detail: str | None = None  # for the instructor only (grades.json): a secret case's whole verdict


@dataclass
class NotebookResult:
    student: str
    notebook: str
    exercises: list = field(default_factory=list)
    flags: list = field(default_factory=list)  # tampering and other things an instructor should see
    problems: list = field(default_factory=list)  # errors in the student's own cells
    isolated: bool | None = None  # None: no kernel was started for it
    seconds: float = 0.0
    solutions: dict = field(default_factory=dict)  # exercise id -> the solution cell's normalised tokens
    answers: dict = field(default_factory=dict)  # written question id -> the student's answer (None: no cell)
    accounting: str | None = None  # what kept its memory limit: "cgroup v1", "cgroup v2" or "watchdog"
    hours_late: float | None = None  # past the due time and any extension (None: graded without a due time)
    late_share: float | None = None  # the share of the points the late-credit timeline keeps


def _exercises_of(release) -> list:
    """The exercises a released notebook asks for: those of its graded check cells, in the catalogue's order.

    What is graded follows the release, as the written questions do: a notebook that holds two of
    its number's exercises is graded on those two.
    """
    from .markup import exercise_id_of

    asked = {
        exercise_id_of(cell)
        for cell in release["cells"]
        if isinstance(cell.get("metadata", {}).get("nbgrader"), dict) and cell["metadata"]["nbgrader"].get("grade")
    }
    return [exercise for exercise in EXERCISES.values() if exercise.id in asked]


@dataclass(frozen=True)
class ReleaseFacts:
    """What grading needs of a released notebook, worked out once for a whole class.

    Sent to every grading process, so it holds plain values: exercises by id (an exercise's own
    checks are functions that stay in the catalogue).

    Attributes:
        exercise_ids: ids of the exercises it asks for, in the catalogue's order (:func:`_exercises_of`).
        questions: its written questions (:func:`.written.questions_of`).
        stubs: exercise id -> the normalised tokens of the release's own program (the untouched stub).
        stub_programs: exercise id -> the release's own program, statement by statement
            (:func:`_program_statements`): a submission whose program is exactly this one calls the
            release's stub, so its graded calls are not made (:func:`grade_notebook`).
    """

    exercise_ids: tuple
    questions: tuple
    stubs: dict
    stub_programs: dict

    @property
    def exercises(self) -> list:
        """The :class:`~.exercises.Exercise` objects it asks for."""
        return [EXERCISES[exercise_id] for exercise_id in self.exercise_ids]

    @property
    def items(self) -> list:
        """Every graded item, exercises then written questions."""
        return [*self.exercises, *self.questions]


def release_facts(release) -> ReleaseFacts:
    """:class:`ReleaseFacts` of a released notebook (an ``nbformat`` notebook or its dict)."""
    release = nbformat.from_dict(release)
    exercises = _exercises_of(release)
    programs = _programs(release, exercises)
    return ReleaseFacts(
        tuple(exercise.id for exercise in exercises),
        tuple(written.questions_of(release)),
        _normalised_solutions(programs, {}),
        {exercise_id: _program_statements(program) for exercise_id, program in programs.items()},
    )


def _program_statements(program) -> tuple:
    """What a ``exercises.slicing.Program`` runs in the graded kernel: its statements' text, a written module's
    body with each; equal tuples run the same code."""
    return tuple((unit.text, unit.writes_module, unit.writes_body) for unit in program.units)


@cache
def _public_cases(exercise_id: str) -> tuple[list, frozenset]:
    """The public cases of ``exercise_id`` (seed 0) and their arguments encoded: drawn once a process, not once a
    student."""
    public = references.cases(exercise_id, np.random.default_rng(0))
    return public, frozenset(encode(arguments) for _, arguments in public)


def _cases(exercise, seed: int, student: str = "") -> list:
    """``[(label, arguments, secret), ...]``: the public cases (seed 0, the ones students check with), then this
    student's secret ones of this run (:func:`secret_case_seed`).

    A generator's fixed cases (a worked example, an edge case) come out at every seed: among the secret ones they
    are dropped, so that no secret case is one a student has seen, and a table of the public outputs earns no
    partial credit."""
    public, seen = _public_cases(exercise.id)
    secret = references.cases(exercise.id, np.random.default_rng(secret_case_seed(seed, student, exercise.id)))
    return [(label, arguments, False) for label, arguments in public] + [
        (label, arguments, True) for label, arguments in secret if encode(arguments) not in seen
    ]


def _zero(notebook: NotebookResult, exercises, status: str, message: str) -> NotebookResult:
    notebook.exercises = [ExerciseResult(e.id, 0, e.points, status, message) for e in exercises]
    return notebook


def _restore_locked_cells(submission, release, flags: list) -> None:
    """Check every copy of every locked cell against the release; restore and flag what changed.

    A deleted locked cell is appended from the release; an edited copy is replaced by the
    original; a locked cell that appears more than once is flagged (each copy is checked).
    """
    from nbgrader.utils import compute_checksum

    by_id: dict = {}
    for index, cell in enumerate(submission.cells):
        grade_id = _nbgrader_metadata(cell).get("grade_id")
        if isinstance(grade_id, str):
            by_id.setdefault(grade_id, []).append(index)
    for grade_id, original in locked_cells(release).items():
        expected = original.metadata["nbgrader"].get("checksum") or compute_checksum(original)
        if grade_id not in by_id:
            flags.append(f"locked cell {grade_id!r} was deleted; restored from the release")
            submission.cells.append(copy.deepcopy(original))
            continue
        if len(by_id[grade_id]) > 1:
            flags.append(f"locked cell {grade_id!r} appears {len(by_id[grade_id])} times; every copy was checked")
        for index in by_id[grade_id]:
            try:
                unchanged = compute_checksum(submission.cells[index]) == expected
            except Exception:  # noqa: BLE001 - mangled metadata counts as an edit
                unchanged = False
            if not unchanged:
                flags.append(f"locked cell {grade_id!r} was edited; restored from the release")
                submission.cells[index] = copy.deepcopy(original)


def _flag_reaches(submission, release, flags: list) -> None:
    """Flag the student's own cells (new or changed, not locked) that reach where answers need not."""
    released = {cell.source for cell in release.cells if cell.cell_type == "code"}
    for index, cell in enumerate(submission.cells):
        if cell.get("cell_type") != "code" or _nbgrader_metadata(cell).get("locked"):
            continue
        source = cell.get("source") if isinstance(cell.get("source"), str) else ""
        if source in released:
            continue
        if len(source) > inspection.MAX_INSPECTED_CHARACTERS:  # never parsed
            flags.append(
                f"cell {index + 1} holds code too large to read ({len(source):,} characters; at most "
                f"{inspection.MAX_INSPECTED_CHARACTERS:,} are parsed): look at it before trusting its score"
            )
            continue
        for place in inspection.reaches(source):
            flags.append(f"cell {index + 1} reaches into {place}: look at it before trusting its score")


def _programs(submission, exercises, budget_seconds: float | None = None) -> dict:
    """exercise id -> the ``exercises.slicing.Program`` of its function, read from the submission's cells.

    Raises:
        slicing.SlicingTooLong: past the slicer's statement cap or ``budget_seconds``.
    """
    sources = [
        cell.get("source") if cell.get("cell_type") == "code" and isinstance(cell.get("source"), str) else ""
        for cell in submission.cells
    ]
    parsed = slicing.parse_cells(sources, budget_seconds)  # read once, whatever the number of exercises
    programs = {}
    for exercise in exercises:
        check = next(
            (
                index
                for index, cell in enumerate(submission.cells)
                if exercise_id_of(cell) == exercise.id and _nbgrader_metadata(cell).get("grade")
            ),
            len(sources),
        )
        programs[exercise.id] = slicing.program_for(parsed, check, exercise.function_name)
    return programs


def _not_graded(exercise, program, stub: tuple | None = None) -> tuple[str, str] | None:
    """(status, message) of an exercise whose function cannot be graded as written, or needs no call (its
    program is ``stub``, the release's own: :func:`_program_statements`), else None."""
    name = f"`{exercise.function_name}`"
    if program.missing:
        return "not attempted", program.missing
    if _program_statements(program) == stub:  # the untouched stub: its calls would only raise NotImplementedError
        return "not attempted", NOT_ATTEMPTED
    if program.package_import:
        cell, module = program.package_import
        return "failed", (
            f"{name} needs cell {cell + 1}, which imports the course package or its grader ({module}): "
            "graded code must be your own"
        )
    if program.characters > slicing.MAX_PROGRAM_CHARACTERS:
        return "error", (
            f"the code {name} needs is larger than {slicing.MAX_PROGRAM_CHARACTERS // 2**20} MiB "
            f"({program.characters:,} characters)"
        )
    refused = policy.refusal(program, exercise.function_name)  # decided from its source before anything runs
    if refused:
        return "failed", refused
    return None


def _nbgrader_metadata(cell) -> dict:
    """A cell's nbgrader metadata, or {} where a submission mangled it into something else."""
    metadata = cell.get("metadata") if isinstance(cell, dict) else None
    nbgrader = metadata.get("nbgrader") if isinstance(metadata, dict) else None
    return nbgrader if isinstance(nbgrader, dict) else {}


MAX_MESSAGE_CHARACTERS = 500  # a verdict's message: what a student's code put in it (an exception's type
# name and text, a module name) can never make a report large


def capped(text: str, limit: int = MAX_MESSAGE_CHARACTERS) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit:,} more characters cut)"


def _normalised_solutions(programs: dict, stubs: dict) -> dict:
    """exercise id -> the normalised tokens of the student's program for it (space-separated, capped).

    ``stubs`` holds the release's programs: an exercise whose program is still the release's (the
    untouched stub) has no solution: two students who both left it are not alike.
    """
    from .similarity import MAX_SOLUTION_TOKENS, normalise, program_text, strip_no_ops

    solutions = {}
    for exercise, program in programs.items():
        if program.missing:
            continue
        text = strip_no_ops(program_text(program)[:65536])  # a longer text is cut
        tokens = " ".join(normalise(text)[:MAX_SOLUTION_TOKENS])
        if tokens and tokens != stubs.get(exercise):
            solutions[exercise] = tokens
    return solutions


def _verdict(exercise, status, message, detail: str | None = None) -> ExerciseResult:
    return ExerciseResult(
        exercise.id,
        exercise.points if status == "passed" else 0,
        exercise.points,
        status,
        capped(message),
        detail=None if detail is None else capped(detail),
    )


PARTIAL_CREDIT_MINIMUM_CASES = 3  # fewer secret cases than this: all or nothing


def credited_points(
    points: int, secret_passed: int, secret_total: int, partial_credit: bool = True, public_failed: int = 0
) -> float | int:
    """The points of an exercise that failed some cases: the share of its secret cases passed.

    Public cases are known in advance, so passing them earns nothing; failing one costs as a
    secret case does (it joins the count): a function written to the public cases alone scores 0,
    and one wrong on a public case never gets full points.

    Args:
        points: int, the exercise's points.
        secret_passed: int, secret cases whose result matched.
        secret_total: int, secret cases run.
        partial_credit: False for an exercise kept all or nothing.
        public_failed: int, public cases whose result was wrong or whose call raised.

    Returns:
        ``points * secret_passed / (secret_total + public_failed)`` rounded to 2 decimals (an int
        when whole); 0 when partial credit is off or the exercise has fewer than
        ``PARTIAL_CREDIT_MINIMUM_CASES`` secret cases.

    Example:
        >>> credited_points(3, 2, 3), credited_points(2, 1, 3), credited_points(2, 1, 2)
        (2, 0.67, 0)
        >>> credited_points(3, 3, 3, public_failed=1)  # every secret case right, one public case wrong
        2.25
    """
    if not partial_credit or secret_total < PARTIAL_CREDIT_MINIMUM_CASES or secret_passed <= 0:
        return 0
    return points_sum([points * secret_passed / (secret_total + public_failed)])


NOT_ATTEMPTED = "not attempted (the stub still raises NotImplementedError)"


def _judge(exercise, cases, replies, stopped, timed_out=frozenset(), cell_seconds=0.0) -> ExerciseResult:
    result = partial(_verdict, exercise)

    if f"{exercise.id}#load" in timed_out:
        return result(
            "error",
            f"running the cells `{exercise.function_name}` needs, for the graded calls, ran past "
            f"the {cell_seconds:.0f} s limit",
        )
    failures = []  # (secret, verdict) of each case whose result is wrong or whose call raised
    for number, (label, arguments, nonce, key, secret) in enumerate(cases, start=1):
        kind, value = protocol.parse_reply(replies.get(key, ""), nonce)
        if kind == "ok" and _library_module(value):
            return result("failed", f"`{exercise.function_name}` is the library's own ({value[0]}), not your code")
        if kind in ("raised", "ok"):
            verdict = _case_verdict(exercise, number, label, arguments, kind, value, secret)
            if verdict is not None:
                failures.append((secret, verdict))
            continue
        if kind == "no-reply" and key in timed_out:
            return result(
                "error", f"case {number} ({label}) ran past the {cell_seconds:.0f} s limit — an endless loop?"
            )
        if kind == "no-reply":
            return result("error", stopped or f"case {number} ({label}): no answer from the kernel")
        if kind == "missing":
            return result(
                "error",
                f"`{exercise.function_name}` was not defined when the cells it needs ran for the "
                f"graded calls: {value or 'its definition did not run'}",
            )
        if kind == "not-attempted":
            return result("not attempted", NOT_ATTEMPTED)
        if kind == "forged":
            return result(
                "failed",
                f"case {number} ({label}): the kernel printed the grader's request tag more than once — a forged reply",
            )
        if kind == "unencodable" and secret:  # the type's name is the student's to choose: kept for the instructor
            return result(
                "failed",
                f"secret case {number} ({label}): returned something that is not numbers, strings or arrays",
                detail=f"case {number} ({label}): returned a {value}",
            )
        if kind == "unencodable":
            return result("failed", f"case {number} ({label}): returned a {value}, not numbers, strings or arrays")
    if not failures:
        return result("passed", f"all {len(cases)} cases match")
    secret_total = sum(1 for case in cases if case[4])
    secret_passed = secret_total - sum(1 for secret, _ in failures if secret)
    public_failed = sum(1 for secret, _ in failures if not secret)
    # Partial credit only from cases that can show the mistake: where every wrong case is one usual mistake (its
    # hint names it on each), the cases passed are those where that mistake changes nothing, and earn nothing.
    mistakes = [_hint_of(v.detail or v.message) for _, v in failures]  # each case: the mistakes it may show
    one_mistake = None not in mistakes and bool(frozenset.intersection(*mistakes))
    points = (
        0
        if one_mistake
        else credited_points(exercise.points, secret_passed, secret_total, exercise.partial_credit, public_failed)
    )
    if len(failures) == 1 and not points:
        return failures[0][1]
    status = "partial credit" if points else failures[0][1].status
    message = (
        f"{len(failures)} of {len(cases)} cases wrong ({secret_passed} of {secret_total} secret cases "
        "right): " + "; ".join(v.message for _, v in failures)
    )
    if one_mistake:
        message = (
            f"every wrong case shows one usual mistake (a hint names it), and the cases right are those where it "
            f"changes nothing, so they earn no partial credit; {message}"
        )
    detail = "; ".join(v.detail or v.message for _, v in failures)
    return ExerciseResult(exercise.id, points, exercise.points, status, capped(message), detail=capped(detail))


def score_in_process(exercise_id: str, candidate, seed: int, student: str = "") -> ExerciseResult:
    """What grading gives ``candidate`` on exercise ``exercise_id``: the same cases (the public ones and the
    secret ones drawn for ``student`` from ``seed``), the same judge, the same partial credit.

    For measuring the grading rules on known functions (the references, the usual mistakes): ``candidate`` is
    called here, in this process, so it must be code you trust; submissions are only ever called in a sandbox.

    Returns:
        :class:`ExerciseResult` (``points`` the credited points).

    Example:
        >>> import numpy as np
        >>> score_in_process("07.1", lambda length: np.tril(np.ones((length, length), bool)), seed=1).points
        1
    """
    exercise = EXERCISES[exercise_id]
    cases, replies = [], {}
    for number, (label, arguments, secret) in enumerate(_cases(exercise, seed, student)):
        key, nonce = f"{exercise_id}#{number}", secrets.token_hex(16)
        cases.append((label, arguments, nonce, key, secret))
        with np.errstate(all="ignore"):
            replies[key] = protocol.reply_line(candidate, copy.deepcopy(arguments), nonce)  # as a kernel replies
    return _judge(exercise, cases, replies, stopped=None)


def _hint_of(text: str) -> frozenset | None:
    """The usual mistakes a case's verdict names (after "Hint:", one or several the case cannot tell apart; their
    numbers, which are the case's, read as #), or None where no hint named one."""
    _, found, hint = str(text).partition("Hint:")
    if not found or not hint.strip():
        return None
    return frozenset(re.sub(r"\d+(?:\.\d+)?", "#", part).strip() for part in hint.split(HINT_ALTERNATIVE.strip()))


def _library_module(value) -> bool:
    """A reply whose function came from the course package, Keras or keras-hub: not the student's code."""
    return str(value[0]).split(".")[0] in ("transformer_course", "keras", "keras_hub")


def _case_verdict(exercise, number, label, arguments, kind, value, secret: bool) -> ExerciseResult | None:
    """The verdict on a case whose call raised (``kind`` "raised") or returned ("ok"); None when it matches.

    On a secret case the message names the case and the kind of error, never the exception's text or a
    value: a student's exception could carry the secret arguments out, and so could a value returned to be
    shown. The whole text is kept for the instructor in ``detail`` (``grades.json``).
    """
    case = f"case {number} ({label})"
    if kind == "raised":
        if not secret:
            return _verdict(exercise, "error", f"{case} raised {value}")
        # Not even the exception's class: a student's code names it (type(name, (ValueError,), {})), and could spell
        # the case's arguments in it.
        return _verdict(exercise, "error", f"secret {case} raised an exception", detail=f"{case} raised {value}")
    _, received = value
    # The case's usual mistakes are computed only if the result is wrong (most are right).
    usual = partial(references.mistakes, exercise.id, arguments)
    problem = exercise.judge(arguments, received, references.expected(exercise.id, arguments), usual)
    if not problem:
        return None
    if not secret:
        return _verdict(exercise, "failed", f"{case}: {problem}")
    return _verdict(
        exercise,
        "failed",
        f"secret {case}: the result differs from the reference (the public cases show how; check them first)",
        detail=f"{case}: {problem}",
    )


def grade_notebook(
    student: str,
    path,
    release_path,
    limits: Limits,
    seed: int | None = None,
    environment: dict | None = None,
    sandbox: bool = True,
    release=None,
    facts: ReleaseFacts | None = None,
    run_notebook: bool = False,
) -> NotebookResult:
    """Grade one submitted notebook against its released version; never raises for the submission.

    The score comes from one kernel alone, the graded one: it runs the statements each graded function
    needs and calls it on the cases, within the notebook's limit (the reading of its code included). The
    whole notebook, lesson cells and all, runs only with ``run_notebook``, after the graded kernel and under
    a limit of its own: its errors and stops are reported and flagged, and never cost a point.

    Args:
        student: str, the student's name (their folder).
        path: the submitted ``.ipynb`` (it may be missing or invalid).
        release_path: the released notebook it should be a completed copy of.
        limits: :class:`~.sandbox.Limits`.
        seed: int, the grading run's secret seed; None (the default) draws a fresh one (:func:`draw_seed`).
        environment: values for the kernel's allow-listed variables (``COURSE_PROFILE`` defaults to smoke).
        sandbox: bool, run the kernel in the bubblewrap sandbox (:mod:`.sandbox`); False only for
            code the instructor trusts.
        release: the released notebook, already read (else it is read from ``release_path``).
        facts: :func:`release_facts` of it, already worked out (else worked out here).
        run_notebook: bool, also run the whole notebook in a kernel of its own, as the student did, to
            report its errors (which cells raise, whether it runs to the end); no score depends on it.

    Returns:
        :class:`NotebookResult`.
    """
    start = time.perf_counter()
    release_path = Path(release_path)
    release = nbformat.read(release_path, as_version=4) if release is None else nbformat.from_dict(release)
    grading = _Grading(
        student=student,
        path=Path(path),
        release=release,
        facts=release_facts(release) if facts is None else facts,
        limits=limits,
        seed=draw_seed() if seed is None else seed,
        environment={
            "COURSE_PROFILE": "smoke",
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "MPLBACKEND": "Agg",
            **(environment or {}),
        },
        sandbox=sandbox,
        run_notebook=run_notebook,
        outcome=NotebookResult(student, release_path.name),
    )
    for step in GRADING_STEPS:
        step(grading)
        if grading.done:
            break
    grading.outcome.seconds = round(time.perf_counter() - start, 1)
    return grading.outcome


@dataclass
class _Grading:
    """One notebook's grading as it goes: what each of :data:`GRADING_STEPS` reads, and leaves for the next."""

    student: str
    path: Path
    release: object
    facts: ReleaseFacts
    limits: Limits
    seed: int
    environment: dict
    sandbox: bool
    run_notebook: bool
    outcome: NotebookResult
    submission: object = None
    deadline: float = 0.0  # the notebook's limit on reading its code and calling its graded functions
    programs: dict = field(default_factory=dict)  # exercise id -> its slicing.Program
    refused: dict = field(default_factory=dict)  # exercise id -> (status, message), not called
    cases: dict = field(default_factory=dict)  # exercise id -> [(label, arguments, nonce, key, secret)]
    graded: SandboxResult | None = None  # the graded kernel's result (None: no call to make)
    run: SandboxResult | None = None  # the whole notebook's run (None: not asked for)
    done: bool = False  # a step settled the outcome: the steps after it do not run

    @property
    def exercises(self) -> list:
        return list(self.facts.exercises)

    @property
    def items(self) -> list:
        return list(self.facts.exercises) + list(self.facts.questions)

    def stop(self, status: str, message: str) -> None:
        """Every exercise and question scores 0 with ``status`` and ``message``; nothing more is done."""
        _zero(self.outcome, self.items, status, message)
        self.done = True

    def written_statuses(self) -> list:
        return [
            ExerciseResult(question.id, 0, question.points, *written.status_of(self.outcome.answers[question.id]))
            for question in self.facts.questions
        ]


def _find_the_notebook(grading: _Grading) -> None:
    """The submitted notebook under the release's name, or a near one (flagged); "not submitted" without it."""
    path, notes = locate_submission(grading.path, frozenset(locked_cells(grading.release)))
    grading.outcome.flags += notes
    grading.path = path
    if path is None:
        grading.stop("not submitted", "no such notebook in the submission" + (f" ({notes[0]})" if notes else ""))


def _read_the_notebook(grading: _Grading) -> None:
    """Its bytes as UTF-8 (what is not, flagged), parsed and validated, outputs dropped; 0 with the reason for a
    file that is not a notebook or is too large."""
    try:
        text, not_utf8 = decode_submission(read_submission_bytes(grading.path))
    except FileNotFoundError:
        return grading.stop("not submitted", "no such notebook in the submission")
    except SubmissionError as error:
        return grading.stop("error", str(error))
    if not_utf8:
        grading.outcome.flags.append(
            f"the notebook holds {not_utf8:,} byte{'s' * (not_utf8 != 1)} that "
            f"{'is' if not_utf8 == 1 else 'are'} not UTF-8, read as U+FFFD (�); the rest was graded "
            "as it is"
        )
    try:
        submission = nbformat.reads(text, as_version=4)
        del text
        for cell in submission.get("cells", []):  # outputs are never graded: dropped before anything else
            if isinstance(cell, dict):
                if cell.get("cell_type") == "code":
                    cell["outputs"], cell["execution_count"] = [], None
                cell.pop("attachments", None)
        nbformat.validate(submission)
    except Exception as error:  # noqa: BLE001 - any unreadable file scores 0 with the reason
        # Named by type only: a validation message would quote the submission's own bytes.
        return grading.stop("error", f"not a valid notebook ({type(error).__name__})")
    size = sum(len(str(cell.get("source", "")).encode("utf-8", "surrogatepass")) for cell in submission.cells)
    if size > MAX_SOURCE_BYTES:
        return grading.stop(
            "error", f"the notebook's code and text (outputs aside) are larger than {MAX_SOURCE_BYTES // 2**20} MiB"
        )
    grading.submission = submission


def _collect_the_written_answers(grading: _Grading) -> None:
    """Each written question's answer, capped, for the instructor to score by hand."""
    grading.outcome.answers = {
        question: None if answer is None else written.capped_answer(answer)
        for question, answer in written.answers_of(grading.submission, grading.facts.questions, grading.release).items()
    }


def _check_the_locked_cells(grading: _Grading) -> None:
    """Flag cells that reach into the package or the grader; restore edited or deleted locked cells (flagged)."""
    _flag_reaches(grading.submission, grading.release, grading.outcome.flags)
    _restore_locked_cells(grading.submission, grading.release, grading.outcome.flags)


def _read_the_graded_programs(grading: _Grading) -> None:
    """The statements each graded function needs (within a share of the notebook's limit), their normalised form
    for the similarity section, and the exercises refused before anything runs (the source policy, a stub)."""
    grading.deadline = time.monotonic() + grading.limits.notebook_seconds  # the reading and the graded kernel
    budget = grading.limits.notebook_seconds * SLICING_SHARE
    try:
        grading.programs = _programs(grading.submission, grading.exercises, budget_seconds=budget)
    except slicing.SlicingTooLong as error:  # the written answers, collected above, are still listed
        _zero(grading.outcome, grading.exercises, "error", f"the notebook's code was not read: {error}")
        grading.outcome.exercises += grading.written_statuses()
        grading.done = True
        return
    grading.outcome.solutions = _normalised_solutions(grading.programs, grading.facts.stubs)
    grading.refused = {
        exercise.id: why
        for exercise in grading.exercises
        if (why := _not_graded(exercise, grading.programs[exercise.id], grading.facts.stub_programs[exercise.id]))
    }


def _call_the_graded_functions(grading: _Grading) -> None:
    """A kernel where the package holds only the protocol runs the statements each graded function needs (their
    source, never an object of another kernel) and calls it on the cases: it alone decides the score."""
    written_modules = {
        name: text for program in grading.programs.values() for name, text in program.writefiles().items()
    }
    requests = {}
    for exercise in grading.exercises:
        grading.cases[exercise.id] = []
        if exercise.id in grading.refused:
            continue
        statements = [(unit.cell, unit.line, unit.text) for unit in grading.programs[exercise.id].units]
        requests[f"{exercise.id}#load"] = (
            protocol.program_code(exercise.id, exercise.function_name, statements, written_modules),
            None,
        )
        for number, (label, arguments, secret) in enumerate(_cases(exercise, grading.seed, grading.student)):
            key, nonce = f"{exercise.id}#{number}", secrets.token_hex(16)
            grading.cases[exercise.id].append((label, arguments, nonce, key, secret))
            requests[key] = (protocol.request_code(exercise.id, exercise.function_name, arguments, nonce), nonce)
    if not requests:
        return  # nothing to call: no kernel
    if grading.deadline - time.monotonic() < 1:
        grading.graded = SandboxResult(
            isolated=grading.sandbox,
            stopped=f"reading the notebook's code used its {grading.limits.notebook_seconds:.0f} s limit before "
            "its graded functions were called",
        )
        return
    grading.graded = run_submission(
        nbformat.v4.new_notebook(),
        requests,
        grading.limits,
        grading.environment,
        sandbox=grading.sandbox,
        package=graded_snapshot(),
        deadline=grading.deadline,
        programs=False,
    )


def _run_the_whole_notebook(grading: _Grading) -> None:
    """Only when asked: the student's kernel runs the whole notebook, as the student did, under a limit of its own
    (its errors are reported; nothing is taken from it, and no score depends on it)."""
    if grading.run_notebook:
        grading.run = run_submission(
            grading.submission, {}, grading.limits, grading.environment, sandbox=grading.sandbox
        )


def _judge_the_exercises(grading: _Grading) -> None:
    """Each exercise's verdict from the graded kernel's replies (or its refusal), the kernels' notes and flags, and
    the written questions' status."""
    outcome, graded, run = grading.outcome, grading.graded, grading.run
    kernels = [result for result in (graded, run) if result is not None]
    outcome.problems = [problem for result in kernels for problem in result.problems]
    outcome.isolated = all(result.isolated for result in kernels) if kernels else None
    outcome.accounting = next((result.accounting for result in kernels if result.isolated), None)
    graded = graded or SandboxResult(isolated=True)
    if run is not None and run.stopped:
        outcome.flags.append(f"stopped while running the whole notebook (reported only, no point lost): {run.stopped}")
    if graded.stopped:
        outcome.flags.append(f"stopped while calling the graded functions: {graded.stopped}")
    cell_seconds = grading.limits.cell_seconds
    outcome.exercises = [
        _verdict(exercise, *grading.refused[exercise.id])
        if exercise.id in grading.refused
        else _judge(
            exercise, grading.cases[exercise.id], graded.replies, graded.stopped, graded.timed_out, cell_seconds
        )
        for exercise in grading.exercises
    ]
    outcome.exercises += grading.written_statuses()


# What grading one notebook does, in order (as nbgrader's autograde lists its preprocessors); a step that settles
# the outcome (a missing or unreadable notebook, code too long to read) ends it.
GRADING_STEPS = (
    _find_the_notebook,
    _read_the_notebook,
    _collect_the_written_answers,
    _check_the_locked_cells,
    _read_the_graded_programs,
    _call_the_graded_functions,
    _run_the_whole_notebook,
    _judge_the_exercises,
)


def _grade_job(arguments):
    """Grade one notebook; whatever goes wrong becomes that student's row, never the batch's end."""
    student, path, release_path, limits, seed, environment, sandbox, release, facts, run_notebook = arguments
    try:
        result = grade_notebook(
            student,
            path,
            release_path,
            limits,
            seed=seed,
            environment=environment,
            sandbox=sandbox,
            release=release,
            facts=facts,
            run_notebook=run_notebook,
        )
    except BaseException as error:  # RecursionError, MemoryError... one submission, one row
        if isinstance(error, KeyboardInterrupt):
            raise
        return _grader_error(student, release_path, facts, f"{type(error).__name__} while grading this notebook")
    result.student = display_name(student)
    return result


def _grader_error(student: str, release_path, facts: ReleaseFacts, what: str) -> NotebookResult:
    """The row of a notebook the grader itself failed on: 0 points, the reason, a flag."""
    result = _zero(
        NotebookResult(display_name(student), Path(release_path).name), facts.items, "error", f"grader error: {what}"
    )
    result.flags.append(f"grader error: {what}; the batch went on")
    return result


def grade_folder(
    submissions_dir,
    out_dir,
    release_dir,
    limits: Limits = Limits(),
    workers: int = 1,
    seed: int | None = None,
    environment: dict | None = None,
    progress: bool = True,
    shard: tuple[int, int] | None = None,
    sandbox: bool = True,
    overrides: list | None = None,
    written_scores: list | None = None,
    notebooks: list[str] | None = None,
    deadline=None,
    run_notebooks: bool = False,
) -> list:
    """Grade every student's notebooks; write ``grades.csv``, ``grades.json``, ``report.md`` to ``out_dir``.

    Written answers (:mod:`.written`) get 0 points until the instructor scores them; every
    student's answer to each question is also written to ``out_dir/answers/``.

    Args:
        submissions_dir: folder of ``<student>/<NN_name>.ipynb``.
        out_dir: where the three reports go (created; files written atomically).
        release_dir: the released notebooks (``transformer-course-grader release``).
        limits: :class:`~.sandbox.Limits` for each notebook.
        workers: int, notebooks graded at once (each in its own process and kernel).
        seed: int, the secret seed of the grading cases; None draws a fresh one (recorded in
            ``grades.json`` either way).
        environment: extra environment variables for the kernels.
        progress: bool, show a progress bar.
        shard: ``(K, N)`` to grade only the students :func:`shard_of` gives to shard K of N (the
            reports then hold those students; :func:`merge_grades` combines the N reports).
        sandbox: bool, run every kernel in the bubblewrap sandbox; False grades unconfined (the
            report says so in bold).
        overrides: rows of :func:`.exports.read_overrides`, points set by hand.
        written_scores: rows of :func:`.written.read_written_scores`, the instructor's scores of
            written answers.
        notebooks: the notebooks of one assignment, by number (``["04", "05"]``); None grades
            every released notebook. The reports hold only these notebooks' exercises.
        deadline: a :class:`.deadlines.Deadline`: each student's hours late and the share of the
            points kept are recorded, and the reports show the credited total beside the raw one.
        run_notebooks: bool, also run each submission's whole notebook after its graded functions, under
            a limit of its own, to report its errors (:func:`grade_notebook`); no score depends on it.

    Returns:
        list of :class:`NotebookResult`, sorted by student then notebook.

    Raises:
        FileNotFoundError: if ``submissions_dir`` or ``release_dir`` does not exist or has nothing to grade.
        SandboxUnavailable: if ``sandbox`` is True and bubblewrap cannot run here (nothing is graded).
        OverrideError, WrittenScoreError: an override or a written score that does not apply
            (the reports are not written).
    """
    from tqdm.auto import tqdm

    submissions_dir, out_dir, release_dir = Path(submissions_dir), Path(out_dir), Path(release_dir)
    releases = sorted(release_dir.glob("[0-9][0-9]_*.ipynb"))
    if not submissions_dir.is_dir():
        raise FileNotFoundError(f"`submissions_dir` {submissions_dir} is not a folder")
    if not releases:
        raise FileNotFoundError(f"no released notebooks NN_*.ipynb in {release_dir}")
    releases = _assignment(releases, notebooks, release_dir)
    # Folders only, never followed links: an entry that is a link (or not a folder) gets its row, 0 points
    # and the reason, but nothing behind it is read.
    entries = [entry for entry in os.scandir(submissions_dir) if not entry.name.startswith(".")]
    refused = {
        entry.name: "the student's folder is a symbolic link, and links are never followed"
        if entry.is_symlink()
        else "the student's entry is not a folder"
        for entry in entries
        if not entry.is_dir(follow_symlinks=False)
    }
    everyone = sorted(entry.name for entry in entries)
    if not everyone:
        raise FileNotFoundError(f"no student folders in {submissions_dir}")
    mine = [student for student in everyone if shard is None or shard_of(student, shard[1]) == shard[0]]
    students = [student for student in mine if student not in refused]
    if overrides:  # a name outside the class is refused before anything is graded
        from .exports import check_students

        check_students(overrides, [display_name(student) for student in everyone])
    # A student with no submission time is graded, and their row says so: no late credit is guessed for them.
    undated = set() if deadline is None else set(deadline.missing(display_name(student) for student in mine))
    if sandbox and not sandbox_available():
        raise SandboxUnavailable(
            "the grading sandbox needs bubblewrap (`bwrap`; Debian/Ubuntu: apt-get install bubblewrap) and "
            "unprivileged user namespaces, and cannot run here; nothing was graded. Pass --unsafe-no-sandbox "
            "to grade without it, only for code you trust."
        )
    out_dir.mkdir(parents=True, exist_ok=True)
    seed = draw_seed() if seed is None else seed
    loaded = {release.name: dict(nbformat.read(release, as_version=4)) for release in releases}  # read once
    facts = {name: release_facts(release) for name, release in loaded.items()}  # worked out once
    jobs = [
        (
            student,
            submissions_dir / student / release.name,
            release,
            limits,
            seed,
            environment,
            sandbox,
            loaded[release.name],
            facts[release.name],
            run_notebooks,
        )
        for student in students
        for release in releases
    ]
    bar = tqdm(total=len(jobs), desc="grading", unit="notebook", disable=not progress)
    # Each notebook is graded in a worker process, even with one worker: a worker that dies (a
    # library aborting it, any signal) costs that notebook's row alone, and the reports are written.
    results = run_jobs(
        _grade_job,
        jobs,
        workers,
        done=lambda: bar.update(1),
        on_death=lambda job, how: _grader_error(job[0], job[2], job[8], f"the grading process {how}"),
    )
    bar.close()
    for student in (student for student in mine if student in refused):
        for release in releases:
            row = _zero(
                NotebookResult(display_name(student), release.name),
                facts[release.name].items,
                "error",
                f"not graded: {refused[student]}",
            )
            row.flags.append(f"not graded: {refused[student]}")
            results.append(row)
    if deadline is not None:
        for result in results:
            if result.student in undated:
                result.flags.append(
                    "no submission time for this student in the submission-times file: graded, with no late credit "
                    "applied (add their time and grade again)"
                )
            else:
                result.hours_late, result.late_share = deadline.credit(result.student)
    exercise_ids = [item.id for release in releases for item in facts[release.name].items]
    _write_reports(
        results,
        out_dir,
        exercise_ids,
        seed,
        [display_name(student) for student in everyone],
        overrides,
        written_scores,
        {"shard": None if shard is None else {"index": shard[0], "count": shard[1]}},
    )
    return results


def parse_notebooks(text: str) -> list[str]:
    """``"04,05"`` -> ``["04", "05"]``: an assignment's notebooks, each two digits.

    Raises:
        ValueError: naming the item that is not a notebook number.

    Example:
        >>> parse_notebooks("4, 05")
        ['04', '05']
    """
    numbers = []
    for item in str(text).split(","):
        item = item.strip()
        if not item.isdigit() or not 1 <= int(item) <= 99:
            raise ValueError(f"--notebooks must list notebook numbers such as 04,05; received {item!r}")
        numbers.append(f"{int(item):02d}")
    return sorted(set(numbers))


def _assignment(releases: list[Path], notebooks: list[str] | None, release_dir) -> list[Path]:
    """The released notebooks of an assignment (all of them for None)."""
    if notebooks is None:
        return releases
    unknown = sorted(set(notebooks) - {release.name[:2] for release in releases})
    if unknown:
        raise FileNotFoundError(f"no released notebook {', '.join(unknown)} in {release_dir}")
    return [release for release in releases if release.name[:2] in notebooks]


def _write_reports(results, out_dir, exercise_ids, seed, students, overrides, written_scores, extra) -> None:
    """Apply the overrides and the written scores, then write the three reports and the answer files."""
    if overrides:
        from .exports import apply_overrides

        apply_overrides(results, overrides, students)
    if written_scores:
        written.apply_written_scores(results, written_scores, students)
    csv_text, json_text, markdown = report_texts(results, exercise_ids, seed, {**extra, "all_students": students})
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out_dir / "grades.csv", csv_text)
    write_text_atomically(out_dir / "grades.json", json_text)
    write_text_atomically(out_dir / "report.md", markdown)
    written.write_answer_files(results, out_dir)


class MergeError(ValueError):
    """Shard reports that do not add up to one class; the message says what is missing or doubled."""


def merge_grades(
    shard_dirs,
    out_dir,
    overrides: list | None = None,
    written_scores: list | None = None,
    notebooks: list[str] | None = None,
) -> list:
    """Combine the reports of ``grade --shard K/N`` runs into one set of reports in ``out_dir``.

    Checks that there are exactly N shards of one run (indexes 1..N once each, one seed, one set of
    exercises, one class list), that every student of the class was graded, and that no student
    was graded twice. ``notebooks`` (``["04", "05"]``) keeps one assignment's notebooks only.

    Returns:
        list of :class:`NotebookResult`, as :func:`grade_folder` returns for the whole class.

    Raises:
        MergeError: naming the shard folder or the students at fault.
    """
    reports = []
    for folder in map(Path, shard_dirs):
        try:
            reports.append((folder, json.loads((folder / "grades.json").read_text(encoding="utf-8"))))
        except (OSError, ValueError) as error:
            raise MergeError(f"{folder}: no readable grades.json ({type(error).__name__})") from None
    if not reports:
        raise MergeError("no shard folders given")
    shards = [report.get("shard") or {} for _, report in reports]
    count = shards[0].get("count")
    if any(not isinstance(shard.get("count"), int) for shard in shards) or {s["count"] for s in shards} != {count}:
        raise MergeError(
            "every folder must come from `grade --shard K/N` with the same N; received "
            + ", ".join(f"{folder}: {report.get('shard')}" for folder, report in reports)
        )
    indexes = sorted(shard["index"] for shard in shards)
    if indexes != list(range(1, count + 1)):
        raise MergeError(f"expected shards 1..{count} once each; received {indexes}")
    first = reports[0][1]
    for folder, report in reports[1:]:
        for key in ("seed", "exercises", "all_students"):
            if report.get(key) != first.get(key):
                raise MergeError(f"{folder} was graded with another {key.replace('_', ' ')} than {reports[0][0]}")
    graded: dict = {}
    for folder, report in reports:
        for student in report["students"]:
            graded.setdefault(student, []).append(folder)
    twice = sorted(student for student, folders in graded.items() if len(folders) > 1)
    missing = sorted(set(first["all_students"]) - set(graded))
    if twice or missing:
        raise MergeError(f"graded twice: {twice or 'none'}; not graded: {missing or 'none'}")
    results = [
        NotebookResult(**{**item, "exercises": [ExerciseResult(**x) for x in item["exercises"]]})
        for _, report in reports
        for items in report["students"].values()
        for item in items
        if notebooks is None or item["notebook"][:2] in notebooks
    ]
    results.sort(key=lambda result: (result.student, result.notebook))
    exercise_ids = [e for e in first["exercises"] if notebooks is None or e[:2] in notebooks]
    if overrides:
        for result in results:  # the shards' overrides give way to the merge's own file
            for x in result.exercises:
                if x.override:
                    x.points, x.automatic_points, x.override = x.automatic_points, None, None
    if written_scores:
        _drop_hand_scores(results)  # and the shards' hand scores to the merge's written scores
    _write_reports(
        results,
        out_dir,
        exercise_ids,
        first.get("seed"),
        first["all_students"],
        overrides,
        written_scores,
        {"shard": None, "merged_from": count},
    )
    return results


def _drop_hand_scores(results) -> None:
    """Return every written answer scored by hand to its state before the instructor's score (in place)."""
    for result in results:
        for item in result.exercises:
            if item.status == "graded by hand":
                item.points = 0
                item.status, item.message = written.status_of((result.answers or {}).get(item.exercise))


def score_written(report_dir, out_dir, written_scores: list) -> list:
    """The reports of ``report_dir`` again in ``out_dir``, with the instructor's scores of written answers.

    Nothing is regraded: the automatic verdicts, overrides and answers come from ``grades.json``.
    The scores given are the whole of the hand scores, as in ``grade --written-scores``: a score of an
    earlier file that this one leaves out is dropped (that answer waits for its score again), so one
    file, kept and added to (``answers/written-scores.csv`` is its template), is the record.
    ``out_dir`` may be ``report_dir`` itself (each file is replaced atomically).

    Returns:
        list of :class:`NotebookResult`.

    Raises:
        MergeError: ``report_dir`` holds no readable ``grades.json`` of a whole class (a shard's
            report is scored after ``merge-grades``).
        WrittenScoreError: a score that does not apply, naming its row (nothing is written).
    """
    folder = Path(report_dir)
    try:
        report = json.loads((folder / "grades.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise MergeError(f"{folder}: no readable grades.json ({type(error).__name__})") from None
    if report.get("shard"):
        raise MergeError(f"{folder} is the report of one shard: combine the shards with merge-grades first")
    results = [
        NotebookResult(**{**item, "exercises": [ExerciseResult(**x) for x in item["exercises"]]})
        for items in report["students"].values()
        for item in items
    ]
    _drop_hand_scores(results)  # the scores file given is the whole of the hand scores, as in `grade`
    extra = {key: report[key] for key in ("merged_from",) if key in report}
    _write_reports(
        results,
        out_dir,
        report["exercises"],
        report.get("seed"),
        report["all_students"],
        None,
        written_scores,
        {"shard": None, **extra},
    )
    return results
