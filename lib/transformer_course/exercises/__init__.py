"""Exercises: instant, friendly feedback on the functions students write in the notebooks.

In a notebook, after an exercise cell::

    from transformer_course.exercises import check
    check("04.1", scaled_dot_product_attention)

prints one verdict: ``✓`` when the public cases match (graded on new cases, which it says), or what
is wrong — expected vs received shape or dtype, the first differing value and where, a mask leak —
or "not attempted yet" for a stub that
still raises ``NotImplementedError``. It never shows a traceback, runs offline in well under a
second, and never raises (whatever the student's function does).

Each exercise runs the student's function on its public cases and compares the results with the
expected outputs stored beside them (``public_cases.json``), and names a usual mistake by comparing
with its output, stored there too; the references, the code of the usual mistakes and the secret
cases a grader draws are not in what students can import (a test calls every function here on every
public case: none gives an accepted answer). :func:`evaluate` returns the
verdict as an object instead of printing it; :func:`show_case` prints a public case, its inputs
and the output expected, before a student writes a line.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from .catalog import EXERCISES, Exercise, catalogue_table, public_cases, public_mistakes
from .compare import compare_outputs

__all__ = [
    "check",
    "refused_as_run",
    "evaluate",
    "show_case",
    "Verdict",
    "EXERCISES",
    "Exercise",
    "compare_outputs",
    "public_cases",
    "catalogue_table",
]

_TIME_LIMIT_SECONDS = 10


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one exercise.

    Attributes:
        exercise: str, the exercise id (``"04.1"``).
        status: ``"passed"``, ``"failed"``, ``"not attempted"`` or ``"error"`` (the function
            raised, or ran out of time).
        message: str, one or two friendly lines for the student.
        points: int, points earned (all or nothing per exercise).
        max_points: int.
    """

    exercise: str
    status: str
    message: str
    points: int
    max_points: int

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        mark = {"passed": "✓", "not attempted": "…"}.get(self.status, "✗")
        return f"{mark} Exercise {self.exercise}: {self.message} ({self.points}/{self.max_points} points)"


class _TimeLimit(Exception):
    pass


