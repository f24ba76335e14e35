"""The course's graded exercises as students see them: names, points, and the public cases.

Every exercise is a plain NumPy/Python function, so a check runs in milliseconds with no model,
no download and no GPU. A student's instant check runs the function on the exercise's public
cases, stored with their expected outputs in ``public_cases.json`` beside this file. The
references and the generators of the secret grading cases are not here: they live only in the
grader (:mod:`transformer_course_grader.references`).
"""

from __future__ import annotations

import collections
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from . import hints
from .compare import compare_outputs
from .hints import _same, equal_at
from .values import decode, plain_value

__all__ = ["Exercise", "EXERCISES", "STUDY_MINUTES", "public_cases", "catalogue_table"]

PUBLIC_CASES = Path(__file__).with_name("public_cases.json")


@dataclass(frozen=True)
class Exercise:
    """One graded exercise.

    Attributes:
        id: str, ``"NN.k"``: notebook NN, exercise k.
        title: str, shown in verdicts and reports.
        function_name: str, the name of the function the student writes.
        points: int.
        extra_check: optional callable ``(arguments, received) -> problem or None``, run before the
            outputs are compared (a property the comparison alone would not name, like a mask leak).
        atol: float, the absolute tolerance for float outputs.
        output_names: how feedback names the output (one name), or the items of a returned tuple.
        hint: optional callable ``(arguments, received, expected) -> str or None``: when the
            output is wrong, recognises a usual mistake (a missing √d_k, a transposed weight) and
            says so after the difference.
        properties: optional callable ``(arguments, received, expected) -> problem or None`` for
            an exercise whose right answers are random (a draw from a seeded generator): it judges
            ``received`` by the properties every right answer has, and ``expected`` describes
            them (target rates, what must never happen) instead of being one output to equal.
        compared: optional callable ``(arguments) -> bool array`` over the output's leading axes:
            only those entries are compared (a language model's logits at real tokens, not at
            padding); the shapes must still match.
        whole_numbers: indices of the returned tuple's items that hold whole numbers and may come in any
            numeric dtype, as the statement allows (12.1's integers: int8 or float): an integer array
            there is compared as the floats it holds.
        partial_credit: bool, whether the grader gives the share of the secret cases passed when
            some fail (it does only where an exercise has three secret cases or more); False keeps
            the exercise all or nothing, for one whose cases are one idea tried several times.
    """

    id: str
    title: str
    function_name: str
    points: int
    extra_check: Callable | None = None
    atol: float = 1e-5
    output_names: tuple[str, ...] = ("the result",)
    hint: Callable | None = None
    properties: Callable | None = None
    compared: Callable | None = None
    partial_credit: bool = True
    whole_numbers: tuple[int, ...] = ()

    @property
    def notebook(self) -> str:
        return self.id.split(".")[0]

    def judge(self, arguments: dict, received, expected, mistakes=()) -> str | None:
        """None if ``received`` equals ``expected`` (the reference output on ``arguments``), else what is wrong.

        ``received`` goes through :func:`~transformer_course.exercises.values.plain_value` first,
        as the grader's replies do, so a tensor is judged like the array it holds. ``mistakes`` are the
        case's usual mistakes as data, ``[(message, output, compared where or None, tolerance), ...]`` (a
        public case's from ``public_cases.json``, :func:`public_mistakes`; the grader's own on a secret
        case): a wrong result equal to one of them gets its message as the hint.
        """
        try:
            received = plain_value(received)
        except ValueError as error:
            return f"the result cannot be read: {error}."
        if self.whole_numbers and isinstance(received, (tuple, list)):
            received = tuple(
                np.asarray(item, dtype="float64")
                if index in self.whole_numbers and np.asarray(item).dtype.kind in "iu"
                else item
                for index, item in enumerate(received)
            )
        if self.extra_check is not None:
            problem = self.extra_check(arguments, received)
            if problem:
                return problem
        if self.properties is not None:
            with np.errstate(all="ignore"):
                return self.properties(arguments, received, expected)
        if self.compared is not None:
            problem = _compare_selected(self.compared(arguments), expected, received, self.atol, self.output_names[0])
        elif isinstance(expected, tuple):
            problem = compare_outputs(expected, received, self.atol, names=self.output_names)
        else:
            problem = compare_outputs(expected, received, self.atol, path=self.output_names[0])
        if problem and self.hint is not None:
            try:
                with np.errstate(all="ignore"):
                    hint = self.hint(arguments, received, expected)
            except Exception:  # noqa: BLE001 - a hint is a bonus; a student's odd output must not break it
                hint = None
            if hint:
                problem = f"{problem} Hint: {hint}"
        elif problem and mistakes:
            with np.errstate(all="ignore"):
                hint = next(
                    (message for message, output, where, atol in mistakes if equal_at(received, output, atol, where)),
                    None,
                )
            if hint:
                problem = f"{problem} Hint: {hint}"
        return problem


def _compare_selected(selected, expected, received, atol, name) -> str | None:
    """Compare only the entries ``selected`` picks (a bool array over the leading axes); shapes first."""
    expected = np.asarray(expected)
    try:
        received_array = np.asarray(received)
    except Exception:  # noqa: BLE001 - anything that fails to convert is simply wrong
        return compare_outputs(expected, received, atol, path=name)
    if received_array.dtype == object or received_array.shape != expected.shape:
        return compare_outputs(expected, received, atol, path=name)
    for where in np.argwhere(selected):
        where = tuple(int(i) for i in where)
        problem = compare_outputs(expected[where], received_array[where], atol, path=f"{name} at position {where}")
        if problem:
            return problem
    return None


@cache
def _public_table() -> dict:
    return json.loads(PUBLIC_CASES.read_text(encoding="utf-8"))


