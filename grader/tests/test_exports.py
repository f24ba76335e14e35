"""Overrides, and the Canvas and Gradescope exports, on reports built from known results."""

import csv
import io
import json

import pytest

from transformer_course_grader.exports import (
    OverrideError,
    canvas_gradebook,
    gradescope_results,
    read_overrides,
)
from transformer_course_grader.grader import ExerciseResult, NotebookResult, merge_grades
from transformer_course_grader.reports import report_texts


def _results():
    def row(student, first, second):
        return NotebookResult(
            student,
            "07_tiny.ipynb",
            [
                ExerciseResult(
                    "07.1", first, 1, "passed" if first else "failed", "all match" if first else "case 1 differs"
                ),
                ExerciseResult(
                    "07.2", second, 3, "passed" if second else "error", "ok" if second else "raised ValueError"
                ),
            ],
        )

    return [row("ada", 1, 3), row("bob", 0, 3), row("=cy", 1, 0)]


def _shards(tmp_path, results):
    """Two shard folders as `grade --shard K/2` writes them."""
    folders = []
    students = sorted({result.student for result in results})
    for index in (1, 2):
        mine = [result for result in results if (students.index(result.student) % 2) + 1 == index]
        csv_text, json_text, markdown = report_texts(
            mine, ["07.1", "07.2"], 99, {"shard": {"index": index, "count": 2}, "all_students": students}
        )
        folder = tmp_path / f"shard{index}"
        folder.mkdir(parents=True)
        (folder / "grades.json").write_text(json_text)
        folders.append(folder)
    return folders


def _overrides(tmp_path, rows, header="student,exercise,points,reason"):
    path = tmp_path / "overrides.csv"
    path.write_text(header + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows))
    return path


def test_overrides_set_points_keep_the_automatic_score_and_survive_a_regrade(tmp_path):
    overrides = read_overrides(_overrides(tmp_path, [("bob", "07.1", 1, "accepted after review")]))
    for attempt in range(2):  # a second merge (a regrade) applies the same file again
        results = merge_grades(_shards(tmp_path / str(attempt), _results()), tmp_path / f"out{attempt}", overrides)
        bob = next(x for r in results if r.student == "bob" for x in r.exercises if x.exercise == "07.1")
        assert (bob.points, bob.automatic_points, bob.override) == (1, 0, "accepted after review")
        grades = list(csv.DictReader(io.StringIO((tmp_path / f"out{attempt}" / "grades.csv").read_text())))
        assert next(row for row in grades if row["student"] == "bob")["total"] == "4"
        report = (tmp_path / f"out{attempt}" / "report.md").read_text()
        assert "1 / 1 (set by hand; automatic 0: accepted after review)" in report


@pytest.mark.parametrize(
    "rows, header, problem",
    [
        ([("bob", "07.1", 1, "ok")], "name,exercise,points,reason", "header"),
        ([("bob", "99.1", 1, "ok")], None, "unknown exercise"),
        ([("bob", "07.1", 2, "ok")], None, "from 0 to 1"),
        ([("bob", "07.1", "one", "ok")], None, "from 0 to 1"),
        ([("bob", "07.1", 1, " ")], None, "reason"),
        ([("bob", "07.1", 1, "ok"), ("bob", "07.1", 0, "again")], None, "twice"),
    ],
)
def test_a_bad_overrides_file_is_refused_naming_the_row(tmp_path, rows, header, problem):
    with pytest.raises(OverrideError, match=problem):
        read_overrides(_overrides(tmp_path, rows, header or "student,exercise,points,reason"))


def test_an_override_for_a_student_outside_the_class_is_refused(tmp_path):
    overrides = read_overrides(_overrides(tmp_path, [("zed", "07.1", 1, "typo in the name")]))
    with pytest.raises(OverrideError, match="zed"):
        merge_grades(_shards(tmp_path, _results()), tmp_path / "out", overrides)


def test_canvas_gradebook_has_canvas_columns_a_points_row_and_reports_unmatched_names(tmp_path):
    merge_grades(_shards(tmp_path, _results()), tmp_path / "out")
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "folder,Student,ID,SIS User ID,SIS Login ID,Section\n"
        "ada,Lovelace Ada,101,s101,ada,Monday\nbob,Bob B,102,s102,bob,Tuesday\n"
        "dee,Dee D,103,s103,dee,Monday\n"
    )
    text, unmatched = canvas_gradebook(tmp_path / "out", roster, "Transformer course", "4242")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Transformer course (4242)"]
    assert rows[1][0] == "Points Possible" and rows[1][-1] == "4"
    assert rows[2] == ["Lovelace Ada", "101", "s101", "ada", "Monday", "4"] and rows[3][-1] == "3"
    assert rows[4][-1] == ""  # dee never submitted: left ungraded, not 0
    assert unmatched == ["=cy", "dee"]