@contextmanager
def _time_limit(seconds: int):
    """Stop a runaway student function (an endless loop) after ``seconds``, where possible."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield
        return

    def stop(signum, frame):
        raise _TimeLimit()

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def evaluate(exercise_id: str, candidate, cases=None) -> Verdict:
    """Check ``candidate`` against exercise ``exercise_id``; return the verdict, print nothing.

    Args:
        exercise_id: str, e.g. ``"04.1"``; see ``EXERCISES``.
        candidate: the student's function (or ``None`` if they have not written one).
        cases: optional ``[(label, keyword arguments, expected output), ...]``; default: the
            exercise's public cases. (The instructor's hidden tests pass cases drawn from the
            grader's references: :func:`transformer_course_grader.evaluate_hidden`.)

    Returns:
        :class:`Verdict`. Never raises for anything the candidate does.

    Raises:
        KeyError: for an unknown ``exercise_id`` (a mistake in the notebook, not the student's).
    """
    if exercise_id not in EXERCISES:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}.")
    exercise = EXERCISES[exercise_id]

    def verdict(status, message):
        return Verdict(exercise_id, status, message, exercise.points if status == "passed" else 0, exercise.points)

    if not callable(candidate):
        return verdict(
            "not attempted", f"expected a function `{exercise.function_name}`; received {type(candidate).__name__}."
        )
    mistakes = public_mistakes(exercise_id) if cases is None else [()] * len(cases)
    cases = public_cases(exercise_id) if cases is None else cases
    for number, ((label, arguments, expected), usual) in enumerate(zip(cases, mistakes), start=1):
        try:
            with _time_limit(_TIME_LIMIT_SECONDS), np.errstate(all="ignore"):
                received = candidate(**arguments)
        except NotImplementedError:
            return verdict(
                "not attempted", "not attempted yet — replace `raise NotImplementedError(...)` with your code."
            )
        except _TimeLimit:
            return verdict(
                "error", f"case {number} ({label}) took longer than {_TIME_LIMIT_SECONDS} s — an endless loop?"
            )
        except Exception as error:  # noqa: BLE001 - report, never re-raise, the student's error
            return verdict("error", f"case {number} ({label}) raised {type(error).__name__[:100]}: {str(error)[:200]}")
        problem = exercise.judge(arguments, received, expected, usual)
        if problem:
            return verdict("failed", f"case {number} ({label}): {problem}")
    return verdict("passed", f"{exercise.title} — all {len(cases)} cases match.")


def check(exercise_id: str, candidate) -> None:
    """Print a friendly verdict for the student's ``candidate`` on the exercise's public cases.

    A pass says what it is: the public cases match, and the grade comes from new cases of the same
    kind (the grader's, drawn at grading time), so a function written to the public cases alone does
    not earn the points. Anything else prints :func:`evaluate`'s verdict.

    Example:
        >>> check("04.2", None)  # doctest: +ELLIPSIS
        … Exercise 04.2: expected a function ...
    """
    verdict = evaluate(exercise_id, candidate)
    refused = refused_as_run(exercise_id) if verdict.status != "not attempted" else None
    if verdict.passed and refused is None:
        count = len(public_cases(exercise_id))
        print(
            f"✓ Exercise {exercise_id}: {EXERCISES[exercise_id].title} — all {count} public cases match. "
            f"Graded on new cases of the same kind ({verdict.max_points} points)."
        )
    elif verdict.passed:
        print(f"✗ Exercise {exercise_id}: the public cases match, but the grader would not run this code (0 points): "
              f"{refused}")  # fmt: skip
    else:
        print(verdict)
        if refused is not None:
            print(f"  The grader would not run this code either: {refused}")


def refused_as_run(exercise_id: str, cells: list | None = None) -> str | None:
    """Why the grader would refuse the code of exercise ``exercise_id``'s function, read from the cells as run.

    The grader reads the statements the function needs from the submitted notebook and runs them only if
    they pass its source policy (:mod:`.policy`); this reads the same statements from the cells this
    kernel ran (IPython's input history, ``In [n]``), so a student meets the refusal at the check, not
    in the grade.

    Args:
        exercise_id: str, e.g. ``"04.1"``.
        cells: the cells' sources in the order they ran, the check cell last; default: IPython's history
            (outside IPython: nothing to read, None).

    Returns:
        str or None: the grader's reason, naming the cells as ``In [n]``; None when it would run the code,
        or the history cannot be read (this never raises).

    Example:
        >>> cells = ["", "import os", "def causal_mask(n):\\n    return os.getpid()", "check('07.1', causal_mask)"]
        >>> print(refused_as_run("07.1", cells))  # doctest: +ELLIPSIS
        `causal_mask` needs In [1], line 1, which imports os, which graded code may not use ...
    """
    from . import policy, slicing

    try:
        if cells is None:
            from IPython import get_ipython

            shell = get_ipython()
            if shell is None:
                return None
            cells = list(shell.history_manager.input_hist_raw)  # In [n] is cells[n]; the running cell last
        name = EXERCISES[exercise_id].function_name
        program = slicing.program_for(slicing.parse_cells(cells, budget_seconds=2.0), len(cells) - 1, name)
        if program.missing:
            return None
        return policy.refusal(program, name, place=lambda cell: f"In [{cell}]")
    except Exception:  # noqa: BLE001 - the check's own verdict stands whatever the history holds
        return None


def _shown(value, indent="    ", full=True) -> str:
    """One value of a case as a student would print it: small arrays in full, arrays inside a dict by shape."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key!r}: {_shown(item, indent, full=False)}" for key, item in value.items()) + "}"
    if isinstance(value, (list, tuple)) and any(isinstance(item, (dict, np.ndarray)) for item in value):
        return (
            f"{type(value).__name__} of {len(value)}: ["
            + ", ".join(_shown(item, indent, full=False) for item in value)
            + "]"
        )
    if isinstance(value, np.ndarray):
        if value.size > 60 or not full:
            return f"array {value.shape} {value.dtype}"
        text = np.array2string(value, precision=4, suppress_small=True, max_line_width=96)
        return "\n".join((indent + line).rstrip() if index else line for index, line in enumerate(text.split("\n")))
    return repr(value)


def show_case(exercise_id: str, number: int = 1) -> None:
    """Print public case ``number`` of exercise ``exercise_id``: its label, inputs and the expected output.

    Args:
        exercise_id: str, e.g. ``"07.4"``; see ``EXERCISES``.
        number: int, 1-based, which public case (``check`` runs them all, in this order).

    Returns:
        None; prints the case. Arrays inside a dict (a model's weights) are shown by shape;
        ``public_cases(exercise_id)[number - 1]`` holds every value.

    Raises:
        KeyError: for an unknown exercise id.
        ValueError: for a case number the exercise does not have, naming how many it has.

    Example:
        >>> show_case("04.2")  # doctest: +ELLIPSIS
        Exercise 04.2, public case 1 of ...
    """
    if exercise_id not in EXERCISES:
        raise KeyError(f"unknown exercise {exercise_id!r}; known: {', '.join(EXERCISES)}.")
    cases = public_cases(exercise_id)
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= len(cases):
        raise ValueError(f"`number` must be 1 to {len(cases)} for exercise {exercise_id}; received {number!r}.")
    label, arguments, expected = cases[number - 1]
    exercise = EXERCISES[exercise_id]
    print(f"Exercise {exercise_id}, public case {number} of {len(cases)}: {label}")
    print(f"  {exercise.function_name}(")
    for name, value in arguments.items():
        print(f"    {name}={_shown(value, ' ' * (len(name) + 5))},")
    print("  )")
    outputs = expected if isinstance(expected, tuple) and len(exercise.output_names) > 1 else (expected,)
    for name, value in zip(exercise.output_names, outputs):
        shown = _shown(value, "    ")
        print(f"  expected {name}:" + (f"\n    {shown}" if "\n" in shown else f" {shown}"))
    print(f"  (every value in full: public_cases({exercise_id!r})[{number - 1}])")