def public_cases(exercise_id: str) -> list:
    """The public cases of ``exercise_id``: ``[(label, keyword arguments, expected output), ...]``.

    Decoded afresh on every call, so a student's function that changes its arguments in place
    changes nothing for the next check.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return [
        (label, decode(arguments), decode(expected)) for label, arguments, expected, *_ in _public_table()[exercise_id]
    ]


def public_mistakes(exercise_id: str) -> list:
    """Each public case's usual mistakes as data (in the order of :func:`public_cases`): ``[[(message, output,
    compared where or None, tolerance), ...], ...]``; empty lists for an exercise whose hints are judges of their own.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return [[tuple(m) for m in decode(row[3])] if len(row) > 3 else [] for row in _public_table()[exercise_id]]


# --- properties checked beside the comparison ---------------------------------------------


def _attention_leak(arguments, received):
    mask = arguments["mask"]
    if mask is None or not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    try:  # shapes first: weights the mask would enlarge are never broadcast (the comparison names the shape)
        shape = np.shape(received[1])
        if np.broadcast_shapes(shape, mask.shape) != shape:
            return None
        weights = np.asarray(received[1], dtype="float64")
    except (ValueError, TypeError):
        return None
    leak = np.abs(weights[~np.broadcast_to(mask, weights.shape)])
    if leak.size and leak.max() > 1e-6:
        return f"mask leak: weight {leak.max():.3g} on a position the mask forbids (it should be 0)."
    return None


# --- hints: usual mistakes, recognised from the output -------------------------------------


def _transposed_weight_hint(arguments, received, expected):
    keys, weight, query = (np.asarray(arguments[name], dtype="float64") for name in ("keys", "weight", "query"))
    if _same(received, keys @ weight.T @ query):
        return "the result is what `weight` transposed gives: score[s] = keys[s] @ weight @ query."
    return None


def _attention_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    weights = np.asarray(received[1], dtype="float64")
    if np.isnan(weights).any():
        return (
            "NaN in the weights: a row whose every key is masked gives softmax over nothing, 0/0. "
            "Give such rows zero weights (and so a zero output)."
        )
    expected_weights = np.asarray(expected[1], dtype="float64")
    depth = np.asarray(arguments["query"]).shape[-1]
    # Without the scaling, each weight is the expected one raised to the power sqrt(d_k), renormalised.
    sharpened = expected_weights ** np.sqrt(depth)
    total = sharpened.sum(axis=-1, keepdims=True)
    unscaled = np.where(total > 0, sharpened / np.where(total > 0, total, 1.0), 0.0)
    if _same(weights, unscaled, atol=1e-5):
        return f"the weights are those of unscaled scores: divide Q Kᵀ by √d_k = √{depth} before the softmax."
    return None


def _split_heads_hint(arguments, received, expected):
    x = np.asarray(arguments["x"])
    if np.shape(received) == np.shape(expected) and _same(received, x.reshape(np.shape(expected))):
        return (
            "one reshape straight to (B, N, T, H) mixes positions into heads: reshape to (B, T, N, H) "
            "first, then transpose to (B, N, T, H)."
        )
    return None


def _merge_heads_hint(arguments, received, expected):
    x = np.asarray(arguments["x"])
    if np.shape(received) == np.shape(expected) and _same(received, x.reshape(np.shape(expected))):
        return "transpose (B, N, T, H) to (B, T, N, H) before the reshape, or the heads' rows get mixed up."
    return None


def _masked_max_hint(arguments, received, expected):
    values = np.asarray(arguments["values"], dtype="float64")
    if np.shape(received) == np.shape(expected) and _same(received, values.max(axis=1)):
        return "padding positions took part in the max: only positions where `mask` is True may win."
    return None


def _greedy_hint(arguments, received, expected):
    decoded = np.asarray(received)
    if decoded.ndim != 2:
        return None
    end_id = arguments["end_id"]
    for row in decoded:
        ended = np.flatnonzero(row[1:] == end_id)
        if ended.size and np.any(row[1 + ended[0] + 1 :] != 0):
            return "a row goes on after it produced `end_id`: from then on it must get padding (0)."
    if decoded.shape[1] > np.shape(expected)[1]:
        return "decoding should stop as soon as every row has produced `end_id` (or after `max_length` steps)."
    return None


def _masked_lm_loss_hint(arguments, received, expected):
    probabilities, labels = np.asarray(arguments["probabilities"], dtype="float64"), np.asarray(arguments["labels"])
    picked = -np.log(np.take_along_axis(probabilities, labels[..., None], axis=-1)[..., 0])
    if _same(received, picked.mean()):
        return "every position was counted: the loss averages over the chosen positions only (label != 0)."
    return None


def _masked_mean_hint(arguments, received, expected):
    values, mask = np.asarray(arguments["values"], dtype="float64"), np.asarray(arguments["mask"])
    if _same(received, np.where(mask[..., None], values, 0.0).sum(axis=1) / values.shape[1]):
        return (
            "the sum was divided by T, every position: divide by the number of real tokens in each row "
            "(mask.sum(axis=1)), so a short review is not diluted by its padding."
        )
    if _same(received, values.mean(axis=1)):
        return "padding took part in the mean: sum only the positions where `mask` is True."
    return None


def _first_index(where) -> str:
    return str(tuple(int(i) for i in np.argwhere(where)[0]))


# A right answer's rates are random draws, so a rate is refused only where a right answer's draws land that
# far from its target with a probability below one in a billion (each rate, on each side). The bound is
# Chernoff's, P(a rate this far) <= exp(-n KL(rate || target)), true at every n; a normal approximation is not:
# a band of 5 standard deviations refused 3 of 3 chosen tokens randomised, which a right answer draws once in
# a thousand (the notebook's own solution failed 5 of 20,000 gradings with fresh seeds).
_RATE_ODDS = 1e-9


