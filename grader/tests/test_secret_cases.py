"""Secrets stay secret: no secret case is a public one, and feedback on a secret case is in the grader's words."""

import numpy as np
import pytest

from transformer_course.exercises import EXERCISES
from transformer_course.exercises.values import encode
from transformer_course_grader import references
from transformer_course_grader.grader import _case_verdict, _cases, _judge, credited_points


def _lookup_table_points(exercise, seed):
    """Points and secret cases passed of a function that is a table of the public cases' outputs."""
    cases = _cases(exercise, seed, "a student")
    table = {encode(arguments): references.expected(exercise.id, arguments) for _, arguments, secret in cases
             if not secret}  # fmt: skip
    first = next(iter(table.values()))
    secret = [arguments for _, arguments, is_secret in cases if is_secret]
    passed = sum(
        exercise.judge(arguments, table.get(encode(arguments), first), references.expected(exercise.id, arguments))
        is None
        for arguments in secret
    )
    return credited_points(exercise.points, passed, len(secret), exercise.partial_credit), passed, len(secret)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_a_lookup_table_of_the_public_outputs_earns_nothing_at_any_seed(exercise_id):
    exercise = EXERCISES[exercise_id]
    for seed in range(1, 21):
        points, passed, total = _lookup_table_points(exercise, seed)
        assert total >= 1, f"{exercise_id}, seed {seed}: no secret case left"
        assert points == 0 and passed < total, f"{exercise_id}, seed {seed}: {passed} of {total} secret cases, {points}"


def test_no_secret_case_is_a_public_one_though_the_generators_draw_their_fixed_cases_at_every_seed():
    exercise = EXERCISES["01.1"]  # its generator's first cases are fixed: every seed draws them
    public = [encode(arguments) for _, arguments, secret in _cases(exercise, 5, "a student") if not secret]
    drawn = [encode(arguments) for _, arguments in references.cases("01.1", np.random.default_rng(12345))]
    assert set(public) & set(drawn)  # without the filter, a secret case would repeat a public one
    assert not set(public) & {encode(a) for _, a, secret in _cases(exercise, 5, "a student") if secret}


def test_feedback_on_a_secret_case_never_shows_a_name_the_students_code_chose():
    exercise = EXERCISES["04.1"]
    raised = "ArgumentsWere_q_1_2_3: whatever the function said"
    verdict = _case_verdict(exercise, 4, "random, B=2", {}, "raised", raised, secret=True)
    assert verdict.message == "secret case 4 (random, B=2) raised an exception"
    assert "ArgumentsWere" in verdict.detail  # kept for the instructor
    public = _case_verdict(exercise, 1, "worked example", {}, "raised", raised, secret=False)
    assert "ArgumentsWere" in public.message  # a public case's error is the student's to read
    nonce = "N0NCE"
    cases = [("random, B=2", {}, nonce, "key", True)]
    result = _judge(exercise, cases, {"key": f"\n{nonce} unencodable Secret_q_1_2_3\n"}, stopped=None)
    assert "Secret_q" not in result.message and "not numbers, strings or arrays" in result.message
    assert "Secret_q_1_2_3" in result.detail
