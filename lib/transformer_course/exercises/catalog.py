"""The course's graded exercises as students see them: names, points, and the public cases.

Every exercise is a plain NumPy/Python function, so a check runs in milliseconds with no model,
no download and no GPU. A student's instant check runs the function on the exercise's public
cases, stored with their expected outputs in ``public_cases.json`` beside this file. The
references and the generators of the secret grading cases are not here: they live only in the
grader (:mod:`transformer_course.grading.references`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..grading.protocol import decode, plain_value
from .compare import compare_outputs

__all__ = ["Exercise", "EXERCISES", "public_cases"]

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
    """

    id: str
    title: str
    function_name: str
    points: int
    extra_check: Callable | None = None
    atol: float = 1e-5

    @property
    def notebook(self) -> str:
        return self.id.split(".")[0]

    def judge(self, arguments: dict, received, expected) -> str | None:
        """None if ``received`` equals ``expected`` (the reference output on ``arguments``), else what is wrong.

        ``received`` goes through :func:`~transformer_course.grading.protocol.plain_value` first,
        as the grader's replies do, so a tensor is judged like the array it holds.
        """
        try:
            received = plain_value(received)
        except ValueError as error:
            return f"the result cannot be read: {error}."
        if self.extra_check is not None:
            problem = self.extra_check(arguments, received)
            if problem:
                return problem
        return compare_outputs(expected, received, self.atol)


@lru_cache(maxsize=None)
def _public_table() -> dict:
    return json.loads(PUBLIC_CASES.read_text(encoding="utf-8"))


def public_cases(exercise_id: str) -> list:
    """The public cases of ``exercise_id``: ``[(label, keyword arguments, expected output), ...]``.

    Decoded afresh on every call, so a student's function that changes its arguments in place
    changes nothing for the next check.

    Raises:
        KeyError: for an unknown exercise id.
    """
    return [(label, decode(arguments), decode(expected)) for label, arguments, expected in _public_table()[exercise_id]]


# --- properties checked beside the comparison ---------------------------------------------

def _attention_leak(arguments, received):
    mask = arguments["mask"]
    if mask is None or not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    try:
        weights = np.broadcast_to(np.asarray(received[1], dtype="float64"),
                                  np.broadcast_shapes(np.shape(received[1]), mask.shape))
    except (ValueError, TypeError):
        return None
    leak = np.abs(weights[~np.broadcast_to(mask, weights.shape)])
    if leak.size and leak.max() > 1e-6:
        return f"mask leak: weight {leak.max():.3g} on a position the mask forbids (it should be 0)."
    return None



EXERCISES: dict[str, Exercise] = {exercise.id: exercise for exercise in [
    Exercise("01.1", "one-hot encoding", "one_hot_encode", 2),
    Exercise("01.2", "one-hot decoding", "one_hot_decode", 1),
    Exercise("02.1", "Luong general score", "luong_general_score", 2),
    Exercise("02.2", "Bahdanau (additive) score", "bahdanau_score", 3),
    Exercise("03.1", "vectorising with a vocabulary", "vectorize", 2),
    Exercise("03.2", "padding and truncating", "pad_or_truncate", 1),
    Exercise("04.1", "scaled dot-product attention with a mask", "scaled_dot_product_attention", 3, extra_check=_attention_leak),
    Exercise("04.2", "splitting into heads", "split_heads", 1),
    Exercise("04.3", "merging heads", "merge_heads", 1),
    Exercise("05.1", "layer normalisation", "layer_norm", 2, atol=1e-4),
    Exercise("05.2", "position-wise feed-forward network", "feed_forward", 2),
    Exercise("06.1", "masked global max pooling", "masked_max_pool", 2),
    Exercise("06.2", "masked global average pooling", "masked_mean_pool", 2),
    Exercise("07.1", "the causal mask", "causal_mask", 1),
    Exercise("07.2", "greedy decoding", "greedy_decode", 3),
]}