def _plausible(rate: float, total: int, target: float, odds: float = _RATE_ODDS) -> bool:
    """Whether total * KL(Bernoulli(rate) || Bernoulli(target)) <= log(1 / odds): Chernoff's bound on a right
    answer's chance of a rate this far from `target` in `total` draws is then at least `odds`."""
    divergence = sum(p * math.log(p / q) for p, q in ((rate, target), (1 - rate, 1 - target)) if p > 0)
    return total * divergence <= math.log(1 / odds)


def _plausible_rates(total: int, target: float, odds: float = _RATE_ODDS) -> tuple[float, float]:
    """The rates a right answer's `total` Bernoulli(`target`) draws reach but for `odds` on either side.

    The interval holds every rate r with total * KL(r || target) <= log(1 / odds): by Chernoff's bound a
    right answer falls outside it with probability below `odds` on each side, whatever `total` is.

    Args:
        total: int >= 1, the number of draws (tokens that may be chosen, or chosen tokens).
        target: float in (0, 1), each draw's probability.
        odds: float in (0, 1), the chance of refusing a right answer that each side allows.

    Returns:
        (lowest, highest): floats in [0, 1], the rates accepted (to 1e-12).

    Example:
        >>> [round(rate, 3) for rate in _plausible_rates(3, 0.1)]  # 3 of 3 randomised passes
        [0.0, 1.0]
    """

    def edge(inside: float, outside: float) -> float:
        if _plausible(outside, total, target, odds):
            return outside
        while abs(outside - inside) > 1e-12:  # bisection: the divergence grows away from the target
            middle = (inside + outside) / 2
            inside, outside = (middle, outside) if _plausible(middle, total, target, odds) else (inside, middle)
        return inside

    return edge(target, 0.0), edge(target, 1.0)


def _bert_corruption_properties(arguments, received, expected):
    """BERT's masking judged by what every right answer satisfies: nothing forbidden chosen, labels at
    the chosen positions only, the rest unchanged, and the 15% / 80-10-10 rates where a right answer's
    draws land but for one in a billion (:func:`_plausible_rates`)."""
    token_ids = np.asarray(arguments["token_ids"])
    if not (isinstance(received, (tuple, list)) and len(received) == 2):
        return "return a tuple of two arrays: (the corrupted token ids, the labels)."
    corrupted, labels = (np.asarray(value) for value in received)
    for name, value in (("the corrupted token ids", corrupted), ("the labels", labels)):
        if value.shape != token_ids.shape:
            return f"{name} should have shape {token_ids.shape} (that of token_ids); received {value.shape}."
        if not np.issubdtype(value.dtype, np.integer):
            return f"{name} should hold integer ids; received dtype {value.dtype}."
    never = np.isin(token_ids, [0, *arguments["special_ids"]])
    chosen = labels != 0
    checks = (
        (chosen & never, "holds padding or a special token and was chosen: those are never chosen"),
        (chosen & (labels != token_ids), "is chosen, but its label is not the original token"),
        (~chosen & (corrupted != token_ids), "was not chosen (label 0), but its token changed"),
        ((corrupted < 0) | (corrupted >= arguments["vocabulary_size"]), "holds an id outside the vocabulary"),
    )
    for where, problem in checks:
        if where.any():
            return f"position {_first_index(where)} {problem}."
    masked = corrupted == arguments["mask_token_id"]
    randomised = ~masked & (corrupted != token_ids)
    rates = (
        ("chosen", chosen.sum(), (~never).sum(), expected["selection"]),
        ("replaced by [MASK]", masked[chosen].sum(), chosen.sum(), expected["mask"]),
        ("replaced by a random token", randomised[chosen].sum(), chosen.sum(), expected["random"]),
    )
    for what, count, total, target in rates:
        if total and not _plausible(count / total, total, target):
            among = "tokens that may be chosen" if what == "chosen" else "chosen tokens"
            lowest, highest = _plausible_rates(int(total), target)
            return (
                f"{count / total:.2%} of the {among} were {what} ({count:,} of {total:,}); expected {target:.0%}: "
                f"a right answer's {total:,} draws give {lowest:.2%} to {highest:.2%}, but for one in a billion."
            )
    return None


def _merge_step_hint(arguments, received, expected):
    words, counts = arguments["words"], arguments["counts"]
    unweighted, weighted = collections.Counter(), collections.Counter()
    for word, count in zip(words, counts):
        symbols = word.split(" ")
        for pair in zip(symbols, symbols[1:]):
            unweighted[pair] += 1
            weighted[pair] += count
    if isinstance(received, (tuple, list)) and received and isinstance(received[0], str) and received[0] != expected[0]:
        pair = tuple(received[0].split(" "))
        if weighted.get(pair) == max(weighted.values()):
            return (
                f"{received[0]!r} ties with {expected[0]!r} for the most frequent pair: among equally frequent "
                "pairs take the one that comes first as a tuple of two str, not the first one counted."
            )
        if unweighted.get(pair) == max(unweighted.values()):
            return "each pair counts as often as its word occurs: weight it by the word's count."
    if isinstance(received, (tuple, list)) and len(received) == 2 and received[0] == expected[0]:
        replaced = [word.replace(expected[0], expected[0].replace(" ", "")) for word in words]
        if [str(word) for word in received[1]] == replaced:
            return (
                "the pair is right, but merge whole symbols only: replacing text in the string also joins the "
                "ends of longer symbols ('ab c' holds 'b c' as text, not as two symbols)."
            )
        return "the pair is right; merge it left to right, one occurrence at a time, in every word."
    return None


