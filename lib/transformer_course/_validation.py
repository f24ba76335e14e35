"""Argument checks shared by the package: one wording for every error message."""

from __future__ import annotations

import numpy as np


def check_integer(name: str, value, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise a ValueError naming the argument.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: what was received.
        minimum: int, the smallest allowed value.

    Raises:
        ValueError: if ``value`` is not an integer (bools excluded) or is below ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"`{name}` must be {wanted}; received {value!r}.")
    return int(value)


def check_texts(name: str, value) -> tuple[bool, list]:
    """Accept one string or a list/tuple of strings; say which, and return them as a list.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: what was received.

    Returns:
        ``(single, texts)``: single is True when ``value`` was one ``str``.

    Raises:
        TypeError: naming the argument (and the position of the first non-string) and what was
            received.
    """
    if isinstance(value, str):
        return True, [value]
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"`{name}` must be a string or a list of strings; received {type(value).__name__} {value!r:.60}.")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"`{name}[{index}]` must be a string; received {type(item).__name__} {item!r:.60}.")
    return False, list(value)
