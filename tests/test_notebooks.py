"""The notebooks as files: pairing, stored outputs, badges, and the README's commands.

Executing them is nbval's job: pytest collects notebooks/*.ipynb with --nbval-lax.
"""

import re
from pathlib import Path

import jupytext
import nbformat
import pytest

from transformer_course.tooling.publishing import COLAB_INSTALL, publication

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_paired_script_matches_the_notebook(path):
    script = path.with_suffix(".py")
    assert script.exists(), f"{path.name} has no paired {script.name}; run jupytext --set-formats ipynb,py:percent"
    from_notebook = [(c.cell_type, c.source.strip()) for c in jupytext.read(path).cells]
    from_script = [(c.cell_type, c.source.strip()) for c in jupytext.read(script).cells]
    assert from_notebook == from_script, f"{path.name} and {script.name} disagree; run jupytext --sync {path}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_outputs_come_from_one_full_profile_run_without_errors(path):
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count is not None for cell in code), "every code cell must have run"
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), "outputs must come from one top-to-bottom run"
    assert not [o for cell in code for o in cell.outputs if o.output_type == "error"]
    first_output = next(o for cell in code for o in cell.outputs if o.output_type == "stream")
    assert first_output["text"].startswith("Profile: full\n")


def _counted_lines(source: str) -> list[str]:
    """The lines of code that count: not blank, and not part of an import (a cell may list what it needs,
    one name a line in a parenthesised import too)."""
    counted, importing = [], False
    for line in source.splitlines():
        if line.startswith(("import ", "from ")):
            importing = line.rstrip().endswith("(")
        elif importing:
            importing = not line.strip().startswith(")")
        elif line.strip():
            counted.append(line)
    return counted


