"""Argument checks shared by the package: one wording for every error message."""

from __future__ import annotations

import warnings

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


def renamed(new_name: str, new_value, old_name: str, old_value):
    """The value of an argument that has a new name, taking one passed under its former name with a warning.

    Args:
        new_name, old_name: str, the argument's names, as callers spell them.
        new_value, old_value: what was received under each (None where not given).

    Returns:
        The value given, under whichever name.

    Raises:
        TypeError: if both names were given, or neither.

    Warns:
        DeprecationWarning: naming both, when the former name was used.

    Example:
        >>> renamed("vocabulary_size", 50, "vocab_size", None)
        50
    """
    if old_value is None:
        if new_value is None:
            raise TypeError(f"missing the argument `{new_name}`.")
        return new_value
    if new_value is not None:
        raise TypeError(
            f"`{old_name}` is the former name of `{new_name}`: pass one of them; received "
            f"{new_name}={new_value!r} and {old_name}={old_value!r}."
        )
    warnings.warn(
        f"`{old_name}` is now called `{new_name}`; the former name will stop working in a later release.",
        DeprecationWarning,
        stacklevel=3,
    )
    return old_value


def renamed_config(config: dict, **new_names) -> dict:
    """A saved config with its former keys under their new names (``renamed_config(c, vocab_size="vocabulary_size")``).

    Files saved before a rename load without a warning.
    """
    return {new_names.get(key, key): value for key, value in config.items()}


def check_positive(name: str, value) -> float:
    """Return ``value`` as a float, or raise a ValueError naming the argument: a real number > 0.

    Args:
        name: str, the argument's name, as the caller spells it.
        value: what was received.

    Raises:
        ValueError: if ``value`` is not a real number (bools excluded) above 0.

    Example:
        >>> check_positive("beta", 0.1)
        0.1
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number; received {value!r}.")
    return float(value)


def check_non_negative(name: str, value) -> float:
    """Return ``value`` as a float, or raise a ValueError naming the argument: a real number >= 0 (a coefficient).

    Args:
        name: str, the argument's name, as the caller spells it.
        value: what was received.

    Raises:
        ValueError: if ``value`` is not a real number (bools excluded) at or above 0.

    Example:
        >>> check_non_negative("kl_coefficient", 0)
        0.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0:
        raise ValueError(f"`{name}` must be a number >= 0; received {value!r}.")
    return float(value)


def check_rate(name: str, value) -> float:
    """Return ``value`` as a float, or raise a ValueError naming the argument: a rate in [0, 1) (dropout).

    Args:
        name: str, the argument's name, as the caller spells it.
        value: what was received.

    Raises:
        ValueError: if ``value`` is not a real number (bools excluded) in [0, 1).

    Example:
        >>> check_rate("dropout", 0.1)
        0.1
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not 0.0 <= value < 1.0
    ):
        raise ValueError(f"`{name}` must be in [0, 1); received {value!r}.")
    return float(value)


def check_model_sizes(embed_dim, num_heads, dropout, **sizes) -> None:
    """The checks every model builder makes: positive sizes, heads that divide the width, a dropout rate.

    Args:
        embed_dim: the model width E; must be a positive integer.
        num_heads: the number of heads N; must be a positive integer dividing E.
        dropout: float in [0, 1).
        **sizes: further sizes (``vocabulary_size=...``), each a positive integer.

    Raises:
        ValueError: naming the first argument that is wrong and what was received.
    """
    for name, value in {**sizes, "embed_dim": embed_dim}.items():
        check_integer(name, value)
    if check_integer("num_heads", num_heads) and embed_dim % num_heads:
        raise ValueError(f"`num_heads` ({num_heads}) must divide `embed_dim` ({embed_dim}).")
    check_rate("dropout", dropout)


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
        raise TypeError(
            f"`{name}` must be a string or a list of strings; received {type(value).__name__} {value!r:.60}."
        )
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(f"`{name}[{index}]` must be a string; received {type(item).__name__} {item!r:.60}.")
    return False, list(value)
