"""Comparing a student's output with the reference: one sentence naming the first difference."""

from __future__ import annotations

import numpy as np

__all__ = ["compare_outputs", "plain_number"]


def _describe(value) -> str:
    array = np.asarray(value) if not isinstance(value, (tuple, list)) or _numeric_sequence(value) else None
    if array is None or array.dtype == object:
        return f"{type(value).__name__}"
    return f"array of shape {array.shape}, dtype {array.dtype}"


def _numeric_sequence(value) -> bool:
    try:
        return np.asarray(value).dtype != object
    except (ValueError, TypeError):
        return False


def plain_number(value) -> str:
    """A number as a student reads it: ``0.1235``, ``3``, ``True``, ``nan`` — never ``np.float64(...)``."""
    value = np.asarray(value).item() if isinstance(value, (np.generic, np.ndarray)) else value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return repr(value)


def compare_outputs(
    expected, received, atol: float = 1e-5, path: str = "the result", names: tuple[str, ...] | None = None
) -> str | None:
    """Compare a reference output with a received one; return what differs, or None if equal.

    Tuples/lists of arrays are compared item by item; arrays by shape, kind of dtype (bool,
    integer, float) and value (floats with ``atol`` plus a relative tolerance of 1e-5); strings
    and other values by equality. Numbers in the message are plain and rounded (4 significant
    digits).

    Args:
        expected: the reference output.
        received: the candidate's output.
        atol: float, the absolute tolerance for floats.
        path: str, how to name the value in the message.
        names: optional names of a tuple's items (``("the output", "the attention weights")``).

    Returns:
        None if they match, else one sentence naming the first difference.
    """
    if isinstance(expected, tuple):
        if not isinstance(received, (tuple, list)) or len(received) != len(expected):
            what = f" ({', '.join(names)})" if names and len(names) == len(expected) else ""
            return f"{path} should be a tuple of {len(expected)} values{what}; received {_describe(received)}."
        for index, (want, got) in enumerate(zip(expected, received)):
            name = names[index] if names and index < len(names) else f"item {index} of {path}"
            problem = compare_outputs(want, got, atol, name)
            if problem:
                return problem
        return None
    if isinstance(expected, str) or not isinstance(expected, (np.ndarray, list, np.generic, int, float, bool)):
        return None if received == expected else f"{path} should be {expected!r}; received {received!r:.80}."
    want = np.asarray(expected)
    try:
        got = np.asarray(received)
    except Exception:  # noqa: BLE001 - anything array-like that fails to convert is simply wrong
        return f"{path} should be an array; received {type(received).__name__}."
    if got.dtype == object:
        return f"{path} should be a numeric array; received {type(received).__name__}."
    if got.shape != want.shape:
        return f"{path} should have shape {want.shape}; received shape {got.shape}."
    kinds = {"b": "bool", "i": "integer", "u": "integer", "f": "float"}
    if kinds.get(want.dtype.kind) != kinds.get(got.dtype.kind):
        return f"{path} should hold {kinds.get(want.dtype.kind, want.dtype)} values; received dtype {got.dtype}."
    if want.dtype.kind == "f":
        close = np.isclose(got, want, atol=atol, rtol=1e-5) & ~(np.isnan(got) ^ np.isnan(want))
    else:
        close = got == want
    if not np.all(close):
        index = tuple(int(i) for i in np.argwhere(~close)[0])
        where = f" at index {index}" if index else ""
        count = int(np.sum(~close))
        others = f" ({count} of {close.size} entries differ)" if close.size > 1 else ""
        expected_text, received_text = plain_number(want[index]), plain_number(got[index])
        tolerance = ""
        if want.dtype.kind == "f":
            expected_text, received_text = _distinct(float(want[index]), float(got[index]))
            tolerance = f"; a difference up to {atol:g} + 1e-05 × |expected| is allowed"
        return f"wrong value in {path}{where}: expected {expected_text}, received {received_text}{others}{tolerance}."
    return None


def _distinct(expected: float, received: float) -> tuple[str, str]:
    """Two floats with as many significant digits (4 to 10) as it takes to see that they differ."""
    for digits in range(4, 11):
        shown = f"{expected:.{digits}g}", f"{received:.{digits}g}"
        if shown[0] != shown[1]:
            return shown
    return repr(expected), repr(received)