def _temperature_hint(arguments, received, expected):
    logits, temperature = np.asarray(arguments["logits"], dtype="float64"), arguments["temperature"]
    for scaled, message in (
        (logits * temperature, "the logits were multiplied by the temperature: divide them by it."),
        (logits, "the temperature was not applied: take the softmax of logits / temperature."),
    ):
        weights = np.exp(scaled - scaled.max(axis=-1, keepdims=True))
        if temperature != 1 and _same(received, weights / weights.sum(axis=-1, keepdims=True)):
            return message
    if len(logits) > 1 and not np.all(np.isfinite(np.asarray(received, dtype="float64"))):
        return (
            "a row came out as nan or inf: subtract each row's own maximum (axis=-1, keepdims=True), not one "
            "maximum of the whole array; a row far below it underflows to 0 / 0."
        )
    return None


def _patchify_hint(arguments, received, expected):
    images = np.asarray(arguments["images"])
    if np.shape(received) == np.shape(expected) and _same(received, images.reshape(np.shape(expected))):
        return (
            'one reshape straight to (B, M, P·P·C) makes each "patch" a strip of pixels across several '
            "patches: reshape to (B, height/P, P, width/P, P, C), transpose to "
            "(B, height/P, width/P, P, P, C), then flatten."
        )
    return None


def _rollout_variants(weights):
    """Rollouts with the usual mistakes: (name, result) pairs."""
    tokens = weights.shape[-1]
    averaged = weights.mean(axis=2)  # (L, B, T, T)
    with_identity = averaged + np.eye(tokens)
    renormalised = with_identity / with_identity.sum(axis=-1, keepdims=True)

    def product(matrices, last_on_left=True):
        result = np.broadcast_to(np.eye(tokens), matrices.shape[1:]).copy()
        for matrix in matrices:
            result = matrix @ result if last_on_left else result @ matrix
        return result

    return [
        (
            "the layers are multiplied in the wrong order: the last layer's matrix goes on the left, "
            "rollout = Ã_L ··· Ã_2 Ã_1.",
            product(renormalised, last_on_left=False),
        ),
        (
            "the identity is missing: add it to each layer's head-averaged weights (the residual "
            "connection) before renormalising.",
            product(averaged),
        ),
        (
            "the rows are not renormalised: after adding the identity each row sums to 2; divide it by its sum.",
            product(with_identity),
        ),
    ]


def _rollout_hint(arguments, received, expected):
    weights = np.asarray(arguments["attention_weights"], dtype="float64")
    for message, candidate in _rollout_variants(weights):
        if _same(received, candidate) and not _same(candidate, expected):
            return message
    return None


def _nucleus_hint(arguments, received, expected):
    probabilities, p = np.asarray(arguments["probabilities"], dtype="float64"), arguments["p"]
    order = np.argsort(-probabilities, axis=-1, kind="stable")
    ranked = np.take_along_axis(probabilities, order, axis=-1)
    cumulative = np.cumsum(ranked, axis=-1)
    for keep, message in (
        (
            cumulative - ranked < p,
            "a token whose probability ranked above it is exactly p was dropped: keep a "
            "token while that mass is at most p (<=, the rule of keras-hub's TopPSampler), "
            "not below it.",
        ),
        (
            cumulative <= p,
            "the token that makes the total reach p is missing: keep a token while the "
            "probability ranked above it is at most p.",
        ),
    ):
        candidate = np.zeros_like(probabilities)
        np.put_along_axis(candidate, order, np.where(keep, ranked, 0.0), axis=-1)
        if np.all(candidate.sum(axis=-1) > 0) and _same(received, candidate / candidate.sum(axis=-1, keepdims=True)):
            return message
    kept = np.asarray(expected, dtype="float64") > 0
    if _same(received, np.where(kept, probabilities, 0.0)):
        return "the kept probabilities are not renormalised: divide each row by its sum."
    return None


def _rotation_variants(x, start_index):
    """Rotations with the usual mistakes: (message, result) pairs."""
    x = np.asarray(x, dtype="float64")
    width = x.shape[-1]
    half = width // 2
    positions = start_index + np.arange(x.shape[1])

    def turned(first, second, theta, where=positions):
        angles = where[None, :, None, None] * theta[None, None, None, :]
        cos, sin = np.cos(angles), np.sin(angles)
        return first * cos - second * sin, second * cos + first * sin

    theta = 10000.0 ** (-2.0 * np.arange(half) / width)
    interleaved = np.empty_like(x)
    interleaved[..., 0::2], interleaved[..., 1::2] = turned(x[..., 0::2], x[..., 1::2], theta)
    from_zero = np.concatenate(turned(x[..., :half], x[..., half:], theta, np.arange(x.shape[1])), axis=-1)
    backwards = np.concatenate(turned(x[..., :half], x[..., half:], -theta), axis=-1)
    return [
        ("feature i was paired with feature i + 1 (interleaved); pair i with i + H/2, the two halves.", interleaved),
        ("the positions started at 0: x[:, t] sits at start_index + t.", from_zero),
        (
            "the rotation turns the wrong way: the first half gets x₁ cos − x₂ sin, the second x₂ cos + x₁ sin.",
            backwards,
        ),
    ]


def _rotation_hint(arguments, received, expected):
    for message, variant in _rotation_variants(arguments["x"], arguments["start_index"]):
        if not _same(variant, expected) and _same(received, variant):
            return message
    return None