def test_a_roster_saved_by_excel_with_a_byte_order_mark_and_its_columns_in_another_order_is_read(tmp_path):
    merge_grades(_shards(tmp_path, _results()), tmp_path / "out")
    roster = tmp_path / "roster.csv"
    roster.write_bytes(
        "\ufeffStudent,Section,folder,ID,SIS Login ID,SIS User ID\r\nLovelace Ada,Monday,ada,101,ada,s101\r\n".encode()
    )
    text, _ = canvas_gradebook(tmp_path / "out", roster, "Transformer course", "4242")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[2] == ["Lovelace Ada", "101", "s101", "ada", "Monday", "4"]
    roster.write_text("folder,Student,ID,Section\nada,Ada,101,Monday\n")
    with pytest.raises(OverrideError, match=r"must name the columns .* \(in any order\)"):
        canvas_gradebook(tmp_path / "out", roster, "Transformer course", "4242")


def test_gradescope_results_hold_the_documented_fields(tmp_path):
    overrides = read_overrides(_overrides(tmp_path, [("bob", "07.1", 1, "regraded by hand")]))
    merge_grades(_shards(tmp_path, _results()), tmp_path / "out", overrides)
    results = gradescope_results(tmp_path / "out", "bob")
    json.dumps(results)  # serialisable as results.json
    assert results["score"] == 4.0 and results["visibility"] == "visible" and results["stdout_visibility"] == "hidden"
    first, second = results["tests"]
    assert set(first) >= {"name", "score", "max_score", "status", "output", "visibility"}
    assert results["output_format"] == first["output_format"] == second["output_format"] == "text"
    assert (first["score"], first["max_score"], first["status"]) == (1.0, 1.0, "passed")
    assert "set by hand from 0 to 1: regraded by hand" in first["output"] and second["max_score"] == 3.0
    with pytest.raises(KeyError):
        gradescope_results(tmp_path / "out", "nobody")


# --- near-identical solutions -----------------------------------------------------------------

HONEST = """def bert_corruption(token_ids, seed, vocabulary_size, mask_token_id, special_ids):
    rng = np.random.default_rng(seed)
    token_ids = np.asarray(token_ids)
    chosen = ~np.isin(token_ids, [0, *special_ids]) & (rng.random(token_ids.shape) < 0.15)
    action = rng.random(token_ids.shape)
    corrupted = np.where(chosen & (action < 0.8), mask_token_id, token_ids)
    randomized = chosen & (action >= 0.8) & (action < 0.9)
    corrupted[randomized] = rng.integers(0, vocabulary_size, size=int(randomized.sum()))
    return corrupted, np.where(chosen, token_ids, 0)"""
RENAMED = """def bert_corruption(ids, s, v, m, specials):
    # my own work, honestly
    generator = np.random.default_rng(s)
    ids = np.asarray(ids)
    picked = ~np.isin(ids, [0, *specials]) & (generator.random(ids.shape) < 0.15)
    draw = generator.random(ids.shape)   # one draw per position
    out = np.where(picked & (draw < 0.8), m, ids)
    swap = picked & (draw >= 0.8) & (draw < 0.9)
    out[swap] = generator.integers(0, v, size=int(swap.sum()))
    return out, np.where(picked, ids, 0)"""
LOOPS = """def bert_corruption(token_ids, seed, vocabulary_size, mask_token_id, special_ids):
    rng = np.random.default_rng(seed)
    corrupted = np.array(token_ids, copy=True)
    labels = np.zeros_like(corrupted)
    for row in range(corrupted.shape[0]):
        for column in range(corrupted.shape[1]):
            token = corrupted[row, column]
            if token == 0 or token in special_ids or rng.random() >= 0.15:
                continue
            labels[row, column] = token
            roll = rng.random()
            if roll < 0.8:
                corrupted[row, column] = mask_token_id
            elif roll < 0.9:
                corrupted[row, column] = rng.integers(vocabulary_size)
    return corrupted, labels"""


def test_a_renamed_copy_is_listed_and_independent_honest_solutions_are_not():
    import inspect

    from transformer_course.pretraining import mask_tokens
    from transformer_course_grader.similarity import normalise, similar_solutions

    copied_from_the_package = inspect.getsource(mask_tokens).replace("token_ids", "ids").replace("rng", "generator")
    solutions = {
        name: {"08.3": normalise(source)}
        for name, source in (("ana", HONEST), ("ben", RENAMED), ("cal", LOOPS), ("dot", copied_from_the_package))
    }
    found = similar_solutions(solutions)["08.3"]
    assert [group for _, _, group in found["groups"]] == [["ana", "ben"]]
    assert [student for _, student, _ in found["package"]] == ["dot"]


