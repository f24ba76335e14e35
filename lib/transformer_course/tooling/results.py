"""Records of real runs: what a notebook reports, and the summary table built from them.

A notebook calls :func:`report_metric` for each number it reports. When the headless runner
(``transformer-course run``) executes the notebook it collects those metrics, and after a
full-profile run it writes one JSON record per notebook to ``results/`` with the metrics, the
profile, the hardware, the library versions, the run time in seconds and the git commit.
The README's results table is generated from those records (``transformer-course results``).
"""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from .._files import replace_between_markers, write_text_atomically

__all__ = [
    "METRICS_FILE_VARIABLE",
    "report_metric",
    "report_environment",
    "read_report",
    "write_record",
    "load_records",
    "load_record",
    "headline",
    "results_table",
    "update_readme_table",
]

METRICS_FILE_VARIABLE = "COURSE_METRICS_FILE"
_TABLE_START = "<!-- results-table:start -->"
_TABLE_END = "<!-- results-table:end -->"


def report_metric(name: str, value, description: str = "", headline: bool = False, read_against: str = "") -> None:
    """Report one number a notebook shows: print it, and hand it to the runner if one is running.

    Args:
        name: str, a short identifier (``"test_element_accuracy"``).
        value: a finite int or float (NumPy scalars are accepted). An integer (an epoch, a
            count) is printed and recorded as an integer.
        description: str, what the number is, for the summary table.
        headline: bool, the notebook's main number (the runner's table shows it).
        read_against: str, the name of another metric of the same run that this one means
            something only beside (pre-trained against from scratch): the results table shows
            both, as ``value vs other (other's description)``. Empty for none.

    Raises:
        ValueError: if ``name`` is empty, ``value`` is not a finite number, or ``read_against``
            is not a str or names the metric itself.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty str; received {name!r}.")
    if not isinstance(read_against, str) or read_against == name:
        raise ValueError(f"`read_against` must name another metric (a str); received {read_against!r}.")
    is_integer = isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    try:
        number = int(value) if is_integer else float(value)
    except (TypeError, ValueError):
        raise ValueError(f"`value` must be a number; received {value!r}.") from None
    if not math.isfinite(number):
        raise ValueError(f"`value` must be finite; received {value!r}.")
    shown = str(number) if is_integer else f"{number:.4f}"
    print(f"{name} = {shown}" + (f"  ({description})" if description else ""))
    target = os.environ.get(METRICS_FILE_VARIABLE)
    if target:
        entry = {"name": name, "value": number, "description": description, "headline": headline}
        if read_against:
            entry["read_against"] = read_against
        with open(target, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(entry) + "\n")


def format_value(value) -> str:
    """A recorded metric as the tables show it: an integer as an integer; else at most 4 decimals,
    trailing zeros beyond the second dropped (29.91, not 29.9100; 0.9988; 1.00)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = f"{value:.4f}"
    while text.endswith("0") and len(text.split(".")[1]) > 2:
        text = text[:-1]
    return text


def report_environment(hardware: dict, versions: dict) -> None:
    """Hand the kernel's hardware and library versions to the runner, if one is running."""
    target = os.environ.get(METRICS_FILE_VARIABLE)
    if target:
        with open(target, "a", encoding="utf-8") as stream:
            stream.write(json.dumps({"environment": {"hardware": hardware, "versions": versions}}) + "\n")


def read_report(path: str | os.PathLike) -> tuple[dict, dict]:
    """Read what :func:`report_metric` and :func:`report_environment` wrote.

    Returns:
        ``(metrics, environment)``: metrics maps name -> ``{"value", "description",
        "headline"}`` (a later report of a name replaces an earlier one); environment holds
        ``hardware`` and ``versions`` when reported. Both are empty if the file is missing.
    """
    metrics: dict = {}
    environment: dict = {}
    path = Path(path)
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            entry = json.loads(line)
            if "environment" in entry:
                environment = entry["environment"]
            else:
                metrics[entry.pop("name")] = entry
    return metrics, environment


