"""Due dates, late credit and extensions: what share of its points a late submission is credited.

An assignment has a due time; each student's submission time comes from a CSV the learning
platform exports (``student,submitted``); a student may have extra time (``student,extra_hours``,
the accommodations and extensions a class of hundreds always has). The late-credit timeline says
what a submission so many hours late keeps: ``"24h:0.9,72h:0.5,168h:0"`` keeps 90% up to a day
late, 50% up to three days, nothing after a week (and nothing past the timeline's last step).
The grader keeps the raw points and writes the credited ones beside them (:mod:`.reports`).

Example:
    >>> deadline = Deadline(parse_time("2026-12-01T23:59+00:00"), parse_late_credit("24h:0.9,72h:0.5"),
    ...                     {"ada": parse_time("2026-12-02T10:00+00:00")}, {})
    >>> deadline.credit("ada")
    (10.02, 0.9)
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Deadline", "DeadlineError", "parse_time", "parse_late_credit", "read_submission_times", "read_extensions"]

_STEP = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([hd])\s*:\s*(\d+(?:\.\d+)?)\s*$")


class DeadlineError(ValueError):
    """A due time, late-credit timeline, submission-times or extensions file the grader will not use."""


def parse_time(text: str, where: str = "the time") -> datetime:
    """An ISO 8601 time with its offset from UTC (``2026-12-01T23:59+01:00``, ``...Z``).

    Raises:
        DeadlineError: text that is not such a time, or a time without an offset (whose moment
            depends on the machine's zone), naming ``where``.
    """
    try:
        moment = datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    except ValueError:
        raise DeadlineError(f"{where}: {text!r} is not an ISO 8601 time like 2026-12-01T23:59+01:00") from None
    if moment.tzinfo is None:
        raise DeadlineError(
            f"{where}: {text!r} has no offset from UTC; write it as {text}+00:00 (or your zone's "
            "offset), so that it means one moment on every machine"
        )
    return moment


def parse_late_credit(text: str) -> tuple[tuple[float, float], ...]:
    """The late-credit timeline ``"24h:0.9,3d:0.5"``: ``((hours late at most, share kept), ...)``.

    Raises:
        DeadlineError: a step that is not ``<number>h:<share>`` or ``<number>d:<share>``, a share
            above 1, or steps whose hours do not grow or whose shares grow.
    """
    steps = []
    for part in str(text).split(","):
        match = _STEP.match(part)
        if not match:
            raise DeadlineError(
                f"`--late-credit`: {part.strip()!r} is not a step like 24h:0.9 or 3d:0.5 "
                "(hours or days late at most, then the share of the points kept)"
            )
        amount, unit, share = float(match[1]), match[2], float(match[3])
        if share > 1:
            raise DeadlineError(f"`--late-credit`: the share kept in {part.strip()!r} is above 1")
        steps.append((amount * (24 if unit == "d" else 1), share))
    if any(b[0] <= a[0] or b[1] > a[1] for a, b in zip(steps, steps[1:])):
        raise DeadlineError(f"`--late-credit`: {text!r}: the hours must grow and the shares must not")
    return tuple(steps)


def _rows(path, columns: list[str]):
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if reader.fieldnames != columns:
                raise DeadlineError(f"{path}: the header must be {','.join(columns)}; received {reader.fieldnames}")
            yield from enumerate(reader, start=2)
    except UnicodeDecodeError:
        raise DeadlineError(f"{path} is not UTF-8: save it as CSV UTF-8") from None


def read_submission_times(path) -> dict[str, datetime]:
    """``{student: submission time}`` from a CSV ``student,submitted`` (ISO 8601 times with offsets).

    Raises:
        DeadlineError: a wrong header, a time that is not one, or a student listed twice, naming the row.
    """
    times: dict[str, datetime] = {}
    for number, row in _rows(path, ["student", "submitted"]):
        student = (row["student"] or "").strip()
        if student in times:
            raise DeadlineError(f"{path}, row {number}: {student} is listed twice")
        times[student] = parse_time(row["submitted"] or "", f"{path}, row {number}")
    return times


def read_extensions(path) -> dict[str, float]:
    """``{student: extra hours}`` from a CSV ``student,extra_hours`` (a non-negative number).

    Raises:
        DeadlineError: a wrong header, hours that are not a non-negative number, or a student listed
            twice, naming the row.
    """
    extensions: dict[str, float] = {}
    for number, row in _rows(path, ["student", "extra_hours"]):
        student, text = (row["student"] or "").strip(), (row["extra_hours"] or "").strip()
        if student in extensions:
            raise DeadlineError(f"{path}, row {number}: {student} is listed twice")
        if not re.fullmatch(r"\d+(\.\d+)?", text):
            raise DeadlineError(f"{path}, row {number}: extra_hours must be a non-negative number; received {text!r}")
        extensions[student] = float(text)
    return extensions


@dataclass(frozen=True)
class Deadline:
    """An assignment's due time, late-credit timeline, submission times and extensions.

    Attributes:
        due: the due time (aware datetime).
        steps: :func:`parse_late_credit`'s timeline; empty: no credit once late.
        submitted: ``{student: submission time}``.
        extra_hours: ``{student: hours added to the due time}``.
    """

    due: datetime
    steps: tuple
    submitted: dict
    extra_hours: dict

    def missing(self, students) -> list[str]:
        """The students with no submission time (the grader refuses to guess one)."""
        return sorted(student for student in students if student not in self.submitted)

    def credit(self, student: str) -> tuple[float, float]:
        """``(hours late, rounded to 2 decimals; 0 when on time, share of the points kept)`` for ``student``.

        Late by any amount is at least 0.01 hours late: a submission 10 s past the due time is not shown as on time
        beside the share it loses."""
        late = (self.submitted[student] - self.due).total_seconds() / 3600 - self.extra_hours.get(student, 0.0)
        if late <= 0:
            return 0.0, 1.0
        share = next((kept for hours, kept in self.steps if late <= hours), 0.0)
        return max(0.01, round(late, 2)), share
