"""Timing shared by the benchmark scripts."""

import time


def interleaved_seconds(functions: dict, repeats: int) -> dict:
    """Wall-clock seconds of each function over ``repeats`` rounds, one call of each per round.

    Interleaving means a change in the machine's load during the run hits every function alike,
    so the ratios between them stay fair on a shared machine.

    Args:
        functions: ``{name: callable taking no arguments}``, already warmed up (compiled).
        repeats: int >= 1, rounds.

    Returns:
        ``{name: [seconds of each call]}`` in the order of ``functions``.
    """
    seconds = {name: [] for name in functions}
    for _ in range(repeats):
        for name, function in functions.items():
            start = time.perf_counter()
            function()
            seconds[name].append(time.perf_counter() - start)
    return seconds
