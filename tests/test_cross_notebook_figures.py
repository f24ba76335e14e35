"""A figure a notebook quotes from another notebook's run matches that notebook's record today.

A notebook that quotes another notebook's number in its prose goes stale when that notebook is
run again: 06's summary once quoted 08's previous edition. The rule checked here: in every
sentence of a Markdown cell (and every line of a stored output) that names another notebook
("notebook 08", "08's"), each decimal figure and each percentage must be one of

* a value of the named notebook's record (``results/NN_*.json``), at the figure's precision
  (a fraction printed as a percentage, 0.7268 as 72.68% or 72.7%);
* a value of the quoting notebook's own record, the same way;
* a difference in points between one of each (the quoting notebook's own value minus the
  named one's, or the reverse), as "5.3 points below notebook 06's";

or one of the few figures listed in ``NOT_FROM_A_RECORD`` with what they are. A figure that a
record holds with another value, or that no record holds, fails the test with the sentence.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIGURE = re.compile(r"(?<![\w.§×/])[−+-]?(\d[\d,]*(?:\.\d+)?)(%?)")
NAMED = re.compile(r"(?i)\bnotebooks? (\d\d)\b(?: and (\d\d))?|\b(\d\d)'s\b")
SENTENCES = re.compile(r"(?<=[.!?:;])\s+(?=[A-Z*(])|\n\s*[-*] |\n\s*\n")
LICENSE = re.compile(r"\bCC[- ]BY(?:-[A-Z]{2})* \d\.\d\b")  # "CC-BY 2.0 FR": a licence's version, not a figure

# (quoting notebook, figure): what it is, when it is no record's value.
NOT_FROM_A_RECORD: dict[tuple[str, str], str] = {
    # 12's base: one printed line gives notebook 11's recorded rate beside the base's own facts.
    ("12", "6.9"): "12's base: minutes of training",
    ("12", "2.0361"): "12's base: validation bits per character",
    ("12", "2.8865"): "12's unigram count table: validation bits per character",
}
# Stored outputs that quote a record as it stood when their notebook ran, until that notebook runs again.
STALE_OUTPUTS: dict[str, str] = {}


def _record_values(notebook_id):
    paths = list((ROOT / "results").glob(f"{notebook_id}_*.json"))
    if not paths:
        return []
    metrics = json.loads(paths[0].read_text())["metrics"]
    return [float(metric["value"]) for metric in metrics.values() if isinstance(metric["value"], (int, float))]


def _matches(value, decimals, percent, candidates):
    """True when a candidate, or a hundred times it (a fraction shown in percent or points), rounds to `value`."""
    return any(
        abs(round(shown, decimals) - value) < 0.5 * 10**-decimals + 1e-9
        for candidate in candidates
        for shown in (candidate, candidate * 100.0)
    )


def _explained(figure, own, named):
    """True when `figure` ("82.45%", "5.3") is a value of the records of `own` or `named`, or a difference."""
    match = FIGURE.fullmatch(figure.lstrip("−+-"))
    if match is None:
        return False
    number, percent = match.groups()
    value = float(number.replace(",", ""))
    decimals = len(number.split(".")[1]) if "." in number else 0
    own_values, named_values = _record_values(own), _record_values(named)
    if _matches(value, decimals, bool(percent), own_values + named_values):
        return True
    differences = [abs(a - b) for a in own_values for b in named_values if abs(a) <= 1.5 and abs(b) <= 1.5]
    return not percent and _matches(value, decimals, False, [d * 100.0 for d in differences])


def _quotes(text, own):
    """(sentence, named notebook, figure) for each decimal or percentage figure in a sentence naming another."""
    for sentence in SENTENCES.split(LICENSE.sub("", text)):
        named = {group for match in NAMED.finditer(sentence) for group in match.groups() if group and group != own}
        for match in FIGURE.finditer(sentence):
            number, percent = match.groups()
            if "." not in number and not percent or re.fullmatch(r"0\d\.\d+", number):
                continue  # an integer (a count, a size, a section) or an exercise's name (09.5)
            for other in sorted(named):
                yield " ".join(sentence.split()), other, match.group(0)


def _unexplained(path, cell_types):
    own = path.name[:2]
    notebook = json.loads(path.read_text())
    problems = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] not in cell_types:
            continue
        if cell["cell_type"] == "markdown":
            texts = ["".join(cell["source"])]
        else:
            texts = ["".join(output.get("text", "")) for output in cell.get("outputs", [])]
            texts = [line for text in texts for line in text.splitlines()]
        for text in texts:
            for sentence, other, figure in _quotes(text, own):
                if (own, figure.lstrip("−+-")) in NOT_FROM_A_RECORD or _explained(figure, own, other):
                    continue
                problems.append(f"cell {index + 1}: {figure} (naming notebook {other}) in: {sentence[:200]}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name[:2])
def test_markdown_quotes_no_figure_that_a_record_holds_otherwise(path):
    assert _unexplained(path, {"markdown"}) == []


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=STALE_OUTPUTS[path.name[:2]]))
        if path.name[:2] in STALE_OUTPUTS
        else path
        for path in NOTEBOOKS
    ],
    ids=lambda path: path.name[:2],
)
def test_stored_outputs_quote_other_notebooks_records_as_they_are(path):
    assert _unexplained(path, {"code"}) == []


def test_the_check_catches_a_stale_quote_and_passes_a_current_one(tmp_path):
    record = json.loads(next((ROOT / "results").glob("06_*.json")).read_text())
    value = next(metric["value"] for metric in record["metrics"].values() if 0 < metric["value"] < 1)
    stale, current = f"{value * 100 + 1.3:.1f}%", f"{value * 100:.1f}%"
    assert not _explained(stale, "08", "06") and _explained(current, "08", "06")
    found = list(_quotes(f"Notebook 06 reached {stale}; this one 3 of 4.", "08"))
    assert [(other, figure) for _, other, figure in found] == [("06", stale)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name[:2])
def test_a_run_time_quoted_in_prose_is_the_recorded_runs(path):
    record = list((ROOT / "results").glob(f"{path.name[:2]}_*.json"))
    text = "".join(
        "".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "markdown"
    )
    for minutes in re.findall(r"(\d+(?:\.\d+)?) minutes in all", text):
        assert record, f"{path.name} quotes a run of {minutes} minutes but has no record"
        recorded = json.loads(record[0].read_text())["seconds"] / 60
        decimals = len(minutes.split(".")[1]) if "." in minutes else 0
        assert round(recorded, decimals) == float(minutes), (
            f"{path.name} says {minutes} minutes in all; its record says {recorded:.1f}"
        )