def _rms_norm_hint(arguments, received, expected):
    x = np.asarray(arguments["x"], dtype="float64")
    scale, epsilon = np.asarray(arguments["scale"], dtype="float64"), arguments["epsilon"]
    centred = x - x.mean(axis=-1, keepdims=True)
    root_mean_square = np.sqrt((x**2).mean(axis=-1, keepdims=True))
    for message, variant in (
        (
            "the mean was subtracted (that is LayerNorm): divide x itself by its root mean square.",
            centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + epsilon) * scale,
        ),
        (
            "epsilon was added outside the square root: sqrt(mean(x²) + epsilon).",
            x / (root_mean_square + epsilon) * scale,
        ),
        ("the scale was not applied: multiply by scale at the end.", x / np.sqrt(root_mean_square**2 + epsilon)),
    ):
        if not _same(variant, expected) and _same(received, variant):
            return message
    return None


def _grouped_attention_variants(query, key, value):
    """Grouped-query attention with each usual slip: (message, output)."""
    query, key, value = (np.asarray(array, dtype="float64") for array in (query, key, value))
    heads, groups, width = query.shape[2], key.shape[2], query.shape[-1]

    def attend(keys, values, scale=None, axis=-1):
        scores = np.einsum("btnh,bsnh->bnts", query, keys) / (math.sqrt(width) if scale is None else scale)
        weights = np.exp(scores - scores.max(axis=axis, keepdims=True))
        return np.einsum("bnts,bsnh->btnh", weights / weights.sum(axis=axis, keepdims=True), values)

    repeats = heads // groups if groups and heads % groups == 0 else 1
    shared = np.repeat(key, repeats, axis=2), np.repeat(value, repeats, axis=2)
    return [
        (
            "query head n read key/value head n % G (np.tile): the heads of a group are neighbours, so head n "
            "reads head n // (N / G) (np.repeat along the heads' axis).",
            attend(np.tile(key, (1, 1, repeats, 1)), np.tile(value, (1, 1, repeats, 1))) if repeats > 1 else None,
        ),
        ("the scores were not divided by √H (the head width).", attend(*shared, scale=1.0)),
        (
            "the softmax ran over the queries: each query's weights must sum to 1 over the keys.",
            attend(*shared, axis=-2),
        ),
    ]


def _grouped_attention_hint(arguments, received, expected):
    for message, variant in _grouped_attention_variants(arguments["query"], arguments["key"], arguments["value"]):
        if variant is not None and not _same(variant, expected) and _same(received, variant):
            return message
    return None


def _absmax_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 3:
        return None
    weights = np.asarray(arguments["weights"], dtype="float64")
    largest = np.abs(weights).max(axis=1)
    step = np.where(largest == 0, 1.0, largest / 127)
    integers, scales = received[0], received[1]
    if _same(scales, 1 / step):
        return "the scales are 127 / max|w|, a multiplier: return the step max|w| / 127, so that w ≈ integers · scale."
    for divisor in (128, 255):
        if _same(scales, np.where(largest == 0, 1.0, largest / divisor)):
            return f"the scale divides by {divisor}: the integers run over [-127, 127], so it is max|w| / 127."
    if _same(integers, np.trunc(weights / step[:, None])) or _same(integers, np.floor(weights / step[:, None])):
        return "the integers were cut, not rounded: use np.round(w / scale)."
    whole = np.abs(weights).max() / 127 or 1.0
    if _same(integers, np.round(weights / whole)):
        return "one scale for the whole matrix: each row gets its own, from its own largest |w|."
    return None


def _chosen_log_probabilities(arguments):
    probabilities = np.asarray(arguments["probabilities"], dtype="float64")
    targets = np.asarray(arguments["targets"])
    return np.log(np.take_along_axis(probabilities, targets[..., None], axis=-1)[..., 0]), targets


def _prompt_masked_hint(arguments, received, expected):
    log_p, targets = _chosen_log_probabilities(arguments)
    positions = np.arange(targets.shape[1])[None, :]
    starts = np.asarray(arguments["prompt_lengths"])[:, None]
    real = targets != 0

    def mean_over(where):
        return float(-log_p[where].sum() / where.sum()) if where.any() else 0.0

    for message, where in (
        ("every real target counted, the prompt's too: the loss is on the answer's tokens only.", real),
        (
            "the mask starts one target late: target t predicts token t + 1, so the answer's first token is "
            "target prompt_length - 1.",
            (positions >= starts) & real,
        ),
        ("padding (target 0) was counted: leave it out.", positions >= starts - 1),
        (
            "every target counted, the prompt's and the padding's too: the loss is on the answer's real tokens only.",
            np.ones_like(real),
        ),
    ):
        if not _same(mean_over(where), expected) and _same(received, mean_over(where)):
            return message
    counted = (positions >= starts - 1) & real
    if _same(received, float(-log_p[counted].sum())):
        return "the sum of the answer tokens' losses: return their mean."
    per_row = [-log_p[row][counted[row]].mean() for row in range(len(targets)) if counted[row].any()]
    if per_row and not _same(float(np.mean(per_row)), expected) and _same(received, float(np.mean(per_row))):
        return "a mean per row, then over rows: the mean is over every answer token of the batch at once."
    return None


def _sequence_log_probability_hint(arguments, received, expected):
    logits = np.asarray(arguments["logits"], dtype="float64")
    targets, mask = np.asarray(arguments["targets"]), np.asarray(arguments["mask"], dtype="float64")
    raw = np.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    shifted = logits - logits.max(axis=-1, keepdims=True)
    probabilities = np.exp(shifted) / np.exp(shifted).sum(axis=-1, keepdims=True)
    chosen = np.log(np.take_along_axis(probabilities, targets[..., None], axis=-1)[..., 0])
    for message, variant in (
        ("the logits themselves were summed: take log softmax first (subtract each position's log-sum-exp).",
         (raw * mask).sum(axis=-1)),
        ("the probabilities were summed: sum their logs.",
         (np.exp(chosen) * mask).sum(axis=-1)),
        ("every position counted: only the tokens the mask marks belong to the answer.", chosen.sum(axis=-1)),
        ("the mean over the answer's tokens: a sequence's log-probability is their sum.",
         (chosen * mask).sum(axis=-1) / np.maximum(mask.sum(axis=-1), 1)),
    ):  # fmt: skip
        if not _same(variant, expected) and np.shape(received) == np.shape(expected) and _same(received, variant):
            return message
    return None


