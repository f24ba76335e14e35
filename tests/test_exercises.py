"""Student-facing checks: every verdict a student can get, and that none of them is a traceback."""

import time

import numpy as np
import pytest

import transformer_course.exercises as exercises
from transformer_course.exercises import EXERCISES, check, evaluate
from transformer_course.grading import references


def _reference(exercise_id):
    """The grader's reference for ``exercise_id``, as a function of keyword arguments."""
    return lambda **arguments: references.expected(exercise_id, arguments)


def test_every_notebook_has_at_least_two_graded_exercises():
    per_notebook = {}
    for exercise in EXERCISES.values():
        per_notebook.setdefault(exercise.notebook, []).append(exercise.id)
    assert sorted(per_notebook) == ["01", "02", "03", "04", "05", "06", "07"]
    assert all(len(ids) >= 2 for ids in per_notebook.values())


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_the_reference_solution_passes_quickly(exercise_id):
    start = time.perf_counter()
    verdict = evaluate(exercise_id, _reference(exercise_id))
    assert verdict.passed, verdict.message
    assert verdict.points == verdict.max_points > 0
    assert time.perf_counter() - start < 1.0


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_an_untouched_stub_is_not_attempted(exercise_id):
    def stub(**kwargs):
        raise NotImplementedError(f"Exercise {exercise_id}")

    verdict = evaluate(exercise_id, stub)
    assert verdict.status == "not attempted" and verdict.points == 0


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_a_wrong_answer_fails_and_says_where(exercise_id):
    reference = _reference(exercise_id)

    def off_by_a_little(**kwargs):
        result = reference(**kwargs)
        if isinstance(result, tuple):
            return (np.asarray(result[0]) + 0.5,) + result[1:]
        result = np.asarray(result)
        if result.dtype.kind == "U":
            return str(result) + "x"
        return ~result if result.dtype == bool else result + 1

    verdict = evaluate(exercise_id, off_by_a_little)
    assert verdict.status == "failed" and verdict.points == 0
    assert "case 1" in verdict.message and ("expected" in verdict.message or "should" in verdict.message)


def test_a_wrong_shape_is_named():
    verdict = evaluate("04.2", lambda x, num_heads: x)
    assert "should have shape (2, 2, 3, 4); received shape (2, 3, 8)" in verdict.message


def test_a_mask_leak_is_named():
    def unmasked(query, key, value, mask=None):
        return references._attention_reference(query, key, value, None)

    verdict = evaluate("04.1", unmasked)
    assert verdict.status == "failed" and "mask leak" in verdict.message


def test_an_exception_is_reported_without_a_traceback(capsys):
    def broken(sequence, n_features):
        return [1, 2][5]

    check("01.1", broken)
    printed = capsys.readouterr().out
    assert printed.startswith("✗ Exercise 01.1: case 1") and "IndexError" in printed
    assert "Traceback" not in printed


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(exercises, "_TIME_LIMIT_SECONDS", 1)

    def endless(length):
        while True:
            pass

    verdict = evaluate("07.1", endless)
    assert verdict.status == "error" and "longer than 1 s" in verdict.message


def test_not_a_function(capsys):
    check("05.1", None)
    assert "expected a function `layer_norm`" in capsys.readouterr().out


def test_an_unknown_exercise_is_a_mistake_in_the_notebook():
    with pytest.raises(KeyError, match="unknown exercise '99.1'"):
        evaluate("99.1", len)


def test_verdicts_are_deterministic():
    wrong = lambda values, mask: np.max(values, axis=1)  # noqa: E731 - ignores the mask
    assert evaluate("06.1", wrong) == evaluate("06.1", wrong)
    assert evaluate("06.1", wrong).status == "failed"


def test_the_stored_public_cases_are_those_the_references_give():
    """public_cases.json, which students' checks read, is regenerated from the grader's references."""
    assert references.PUBLIC_CASES.read_text(encoding="utf-8") == references.public_cases(), \
        "run: python -c 'from transformer_course.grading.references import write_public_cases; write_public_cases()'"


def test_students_see_no_reference_or_case_generator():
    assert not any(hasattr(exercise, name) for exercise in EXERCISES.values() for name in ("reference", "cases"))


def test_the_instructors_hidden_tests_draw_more_cases_from_the_references():
    """The source notebooks' hidden tests call evaluate(..., seed=7): other cases, the same verdicts."""
    assert evaluate("07.1", _reference("07.1"), seed=7).passed
    wrong = evaluate("06.1", lambda values, mask: values.max(axis=1), seed=7)
    assert wrong.status == "failed"