# Lesson cells over the limit in a stored run, by notebook and how they begin, until that notebook's next full
# run splits them (its outputs must come from the code as it ran). Each must still be there and still be long.
OVER_LONG_UNTIL_THE_NEXT_RUN = {
    "08_bert_pretraining": ("runs = {}",),  # 16 lines: clearing Keras' state per run
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_cells_stay_short(path):
    """A lesson cell holds at most 15 lines of code; an exercise's solution, which the student writes and the
    release replaces, at most 40 (the capstone is a whole model)."""
    notebook = nbformat.read(path, as_version=4)
    waiting = set(OVER_LONG_UNTIL_THE_NEXT_RUN.get(path.stem, ()))
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            limit = 40 if cell.metadata.get("nbgrader", {}).get("solution") else 15
            start = next((start for start in waiting if cell.source.startswith(start)), None)
            if start is not None and len(_counted_lines(cell.source)) > limit:
                waiting.discard(start)
                continue
            assert len(_counted_lines(cell.source)) <= limit, f"cell {index + 1} has over {limit} lines of code"
    assert not waiting, f"no longer over-long, remove from OVER_LONG_UNTIL_THE_NEXT_RUN: {waiting}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_colab_badges_open_the_student_version_named_by_the_setting(path):
    setting = publication(ROOT)
    badge = setting.colab_link(path.name)
    assert badge.endswith(f"/blob/{setting.ref}/release/{path.name}")
    assert badge in (ROOT / "README.md").read_text(encoding="utf-8")
    for notebook in (path, ROOT / "release" / path.name):
        cells = nbformat.read(notebook, as_version=4).cells
        assert badge in cells[0].source, notebook
        assert f'"{setting.requirement}"' in cells[1].source, notebook


def test_every_colab_link_a_student_sees_opens_a_release_notebook():
    """README, source and release notebooks: no Colab link to notebooks/ (the solutions), none elsewhere."""
    setting = publication(ROOT)
    files = [ROOT / "README.md", *NOTEBOOKS, *(ROOT / "release").glob("*.ipynb")]
    for file in files:
        text = file.read_text(encoding="utf-8")
        links = re.findall(r"https://colab\.research\.google\.com/github/[^\s)\"\\]+", text)
        assert links, file
        assert all(link == setting.colab_link(link.rsplit("/", 1)[1]) for link in links), (file, links)
        assert all(requirement == setting.requirement for requirement in COLAB_INSTALL.findall(text)), file


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", quick_start, flags=re.S)


def test_readme_quick_start_has_two_complete_commands():
    commands = _readme_commands()
    assert len(commands) == 2
    for command in commands:
        assert command.startswith("python3 -m venv .venv && .venv/bin/pip install -r requirements.txt -e .")
    assert commands[0].endswith("transformer-course run --profile smoke")
    assert commands[1].endswith("-m pytest")


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert _readme_commands()[1] in ci.splitlines()


def test_the_readme_package_table_names_every_module_of_the_package():
    """A module added to `lib/` appears in the README's package table (or, for the three parts, its prose)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## The package", 1)[1].split("\n## ", 1)[0]
    package = ROOT / "lib" / "transformer_course"
    modules = {path.stem for path in package.glob("*.py") if not path.stem.startswith("_")}
    modules |= {path.parent.name for path in package.glob("*/__init__.py")} - {"records"}  # records: data only
    assert not {module for module in modules if f"`{module}`" not in section}


# A reading ("**Reading the run.** ...") interprets a recorded run, so each number it states with two or more
# decimals must be one the run printed (rounded as printed, or a percentage of a printed fraction), or a
# constant of the notebook's own code (a lesson's 0.02). The exceptions, by notebook, until that notebook's next full
# run prints them; each must still be in a reading and still be printed nowhere.
READ_OFF_A_FIGURE_UNTIL_THE_NEXT_RUN = {
    "08_bert_pretraining": {"0.397", "0.381"},  # the discriminator's loss, read off its curve, printed by no cell
}
_READING_NUMBER = re.compile(r"(?<![\w.·⁻])((?:\d{1,3}(?:,\d{3})+|\d+)\.\d{2,})")
_PRINTED_NUMBER = re.compile(r"\d+(?:,\d{3})*\.\d+")


def _printed_numbers(notebook) -> list[tuple[float, int]]:
    """(value, decimals) of every decimal number in the code cells' text outputs and in their sources."""
    texts = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts.append(output.get("text", "") + output.get("data", {}).get("text/plain", ""))
    numbers = []
    for match in _PRINTED_NUMBER.finditer("\n".join(texts)):
        literal = match.group(0).replace(",", "")
        numbers.append((float(literal), len(literal.split(".")[1])))
    return numbers


def _shown(literal: str, printed: list[tuple[float, int]]) -> bool:
    """Whether a reading's number is a printed one, rounded to the reading's decimals (or a printed fraction x 100)."""
    value, decimals = float(literal), len(literal.split(".")[1])
    half_step = 0.5 * 10.0**-decimals + 1e-9
    for number, places in printed:
        if places >= decimals and abs(number - value) <= half_step:
            return True
        if places >= decimals + 2 and abs(100 * number - value) <= half_step:  # 0.6853 printed, 68.53 (%) read
            return True
    return False


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_number_a_reading_states_is_one_the_run_printed(path):
    notebook = nbformat.read(path, as_version=4)
    printed = _printed_numbers(notebook)
    excused = READ_OFF_A_FIGURE_UNTIL_THE_NEXT_RUN.get(path.stem, set())
    stated, unprinted = set(), set()
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and "**Reading" in cell.source:
            for match in _READING_NUMBER.finditer(cell.source):
                literal = match.group(1).replace(",", "")
                stated.add(literal)
                if not _shown(literal, printed):
                    unprinted.add(literal)
    assert unprinted - excused == set(), (
        f"numbers in {path.stem}'s readings that no output shows: {unprinted - excused}"
    )
    assert excused <= unprinted, f"excused numbers that are printed now or no longer read: {excused - unprinted}"