def test_students_sharing_one_program_are_one_group_and_short_answers_are_not_compared():
    """Five students of sixty with one program are one line, not ten pairs; the short answer thirty students wrote
    alike is the usual answer, counted, not listed; a one-line program is not compared at all."""
    from transformer_course_grader.similarity import MIN_SHINGLES, normalise, similar_solutions

    usual = normalise(
        "def split_heads(x, heads):\n    b, t, e = x.shape\n"
        "    return x.reshape(b, t, heads, e // heads).transpose(0, 2, 1, 3)"
    )
    tiny = normalise("def f(n):\n    return n + 1")
    assert len(tiny) - 4 < MIN_SHINGLES <= len(usual) - 4
    solutions = {}
    for n in range(60):
        own = [f"t{n}_{i}" for i in range(40)]  # everyone's own program...
        solutions[f"student{n:02d}"] = {
            "08.3": normalise(HONEST) if n < 5 else own,  # ...but five who share one
            "04.2": usual if n < 30 else own,
            "01.1": tiny,
        }
    found = similar_solutions(solutions)
    assert found["08.3"]["groups"] == [(1.0, 1.0, [f"student{n:02d}" for n in range(5)])]
    assert found["04.2"]["groups"] == [] and found["04.2"]["common"] == [30]
    assert "01.1" not in found


def test_the_report_lists_near_identical_solutions_and_never_changes_a_score(tmp_path):
    from transformer_course_grader.similarity import normalise

    results = _results()
    for result, source in zip(results, (HONEST, RENAMED, LOOPS)):
        result.solutions = {"08.3": " ".join(normalise(source))}
    before = {(r.student, x.exercise): x.points for r in results for x in r.exercises}
    merge_grades(_shards(tmp_path, results), tmp_path / "out")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Near-identical solutions" in report and "08.3: ada and bob, similarity 1.00" in report
    assert "=cy" not in report.split("## Near-identical solutions")[1]
    after = merge_grades(_shards(tmp_path / "again", results), tmp_path / "o2")
    assert before == {(r.student, x.exercise): x.points for r in after for x in r.exercises}


def _two_assignments():
    """ada and bob hand in notebook 07 (week 1) and notebook 09 (week 2)."""
    results = _results()[:2]
    for student, points in (("ada", 3), ("bob", 1)):
        results.append(
            NotebookResult(
                student,
                "09_tiny.ipynb",
                [
                    ExerciseResult("09.1", min(points, 2), 2, "passed" if points >= 2 else "failed", "x"),
                    ExerciseResult("09.w1", 1, 2, "graded by hand", "fair"),
                ],
            )
        )
    return results


def test_an_assignment_is_merged_and_exported_alone_or_one_column_per_exercise(tmp_path):
    results = _two_assignments()
    folders = []
    for index in (1, 2):
        mine = [result for result in results if (result.student == "ada") == (index == 1)]
        _, json_text, _ = report_texts(
            mine,
            ["07.1", "07.2", "09.1", "09.w1"],
            99,
            {"shard": {"index": index, "count": 2}, "all_students": ["ada", "bob"]},
        )
        (tmp_path / f"shard{index}").mkdir()
        (tmp_path / f"shard{index}" / "grades.json").write_text(json_text)
        folders.append(tmp_path / f"shard{index}")
    merge_grades(folders, tmp_path / "all")
    merge_grades(folders, tmp_path / "week2", notebooks=["09"])
    assert json.loads((tmp_path / "week2" / "grades.json").read_text())["exercises"] == ["09.1", "09.w1"]
    roster = tmp_path / "roster.csv"
    roster.write_text("folder,Student,ID,SIS User ID,SIS Login ID,Section\nada,Ada,1,,,\nbob,Bob,2,,,\n")
    text, _ = canvas_gradebook(tmp_path / "all", roster, "Week 2", "88", notebooks=["09"])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][-1] == "Week 2 (88)" and rows[1][-1] == "4" and [rows[2][-1], rows[3][-1]] == ["3", "2"]
    text, _ = canvas_gradebook(tmp_path / "all", roster, "Course", None, per_exercise=True)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0][5:] == ["Course: 07.1", "Course: 07.2", "Course: 09.1", "Course: 09.w1"]
    assert rows[1][5:] == ["1", "3", "2", "2"] and rows[3][5:] == ["0", "3", "1", "1"]
    assert [test["number"] for test in gradescope_results(tmp_path / "all", "bob", notebooks=["09"])["tests"]] == [
        "09.1",
        "09.w1",
    ]
    with pytest.raises(OverrideError, match="no exercise of notebooks 05"):
        canvas_gradebook(tmp_path / "all", roster, "Week 3", "89", notebooks=["05"])


@pytest.mark.parametrize("text", ["4,x", "0", "100", ""])
def test_an_assignment_that_is_not_notebook_numbers_is_a_usage_error(text, capsys):
    from transformer_course_grader.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["export", "gradescope", "report", "--out", "x.json", "--notebooks", text])
    assert stopped.value.code == 2 and "--notebooks must list notebook numbers" in capsys.readouterr().err
