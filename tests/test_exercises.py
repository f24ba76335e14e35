"""Student-facing checks: every verdict a student can get, and that none of them is a traceback."""

import contextlib
import math
import types
from pathlib import Path

import keras
import numpy as np
import pytest

import transformer_course.exercises as exercises
from transformer_course import post_training
from transformer_course.exercises import EXERCISES, check, evaluate
from transformer_course_grader import evaluate_hidden, references
from transformer_course_grader.grader import score_in_process


def _reference(exercise_id):
    """A right answer to ``exercise_id`` (the grader's reference), as a function of keyword arguments."""
    return lambda **arguments: references.answer(exercise_id, arguments)


def test_every_notebook_has_at_least_two_graded_exercises():
    per_notebook = {}
    for exercise in EXERCISES.values():
        per_notebook.setdefault(exercise.notebook, []).append(exercise.id)
    notebooks = sorted(path.name[:2] for path in (Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(notebooks) >= 13
    assert sorted(per_notebook) == notebooks
    assert all(len(ids) >= 2 for ids in per_notebook.values())


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_the_reference_solution_passes(exercise_id):
    """(How long the checks take is measured in benchmarks/grading.py, never asserted under a test's load.)"""
    verdict = evaluate(exercise_id, _reference(exercise_id))
    assert verdict.passed, verdict.message
    assert verdict.points == verdict.max_points > 0


def _in_single_precision(value):
    """A float64 array (or a dict, list or tuple of them) as float32; anything else as it is."""
    if isinstance(value, np.ndarray) and value.dtype == np.float64:
        return value.astype(np.float32)
    if isinstance(value, dict):
        return {key: _in_single_precision(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)) and value and all(isinstance(item, np.ndarray) for item in value):
        return type(value)(_in_single_precision(item) for item in value)
    return value


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_a_right_answer_in_single_precision_passes_the_cases_of_fresh_grading_seeds(exercise_id):
    """Grading draws its cases anew each time: a right answer computed in float32, as a student's often is,
    must pass every draw (20 seeds here; 200 passed for every exercise when this test was written)."""

    def answer(**arguments):
        return references.answer(exercise_id, {key: _in_single_precision(value) for key, value in arguments.items()})

    for seed in range(1000, 1020):
        verdict = evaluate_hidden(exercise_id, answer, seed=seed)
        assert verdict.passed, (seed, verdict.message)
    for seed in range(3):  # and as grading credits it: every point
        scored = score_in_process(exercise_id, answer, seed, student="float32")
        assert scored.points == EXERCISES[exercise_id].points, (seed, scored.message)


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
            first = result[0] + "x" if isinstance(result[0], str) else np.asarray(result[0]) + 0.5
            return (first,) + result[1:]
        result = np.asarray(result)
        if result.dtype.kind == "U":
            return str(result) + "x"
        return ~result if result.dtype == bool else result + 1

    verdict = evaluate(exercise_id, off_by_a_little)
    assert verdict.status == "failed" and verdict.points == 0
    assert "case 1" in verdict.message and ("expected" in verdict.message or "should" in verdict.message)


def test_a_wrong_shape_is_named():
    verdict = evaluate("04.2", lambda x, num_heads: x)
    assert "the heads should have shape (2, 2, 3, 4); received shape (2, 3, 8)" in verdict.message


def test_a_mask_leak_is_named():
    def unmasked(query, key, value, mask=None):
        return references._attention_reference(query, key, value, None)

    verdict = evaluate("04.1", unmasked)
    assert verdict.status == "failed" and "mask leak" in verdict.message


def test_weights_the_mask_would_enlarge_are_judged_by_shape_without_being_broadcast():
    import tracemalloc

    def huge(query, key, value, mask=None):
        output, _ = references._attention_reference(query, key, value, mask)
        return output, np.zeros((200_000, 1, 1, 1))  # 1.6 MB; broadcast against the mask it would be hundreds

    tracemalloc.start()
    verdict = evaluate("04.1", huge)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert verdict.status == "failed" and "should have shape" in verdict.message and "mask leak" not in verdict.message
    assert peak < 50 * 2**20


def test_an_exception_type_name_is_cut():
    error = type("E" * 5000, (Exception,), {})

    def raises(sequence, n_features):
        raise error("message")

    verdict = evaluate("01.1", raises)
    assert verdict.status == "error" and "E" * 100 + ": message" in verdict.message and "E" * 101 not in verdict.message


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


def _assert_same_value(stored, computed, where):
    """Equal structure, types, shapes, dtypes and integers; floats within 1e-5 relative (1e-6 absolute near zero).

    The expected outputs are float arithmetic, and NumPy's SIMD kernels (AVX2, AVX-512, NEON) round
    their last bits differently from one CPU to the next: the file written on one machine holds the
    values another machine computes to within float32's last bits, not to the byte.
    """
    from transformer_course._next_token_table import NextTokenTable

    assert type(stored) is type(computed), f"{where}: {type(stored).__name__} != {type(computed).__name__}"
    if isinstance(stored, NextTokenTable):
        stored, computed = stored.table, computed.table
    if isinstance(stored, dict):
        assert sorted(stored) == sorted(computed), f"{where}: keys {sorted(stored)} != {sorted(computed)}"
        for key in stored:
            _assert_same_value(stored[key], computed[key], f"{where}[{key!r}]")
    elif isinstance(stored, (list, tuple)):
        assert len(stored) == len(computed), f"{where}: length {len(stored)} != {len(computed)}"
        for index, (first, second) in enumerate(zip(stored, computed)):
            _assert_same_value(first, second, f"{where}[{index}]")
    elif isinstance(stored, np.ndarray) and stored.dtype.kind in "fc":
        assert (stored.dtype, stored.shape) == (computed.dtype, computed.shape), where
        np.testing.assert_allclose(stored, computed, rtol=1e-5, atol=1e-6, err_msg=where)
    elif isinstance(stored, float):
        assert stored == pytest.approx(computed, rel=1e-5, abs=1e-6), where
    elif isinstance(stored, np.ndarray):
        assert (stored.dtype, stored.shape) == (computed.dtype, computed.shape), where
        assert np.array_equal(stored, computed), where
    else:
        assert stored == computed, where


def test_the_stored_public_cases_are_those_the_references_give():
    """public_cases.json, which students' checks read, holds what the grader's references give on this CPU.

    Labels, arguments and integer outputs are equal; float outputs within 1e-5 relative (see
    :func:`_assert_same_value`): a few float32 roundings, where a wrong formula moves a value by far more.
    """
    import json

    from transformer_course.exercises.values import decode

    regenerate = (
        "run: python -c 'from transformer_course_grader.references import write_public_cases; write_public_cases()'"
    )
    stored = json.loads(references.PUBLIC_CASES.read_text(encoding="utf-8"))
    computed = json.loads(references.public_cases())
    assert sorted(stored) == sorted(computed), regenerate
    for exercise_id, cases in computed.items():
        assert [case[0] for case in stored[exercise_id]] == [case[0] for case in cases], (exercise_id, regenerate)
        for (label, *stored_values), (_, *computed_values) in zip(stored[exercise_id], cases):
            for part, first, second in zip(("arguments", "expected output"), stored_values, computed_values):
                _assert_same_value(decode(first), decode(second), f"{exercise_id} {label!r}: {part}")


def test_the_stored_public_cases_fail_the_comparison_when_a_value_moves():
    """The comparison above is not vacuous: a float moved past the tolerance, or an integer changed, fails it."""
    stored = np.array([0.5, 1.25], dtype=np.float32)
    _assert_same_value(stored, stored * np.float32(1 + 1e-6), "last bits")
    with pytest.raises(AssertionError):
        _assert_same_value(stored, stored * np.float32(1 + 1e-3), "moved")
    with pytest.raises(AssertionError):
        _assert_same_value({"ids": np.array([1, 2])}, {"ids": np.array([1, 3])}, "integers")
    with pytest.raises(AssertionError):
        _assert_same_value(stored, stored.astype(np.float64), "dtype")


def test_students_see_no_reference_or_case_generator():
    assert not any(hasattr(exercise, name) for exercise in EXERCISES.values() for name in ("reference", "cases"))


def test_the_instructors_hidden_tests_draw_more_cases_from_the_references():
    """The source notebooks' hidden tests call evaluate_hidden(..., seed=7): other cases, the same verdicts."""
    from transformer_course_grader import evaluate_hidden

    assert evaluate_hidden("07.1", _reference("07.1"), seed=7).passed
    wrong = evaluate_hidden("06.1", lambda values, mask: values.max(axis=1), seed=7)
    assert wrong.status == "failed"


def test_what_students_import_never_imports_the_grader():
    import ast
    from pathlib import Path

    import transformer_course.exercises as exercises_package

    for path in Path(exercises_package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                assert "grading" not in (node.module or ""), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any("grading" in alias.name for alias in node.names), path.name


def _attention_without_scaling(query, key, value, mask=None):
    return references._attention_reference(query * np.sqrt(query.shape[-1]), key, value, mask)


def _attention_with_nan_rows(query, key, value, mask=None):
    output, weights = references._attention_reference(query, key, value, mask)
    if mask is not None:
        empty = ~np.broadcast_to(mask, weights.shape).any(axis=-1)
        weights = np.where(empty[..., None], np.nan, weights)
        output = np.where(empty[..., None], np.nan, output)
    return output, weights


def test_feedback_names_the_output_prints_plain_numbers_and_hints_at_a_missing_scaling():
    verdict = evaluate("04.1", _attention_without_scaling)
    assert verdict.status == "failed"
    assert verdict.message.startswith("case 1 (no mask): wrong value in the output")
    assert "np.float" not in verdict.message and "entries differ" in verdict.message
    assert "Hint:" in verdict.message and "√d_k = √4" in verdict.message


def test_nan_in_a_fully_masked_row_fails_with_a_hint():
    verdict = evaluate("04.1", _attention_with_nan_rows)
    assert verdict.status == "failed" and "every key masked" in verdict.message
    assert "NaN in the weights" in verdict.message


def _softmax_with_one_global_maximum(logits, temperature):
    with np.errstate(all="ignore"):
        weights = np.exp((np.asarray(logits) - np.max(logits)) / temperature)
        return weights / weights.sum(axis=-1, keepdims=True)


def _nucleus_below_p(probabilities, p):  # keeps a token while the mass above is *below* p: drops the exact tie
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    kept = np.zeros_like(probabilities)
    np.put_along_axis(kept, order, np.where(np.cumsum(ranked, axis=-1) - ranked < p, ranked, 0.0), axis=-1)
    return kept / kept.sum(axis=-1, keepdims=True)


def _lstm_forget_gate_first(x, h, c, kernel, recurrent_kernel, bias):
    units = h.shape[-1]
    order = np.r_[units : 2 * units, 0:units, 2 * units : 4 * units]  # f, i, c, o read as i, f, c, o
    return references.expected(
        "01.2",
        {
            "x": x,
            "h": h,
            "c": c,
            "kernel": kernel[:, order],
            "recurrent_kernel": recurrent_kernel[:, order],
            "bias": bias[order],
        },
    )


def _sines_then_cosines(length, depth):
    angles = np.arange(length)[:, None] / 10000 ** (np.arange(0, depth, 2) / depth)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def _mean_over_every_position(values, mask):
    return np.where(mask[..., None], values, 0.0).sum(axis=1) / values.shape[1]


def _encode_leftmost_first(word, merges):
    return references._encode_left_to_right(word, merges)


def _encode_one_merge(word, merges):
    """03.3 that merges the lowest-rank pair once and stops."""
    symbols, ranks = list(word), {tuple(merge.split(" ")): rank for rank, merge in enumerate(merges)}
    pairs = [pair for pair in zip(symbols, symbols[1:]) if pair in ranks]
    if not pairs:
        return symbols
    first, second = min(pairs, key=ranks.get)
    merged, index = [], 0
    while index < len(symbols):
        if index + 1 < len(symbols) and (symbols[index], symbols[index + 1]) == (first, second):
            merged.append(first + second)
            index += 2
        else:
            merged.append(symbols[index])
            index += 1
    return merged


def _attention_scaled_by_the_width(query, value, weights, mask=None):
    return references._multi_head_attention_reference(query, value, weights, mask, scale_width=query.shape[-1])


def _encoder_block_swapped_norm(x, weights, mask=None, normalize_first=False):
    return references._encoder_block_reference(x, weights, mask, not normalize_first)


def _step_over_the_whole_cache(query, key, value, key_cache, value_cache, index):
    _, keys, values = references.expected(
        "09.3",
        {
            "query": query,
            "key": key,
            "value": value,
            "key_cache": key_cache,
            "value_cache": value_cache,
            "index": index,
        },
    )
    return references.expected("04.1", {"query": query, "key": keys, "value": values, "mask": None})[0], keys, values


def _bits_in_nats(log_probabilities, targets, characters):
    perplexity, bits = references.expected(
        "09.4", {"log_probabilities": log_probabilities, "targets": targets, "characters": characters}
    )
    return perplexity, bits * np.log(2)


def _loss_with_padding(target_ids, probabilities):
    inputs, labels, _ = references.expected("07.3", {"target_ids": target_ids, "probabilities": probabilities})
    picked = np.take_along_axis(probabilities, labels[..., None], axis=-1)[..., 0]
    return inputs, labels, -np.log(picked).mean()


def _finished_not_normalised(scores, log_probabilities, beam_width, end_id, step, alpha):
    arguments = {
        "scores": scores,
        "log_probabilities": log_probabilities,
        "beam_width": beam_width,
        "end_id": end_id,
        "step": step,
        "alpha": alpha,
    }
    parents, tokens, kept, ended, ended_scores = references.expected("07.4", arguments)
    return parents, tokens, kept, ended, ended_scores * ((5 + step) / 6) ** alpha


def _skipgram_window(reach_change):
    def pairs(token_ids, window):
        reach = window + reach_change
        return [
            (token_ids[i], token_ids[j])
            for i in range(len(token_ids))
            for j in range(len(token_ids))
            if 0 < abs(i - j) <= reach
        ]

    return pairs


def _positions_from_one(length, depth):
    angles = np.arange(1, length + 1)[:, None] / 10000 ** (np.arange(0, depth, 2) / depth)
    table = np.zeros((length, depth))
    table[:, 0::2], table[:, 1::2] = np.sin(angles), np.cos(angles)
    return table


def _heads_flattened_unmoved(query, value, weights, mask=None):
    query, value = np.asarray(query, "float64"), np.asarray(value, "float64")
    q = np.einsum("bte,enh->bnth", query, weights["query_kernel"]) + weights["query_bias"][:, None, :]
    k = np.einsum("bse,enh->bnsh", value, weights["key_kernel"]) + weights["key_bias"][:, None, :]
    v = np.einsum("bse,enh->bnsh", value, weights["value_kernel"]) + weights["value_bias"][:, None, :]
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(np.asarray(mask, bool)[:, None], scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    context = scores / scores.sum(axis=-1, keepdims=True) @ v  # (B, N, T, H)
    batch, heads, length, width = context.shape
    return (
        context.reshape(batch, length, heads * width) @ weights["output_kernel"].reshape(heads * width, -1)
        + weights["output_bias"]
    )


def _mask_on_the_queries(x, weights, mask=None, normalize_first=False):
    """05.3 with the padding mask on the query axis, mask[:, :, None]: each real position attends to every key,
    padding keys included, and a padding position to none (its output is taken as 0 here; any value makes the
    mistake)."""
    everything = references._encoder_block_reference(x, weights, None, normalize_first)
    return everything if mask is None else np.where(np.asarray(mask, bool)[..., None], everything, 0.0)


def _norm_on_the_output(x, weights, mask=None, normalize_first=False):
    x = np.asarray(x, "float64")
    allowed = (
        None
        if mask is None
        else np.broadcast_to(np.asarray(mask, bool)[:, None, :], (x.shape[0], x.shape[1], x.shape[1]))
    )

    def norm(values, parameters):
        return references._layer_norm_reference(values, parameters["gamma"], parameters["beta"], 1e-5)

    def feedforward(values):
        ff = weights["feedforward"]
        return np.maximum(values @ ff["hidden_kernel"] + ff["hidden_bias"], 0) @ ff["output_kernel"] + ff["output_bias"]

    x = x + norm(
        references._multi_head_attention_reference(x, x, weights["attention"], allowed), weights["attention_norm"]
    )
    return x + norm(feedforward(x), weights["feedforward_norm"])


def _loss_masked_by_the_inputs(target_ids, probabilities):
    inputs, labels, _ = references.expected("07.3", {"target_ids": target_ids, "probabilities": probabilities})
    picked = np.take_along_axis(probabilities, labels[..., None], axis=-1)[..., 0]
    return inputs, labels, -np.log(picked)[inputs != 0].mean()


def _penalty_one_longer(scores, log_probabilities, beam_width, end_id, step, alpha):
    parents, tokens, kept, ended, ended_scores = references.expected(
        "07.4",
        {
            "scores": scores,
            "log_probabilities": log_probabilities,
            "beam_width": beam_width,
            "end_id": end_id,
            "step": step,
            "alpha": alpha,
        },
    )
    return parents, tokens, kept, ended, ended_scores * ((5 + step) / 6) ** alpha / ((6 + step) / 6) ** alpha


def _warmup_one_step_longer(steps, peak, warmup_steps, decay_steps, final_fraction):
    rates = references.expected(
        "07.5",
        {
            "steps": steps,
            "peak": peak,
            "warmup_steps": warmup_steps,
            "decay_steps": decay_steps,
            "final_fraction": final_fraction,
        },
    )
    return np.where(steps <= warmup_steps, peak * (steps + 1) / warmup_steps, rates)


def _cache_written_one_later(query, key, value, key_cache, value_cache, index):
    key_cache, value_cache = np.array(key_cache, "float64"), np.array(value_cache, "float64")
    key_cache[:, :, index + 1 : index + 2], value_cache[:, :, index + 1 : index + 2] = key, value
    keys, values = key_cache[:, :, : index + 1], value_cache[:, :, : index + 1]
    scores = query @ np.swapaxes(keys, -1, -2) / np.sqrt(query.shape[-1])
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return scores / scores.sum(axis=-1, keepdims=True) @ values, key_cache, value_cache


def _warmup_from_zero(steps, peak, warmup_steps, decay_steps, final_fraction):
    rates = references.expected(
        "07.5",
        {
            "steps": steps,
            "peak": peak,
            "warmup_steps": warmup_steps,
            "decay_steps": decay_steps,
            "final_fraction": final_fraction,
        },
    )
    return np.where(steps < warmup_steps, peak * steps / warmup_steps, rates)


def _adam_with_l2(parameters, gradients, m, v, step, learning_rate, beta_1, beta_2, epsilon, weight_decay):
    return references.expected(
        "07.6",
        {
            "parameters": parameters,
            "gradients": gradients + weight_decay * parameters,
            "m": m,
            "v": v,
            "step": step,
            "learning_rate": learning_rate,
            "beta_1": beta_1,
            "beta_2": beta_2,
            "epsilon": epsilon,
            "weight_decay": 0.0,
        },
    )


def _adam_with(epsilon_inside=False, corrected=True, decay_without_rate=False, decay_after_step=False):
    """An AdamW step in float32 with one of the usual mistakes: ε inside the square root, no bias correction,
    the decay without the learning rate, or the decay applied after the step."""

    def step_function(parameters, gradients, m, v, step, learning_rate, beta_1, beta_2, epsilon, weight_decay):
        parameters, gradients, m, v = (np.asarray(value, "float32") for value in (parameters, gradients, m, v))
        m = beta_1 * m + (1 - beta_1) * gradients
        v = beta_2 * v + (1 - beta_2) * gradients**2
        rate = learning_rate * np.sqrt(1 - beta_2**step) / (1 - beta_1**step) if corrected else learning_rate
        adam = rate * m / (np.sqrt(v + epsilon) if epsilon_inside else np.sqrt(v) + epsilon)
        factor = 1 - weight_decay if decay_without_rate else 1 - learning_rate * weight_decay
        return ((parameters - adam) * factor if decay_after_step else parameters * factor - adam), m, v

    return step_function


def _gpt(mistake):
    return lambda token_ids, weights, config: references._gpt_reference(token_ids, weights, config, **mistake)


def _gpt_swapped_norm(token_ids, weights, config):
    return references._gpt_reference(token_ids, weights, config, normalize_first=not config["normalize_first"])


def _narrowing(low, high, frequencies, symbol, high_minus=1, width_plus=1, floats=False, shift=0, from_new_low=False):
    """09.6 with one usual slip: high not inclusive, the width one short, float division, the share's start
    counting the symbol itself, or the new high computed from the new low."""
    cumulative = [0, *np.cumsum(frequencies).tolist()]
    total, width = cumulative[-1], high - low + width_plus
    below = cumulative[symbol + shift]  # shift 1: np.cumsum without its leading 0, the symbol counted in its own start
    through = below + int(frequencies[symbol])
    if floats:
        return low + width * below / total, low + width * through / total - 1
    new_low = low + width * below // total
    return new_low, (new_low if from_new_low else low) + width * through // total - high_minus


def _mask_with(keys_only=False, queries_only=False, strict=False, upper=False, ignore_causal=False):
    """04.6 with one usual slip: padding masked on the keys or the queries alone, the diagonal left out, the
    upper triangle, or the `causal` flag not followed."""

    def self_attention_mask(token_ids, causal):
        real = np.asarray(token_ids) != 0
        length = real.shape[1]
        mask = np.broadcast_to(real[:, None, :] if keys_only else real[:, :, None], (len(real), length, length)).copy()
        if not (keys_only or queries_only):
            mask &= real[:, :, None] & real[:, None, :]
        if causal != ignore_causal:
            mask &= (
                np.triu(np.ones((length, length), bool))
                if upper
                else np.tril(np.ones((length, length), bool), k=-1 if strict else 0)
            )
        return mask

    return self_attention_mask


def _grouped_attention_with(tile=False, scaled=True):
    def attention(query, key, value):
        repeats = query.shape[2] // key.shape[2]
        if tile:
            key, value = np.tile(key, (1, 1, repeats, 1)), np.tile(value, (1, 1, repeats, 1))
        else:
            key, value = np.repeat(key, repeats, axis=2), np.repeat(value, repeats, axis=2)
        scores = np.einsum("btnh,bsnh->bnts", query, key) / (np.sqrt(query.shape[-1]) if scaled else 1.0)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return np.einsum("bnts,bsnh->btnh", weights / weights.sum(axis=-1, keepdims=True), value)

    return attention


def _tiled_attention_with(mistake=None):
    """A student's tiled attention (one pass over key tiles, an online softmax), with one usual mistake."""

    def attention(query, key, value, mask, tile_size):
        query, key, value, mask = np.asarray(query), np.asarray(key), np.asarray(value), np.asarray(mask, bool)
        running_max, running_sum = np.full(len(query), -np.inf), np.zeros(len(query))
        output = np.zeros((len(query), value.shape[1]))
        for start in range(0, len(key), tile_size):
            scale = 1.0 if mistake == "unscaled" else np.sqrt(query.shape[1])
            scores = query @ key[start : start + tile_size].T / scale
            if mistake != "unmasked":
                scores = np.where(mask[:, start : start + tile_size], scores, -np.inf)
            new_max = np.maximum(running_max, scores.max(axis=1))
            shift = np.where(np.isinf(new_max), 0.0, new_max)
            correction = np.exp(running_max - shift)
            weights = np.exp(scores - shift[:, None])
            running_sum = running_sum * (1.0 if mistake == "sum kept" else correction) + weights.sum(axis=1)
            output = output * (1.0 if mistake == "output kept" else correction[:, None])
            output += weights @ value[start : start + tile_size]
            running_max = new_max
        return output / running_sum[:, None], np.log(running_sum) + (0.0 if mistake == "no max" else running_max)

    return attention


def _naive_attention(query, key, value, mask, tile_size):
    scores = np.where(mask, query @ key.T / np.sqrt(query.shape[1]), -np.inf)
    largest = scores.max(axis=1, keepdims=True)
    weights = np.exp(scores - largest)
    return weights @ value / weights.sum(axis=1, keepdims=True), np.log(weights.sum(axis=1)) + largest[:, 0]


def test_tiled_attention_equals_naive_attention_on_every_case_and_every_tile_size():
    """FlashAttention's claim, on the reference and a student's answer: exact (to rounding), whatever the tiles."""
    for seed in range(3):
        for _, arguments in references.REGISTRY["11.4"].cases(np.random.default_rng(seed)):
            for tile_size in (1, 2, 3, len(arguments["key"])):
                tiled = {**arguments, "tile_size": tile_size}
                for answer in (references.REGISTRY["11.4"].reference, _tiled_attention_with()):
                    for got, want in zip(answer(**tiled), _naive_attention(**tiled)):
                        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    assert evaluate("11.4", _naive_attention).passed  # the outputs alone are graded: the tiles are the lesson's
    assert evaluate("11.4", _tiled_attention_with()).passed


def _absmax_with(divisor=127, cut=False, multiplier=False):
    def quantize(weights):
        weights = np.asarray(weights, dtype="float64")
        largest = np.abs(weights).max(axis=1)
        step = np.where(largest == 0, 1.0, largest / divisor)
        integers = (np.trunc if cut else np.round)(weights / step[:, None])
        return integers, 1 / step if multiplier else step, integers * step[:, None]

    return quantize


def _groupwise_int4_with(divisor=7, whole_row=False, cut=False, multiplier=False, tiled=False):
    def quantize(weights, group_size):
        weights = np.asarray(weights, dtype="float64")
        size = weights.shape[1] if whole_row else group_size
        groups = weights.reshape(len(weights), -1, size)
        largest = np.abs(groups).max(axis=2)
        step = np.where(largest == 0, 1.0, largest / divisor)
        integers = (np.trunc if cut else np.round)(groups / step[..., None]).reshape(weights.shape)
        spread = np.tile(step, (1, size)) if tiled else np.repeat(step, size, axis=1)
        return integers, 1 / step if multiplier else step, integers * spread

    return quantize


def _shard_gradients(x, y, w, devices, divide_by_batch=False, total=False, two=True):
    shards = [(2 if two else 1) / (len(y) if divide_by_batch else len(rows_y)) * rows_x.T @ (rows_x @ w - rows_y)
              for rows_x, rows_y in zip(np.split(x, devices), np.split(y, devices))]  # fmt: skip
    return np.array(shards), np.sum(shards, axis=0) if total else np.mean(shards, axis=0)


# Each usual mistake of the exercises with a hint: (exercise id, the mistaken function, words its hint says).
USUAL_MISTAKES = [
    ("01.2", _lstm_forget_gate_first, "input and forget gates are swapped"),
    ("02.1", lambda query, keys, weight: keys @ weight.T @ query, "`weight` transposed"),
    ("03.3", _encode_leftmost_first, "lowest **rank**"),
    ("03.3", _encode_one_merge, "look at the new neighbours again"),
    ("04.4", _sines_then_cosines, "interleave them"),
    ("04.5", _attention_scaled_by_the_width, "divide by √H"),
    ("04.6", _mask_with(keys_only=True), "a padded query attends to nothing"),
    ("04.6", _mask_with(queries_only=True), "no query may attend to a padded key"),
    ("04.6", _mask_with(strict=True), "leaves out the diagonal"),
    ("04.6", _mask_with(upper=True), "the causal part is reversed"),
    ("04.6", _mask_with(ignore_causal=True), "`causal` is not followed"),
    ("05.3", _encoder_block_swapped_norm, "normalise"),
    ("06.2", _mean_over_every_position, "divided by T"),
    ("07.3", _loss_with_padding, "padding was counted"),
    ("07.4", _finished_not_normalised, "not length-normalised"),
    ("07.5", _warmup_from_zero, "step 0 got a rate of 0"),
    ("07.6", _adam_with_l2, "went through the gradient"),
    ("07.6", _adam_with(epsilon_inside=True), "ε went inside the square root"),
    ("07.6", _adam_with(corrected=False), "not bias-corrected"),
    ("09.3", _step_over_the_whole_cache, "positions after `index` hold stale values"),
    ("09.4", _bits_in_nats, "divide the natural-log sum by ln 2"),
    (
        "09.6",
        lambda low, high, frequencies, symbol: _narrowing(low, high, frequencies, symbol, high_minus=0),
        "high is inclusive",
    ),
    (
        "09.6",
        lambda low, high, frequencies, symbol: _narrowing(low, high, frequencies, symbol, width_plus=0),
        "holds high - low + 1 integers",
    ),
    (
        "09.6",
        lambda low, high, frequencies, symbol: _narrowing(low, high, frequencies, symbol, floats=True),
        "floor division",
    ),
    (
        "09.6",
        lambda low, high, frequencies, symbol: _narrowing(low, high, frequencies, symbol, shift=1),
        "the sum of the frequencies *before* it",
    ),
    (
        "09.6",
        lambda low, high, frequencies, symbol: _narrowing(low, high, frequencies, symbol, from_new_low=True),
        "from the old low",
    ),
    ("09.5", _gpt({"causal": False}), "without the causal mask"),
    ("09.5", _gpt({"positions_after_blocks": True}), "added after the blocks"),
    ("09.5", _gpt_swapped_norm, "where the config says"),
    (
        "04.2",
        lambda x, num_heads: x.reshape(x.shape[0], num_heads, x.shape[1], -1),
        "reshape to (B, T, N, H) first",
    ),
    ("04.3", lambda x: x.reshape(x.shape[0], x.shape[2], -1), "transpose (B, N, T, H) to (B, T, N, H)"),
    ("06.1", lambda values, mask: values.max(axis=1), "padding positions took part"),
    ("09.1", _softmax_with_one_global_maximum, "each row's own maximum"),
    ("09.2", _nucleus_below_p, "at most p (<="),
    ("03.4", _skipgram_window(-1), "only `window` - 1 positions"),
    ("03.4", _skipgram_window(+1), "`window` + 1 positions"),
    ("04.4", _positions_from_one, "positions start at 1"),
    ("04.5", _heads_flattened_unmoved, "flattened in the wrong order"),
    ("05.3", _norm_on_the_output, "x + LayerNorm(F(x))"),
    ("05.3", _mask_on_the_queries, "applied to the queries, not the keys"),
    ("07.3", _loss_masked_by_the_inputs, "the mask came from the decoder inputs"),
    ("07.4", _penalty_one_longer, "the length penalty used a length of"),
    ("07.5", _warmup_one_step_longer, "went above the peak"),
    ("07.6", _adam_with(decay_without_rate=True), "left out the learning rate"),
    ("07.6", _adam_with(decay_after_step=True), "applied after the step"),
    ("09.3", _cache_written_one_later, "the new key was written at position"),
    ("11.3", _grouped_attention_with(tile=True), "np.repeat along the heads' axis"),
    ("11.3", _grouped_attention_with(scaled=False), "not divided by √H"),
    ("11.4", _tiled_attention_with("output kept"), "output accumulated so far was not rescaled"),
    ("11.4", _tiled_attention_with("sum kept"), "running sum was not rescaled"),
    ("11.4", _tiled_attention_with("unscaled"), "not divided by √H"),
    ("11.4", _tiled_attention_with("unmasked"), "mask was not applied"),
    ("11.4", _tiled_attention_with("no max"), "left out the maximum"),
    ("12.1", _absmax_with(multiplier=True), "a multiplier"),
    ("12.1", _absmax_with(divisor=255), "divides by 255"),
    ("12.1", _absmax_with(cut=True), "cut, not rounded"),
    ("12.4", _groupwise_int4_with(divisor=8), "divides by 8"),
    ("12.4", _groupwise_int4_with(whole_row=True), "one scale for the whole row"),
    ("12.4", _groupwise_int4_with(cut=True), "cut, not rounded"),
    ("12.4", _groupwise_int4_with(multiplier=True), "a multiplier"),
    ("12.4", _groupwise_int4_with(tiled=True), "np.tile"),
    ("12.2", lambda kernel, a, b, alpha: kernel + a @ b, "without its scale"),
    ("12.2", lambda kernel, a, b, alpha: kernel + alpha * a @ b, "scaled by α"),
    ("12.3", lambda x, y, w, devices: _shard_gradients(x, y, w, devices, total=True), "added up"),
    ("12.3", lambda x, y, w, devices: _shard_gradients(x, y, w, devices, divide_by_batch=True), "whole batch's B"),
    ("12.3", lambda x, y, w, devices: _shard_gradients(x, y, w, devices, two=False), "factor 2"),
    ("12.2", lambda kernel, a, b, alpha: kernel + alpha / a.shape[0] * a @ b, "first axis"),
]


@pytest.mark.parametrize("exercise_id, mistake, words", USUAL_MISTAKES)
def test_usual_mistakes_get_a_hint(exercise_id, mistake, words):
    verdict = evaluate(exercise_id, mistake)
    assert verdict.status == "failed" and "Hint:" in verdict.message and words in verdict.message, verdict.message


def _gpt_final_norm_by_layout(token_ids, weights, config):
    kept = {name: value for name, value in weights.items() if name != "final_norm" or config["normalize_first"]}
    return references._gpt_reference(token_ids, kept, config)


@pytest.mark.parametrize(
    "mistake",
    [
        _gpt_final_norm_by_layout,
        lambda token_ids, weights, config: references._gpt_reference(
            token_ids, weights, {**config, "layer_norm_epsilon": 1e-5}
        ),
        lambda token_ids, weights, config: references._gpt_reference(
            token_ids, weights, {**config, "activation": "gelu_approximate" if config["normalize_first"] else "relu"}
        ),
    ],
    ids=["final norm by layout", "epsilon hard-coded", "activation by layout"],
)
def test_09_5_settings_read_off_the_layout_fail(mistake):
    # The layout, the activation, the final norm and epsilon are independent settings: an answer that
    # infers one from another fails the public cases and every seed of the hidden ones.
    assert evaluate("09.5", mistake).status == "failed"
    assert not any(evaluate_hidden("09.5", mistake, seed=seed).passed for seed in range(5))


def _merge_by_replacing(words, counts):
    """A usual mistake: merge with a space-padded str.replace, which skips a pair right after another."""
    pair, _ = references.expected("03.2", {"words": words, "counts": counts})
    first, second = pair.split(" ")
    return pair, [f" {word} ".replace(f" {first} {second} ", f" {first}{second} ").strip() for word in words]


def test_merging_by_string_replacement_fails_03_2():
    # " a a a a ".replace(" a a ", " aa ") gives "aa a a": the second pair starts at the space the first used.
    assert evaluate("03.2", _merge_by_replacing).status == "failed"
    assert not any(evaluate_hidden("03.2", _merge_by_replacing, seed=seed).passed for seed in range(20))


def _beam_step(ties_reversed=False, stop_at_minus_infinity=True):
    def beam_step(scores, log_probabilities, beam_width, end_id, step, alpha):
        vocabulary = log_probabilities.shape[1]
        candidates = (scores[:, None] + log_probabilities).ravel()
        order = np.argsort(candidates, kind="stable")[::-1] if ties_reversed else np.argsort(-candidates, kind="stable")
        live, finished = [], []
        for flat in order[: 2 * beam_width]:
            if stop_at_minus_infinity and not np.isfinite(candidates[flat]):
                break
            parent, token = divmod(int(flat), vocabulary)
            if token == end_id:
                finished.append((parent, candidates[flat] / ((5 + step) / 6) ** alpha))
            else:
                live.append((parent, token, candidates[flat]))
                if len(live) == beam_width:
                    break
        parents, tokens, kept = (np.array(column) for column in zip(*live)) if live else (np.array([]),) * 3
        ended, ended_scores = (np.array(column) for column in zip(*finished)) if finished else (np.array([]),) * 2
        return (
            parents.astype("int64"),
            tokens.astype("int64"),
            kept.astype("float64"),
            ended.astype("int64"),
            ended_scores.astype("float64"),
        )

    return beam_step


@pytest.mark.parametrize(
    "mistake",
    [_beam_step(ties_reversed=True), _beam_step(stop_at_minus_infinity=False)],
    ids=["ties: the higher k x V + v first", "no stop at -inf"],
)
def test_07_4_cases_hold_a_tie_and_an_impossible_extension(mistake):
    assert evaluate("07.4", mistake).status == "failed"
    assert not any(evaluate_hidden("07.4", mistake, seed=seed).passed for seed in range(10))


def test_the_beam_step_without_the_mistakes_passes():
    assert evaluate("07.4", _beam_step()).passed and evaluate_hidden("07.4", _beam_step(), seed=3).passed


def test_show_case_prints_a_public_case_with_its_expected_output(capsys):
    exercises.show_case("07.4")
    printed = capsys.readouterr().out
    label, arguments, expected = exercises.public_cases("07.4")[0]
    assert printed.startswith(f"Exercise 07.4, public case 1 of {len(exercises.public_cases('07.4'))}: {label}")
    assert "beam_step(" in printed and f"beam_width={arguments['beam_width']}," in printed
    assert f"expected the parents: {np.array2string(expected[0])}" in printed
    with pytest.raises(ValueError, match="`number` must be 1 to 4 for exercise 07.4; received 9"):
        exercises.show_case("07.4", 9)
    with pytest.raises(KeyError, match="unknown exercise '99.9'"):
        exercises.show_case("99.9")


def test_greedy_decoding_that_never_stops_gets_a_hint():
    def never_stops(next_token_probabilities, start_ids, end_id, max_length):
        decoded = np.asarray(start_ids, dtype="int64").reshape(-1, 1)
        for _ in range(max_length):
            decoded = np.concatenate([decoded, np.argmax(next_token_probabilities(decoded), axis=-1)[:, None]], axis=1)
        return decoded

    verdict = evaluate("07.2", never_stops)
    assert verdict.status == "failed" and "goes on after it produced `end_id`" in verdict.message, verdict.message


def test_a_hint_never_turns_an_odd_answer_into_a_crash():
    verdict = evaluate("04.1", lambda query, key, value, mask=None: ("not", "arrays"))
    assert verdict.status == "failed" and "Traceback" not in verdict.message


# --- 08.3: judged by properties, since every right answer is a different random draw ------------


def _bert_corruption_variant(change):
    def answer(**arguments):
        corrupted, labels = references.answer("08.3", arguments)
        return change(np.asarray(arguments["token_ids"]), corrupted.copy(), labels.copy(), arguments)

    return answer


def _everything_masked(token_ids, corrupted, labels, arguments):
    return np.where(labels != 0, arguments["mask_token_id"], corrupted), labels


def _padding_chosen(token_ids, corrupted, labels, arguments):
    labels[token_ids == 0] = 5
    return corrupted, labels


def _labels_everywhere(token_ids, corrupted, labels, arguments):
    return corrupted, np.where(np.isin(token_ids, [0, *arguments["special_ids"]]), 0, token_ids)


def _unchosen_changed(token_ids, corrupted, labels, arguments):
    return np.where((labels == 0) & (token_ids > 9), token_ids + 1, corrupted), labels


def _thirty_percent(token_ids, corrupted, labels, arguments):
    rng = np.random.default_rng(arguments["seed"])
    chosen = ~np.isin(token_ids, [0, *arguments["special_ids"]]) & (rng.random(token_ids.shape) < 0.3)
    return np.where(chosen, arguments["mask_token_id"], token_ids), np.where(chosen, token_ids, 0)


@pytest.mark.parametrize(
    "change, message",
    [
        (_everything_masked, "replaced by [MASK]"),
        (_padding_chosen, "never chosen"),
        (_labels_everywhere, "of the tokens that may be chosen were chosen"),
        (_unchosen_changed, "was not chosen (label 0), but its token changed"),
        (_thirty_percent, "expected 15%"),
    ],
    ids=lambda value: getattr(value, "__name__", "message"),
)
def test_bert_corruption_mistakes_fail_on_public_and_secret_cases(change, message):
    from transformer_course_grader import evaluate_hidden

    for verdict in (
        evaluate("08.3", _bert_corruption_variant(change)),
        evaluate_hidden("08.3", _bert_corruption_variant(change), seed=11),
    ):
        assert verdict.status == "failed" and message in verdict.message, verdict.message


@pytest.mark.parametrize("seed", [3, 11, 12345])
def test_right_bert_corruption_answers_pass_at_any_seed(seed):
    from transformer_course_grader import evaluate_hidden

    assert evaluate_hidden("08.3", _reference("08.3"), seed=seed).passed


def _masking_of(rows, randomised):
    """`rows` rows of 20 ordinary tokens, the first 3 of each chosen (15%): the first `randomised` of those
    replaced by another id, the rest by [MASK] (id 1)."""
    token_ids = np.tile(np.arange(10, 30), (rows, 1))
    labels = np.where(np.arange(20) < 3, token_ids, 0)
    corrupted = np.where(np.arange(20) < 3, 1, token_ids)
    corrupted[:, :randomised] = 500
    arguments = {"token_ids": token_ids, "vocabulary_size": 1000, "mask_token_id": 1, "special_ids": [1, 2, 3]}
    return arguments, (corrupted, labels)


def test_a_rare_draw_of_a_right_answer_passes_and_the_same_rates_of_many_tokens_fail():
    """Every chosen token randomised: a right answer draws it for 3 chosen tokens once in a thousand (a band of
    5 standard deviations refused it), and for 3,000 never."""
    from transformer_course.exercises.catalog import _bert_corruption_properties

    expected = {"selection": 0.15, "mask": 0.8, "random": 0.1}  # what the reference gives
    assert _bert_corruption_properties(*_masking_of(1, randomised=3), expected) is None
    message = _bert_corruption_properties(*_masking_of(1000, randomised=3), expected)
    assert message.startswith("0.00% of the chosen tokens were replaced by [MASK] (0 of 3,000); expected 80%: a right")


@pytest.mark.parametrize("total, target", [(3, 0.1), (18, 0.15), (300, 0.8), (2_000, 0.1), (13_000, 0.8)])
def test_a_right_answer_falls_outside_the_accepted_rates_less_than_once_in_a_billion(total, target):
    """The accepted rates against SciPy's exact binomial tails, on each side: the counts refused are rarer than
    one in a billion for a right answer, and (where a side refuses any) not needlessly rarer than 1e-12."""
    from scipy.stats import binom

    from transformer_course.exercises.catalog import _plausible_rates

    lowest, highest = _plausible_rates(total, target)
    below = binom.cdf(math.ceil(lowest * total) - 1, total, target)  # a count below the lowest rate
    above = binom.sf(math.floor(highest * total), total, target)  # a count above the highest
    assert lowest < target < highest and below < 1e-9 and above < 1e-9
    assert lowest == 0 or below > 1e-12
    assert highest == 1 or above > 1e-12


def _equal(first, second) -> bool:
    """Deep equality of two case arguments: dicts, lists, tuples, arrays and next-token tables."""
    if isinstance(first, dict) or isinstance(second, dict):
        return (
            isinstance(first, dict)
            and isinstance(second, dict)
            and first.keys() == second.keys()
            and all(_equal(first[key], second[key]) for key in first)
        )
    if isinstance(first, (list, tuple)) and first and isinstance(first[0], (dict, list, tuple)):
        return (
            isinstance(second, (list, tuple))
            and len(first) == len(second)
            and all(_equal(a, b) for a, b in zip(first, second))
        )
    first, second = (getattr(value, "table", value) for value in (first, second))
    return np.array_equal(np.asarray(first), np.asarray(second))


@pytest.mark.parametrize("exercise_id", list(EXERCISES))
def test_a_lookup_table_of_the_public_outputs_fails_the_secret_cases(exercise_id):
    """The grading cases are drawn from the secret seed: remembering the public answers earns nothing."""
    from transformer_course.exercises.catalog import public_cases
    from transformer_course_grader import evaluate_hidden

    table = [(arguments, references.answer(exercise_id, arguments)) for _, arguments, _ in public_cases(exercise_id)]

    def look_up(**arguments):
        for known, output in table:
            if all(_equal(known[key], value) for key, value in arguments.items()):
                return output
        return table[0][1]

    assert evaluate(exercise_id, look_up).passed
    assert not evaluate_hidden(exercise_id, look_up, seed=11).passed


def test_a_float16_answer_is_told_the_digits_that_differ_and_the_tolerance():
    from transformer_course.exercises.compare import compare_outputs

    expected = np.array([-1.12345678, 0.5], dtype="float64")
    message = compare_outputs(expected, expected.astype("float16"))  # float16 holds -1.123046875
    expected_text, received_text = message.split("expected ")[1].split(" (")[0].split(", received ")
    assert (expected_text, received_text) == ("-1.1235", "-1.123")  # 4 digits would show -1.123 and -1.123
    assert "a difference up to 1e-05 + 1e-05 × |expected| is allowed" in message


def _scalar_results():
    """Every scalar a function may return whose own check accepts it: NumPy scalars, 0-d arrays, Python numbers,
    and a 0-d tensor."""
    import keras

    values = {
        f"np.{name}": getattr(np, name)(3)
        for name in (
            "float16",
            "float32",
            "float64",
            "longdouble",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint64",
        )
    }
    values |= {
        "np.bool_": np.bool_(True),
        "0-d float32 array": np.array(1.5, dtype=np.float32),
        "0-d int64 array": np.array(7),
        "float": 1.5,
        "int": 7,
        "bool": True,
        "negative float": -0.25,
        "tensor": keras.ops.convert_to_tensor(np.float32(2.5)),
        "float64 in a tuple": (np.float64(0.5), np.float32(2.0)),
    }
    return values


@pytest.mark.parametrize("name", list(_scalar_results()))
def test_every_scalar_crosses_the_kernel_boundary_with_its_shape_and_value(name):
    """What the graded kernel replies (``encode(plain_value(result))``) decodes to the same shape, dtype kind and
    value, and is judged as the student's own check judges the result itself."""
    from transformer_course.exercises.compare import compare_outputs
    from transformer_course.exercises.values import decode, encode, plain_value

    result = _scalar_results()[name]
    local = plain_value(result)
    received = decode(encode(local))
    for before, after in zip(
        local if isinstance(local, tuple) else (local,),
        received if isinstance(received, tuple) else (received,),
        strict=True,
    ):
        assert np.shape(after) == np.shape(before) == ()
        assert np.asarray(after).dtype == np.asarray(before).dtype or type(after) is type(before)
        np.testing.assert_equal(np.asarray(after), np.asarray(before))
        assert compare_outputs(np.asarray(before).item(), after) is None


@pytest.mark.parametrize("exercise_id", ["08.1", "09.4"])
def test_a_numpy_scalar_loss_is_judged_after_the_boundary_as_the_check_judges_it(exercise_id):
    """08.1's loss as ``-np.log(p).mean()`` (an np.float64), and 09.4's pair of them, through the grader's value
    format: each style the student's check accepts is accepted after it too."""
    from transformer_course.exercises.values import decode, encode, plain_value

    exercise = EXERCISES[exercise_id]
    for label, arguments, expected in exercises.public_cases(exercise_id):
        for style in (np.float64, np.float32, np.asarray, float):
            returned = tuple(style(x) for x in expected) if isinstance(expected, tuple) else style(expected)
            assert exercise.judge(arguments, returned, expected) is None, (label, style)  # the check
            assert exercise.judge(arguments, decode(encode(plain_value(returned))), expected) is None, (label, style)


def test_a_passing_check_says_it_ran_the_public_cases_and_that_new_ones_grade(capsys):
    from transformer_course_grader.references import _one_hot_encode_reference

    check("01.1", _one_hot_encode_reference)
    printed = capsys.readouterr().out
    assert printed.startswith("✓ Exercise 01.1: ") and "public cases match" in printed, printed
    assert "Graded on new cases of the same kind (2 points)." in printed, printed


# --- 13: post-training. Each usual mistake fails the public and the secret cases, and its hint names it ----------


def _chosen_log_probabilities(probabilities, targets):
    chosen = np.take_along_axis(np.asarray(probabilities, "float64"), np.asarray(targets)[..., None], axis=-1)
    return np.log(chosen[..., 0])


def _prompt_masked(counted, reduce="mean"):
    """13.1 with the counted targets chosen by `counted(positions, prompt_lengths, real)`."""

    def answer(probabilities, targets, prompt_lengths):
        log_p, targets = _chosen_log_probabilities(probabilities, targets), np.asarray(targets)
        where = counted(np.arange(targets.shape[1])[None], np.asarray(prompt_lengths)[:, None], targets != 0)
        return float(-log_p[where].sum() / (where.sum() if reduce == "mean" else 1))

    return answer


def _log_softmax(logits):
    shifted = np.asarray(logits, "float64") - np.max(logits, axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _sequence(kind):
    def answer(logits, targets, mask):
        mask, targets = np.asarray(mask, "float64"), np.asarray(targets)[..., None]
        if kind == "raw logits":
            return (np.take_along_axis(np.asarray(logits, "float64"), targets, axis=-1)[..., 0] * mask).sum(axis=-1)
        chosen = np.take_along_axis(_log_softmax(logits), targets, axis=-1)[..., 0]
        return {
            "probabilities": (np.exp(chosen) * mask).sum(axis=-1),
            "every position": chosen.sum(axis=-1),
            "mean": (chosen * mask).sum(axis=-1) / mask.sum(axis=-1),
        }[kind]

    return answer


def _dpo(kind):
    def answer(policy_chosen, policy_rejected, reference_chosen, reference_rejected, beta):
        chosen, rejected = np.asarray(policy_chosen, "float64"), np.asarray(policy_rejected, "float64")
        margin = beta * ((chosen - reference_chosen) - (rejected - reference_rejected))
        return {
            "no reference": np.logaddexp(0, -beta * (chosen - rejected)),
            "no beta": np.logaddexp(0, -margin / beta),
            "sign": np.logaddexp(0, margin),
            "negated": -np.logaddexp(0, -margin),
            "mean": np.logaddexp(0, -margin).mean(),
        }[kind]

    return answer


def _grpo(kind):
    def answer(rewards, log_probabilities, old_log_probabilities, mask, clip_epsilon):
        rewards = np.asarray(rewards, "float64")
        spread = rewards.std(ddof=1 if kind == "G - 1" else 0)
        advantages = rewards - rewards.mean() if kind == "not divided" else (rewards - rewards.mean()) / (spread + 1e-4)
        ratio = np.exp(np.asarray(log_probabilities) - np.asarray(old_log_probabilities))
        plain, clipped = (
            ratio * advantages[:, None],
            np.clip(ratio, 1 - clip_epsilon, 1 + clip_epsilon) * advantages[:, None],
        )
        per_token = {"no clip": plain, "max": np.maximum(plain, clipped), "clipped only": clipped}.get(
            kind, np.minimum(plain, clipped)
        )
        weights = np.asarray(mask, "float64")
        if kind == "one mean":
            return advantages, float((per_token * weights).sum() / weights.sum())
        return advantages, float(((per_token * weights).sum(axis=1) / weights.sum(axis=1)).mean())

    return answer


def _kl(kind):
    def answer(q, p, samples):
        q, p = np.asarray(q, "float64"), np.asarray(p, "float64")
        drawn = np.arange(len(q)) if kind == "outcomes" else np.asarray(samples)
        log_ratio = np.log(p[drawn] / q[drawn]) * (-1 if kind == "upside down" else 1)
        k3 = np.expm1(log_ratio) - log_ratio
        estimates = np.array([-log_ratio, (1.0 if kind == "no half" else 0.5) * log_ratio**2,
                              -k3 if kind == "k3 sign" else k3]).mean(axis=1)  # fmt: skip
        exact = np.sum(p * np.log(p / q)) if kind == "reversed" else np.sum(q * np.log(q / p))
        if kind == "bits":
            return float(exact / np.log(2)), estimates / np.log(2)
        return float(exact), estimates

    return answer


POST_TRAINING_MISTAKES = [
    ("13.1", _prompt_masked(lambda position, start, real: real), "prompt's too"),
    ("13.1", _prompt_masked(lambda position, start, real: (position >= start) & real), "one target late"),
    ("13.1", _prompt_masked(lambda position, start, real: position >= start - 1), "padding"),
    ("13.1", _prompt_masked(lambda position, start, real: (position >= start - 1) & real, reduce="sum"), "sum"),
    ("13.1", _prompt_masked(lambda position, start, real: np.ones_like(real)), "the padding's too"),
    ("13.2", _sequence("raw logits"), "log softmax"),
    ("13.2", _sequence("probabilities"), "their logs"),
    ("13.2", _sequence("every position"), "every position"),
    ("13.2", _sequence("mean"), "their sum"),
    ("13.3", _dpo("no reference"), "reference"),
    ("13.3", _dpo("no beta"), "β is missing"),
    ("13.3", _dpo("sign"), "sign"),
    ("13.3", _dpo("negated"), "minus sign"),
    ("13.3", _dpo("mean"), "one loss per pair"),
    ("13.4", _grpo("G - 1"), "G − 1"),
    ("13.4", _grpo("not divided"), "standard deviation"),
    ("13.4", _grpo("no clip"), "not clipped"),
    ("13.4", _grpo("max"), "max"),
    ("13.4", _grpo("clipped only"), "clipped term alone"),
    ("13.4", _grpo("one mean"), "one mean"),
    ("13.5", _kl("upside down"), "upside down"),
    ("13.5", _kl("reversed"), "other direction"),
    ("13.5", _kl("no half"), "without its ½"),
    ("13.5", _kl("k3 sign"), "sign turned"),
    ("13.5", _kl("bits"), "in bits"),
    ("13.5", _kl("outcomes"), "over the outcomes"),
]


@pytest.mark.parametrize("exercise_id, mistake, words", USUAL_MISTAKES + POST_TRAINING_MISTAKES)
def test_a_usual_mistake_keeps_at_most_a_tenth_of_the_points_on_average_over_seeds(exercise_id, mistake, words):
    """Partial credit only from cases that can show a mistake: the cases a usual mistake gets right are those
    where it changes nothing (before this rule 28 of 74 kept more than a tenth, 5 a third or more)."""
    kept = [score_in_process(exercise_id, mistake, seed, student="s").points for seed in range(5)]
    assert np.mean(kept) <= 0.1 * EXERCISES[exercise_id].points, (words, kept)


@pytest.mark.parametrize("exercise_id, mistake, words", POST_TRAINING_MISTAKES)
def test_post_training_mistakes_fail_every_case_and_get_their_hint(exercise_id, mistake, words):
    verdict = evaluate(exercise_id, mistake)
    assert verdict.status == "failed" and "Hint:" in verdict.message and words in verdict.message, verdict.message
    assert not any(evaluate_hidden(exercise_id, mistake, seed=seed).passed for seed in range(5))


def _float32(*arrays):
    return [np.asarray(array, "float32") for array in arrays]


def _kl_with_the_package(q, p, samples):
    q, p = np.asarray(q, "float32"), np.asarray(p, "float32")
    estimates = post_training.kl_estimates(np.log(q[samples]), np.log(p[samples]))
    return float(np.sum(q * np.log(q / p))), np.array([value.mean() for value in estimates], "float32")


POST_TRAINING_IN_FLOAT32 = {  # the package's own functions, in single precision, as a student's Keras answer would be
    "13.1": lambda probabilities, targets, prompt_lengths: float(
        -np.sum(
            keras.ops.convert_to_numpy(post_training.target_log_probabilities(*_float32(probabilities), targets))
            * (counted := keras.ops.convert_to_numpy(post_training.answer_mask(targets, prompt_lengths)))
        )
        / counted.sum()
    ),
    "13.2": lambda logits, targets, mask: keras.ops.convert_to_numpy(
        post_training.sequence_log_probabilities(
            post_training.target_log_probabilities(keras.ops.softmax(*_float32(logits)), targets), mask
        )
    ),
    "13.3": lambda beta, **pairs: keras.ops.convert_to_numpy(
        post_training.dpo_loss(*_float32(*(pairs[name] for name in sorted(pairs))), beta=beta).loss
    ),
    "13.4": lambda rewards, log_probabilities, old_log_probabilities, mask, clip_epsilon: (
        (advantages := post_training.group_advantages(np.asarray(rewards)[None])[0]),
        -float(
            post_training.grpo_loss(
                *_float32(log_probabilities, old_log_probabilities, old_log_probabilities, advantages),
                mask,
                clip_epsilon=clip_epsilon,
                kl_coefficient=0.0,
            ).loss
        ),
    ),
    "13.5": _kl_with_the_package,
}


@pytest.mark.parametrize("exercise_id", sorted(POST_TRAINING_IN_FLOAT32))
def test_post_training_answers_in_float32_pass_and_the_package_agrees_with_the_references(exercise_id):
    answer = POST_TRAINING_IN_FLOAT32[exercise_id]
    assert evaluate(exercise_id, answer).status == "passed", evaluate(exercise_id, answer).message
    assert all(evaluate_hidden(exercise_id, answer, seed=seed).passed for seed in range(5))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float32", "float64"])
def test_absmax_integers_in_any_numeric_dtype_the_statement_allows_pass_public_and_secret_cases(dtype):

    def absmax_int8(weights):
        weights = np.asarray(weights, dtype="float64")
        largest = np.abs(weights).max(axis=1)
        scales = np.where(largest > 0, largest / 127, 1.0)
        integers = np.round(weights / scales[:, None]).astype(dtype)
        return integers, scales, integers * scales[:, None]

    assert evaluate("12.1", absmax_int8).passed and evaluate_hidden("12.1", absmax_int8, seed=5).passed


def test_a_hint_never_names_a_mistake_that_changes_nothing_on_the_case():
    # The lesson's batch of 04.6 pads only at the end: with a causal mask, masking the padded keys changes nothing
    # there, so a right mask of another dtype (int) must not be told "mask the columns of padding positions".
    right = references.REGISTRY["04.6"].reference
    verdict = evaluate("04.6", lambda token_ids, causal: np.asarray(right(token_ids, causal)).astype("int32"))
    assert "should hold bool values" in verdict.message and "Hint" not in verdict.message


def test_the_check_says_what_the_grader_would_refuse_as_the_cells_ran():
    """A right function whose code the grader's source policy refuses is not told ✓: the check reads the
    cells as this kernel ran them (In [n]) the way the grader reads the notebook, and names what it refuses."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        cells = [
            "import os\nimport numpy as np",
            "def causal_mask(length):\n    os.getpid()\n    return np.tril(np.ones((length, length), dtype=bool))",
            "from transformer_course.exercises import check\ncheck('07.1', causal_mask)",
        ]
        outputs = []
        for cell in cells:
            with capture_output() as captured:
                shell.run_cell(cell, store_history=True)
            outputs.append(captured.stdout)
        assert outputs[-1].startswith("✗ Exercise 07.1: the public cases match, but the grader would not run this")
        assert "which imports os, which graded code may not use" in outputs[-1], outputs[-1]
        with capture_output() as captured:  # the same function without os: ✓
            shell.run_cell("def causal_mask(length):\n    return np.tril(np.ones((length, length), dtype=bool))",
                           store_history=True)  # fmt: skip
            shell.run_cell("check('07.1', causal_mask)", store_history=True)
        assert captured.stdout.startswith("✓ Exercise 07.1"), captured.stdout
    finally:
        InteractiveShell.clear_instance()


@contextlib.contextmanager
def capture_output():
    """stdout of the statements inside, as ``.stdout``."""
    import io

    buffer, holder = io.StringIO(), types.SimpleNamespace(stdout="")
    with contextlib.redirect_stdout(buffer):
        yield holder
    holder.stdout = buffer.getvalue()
