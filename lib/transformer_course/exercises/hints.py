"""Hints that judge a received value by a property of its own, and the comparison usual mistakes are told apart with.

The usual mistakes of the exercises come to a check as data: their outputs on the public cases, written into
``public_cases.json`` by the grader, which alone computes them (a mistake one slip from the answer is a copy of
the answer). :func:`equal_at` compares a received value with one of them. The hints here are the few that are
not an output to compare with: symbols that do not spell the word again (03.3), a finished beam still among the
live ones (07.4), an interval's ends that are floats (09.6). Like every hint they run only after an output was
found wrong, and a hint that cannot tell says nothing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["equal_at", "encode_word_hint", "beam_step_hint", "narrow_interval_hint"]


def _plain(value):
    """Arrays, tuples and lists as nested lists of Python values: what an exact comparison of strings reads."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    return value.item() if isinstance(value, np.generic) else value


def _same(received, candidate, atol=1e-6) -> bool:
    """Equal within ``atol`` (and NumPy's default relative tolerance, 1e-5), or exactly where ``atol`` is 0; values
    that are not numbers (strings) are compared exactly."""
    try:
        received_array, candidate_array = (np.asarray(value, dtype="float64") for value in (received, candidate))
    except (TypeError, ValueError):
        try:
            return bool(_plain(received) == _plain(candidate))
        except Exception:  # noqa: BLE001 - a value that cannot be compared is not equal
            return False
    return received_array.shape == candidate_array.shape and bool(
        np.allclose(received_array, candidate_array, atol=atol, rtol=1e-5 if atol else 0.0)
    )


def equal_at(value, candidate, atol, where):
    """Whether ``value`` equals ``candidate`` within ``atol`` (0: exactly; at ``where`` only, when given: a bool
    array over the leading axes); None when ``value`` is no array of numbers to compare there. A ``candidate`` that
    is a tuple is compared item by item, and its items that are None are not compared: a usual mistake judged by
    one output of several holds None for the others. A usual mistake's output is told apart with it, here and in
    the grader.

    Example:
        >>> bool(equal_at([1.0, 2.0], [1.0, 2.5], 1e-6, [True, False]))
        True
        >>> bool(equal_at((np.ones(2), 3.0), (None, 3.0), 1e-6, None))
        True
    """
    if isinstance(candidate, tuple):
        if not isinstance(value, (tuple, list)) or len(value) != len(candidate):
            return False
        return all(equal_at(item, wanted, atol, where) for item, wanted in zip(value, candidate) if wanted is not None)
    if where is None:
        return _same(value, candidate, atol)
    try:
        value, candidate = np.asarray(value, dtype="float64"), np.asarray(candidate)
    except (TypeError, ValueError):
        return None
    return value.shape == candidate.shape and _same(value[where], candidate[where], atol)


# --- judges: properties of the received value ------------------------------------------------------------------


def encode_word_hint(arguments, received, expected):
    """03.3: symbols that do not spell the word again."""
    word = arguments["word"]
    received = [str(symbol) for symbol in received] if isinstance(received, (list, tuple, np.ndarray)) else received
    if isinstance(received, list) and "".join(received) != word:
        return f"the symbols must spell the word again: joined they give {''.join(received)!r:.60}, not {word!r}."
    return None


def beam_step_hint(arguments, received, expected):
    """07.4: a finished beam among the live ones, or fewer live beams than asked for."""
    if not isinstance(received, (tuple, list)) or len(received) != 5:
        return None
    tokens = np.asarray(received[1])
    if tokens.size and np.any(tokens == arguments["end_id"]):
        return (
            "a beam that produced `end_id` is still among the live beams: set it aside as finished (with its "
            "normalised score) and keep looking for `beam_width` live ones."
        )
    if len(received[0]) < len(expected[0]):
        return (
            "fewer live beams than `beam_width`: look through the best 2 × beam_width candidates, since the ones "
            "that finish do not count as live."
        )
    return None


def narrow_interval_hint(arguments, received, expected):
    """09.6: an interval's ends that are floats, where the coder's interval holds integers."""
    if not isinstance(received, (tuple, list)) or len(received) != 2:
        return None
    if any(np.asarray(value).dtype.kind == "f" for value in received):
        return (
            "the ends are floats: the coder's interval holds integers. Use floor division `//` on Python ints "
            "(width * cumulative // total), never `/`."
        )
    return None
