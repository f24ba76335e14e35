"""The grader's own work bounded: the slicer and the similarity step stay linear in a submission's statements, and
the slicer's budget is checked inside a cell, not only between cells."""

import itertools

import pytest

from transformer_course.exercises import slicing
from transformer_course_grader.similarity import strip_no_ops


def test_a_cell_of_thousands_of_statements_on_one_line_is_read_statement_by_statement():
    cell = "; ".join(f"v{index} = {index}" for index in range(6000)) + "\nw = 'é'; z = [1,\n 2]"
    units = slicing.parse_cells([cell]).units
    assert len(units) == 6002 and units[0].text == "v0 = 0" and units[5999].text == "v5999 = 5999"
    assert [unit.text for unit in units[-2:]] == ["w = 'é'", "z = [1,\n 2]"]  # offsets in bytes, text in characters


def test_past_its_statements_or_its_budget_the_slicer_stops_inside_the_cell(monkeypatch):
    with pytest.raises(slicing.SlicingTooLong, match="more than 20,000 top-level statements"):
        slicing.parse_cells(["; ".join(f"v{index} = 0" for index in range(20_001))])
    ticks = itertools.count()
    monkeypatch.setattr(slicing.time, "monotonic", lambda: float(next(ticks)))  # one second a look at the clock
    with pytest.raises(slicing.SlicingTooLong, match="stopped inside cell 1"):
        slicing.parse_cells(["; ".join(f"v{index} = 0" for index in range(100))], budget_seconds=5)


def test_a_chain_of_three_thousand_unused_assignments_is_stripped_in_one_pass():
    chain = (
        "def f(x):\n    a0 = x\n" + "".join(f"    a{i} = a{i - 1} + 1\n" for i in range(1, 3000)) + "    return x * 2\n"
    )
    assert strip_no_ops(chain) == "def f(x):\n    return x * 2"
    # What one read keeps: the chain up to it, and a global's assignment.
    kept = "def f(x):\n    a = x\n    b = a\n    c = b\n    global g\n    g = 1\n    return b"
    assert strip_no_ops(kept) == "def f(x):\n    a = x\n    b = a\n    global g\n    g = 1\n    return b"
