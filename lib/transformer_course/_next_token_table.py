"""The smallest next-token model: a table of bigram probabilities (the exercises' decoding cases).

It lives in a module of its own, which imports only NumPy, because graded calls need it where the
rest of the package is out of reach (:mod:`transformer_course_grader.sandbox`); the course
imports it from :mod:`transformer_course.decoding`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NextTokenTable"]


class NextTokenTable:
    """A next-token model given by a table: ``P(next | decoded)`` depends on the last id only.

    The smallest model a decoding strategy can run on (a bigram model), used by the exercises'
    cases: its answers are known exactly.

    Args:
        table: float ``(V, V)``; row i is the distribution of the id after id i.

    Call: int ``(K, t)`` ids decoded so far -> float64 ``(K, V)`` = ``table[decoded[:, -1]]``.

    Example:
        >>> NextTokenTable([[0.0, 1.0], [0.25, 0.75]])([[0, 1]])
        array([[0.25, 0.75]])
    """

    def __init__(self, table):
        self.table = np.asarray(table, dtype="float64")

    def __call__(self, decoded):
        return self.table[np.asarray(decoded)[:, -1]]
