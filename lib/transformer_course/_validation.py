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