def write_record(
    results_dir: str | os.PathLike,
    notebook: str,
    *,
    profile: str,
    metrics: dict,
    seconds: float,
    hardware: dict,
    versions: dict,
    commit: dict,
) -> Path:
    """Write ``results_dir/<notebook>.json`` atomically and return its path.

    Args:
        results_dir: folder of records (created if missing).
        notebook: str, the notebook's file stem (``"01_seq2seq_lstm"``).
        profile: str, the profile the run used.
        metrics: the metrics from :func:`read_report`.
        seconds: float, wall-clock run time of the whole notebook.
        hardware, versions, commit: from :mod:`transformer_course.tooling.runtime`.
    """
    record = {
        "notebook": notebook,
        "profile": profile,
        "metrics": metrics,
        "seconds": round(seconds, 1),
        "hardware": hardware,
        "versions": versions,
        "commit": commit.get("commit"),
        "uncommitted_changes": commit.get("dirty"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return write_text_atomically(
        Path(results_dir) / f"{notebook}.json", json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    )


def load_records(results_dir: str | os.PathLike) -> list[dict]:
    """All records in ``results_dir``, ordered by notebook name."""
    folder = Path(results_dir)
    return [json.loads(path.read_text(encoding="utf-8")) for path in sorted(folder.glob("*.json"))]


# The full-profile records as of the last `transformer-course-grader release`, shipped inside the package so
# that a notebook run from a pip install or in Colab (no results/ folder) still reads them.
PACKAGED_RECORDS = Path(__file__).parent.parent / "records"


def checkout_results() -> Path | None:
    """The ``results/`` folder of the checkout this package is imported from; None for an installed package."""
    root = Path(__file__).resolve().parents[3]  # <root>/lib/transformer_course/tooling/results.py
    return root / "results" if (root / "pyproject.toml").is_file() else None


def load_record(notebook: str, results_dir: str | os.PathLike | None = None) -> dict | None:
    """The record of ``notebook``'s last full-profile run, or None if there is none.

    Reads ``results_dir`` first (a checkout's own, freshest records), then the copy shipped in the
    package (``PACKAGED_RECORDS``, written by ``transformer-course-grader release``).

    Args:
        notebook: str, the notebook's file stem (``"01_seq2seq_lstm"``).
        results_dir: the records' folder; None (the default) for the ``results/`` of the checkout
            the package is imported from (:func:`checkout_results`), whatever the working folder.

    Returns:
        dict, the record as :func:`write_record` wrote it; None when neither place holds one.

    Example:
        >>> load_record("06_imdb_classifier")["profile"]  # doctest: +SKIP
        'full'
    """
    for folder in (checkout_results() if results_dir is None else Path(results_dir), PACKAGED_RECORDS):
        if folder is not None and (folder / f"{notebook}.json").is_file():
            return json.loads((folder / f"{notebook}.json").read_text(encoding="utf-8"))
    return None


def headline(metrics: dict) -> tuple[str, dict] | None:
    """The metric marked ``headline``, else the first one, else None."""
    for name, entry in metrics.items():
        if entry.get("headline"):
            return name, entry
    return next(iter(metrics.items()), None)


def results_table(records: list[dict], for_students: bool = False) -> str:
    """A Markdown table of the records: notebook, headline metric, value, hardware, time.

    A headline reported with ``read_against`` (:func:`report_metric`) is shown with the metric
    it is read against, as ``value vs other (other's description)``, when the record holds both.
    With ``for_students`` the table keeps what a student reads (notebook, what was measured, the
    result, the run time) and leaves the profile, hardware and commit to the maintainers' copy.
    """
    lines = [
        "| notebook | what was measured | result | run time |"
        if for_students
        else "| notebook | result | value | profile | hardware | run time | commit |",
        "|---|---|---|---|" if for_students else "|---|---|---|---|---|---|---|",
    ]
    for record in records:
        top = headline(record["metrics"])
        name, value = (
            ("—", "—") if top is None else (top[1].get("description") or top[0], format_value(top[1]["value"]))
        )
        against = top[1].get("read_against") if top else None
        other = record["metrics"].get(against) if against else None
        if other is not None:
            value = f"{value} vs {format_value(other['value'])} ({other.get('description') or against})"
        name = name.replace("|", "\\|")  # a sacreBLEU signature holds "|", which would split the table row
        hardware = record["hardware"]
        vectors = f", {hardware['vectors']}" if hardware.get("vectors") else ""  # recorded since 2026-12-07
        machine = hardware.get("accelerator") or f"CPU ({hardware.get('cpu_count')} cores{vectors})"
        commit = (record.get("commit") or "unknown")[:10]
        if for_students:
            lines.append(f"| {record['notebook']} | {name} | {value} | {record['seconds'] / 60:.1f} min |")
            continue
        lines.append(
            f"| {record['notebook']} | {name} | {value} | {record['profile']} | {machine} | "
            f"{record['seconds'] / 60:.1f} min | {commit} |"
        )
    return "\n".join(lines)


def update_readme_table(readme: str | os.PathLike, results_dir: str | os.PathLike) -> bool:
    """Regenerate the table between the README's results-table markers.

    Returns:
        True if the README changed.

    Raises:
        ValueError: if the README lacks the two marker lines.
    """
    path = Path(readme)
    text = path.read_text(encoding="utf-8")
    table = results_table(load_records(results_dir))
    new = replace_between_markers(text, (_TABLE_START, _TABLE_END), table, where=str(path))
    if new != text:
        write_text_atomically(path, new)
    return new != text
