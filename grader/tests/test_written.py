"""Written answers: released with nbgrader's placeholder, collected per question, scored by hand, exported."""

import csv
import json
import shutil

import nbformat
import pytest

from transformer_course.exercises import EXERCISES
from transformer_course_grader.exports import canvas_gradebook, gradescope_results
from transformer_course_grader.grader import grade_folder, score_written
from transformer_course_grader.markup import MarkupError, release_folder
from transformer_course_grader.written import (
    WrittenScoreError,
    questions_of,
    read_written_scores,
)

pytestmark = pytest.mark.tensorflow  # as the grading tests

RUBRIC = "### BEGIN SOLUTION\nFull marks: names the seeds' spread. Rubric only the instructor sees.\n### END SOLUTION"
HOSTILE = (
    '=HYPERLINK("http://x") It is not a result: the spread is ±6.3.\n\n<script>alert(1)</script> '
    "| a | table |\n# a heading of my own"
)


def _answer_cell(question, points, source):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["nbgrader"] = {
        "grade_id": f"written_{question}",
        "solution": True,
        "grade": True,
        "locked": False,
        "points": points,
        "schema_version": 3,
    }
    return cell


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A notebook number with no autograded exercise (11) and two written questions, released and answered."""
    root = tmp_path_factory.mktemp("written")
    source = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("x = 1"),
            nbformat.v4.new_markdown_cell(
                "**Question 11.w1 (2 points).** Is a gain of 5.3 points with seeds spread ±6.3 a result?"
            ),
            _answer_cell("11_1", 2, RUBRIC),
            nbformat.v4.new_markdown_cell("**Question 11.w2 (3 points).** What would you run to know?"),
            _answer_cell("11_2", 3, RUBRIC),
        ]
    )
    (root / "source").mkdir()
    nbformat.write(source, root / "source" / "11_tiny.ipynb")
    release_folder(root / "source", root / "release")
    release = nbformat.read(root / "release" / "11_tiny.ipynb", as_version=4)
    answered = nbformat.from_dict(json.loads(json.dumps(release)))
    answered.cells[2].source = HOSTILE
    deleted = nbformat.from_dict(json.loads(json.dumps(release)))
    del deleted.cells[4]
    for student, notebook in (("ada", answered), ("bo", release), ("cy", deleted)):
        (root / "class" / student).mkdir(parents=True)
        nbformat.write(notebook, root / "class" / student / "11_tiny.ipynb")
    results = grade_folder(
        root / "class", root / "report", root / "release", workers=1, seed=3, progress=False, sandbox=False
    )
    return {"root": root, "release": release, "results": results}


def test_the_release_keeps_the_placeholder_and_drops_the_rubric(course):
    cells = course["release"].cells
    assert cells[2].source == cells[4].source == "YOUR ANSWER HERE"
    assert "Rubric" not in json.dumps(course["release"])
    assert [(q.id, q.points) for q in questions_of(course["release"])] == [("11.w1", 2), ("11.w2", 3)]


def test_an_answer_cell_must_be_markdown_with_its_rubric(tmp_path):
    cell = nbformat.v4.new_code_cell("answer = 42")
    cell.metadata["nbgrader"] = {
        "grade_id": "written_11_1",
        "solution": True,
        "grade": True,
        "locked": False,
        "points": 2,
        "schema_version": 3,
    }
    (tmp_path / "source").mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), tmp_path / "source" / "11_bad.ipynb")
    with pytest.raises(MarkupError, match="the answer cell of 11.w1 must be a Markdown cell"):
        release_folder(tmp_path / "source", tmp_path / "release")
    assert not (tmp_path / "release" / "11_bad.ipynb").exists()


def test_answers_wait_for_the_instructor_and_are_collected_per_question_escaped(course):
    report = course["root"] / "report"
    statuses = {
        (r.student, x.exercise): (x.status, x.points, x.max_points) for r in course["results"] for x in r.exercises
    }
    assert statuses[("ada", "11.w1")] == ("to be graded by hand", 0, 2)
    assert statuses[("bo", "11.w1")][0] == statuses[("ada", "11.w2")][0] == "not attempted"
    assert statuses[("cy", "11.w2")][0] == "not attempted"
    rows = list(csv.reader((report / "grades.csv").read_text().splitlines()))
    assert rows[0] == ["student", "11.w1", "11.w2", "total", "max"] and rows[1][-1] == "5"
    markdown = (report / "answers" / "11.w1.md").read_text()
    assert "&lt;script&gt;" in markdown and "<script>" not in markdown
    assert "\\| a \\| table \\|" in markdown and "\n# a heading" not in markdown
    assert "*the answer still says YOUR ANSWER HERE*" in markdown
    table = list(csv.reader((report / "answers" / "11.w1.csv").read_text().splitlines(keepends=True)))
    answers = {row[0]: row[2] for row in csv.reader((report / "answers" / "11.w1.csv").open(newline=""))}
    assert answers["ada"].startswith("'=HYPERLINK") and answers["ada"].endswith("|\n# a heading of my own")
    assert table[0] == ["student", "question", "answer"]
    assert "no answer cell" in (report / "answers" / "11.w2.md").read_text()  # cy deleted it


def _scores(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "question", "points", "comment"])
        writer.writerows(rows)
    return path


def test_scores_come_back_into_the_totals_and_both_exports(course, tmp_path):
    scores = _scores(
        tmp_path / "scores.csv", [["ada", "11.w1", "2", "Names the spread; good."], ["bo", "11.w2", "1", ""]]
    )
    score_written(course["root"] / "report", tmp_path / "scored", read_written_scores(scores))
    rows = {row[0]: row for row in csv.reader((tmp_path / "scored" / "grades.csv").read_text().splitlines())}
    assert rows["ada"][1:] == ["2", "0", "2", "5"] and rows["bo"][1:] == ["0", "1", "1", "5"]
    report = (tmp_path / "scored" / "report.md").read_text()
    assert "| 11.w1 | 2 / 2 | graded by hand: Names the spread; good\\. |" in report
    assert (tmp_path / "scored" / "answers" / "11.w1.md").exists()
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,Student,ID,SIS User ID,SIS Login ID,Section\nada,Ada,1,,,\nbo,Bo,2,,,\ncy,Cy,3,,,\n")
    gradebook, unmatched = canvas_gradebook(tmp_path / "scored", roster, "Week 11", "77")
    lines = gradebook.splitlines()
    assert lines[1].endswith(",5") and lines[2] == "Ada,1,,,,2" and unmatched == []
    tests = gradescope_results(tmp_path / "scored", "ada")["tests"]
    assert tests[0]["name"] == "Written answer 11.w1 (graded by hand)" and tests[0]["score"] == 2.0
    # In the autograder a written answer is a question Gradescope grades by hand: no test, not in its total.
    autograded = gradescope_results(course["root"] / "report", "ada", written=False)
    assert all(test["number"] in EXERCISES for test in autograded["tests"])
    assert autograded["score"] == sum(test["score"] for test in autograded["tests"])
    assert "the written answers (11.w1, 11.w2) are graded by hand" in autograded["output"]


@pytest.mark.parametrize(
    "row, message",
    [
        (["dan", "11.w1", "1", ""], "'dan' is not a student of this class"),
        (["ada", "11.w9", "1", ""], "no graded notebook asks question '11.w9'"),
        (["ada", "11.w1", "3", ""], "3 points for 11.w1, which is worth 2"),
    ],
)
def test_a_score_that_does_not_apply_is_refused_naming_its_row_and_nothing_is_written(course, tmp_path, row, message):
    shutil.copytree(course["root"] / "report", tmp_path / "report")
    before = (tmp_path / "report" / "grades.json").read_bytes()
    scores = _scores(tmp_path / "scores.csv", [["ada", "11.w2", "1", "fine"], row])
    with pytest.raises(WrittenScoreError, match="row 3: " + message.replace("(", r"\(")):
        score_written(tmp_path / "report", tmp_path / "report", read_written_scores(scores))
    assert (tmp_path / "report" / "grades.json").read_bytes() == before


@pytest.mark.parametrize(
    "content, message",
    [
        ("student,question,points\nada,11.w1,1\n", "the header must be student,question,points,comment"),
        ("student,question,points,comment\nada,11.1,1,\n", "'11.1' is not a written question's id"),
        ("student,question,points,comment\nada,11.w1,-1,\n", "points must be a non-negative integer"),
        ("student,question,points,comment\nada,11.w1,1,\nada,11.w1,2,\n", "row 3: ada 11.w1 is scored twice"),
    ],
)
def test_a_malformed_scores_file_is_refused(tmp_path, content, message):
    path = tmp_path / "scores.csv"
    path.write_text(content)
    with pytest.raises(WrittenScoreError, match=message):
        read_written_scores(path)


@pytest.mark.parametrize(
    "content, message",
    [
        (
            "student,question,points,comment\nada,11.w1,²,\n",
            r"row 2: points must be a non-negative integer in the digits 0-9; received '²'",
        ),
        ("student,question,points,comment\nada,11.w1,２,\n", r"row 2: points must be .* received '２'"),
        (
            "student,question,points,comment\nada,11.w1,2,good, but short\n",
            r"row 2: 5 columns, the header has 4: a comment holding ',' must be in quotes .* ' but short'",
        ),
        ("student,question,points,comment\n,11.w1,2,\n", "row 2: no student named"),
        (
            "student\tquestion\tpoints\tcomment\nada\t11.w1\t2\t\n",
            r"the header must be .*CSV UTF-8 \(Comma delimited\)",
        ),
    ],
)
def test_a_score_typed_as_a_spreadsheet_lets_it_through_is_refused_naming_its_row(tmp_path, content, message):
    path = tmp_path / "scores.csv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(WrittenScoreError, match=message):
        read_written_scores(path)


def test_a_scores_file_not_in_utf8_is_refused_with_how_to_save_it(tmp_path):
    path = tmp_path / "scores.csv"
    path.write_bytes("student,question,points,comment\nzoë,11.w1,2,très bien\n".encode("cp1252"))
    with pytest.raises(WrittenScoreError, match=r"is not UTF-8 \(byte \d+ cannot be read\): save it as CSV"):
        read_written_scores(path)


def test_scores_saved_by_excel_are_read_with_or_without_the_byte_order_mark_and_semicolons(tmp_path):
    expected = [("ada", "11.w1", 2, "fine; clear"), ("bo", "11.w2", 1, "")]
    files = {
        "utf8-bom-comma.csv": "\ufeffstudent,question,points,comment\r\nada,11.w1,2,fine; clear\r\nbo,11.w2,1,\r\n",
        "utf8-bom-semicolon.csv": '\ufeffstudent;question;points;comment\r\nada;11.w1;2;"fine; clear"\r\n'
        "bo;11.w2;1;\r\n",
    }
    for name, content in files.items():
        (tmp_path / name).write_text(content, encoding="utf-8", newline="")
        rows = read_written_scores(tmp_path / name)
        assert [(r["student"], r["question"], r["points"], r["comment"]) for r in rows] == expected, name


def test_the_template_lists_every_student_and_question_and_is_read_as_it_is_filled(course, tmp_path):
    template = course["root"] / "report" / "answers" / "written-scores.csv"
    rows = list(csv.reader(template.open(newline="")))
    assert rows[0] == ["student", "question", "points", "comment"]
    assert sorted((row[0], row[1]) for row in rows[1:]) == [
        (s, q) for s in ("ada", "bo", "cy") for q in ("11.w1", "11.w2")
    ]
    assert read_written_scores(template) == []  # nothing scored yet: every row left out, none refused
    rows = [[*row[:2], "2" if row[:2] == ["ada", "11.w1"] else "", ""] for row in rows[1:]]
    scored = read_written_scores(_scores(tmp_path / "filled.csv", rows))
    assert [(r["student"], r["question"], r["points"]) for r in scored] == [("ada", "11.w1", 2)]


def test_a_second_scores_file_replaces_the_first_in_every_command(course, tmp_path):
    first = read_written_scores(_scores(tmp_path / "first.csv", [["ada", "11.w1", "2", "good"]]))
    second = read_written_scores(_scores(tmp_path / "second.csv", [["bo", "11.w2", "1", ""]]))
    score_written(course["root"] / "report", tmp_path / "once", first)
    twice = {
        (r.student, x.exercise): (x.points, x.status)
        for r in score_written(tmp_path / "once", tmp_path / "twice", second)
        for x in r.exercises
    }
    assert twice[("ada", "11.w1")] == (0, "to be graded by hand") and twice[("bo", "11.w2")] == (1, "graded by hand")
    regraded = {
        (r.student, x.exercise): (x.points, x.status)
        for r in grade_folder(
            course["root"] / "class",
            tmp_path / "regraded",
            course["root"] / "release",
            workers=1,
            seed=3,
            progress=False,
            sandbox=False,
            written_scores=second,
        )
        for x in r.exercises
    }
    assert regraded == twice


def test_the_command_line_scores_a_report(course, tmp_path, capsys):
    from transformer_course_grader.cli import main

    shutil.copytree(course["root"] / "report", tmp_path / "report")
    scores = _scores(tmp_path / "scores.csv", [["cy", "11.w1", "1", ""]])
    assert main(["score-written", str(tmp_path / "report"), "--written-scores", str(scores)]) == 0
    assert "1 written answer(s) scored by hand" in capsys.readouterr().out
    bad = _scores(tmp_path / "bad.csv", [["cy", "11.w1", "7", ""]])
    assert main(["score-written", str(tmp_path / "report"), "--written-scores", str(bad)]) == 1
    assert "7 points for 11.w1, which is worth 2" in capsys.readouterr().err


def test_grading_an_assignment_refuses_a_notebook_that_was_not_released(course, tmp_path):
    with pytest.raises(FileNotFoundError, match="no released notebook 12"):
        grade_folder(
            course["root"] / "class",
            tmp_path / "out",
            course["root"] / "release",
            notebooks=["11", "12"],
            progress=False,
            sandbox=False,
        )
    assert not (tmp_path / "out").exists()


def test_an_answer_is_collected_wherever_an_honest_student_typed_it(course, tmp_path):
    """Below the placeholder in a new cell, in the answer cell whose nbgrader metadata Colab dropped, in the
    answer cell turned into a code cell, or in a notebook with a stray byte that is not UTF-8; and a notebook
    that cannot be read at all is listed in the answers file with the reason."""
    release = course["release"]

    def copy():
        return nbformat.from_dict(json.loads(json.dumps(release)))

    below = copy()
    below.cells.insert(3, nbformat.v4.new_markdown_cell("No: the spread is larger than the gain."))
    no_metadata = copy()
    no_metadata.cells[2].metadata = {}
    no_metadata.cells[2].source = "Not yet: run more seeds."
    as_code = copy()
    as_code.cells[2] = nbformat.v4.new_code_cell("# It depends on the interval over seeds.")
    as_code.cells[2].metadata = dict(release.cells[2].metadata)
    stray = copy()
    stray.cells[2].source = "Jos\u00e9 says no."
    for student, notebook in (("below", below), ("no_metadata", no_metadata), ("as_code", as_code), ("stray", stray)):
        (tmp_path / "class" / student).mkdir(parents=True)
        nbformat.write(notebook, tmp_path / "class" / student / "11_tiny.ipynb")
    path = tmp_path / "class" / "stray" / "11_tiny.ipynb"
    path.write_bytes(path.read_bytes().replace("é".encode(), "é".encode("latin-1")))
    (tmp_path / "class" / "void").mkdir()
    (tmp_path / "class" / "void" / "11_tiny.ipynb").write_text('{"cells": [', encoding="utf-8")
    results = grade_folder(
        tmp_path / "class",
        tmp_path / "report",
        course["root"] / "release",
        workers=1,
        seed=3,
        progress=False,
        sandbox=False,
    )
    answers = {result.student: result.answers for result in results}
    assert answers["below"]["11.w1"] == "No: the spread is larger than the gain."
    assert answers["no_metadata"]["11.w1"] == "Not yet: run more seeds."
    assert answers["as_code"]["11.w1"] == "# It depends on the interval over seeds."
    assert answers["stray"]["11.w1"] == "Jos\ufffd says no."
    assert answers["below"]["11.w2"] == ""  # still the placeholder: not attempted
    flags = {result.student: result.flags for result in results}
    assert any("1 byte that is not UTF-8" in flag for flag in flags["stray"]), flags["stray"]
    statuses = {(r.student, x.exercise): x.status for r in results for x in r.exercises}
    assert statuses[("below", "11.w1")] == statuses[("stray", "11.w1")] == "to be graded by hand"
    listed = (tmp_path / "report" / "answers" / "11.w1.md").read_text()
    assert "## void" in listed and "no answer read: error: not a valid notebook" in listed
