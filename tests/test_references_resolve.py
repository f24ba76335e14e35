"""Every package name a docstring or a guide cites exists where it is cited, and the guides' counts are true.

A function that moves leaves its old dotted name behind in docstrings and guides
(``positional.rotary_embedding`` once outlived its move to ``rotary``). The checks here:

* each Sphinx cross-reference in a docstring of the package or the grader (``:func:`~transformer_course.x.y```,
  ``:class:``, ``:mod:``, ``:meth:``, ``:data:``) and each backticked ``transformer_course.x.y`` in
  the guides (``docs/*.md``, the README) resolves, by import and attribute, and a function or
  class it names is defined in the module named, or listed in that module's ``__all__`` (a name
  that only passes through a module's imports is not that module's);
* the counts of notebooks, exercises and points that the guides state equal the catalog's, and so do
  the counts of notebooks in the workflows', nox sessions' and CI script's comments.
"""

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "transformer_course"
GRADER = ROOT / "grader" / "lib" / "transformer_course_grader"
ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc):`~?(transformer_course(?:_grader)?(?:\.\w+)+)`")
BACKTICKED = re.compile(r"`(transformer_course(?:_grader)?(?:\.\w+)+)`")


def _resolves(dotted):
    """'' when `dotted` names an existing object where it says; else what is wrong."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        owner, value = module, module
        for index, name in enumerate(parts[cut:]):
            if not hasattr(value, name):
                return f"{'.'.join(parts[: cut + index])} has no {name!r}"
            owner, value = value, getattr(value, name)
        if owner is module and cut < len(parts) and (callable(value) or isinstance(value, type)):
            defined_in = getattr(value, "__module__", module.__name__)
            exported = name in getattr(module, "__all__", ())
            if defined_in != module.__name__ and not exported:
                return f"{name} lives in {defined_in}, not {module.__name__} (nor in its __all__)"
        return ""
    return f"no module in {dotted}"


def _docstrings(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield getattr(node, "lineno", 1), text


def _cited():
    cited = []
    for path in sorted(PACKAGE.rglob("*.py")) + sorted(GRADER.rglob("*.py")):
        for line, text in _docstrings(path):
            cited += [(f"{path.relative_to(ROOT)}:{line}", match) for match in ROLE.findall(text)]
    for path in sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md", ROOT / "grader" / "README.md"]:
        text = path.read_text(encoding="utf-8")
        cited += [(str(path.relative_to(ROOT)), match) for match in BACKTICKED.findall(text) + ROLE.findall(text)]
    return cited


def test_docstrings_and_guides_cite_names_that_exist_where_they_say():
    problems = [f"{where}: {dotted}: {problem}" for where, dotted in _cited() if (problem := _resolves(dotted))]
    assert problems == []


def test_the_check_catches_a_moved_name():
    assert _resolves("transformer_course.rotary.rotary_embedding") == ""
    assert "has no 'rotary_embedding'" in _resolves("transformer_course.positional.rotary_embedding")
    assert _resolves("transformer_course.training.fit_best") == ""


COUNTED = [
    "README.md",
    "grader/README.md",
    "docs/*.md",
    ".github/workflows/*.yml",
    "noxfile.py",
    "pyproject.toml",
    ".ci/run",
]
NUMBER_WORDS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15}
_COUNT = r"(\d+|" + "|".join(NUMBER_WORDS) + r")"
NOTEBOOK_COUNTS = (rf"(?<!Keras )\b{_COUNT} notebooks\b", rf"\bof all {_COUNT}\b")  # "13 notebooks", "of all ten"


def _counted_paths():
    return sorted({path for pattern in COUNTED for path in ROOT.glob(pattern)})


def _notebook_counts(text):
    """Every count of notebooks `text` states ("thirteen notebooks", "of all ten"), as numbers."""
    found = [count for pattern in NOTEBOOK_COUNTS for count in re.findall(pattern, text, flags=re.IGNORECASE)]
    return [int(count) if count.isdigit() else NUMBER_WORDS[count.lower()] for count in found]


def test_the_guides_counts_of_notebooks_exercises_and_points_are_the_catalogs():
    # The guides, and the comments of the workflows, nox sessions and CI script that count the notebooks.
    from transformer_course.exercises import EXERCISES

    notebooks = len(list((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    exercises, points = len(EXERCISES), sum(exercise.points for exercise in EXERCISES.values())
    for path in _counted_paths():
        text = " ".join(path.read_text(encoding="utf-8").split())
        for count in re.findall(r"\b(\d+) (?:graded )?exercises\b", text):
            assert int(count) == exercises, f"{path.name} says {count} exercises; the catalog holds {exercises}"
        for count in re.findall(r"\b(\d+) exercises, (\d+) points\b", text):
            assert int(count[1]) == points, f"{path.name} says {count[1]} points; the catalog's sum is {points}"
        for count in _notebook_counts(text):
            assert count == notebooks, f"{path.name} says {count} notebooks; there are {notebooks}"


def test_the_count_check_reads_the_workflows_phrasing():
    text = "The release and the grading of all Eleven run in the full suite; 500 students x 10 notebooks"
    assert _notebook_counts(text) == [10, 11]
    assert {path.name for path in _counted_paths()} >= {"checks.yml", "grade.yml", "noxfile.py"}


@pytest.mark.parametrize(
    "dotted", ["transformer_course.bert.gelu_approximate", "transformer_course.bert_checkpoints.PresetUnavailableError"]
)
def test_names_passed_through_are_judged_by_where_they_live(dotted):
    # Either defined there or exported there: both are fine; passing through an import is not.
    module_name, name = dotted.rsplit(".", 1)
    module = importlib.import_module(module_name)
    value = getattr(module, name)
    expected = "" if value.__module__ == module_name or name in getattr(module, "__all__", ()) else "lives in"
    assert (_resolves(dotted) == "") == (expected == "")


def test_the_students_catalogue_is_generated_from_the_exercises():
    """docs/students.md holds the catalogue as `transformer-course catalogue --update docs/students.md` writes it."""
    from transformer_course.exercises import catalogue_table
    from transformer_course.tooling.cli import CATALOGUE_MARKERS

    text = (ROOT / "docs" / "students.md").read_text(encoding="utf-8")
    start, end = (text.index(marker) for marker in CATALOGUE_MARKERS)
    assert text[start + len(CATALOGUE_MARKERS[0]) : end].strip() == catalogue_table()


def test_the_catalogue_command_rewrites_a_stale_copy_and_refuses_a_guide_without_markers(tmp_path, capsys):
    from transformer_course.exercises import catalogue_table
    from transformer_course.tooling.cli import CATALOGUE_MARKERS, main

    guide = tmp_path / "guide.md"
    guide.write_text(f"Intro.\n\n{CATALOGUE_MARKERS[0]}\n| 01 | stale |\n{CATALOGUE_MARKERS[1]}\n\nEnd.\n")
    assert main(["catalogue", "--update", str(guide)]) == 0
    expected = f"Intro.\n\n{CATALOGUE_MARKERS[0]}\n{catalogue_table()}\n{CATALOGUE_MARKERS[1]}\n\nEnd.\n"
    assert guide.read_text() == expected
    assert main(["catalogue", "--update", str(guide)]) == 0 and "already up to date" in capsys.readouterr().out
    (tmp_path / "plain.md").write_text("No markers.\n")
    assert main(["catalogue", "--update", str(tmp_path / "plain.md")]) == 2
    assert "must contain the lines" in capsys.readouterr().err