def _dpo_hint(arguments, received, expected):
    beta = float(arguments["beta"])
    chosen, rejected, reference_chosen, reference_rejected = (
        np.asarray(arguments[name], dtype="float64")
        for name in ("policy_chosen", "policy_rejected", "reference_chosen", "reference_rejected")
    )
    margin = beta * ((chosen - reference_chosen) - (rejected - reference_rejected))
    for message, variant in (
        (
            "the reference was left out: each reward is β (log π − log π_ref).",
            np.logaddexp(0, -beta * (chosen - rejected)),
        ),
        ("β is missing from the margin.", np.logaddexp(0, -margin / beta)),
        ("the sign is turned: the loss is −log σ(margin) = log(1 + e^(−margin)).", np.logaddexp(0, margin)),
        ("log σ(margin) without its minus sign: the loss must be ≥ 0.", -np.logaddexp(0, -margin)),
        ("the mean over the pairs: return one loss per pair.", np.logaddexp(0, -margin).mean()),
    ):
        if not _same(variant, expected) and _same(received, variant):
            return message
    return None


def _grpo_group_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    rewards = np.asarray(arguments["rewards"], dtype="float64")
    centred = rewards - rewards.mean()
    if rewards.std(ddof=1) > 0 and _same(received[0], centred / (rewards.std(ddof=1) + 1e-4)):
        return "the standard deviation over G − 1: the group's is the population one, over G (np.std's default)."
    if rewards.std() > 0 and _same(received[0], centred):
        return "the advantages were not divided by the group's standard deviation (+ 1e-4)."
    advantages = np.asarray(expected[0], dtype="float64")
    epsilon = float(arguments["clip_epsilon"])
    ratio = np.exp(
        np.asarray(arguments["log_probabilities"], "float64")
        - np.asarray(arguments["old_log_probabilities"], "float64")
    )
    weights = np.asarray(arguments["mask"], dtype="float64")
    a = advantages[:, None]
    for message, per_token in (
        ("the ratio was not clipped: min(r Â, clip(r, 1 − ε, 1 + ε) Â).", ratio * a),
        ("max where the objective takes min: min(r Â, clip(r) Â) keeps the pessimistic one.",
         np.maximum(ratio * a, np.clip(ratio, 1 - epsilon, 1 + epsilon) * a)),
        ("the clipped term alone: take the min of r Â and clip(r) Â.", np.clip(ratio, 1 - epsilon, 1 + epsilon) * a),
    ):  # fmt: skip
        value = float(((per_token * weights).sum(axis=1) / weights.sum(axis=1)).mean())
        if not _same(value, expected[1]) and _same(received[1], value):
            return message
    surrogate = np.minimum(ratio * a, np.clip(ratio, 1 - epsilon, 1 + epsilon) * a)
    pooled = float((surrogate * weights).sum() / weights.sum())
    if not _same(pooled, expected[1]) and _same(received[1], pooled):
        return "one mean over every token of the group: average each answer's tokens first, then the answers."
    return None


HINT_ALTERNATIVE = " Or: "  # between the usual mistakes a case cannot tell apart (they give the same output)


def either(messages: list) -> str | None:
    """One hint naming every usual mistake that gives the received output (on this case they coincide), or None."""
    return HINT_ALTERNATIVE.join(messages) or None


def _merge_lora_hint(arguments, received, expected):
    kernel, a, b = (np.asarray(arguments[name], dtype="float64") for name in ("kernel", "a", "b"))
    alpha, rank = float(arguments["alpha"]), a.shape[1]
    change = a @ b
    found = [
        message
        for message, variant in (
            ("the change AB was added without its scale α / r.", kernel + change),
            ("the change was scaled by α: the scale is α / r (r = A's second axis).", kernel + alpha * change),
            ("the scale is upside down: α / r, not r / α.", kernel + rank / alpha * change),
            ("W itself was left out: the merged kernel is W + (α / r) A B.", alpha / rank * change),
            (
                "the rank was read from A's first axis (d): r is its second, A is (d, r).",
                kernel + alpha / a.shape[0] * change,
            ),
        )
        if not _same(variant, expected) and _same(received, variant)
    ]
    return either(found)


def _data_parallel_hint(arguments, received, expected):
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    x, y, w = (np.asarray(arguments[name], dtype="float64") for name in ("x", "y", "w"))
    devices = int(arguments["devices"])
    shards = np.array(
        [rows_x.T @ (rows_x @ w - rows_y) for rows_x, rows_y in zip(np.split(x, devices), np.split(y, devices))]
    )  # each shard's sum of per-row gradients / 2
    rows = len(y) // devices
    if _same(received[1], 2 / rows * shards.sum(axis=0)):
        return "the shards' gradients were added up: DataParallel averages them (divide the sum by D)."
    found = []  # with D = 2 devices these two give the same numbers: both are named
    if _same(received[0], 2 / len(y) * shards):
        found.append("each shard divided by the whole batch's B: a shard's loss is the mean over its own B / D rows.")
    if _same(received[0], shards / rows) or _same(received[1], shards.mean(axis=0) / rows):
        found.append("the factor 2 of the squared error's derivative is missing: ∇(u²) = 2u ∇u.")
    return either(found)


