"""Due dates, late credit and extensions: the timeline's arithmetic, its refusals, and a graded class's reports."""

import csv
import datetime

import pytest
from test_written import course  # noqa: F401 - the written-answers course, graded once for both files

from transformer_course_grader.deadlines import (
    Deadline,
    DeadlineError,
    parse_late_credit,
    parse_time,
    read_extensions,
    read_submission_times,
)
from transformer_course_grader.exports import canvas_gradebook
from transformer_course_grader.grader import grade_folder, score_written
from transformer_course_grader.written import read_written_scores

pytestmark = pytest.mark.tensorflow  # as the grading tests

DUE = "2026-12-01T23:59+01:00"


def test_the_timeline_keeps_its_share_by_hours_late_after_each_students_extension():
    times = {
        "ada": parse_time("2026-12-02T00:00Z"),  # 1 h 1 min late: the due time is 22:59 UTC
        "bo": parse_time("2026-12-03T23:00+01:00"),  # 47 h late
        "cy": parse_time("2026-12-03T23:00+01:00"),  # the same, with 48 extra hours: on time
        "di": parse_time("2026-12-20T12:00+01:00"),
    }  # past the timeline's last step
    deadline = Deadline(parse_time(DUE), parse_late_credit("24h:0.9,3d:0.5"), times, {"cy": 48.0})
    assert deadline.credit("ada") == (1.02, 0.9)
    assert deadline.credit("bo") == (47.02, 0.5)
    assert deadline.credit("cy") == (0.0, 1.0)
    assert deadline.credit("di")[1] == 0.0
    assert Deadline(parse_time(DUE), (), times, {}).credit("ada") == (1.02, 0.0)  # no steps: nothing once late
    # Ten seconds late is late: at least 0.01 hours, never "0.0" beside the share it loses.
    just_late = {"ed": parse_time(DUE) + datetime.timedelta(seconds=10)}
    assert Deadline(parse_time(DUE), parse_late_credit("24h:0.9"), just_late, {}).credit("ed") == (0.01, 0.9)


@pytest.mark.parametrize(
    "text, message",
    [
        ("2026-12-01T23:59", "has no offset from UTC; write it as 2026-12-01T23:59\\+00:00"),
        ("tomorrow", "is not an ISO 8601 time"),
    ],
)
def test_a_time_without_its_offset_or_not_a_time_is_refused(text, message):
    with pytest.raises(DeadlineError, match=message):
        parse_time(text, "--due")


@pytest.mark.parametrize(
    "text, message",
    [
        ("24:0.9", "'24:0.9' is not a step like 24h:0.9"),
        ("24h:1.5", "above 1"),
        ("3d:0.5,24h:0.9", "the hours must grow"),
        ("24h:0.5,3d:0.9", "the shares must not"),
    ],
)
def test_a_timeline_that_is_not_one_is_refused(text, message):
    with pytest.raises(DeadlineError, match=message):
        parse_late_credit(text)


def test_the_platforms_files_are_read_and_their_mistakes_named_by_row(tmp_path):
    (tmp_path / "times.csv").write_text("\ufeffstudent,submitted\nada,2026-12-01T22:00Z\nbo,soon\n", encoding="utf-8")
    with pytest.raises(DeadlineError, match=r"times.csv, row 3: 'soon' is not an ISO 8601 time"):
        read_submission_times(tmp_path / "times.csv")
    (tmp_path / "extensions.csv").write_text("student,extra_hours\nada,48\nada,24\n", encoding="utf-8")
    with pytest.raises(DeadlineError, match="row 3: ada is listed twice"):
        read_extensions(tmp_path / "extensions.csv")
    (tmp_path / "extensions.csv").write_text("student,extra_hours\nada,-2\n", encoding="utf-8")
    with pytest.raises(DeadlineError, match="extra_hours must be a non-negative number; received '-2'"):
        read_extensions(tmp_path / "extensions.csv")


def test_a_class_graded_with_a_due_time_shows_raw_and_credited_side_by_side(course, tmp_path):  # noqa: F811
    root = course["root"]
    times = {
        "ada": parse_time("2026-12-02T12:00+01:00"),
        "bo": parse_time("2026-12-01T12:00+01:00"),
        "cy": parse_time("2026-12-04T12:00+01:00"),
    }
    deadline = Deadline(parse_time(DUE), parse_late_credit("24h:0.5"), times, {"cy": 72.0})

    def graded(out, deadline):
        return grade_folder(
            root / "class", tmp_path / out, root / "release", workers=1, seed=3, progress=False, sandbox=False,
            deadline=deadline,
        )  # fmt: skip

    # Students with no submission time are graded, each row saying so; the dated one is credited as usual.
    partly = graded("partly", Deadline(deadline.due, deadline.steps, {"ada": times["ada"]}, {}))
    for result in partly:
        undated = [flag for flag in result.flags if flag.startswith("no submission time for this student")]
        assert bool(undated) == (result.student != "ada") and (result.late_share is None) == bool(undated), result
    rows = {row[0]: row for row in csv.reader((tmp_path / "partly" / "grades.csv").open(newline=""))}
    assert rows["ada"][-2:] == ["12.02", "0"] and rows["bo"][-2:] == ["", ""]  # nothing scored by hand yet
    graded("report", deadline)
    scores = tmp_path / "scores.csv"
    scores.write_text("student,question,points,comment\nada,11.w1,2,\nbo,11.w1,2,\n", encoding="utf-8")
    score_written(tmp_path / "report", tmp_path / "report", read_written_scores(scores))  # the dates survive it
    rows = {row[0]: row for row in csv.reader((tmp_path / "report" / "grades.csv").open(newline=""))}
    assert rows["student"][-4:] == ["total", "max", "hours_late", "credited"]
    assert rows["ada"][-4:] == ["2", "5", "12.02", "1"] and rows["bo"][-4:] == ["2", "5", "0.0", "2"]
    assert rows["cy"][-2:] == ["0.0", "0"]  # 60 hours after the due time, with 72 extra hours: on time
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## ada: 2 / 5; credited 1 (12.02 hours late, 50% kept)" in report and "## bo: 2 / 5\n" in report
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,Student,ID,SIS User ID,SIS Login ID,Section\nada,Ada,1,,,\nbo,Bo,2,,,\n")
    gradebook, _ = canvas_gradebook(tmp_path / "report", roster, "Week 11", None)
    assert gradebook.splitlines()[2:] == ["Ada,1,,,,1", "Bo,2,,,,2"]


def test_the_command_line_refuses_a_due_time_without_submission_times(course, tmp_path, capsys):  # noqa: F811
    from transformer_course_grader.cli import main

    root = course["root"]
    common = [
        "grade",
        str(root / "class"),
        "--out",
        str(tmp_path / "out"),
        "--release-dir",
        str(root / "release"),
        "--unsafe-no-sandbox",
        "--quiet",
    ]
    assert main([*common, "--due", DUE]) == 2
    assert "--due needs --submission-times" in capsys.readouterr().err
    assert main([*common, "--late-credit", "24h:0.5"]) == 2
    assert "--late-credit needs --due" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