def _skipgram_pairs_hint(arguments, received, expected):
    ids, window = list(arguments["token_ids"]), arguments["window"]
    try:
        received = [tuple(pair) for pair in received]
    except TypeError:
        return None
    near = [(i, j) for i in range(len(ids)) for j in range(len(ids)) if abs(i - j) <= window]
    with_itself = [(ids[i], ids[j]) for i, j in near]
    right_only = [(ids[i], ids[j]) for i, j in near if j > i]
    if received == with_itself and with_itself != [tuple(pair) for pair in expected]:
        return "each word was paired with itself: leave out position i."
    if received == right_only and right_only != [tuple(pair) for pair in expected]:
        return "only the words after the centre were paired: the window reaches `window` positions on both sides."
    for reach, wrong in ((window - 1, "only `window` - 1"), (window + 1, "`window` + 1")):
        off_by_one = [(ids[i], ids[j]) for i in range(len(ids)) for j in range(len(ids)) if 0 < abs(i - j) <= reach]
        if received == off_by_one and off_by_one != [tuple(pair) for pair in expected]:
            return (
                f"the window reached {wrong} positions on each side: the context of position i is positions "
                "i − window … i + window, both ends included, i itself left out."
            )
    if sorted(received) == sorted(tuple(pair) for pair in expected):
        return (
            "the right pairs in another order: go through the centres left to right, and each one's context "
            "words left to right."
        )
    return None


EXERCISES: dict[str, Exercise] = {
    exercise.id: exercise
    for exercise in [
        Exercise("01.1", "one-hot encoding", "one_hot_encode", 2, output_names=("the one-hot array",)),
        Exercise(
            "01.2",
            "one LSTM step from Keras' weights",
            "lstm_step",
            3,
            output_names=("the new hidden state h", "the new cell state c"),
            hint=hints.lstm_step_hint,
        ),
        Exercise(
            "02.1",
            "Luong general score",
            "luong_general_score",
            2,
            output_names=("the scores",),
            hint=_transposed_weight_hint,
        ),
        Exercise("02.2", "Bahdanau (additive) score", "bahdanau_score", 3, output_names=("the scores",)),
        Exercise("03.1", "vectorising with a vocabulary", "vectorize", 2, output_names=("the ids",)),
        Exercise(
            "03.2",
            "one merge step of byte-pair encoding",
            "merge_step",
            2,
            output_names=("the most frequent pair", "the merged words"),
            hint=_merge_step_hint,
        ),
        Exercise(
            "03.3",
            "encoding a word by merge rank",
            "encode_word",
            2,
            output_names=("the symbols",),
            hint=hints.encode_word_hint,
        ),
        Exercise(
            "03.4",
            "the skip-gram pairs of a sentence",
            "skipgram_pairs_of",
            2,
            output_names=("the pairs",),
            hint=_skipgram_pairs_hint,
        ),
        Exercise(
            "04.1",
            "scaled dot-product attention with a mask",
            "scaled_dot_product_attention",
            3,
            extra_check=_attention_leak,
            output_names=("the output", "the attention weights"),
            hint=_attention_hint,
        ),
        Exercise("04.2", "splitting into heads", "split_heads", 1, output_names=("the heads",), hint=_split_heads_hint),
        Exercise(
            "04.3", "merging heads", "merge_heads", 1, output_names=("the merged output",), hint=_merge_heads_hint
        ),
        Exercise(
            "04.4",
            "the sinusoidal positional encoding",
            "positional_encoding_table",
            2,
            output_names=("the table",),
            hint=hints.sinusoidal_hint,
        ),
        Exercise(
            "04.5",
            "multi-head attention from its weights",
            "multi_head_attention_forward",
            3,
            atol=1e-5,
            output_names=("the output",),
        ),
        Exercise(
            "04.6",
            "the self-attention mask of a padded batch",
            "self_attention_mask",
            2,
            output_names=("the mask",),
            hint=hints.self_attention_mask_hint,
        ),
        Exercise("05.1", "layer normalisation", "layer_norm", 2, atol=1e-4, output_names=("the normalised output",)),
        Exercise("05.2", "position-wise feed-forward network", "feed_forward", 2, output_names=("the output",)),
        Exercise(
            "05.3",
            "a Transformer encoder block from its weights, post- and pre-norm",
            "encoder_block",
            3,
            atol=1e-5,
            output_names=("the block's output",),
        ),
        Exercise(
            "06.1",
            "masked global max pooling",
            "masked_max_pool",
            2,
            output_names=("the pooled vectors",),
            hint=_masked_max_hint,
        ),
        Exercise(
            "06.2",
            "masked global average pooling",
            "masked_mean_pool",
            2,
            output_names=("the pooled vectors",),
            hint=_masked_mean_hint,
        ),
        Exercise(
            "07.1", "the causal mask", "causal_mask", 1, output_names=("the mask",), partial_credit=False
        ),  # each case is the same mask at another length: one idea
        Exercise("07.2", "greedy decoding", "greedy_decode", 3, output_names=("the decoded ids",), hint=_greedy_hint),
        Exercise(
            "07.3",
            "teacher forcing and the padding-masked loss",
            "teacher_forcing_loss",
            2,
            output_names=("the decoder inputs", "the labels", "the loss"),
            hint=hints.teacher_forcing_loss_hint,
        ),
        Exercise(
            "07.4",
            "one step of beam search",
            "beam_step",
            3,
            output_names=(
                "the parents",
                "the tokens",
                "the live scores",
                "the finished parents",
                "the finished scores",
            ),
            hint=hints.beam_step_hint,
        ),
        Exercise(
            "07.5",
            "the warm-up and cosine learning-rate schedule",
            "warmup_cosine",
            2,
            output_names=("the learning rates",),
            atol=1e-9,
            hint=hints.warmup_cosine_hint,
        ),
        Exercise(
            "07.6",
            "one AdamW step",
            "adamw_step",
            2,
            atol=1e-6,  # float32 arithmetic passes, as Keras' own
            output_names=("the new parameters", "the new first moment", "the new second moment"),
            hint=hints.adamw_step_hint,
        ),
        Exercise(
            "08.1", "the masked-LM loss", "masked_lm_loss", 2, output_names=("the loss",), hint=_masked_lm_loss_hint
        ),
        Exercise(
            "08.3",
            "BERT's masking: choose 15%, then 80/10/10",
            "bert_corruption",
            3,
            output_names=("the corrupted token ids", "the labels"),
            properties=_bert_corruption_properties,
        ),
        Exercise(
            "09.1",
            "softmax with a temperature",
            "softmax_with_temperature",
            2,
            output_names=("the probabilities",),
            hint=_temperature_hint,
        ),
        Exercise(
            "09.2",
            "the top-p (nucleus) filter",
            "nucleus_filter",
            3,
            output_names=("the filtered probabilities",),
            hint=_nucleus_hint,
        ),
        Exercise(
            "09.3",
            "one attention step with a key/value cache",
            "cached_attention_step",
            3,
            output_names=("the output", "the new key cache", "the new value cache"),
            hint=hints.cached_attention_step_hint,
        ),
        Exercise(
            "09.4",
            "perplexity and bits per character",
            "perplexity_and_bits",
            2,
            output_names=("the perplexity", "the bits per character"),
            hint=hints.perplexity_and_bits_hint,
        ),
        Exercise(
            "09.5",
            "capstone: the whole GPT forward pass from its weights",
            "gpt_forward",
            5,
            atol=1e-4,
            output_names=("the logits",),
            compared=lambda arguments: np.asarray(arguments["token_ids"]) != 0,
        ),
        Exercise(
            "09.6",
            "one step of the arithmetic coder: narrowing the interval",
            "narrow_interval",
            2,
            output_names=("the new low", "the new high"),
            hint=hints.narrow_interval_hint,
        ),
        Exercise(
            "10.1", "cutting images into patches", "patchify", 2, output_names=("the patch array",), hint=_patchify_hint
        ),
        Exercise(
            "10.2", "attention rollout", "roll_out_attention", 3, output_names=("the rollout",), hint=_rollout_hint
        ),
        Exercise(
            "11.1",
            "rotary position embedding",
            "rotate_positions",
            3,
            output_names=("the rotated array",),
            hint=_rotation_hint,
        ),
        Exercise("11.2", "RMSNorm", "rms_norm", 2, output_names=("the normalised array",), hint=_rms_norm_hint),
        Exercise(
            "11.3",
            "grouped-query attention's shared key/value heads",
            "grouped_query_attention",
            3,
            output_names=("the attention output",),
            hint=_grouped_attention_hint,
        ),
        Exercise(
            "12.1",
            "absmax int8 quantization",
            "absmax_int8",
            2,
            output_names=("the integers", "the scales", "the dequantized weights"),
            hint=_absmax_hint,
            whole_numbers=(0,),  # "float or int (R, C)", as the statement says
        ),
        Exercise(
            "12.2",
            "merging LoRA into the weights",
            "merge_lora_kernel",
            2,
            output_names=("the merged kernel",),
            hint=_merge_lora_hint,
        ),
        Exercise(
            "12.3",
            "the data-parallel gradient",
            "data_parallel_gradient",
            2,
            output_names=("the shards' gradients", "their mean"),
            hint=_data_parallel_hint,
        ),
        Exercise(
            "13.1",
            "the prompt-masked cross-entropy",
            "prompt_masked_cross_entropy",
            2,
            output_names=("the loss",),
            hint=_prompt_masked_hint,
        ),
        Exercise(
            "13.2",
            "an answer's log-probability from logits",
            "sequence_log_probability",
            2,
            atol=1e-4,
            output_names=("the log-probabilities",),
            hint=_sequence_log_probability_hint,
        ),
        Exercise(
            "13.3",
            "the DPO loss",
            "dpo_pair_losses",
            2,
            output_names=("the losses",),
            hint=_dpo_hint,
        ),
        Exercise(
            "13.4",
            "GRPO's advantages and clipped objective for one group",
            "grpo_group_objective",
            3,
            output_names=("the advantages", "the objective"),
            hint=_grpo_group_hint,
        ),
    ]
}


# How long a student might spend on each notebook with its exercises, in minutes: our estimate, not a measurement.
STUDY_MINUTES = {
    "01": 40,
    "02": 40,
    "03": 75,
    "04": 90,
    "05": 60,
    "06": 30,
    "07": 150,
    "08": 45,
    "09": 210,
    "10": 45,
    "11": 55,
    "12": 45,
    "13": 60,
}


def catalogue_table() -> str:
    """The students' catalogue: a Markdown table, one row per notebook, its exercises with their points.

    Generated from :data:`EXERCISES` and :data:`STUDY_MINUTES` into ``docs/students.md``
    (``transformer-course catalogue --update docs/students.md``; a test fails while it is stale).

    Returns:
        str, the table's lines, with a first line that counts the exercises and their points.

    Example:
        >>> catalogue_table().splitlines()[2]
        '| notebook | exercises (points) | about |'
    """
    notebooks = sorted({exercise.notebook for exercise in EXERCISES.values()})
    points = sum(exercise.points for exercise in EXERCISES.values())
    lines = [
        f"{len(EXERCISES)} exercises, {points} points.",
        "",
        "| notebook | exercises (points) | about |",
        "|---|---|---|",
    ]
    for notebook in notebooks:
        listed = "; ".join(
            f"{exercise.id} {exercise.title} ({exercise.points})"
            for exercise in EXERCISES.values()
            if exercise.notebook == notebook
        )
        lines.append(f"| {notebook} | {listed} | {STUDY_MINUTES[notebook]} min |")
    return "\n".join(lines)
