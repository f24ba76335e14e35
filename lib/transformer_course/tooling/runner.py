"""Running notebooks headless: nbclient executes them in order, into executed copies.

* :func:`run_notebooks` — execute notebooks in a profile; a full-profile run writes one record per
  passing notebook to ``results/``.
* :func:`find_notebooks` — resolve ``01`` / file names / paths to notebooks.
* :func:`clean_outputs` — what is done to every executed copy before it is written: TensorFlow's
  machine-dependent INFO records removed, progress bars collapsed to their final line.
* :func:`summary_table` — notebook, status, seconds, headline metric.

The ``transformer-course run`` command (:mod:`transformer_course.tooling.cli`) is a thin wrapper.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path

from . import results, runtime
from .profiles import PROFILE_NAMES

__all__ = [
    "NotebookRun",
    "find_notebooks",
    "run_notebooks",
    "summary_table",
    "record_smoke_times",
    "clean_outputs",
    "drop_info_records_from_outputs",
    "collapse_progress_bars",
]


@dataclass
class NotebookRun:
    """What happened when one notebook ran."""

    path: Path
    status: str = "not run"  # "passed" | "failed"
    seconds: float = 0.0
    metrics: dict = field(default_factory=dict)
    environment: dict = field(default_factory=dict)  # the kernel's hardware and versions
    failure: str | None = None  # which cell failed and why
    executed_copy: Path | None = None
    record: Path | None = None

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def find_notebooks(names: list[str], notebooks_dir: Path) -> list[Path]:
    """Resolve ``names`` (paths, file names, or ids such as ``01``) to notebooks, in order.

    With no names, every ``NN_*.ipynb`` in ``notebooks_dir``.

    Raises:
        SystemExit: naming the argument that matches no notebook, and listing those that exist.
    """
    available = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        if not available:
            raise SystemExit(f"error: no notebooks (NN_*.ipynb) in {notebooks_dir}")
        return available
    chosen = []
    for name in names:
        path = Path(name)
        if path.suffix == ".ipynb" and path.exists():
            chosen.append(path)
            continue
        matches = [p for p in available if p.name == name or p.stem == name or p.name.startswith(f"{name}_")]
        if len(matches) != 1:
            listing = ", ".join(p.stem for p in available) or "none"
            raise SystemExit(
                f"error: NOTEBOOK {name!r} matches {len(matches)} notebooks in {notebooks_dir}; available: {listing}"
            )
        chosen.append(matches[0])
    return chosen


def _run_one(path: Path, profile: str, build_dir: Path, timeout: int, progress: bool) -> NotebookRun:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from tqdm import tqdm
    from traitlets.config import Config

    run = NotebookRun(path=path)
    notebook = nbformat.read(path, as_version=4)
    code_cells = sum(cell.cell_type == "code" for cell in notebook.cells)
    current = {"index": None}
    bar = tqdm(total=code_cells, desc=path.stem, unit="cell", disable=not progress, leave=False)

    def on_cell_start(cell, cell_index):
        current["index"] = cell_index

    def on_cell_executed(cell, cell_index, execute_reply):
        bar.update(1)

    with tempfile.TemporaryDirectory() as scratch:
        metrics_file = Path(scratch) / "metrics.jsonl"
        kernel_temporary = Path(scratch, "tmp")
        kernel_temporary.mkdir()
        saved = {
            key: os.environ.get(key)
            for key in ("COURSE_PROFILE", results.METRICS_FILE_VARIABLE, "TF_CPP_MIN_LOG_LEVEL", "TMPDIR")
        }
        # The kernel's temporary files (TensorFlow's autograph writes one per traced function)
        # go into the scratch folder, which is removed after the run.
        os.environ.update(
            {
                "COURSE_PROFILE": profile,
                results.METRICS_FILE_VARIABLE: str(metrics_file),
                "TMPDIR": str(kernel_temporary),
            }
        )
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        config = Config()
        # Talk to the kernel through socket files in the scratch folder, not unencrypted TCP ports.
        config.KernelManager.transport = "ipc"
        config.KernelManager.ip = str(Path(scratch, "kernel"))
        client = NotebookClient(
            notebook,
            config=config,
            timeout=timeout,
            kernel_name="python3",
            record_timing=False,  # keeps executed copies free of per-cell timestamps
            resources={"metadata": {"path": str(path.parent.resolve())}},
            on_cell_start=on_cell_start,
            on_cell_executed=on_cell_executed,
        )
        start = time.perf_counter()
        try:
            client.execute()
            run.status = "passed"
        except Exception as error:  # noqa: BLE001 - a cell error, a timeout, a dead or unstartable kernel
            run.status = "failed"
            in_a_cell = isinstance(error, (CellExecutionError, CellTimeoutError, DeadKernelError))
            index = current["index"] if in_a_cell else None
            where = (
                "outside the cells (kernel start-up or shut-down)"
                if index is None
                else f"cell {index + 1} of {len(notebook.cells)}"
            )
            if index is not None:
                first_line = notebook.cells[index].source.strip().splitlines()[:1]
                if first_line:
                    where += f" ({first_line[0][:60]!r})"
            reason = getattr(error, "ename", None) or type(error).__name__
            last_line = (str(error).strip().splitlines() or [""])[-1]
            run.failure = f"{where}: {reason}: {getattr(error, 'evalue', None) or last_line}"
        finally:
            run.seconds = time.perf_counter() - start
            bar.close()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        run.metrics, run.environment = results.read_report(metrics_file)

    clean_outputs(notebook)
    build_dir.mkdir(parents=True, exist_ok=True)
    run.executed_copy = build_dir / path.name
    nbformat.write(notebook, run.executed_copy)
    return run


def drop_info_records_from_outputs(notebook) -> None:
    """Remove TensorFlow's C++ INFO records from every stderr output of ``notebook``, in place.

    Records logged after start-up (XLA's "Compiled cluster using XLA!", oneDNN notices on Intel
    CPUs) depend on the machine, so they must not land in a stored notebook; warnings and errors
    stay (see :func:`transformer_course._backend.drop_info_records`). A stderr output left empty
    is removed.
    """
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                output["text"] = runtime.drop_info_records(output["text"])
                if not output["text"]:
                    continue
            kept.append(output)
        cell.outputs = kept


def collapse_progress_bars(text: str) -> str:
    """Keep what a terminal would show of ``text``: per line, the part after the last carriage return.

    A progress bar redraws itself with ``\r``. Jupyter shows only the last drawing, but a stored
    notebook keeps every one, and nbconvert or GitHub print them all, one line each.

    Args:
        text: str, stream output.

    Returns:
        str: each line replaced by its last non-empty ``\r``-separated part.
    """
    lines = []
    for line in text.split("\n"):
        parts = [part for part in line.split("\r") if part]
        lines.append(parts[-1] if parts else "")
    return "\n".join(lines)


def clean_outputs(notebook) -> None:
    """Make an executed notebook's outputs independent of the machine and readable when stored.

    In place: consecutive stream outputs of one stream are merged and their progress bars
    collapsed to the final drawing (:func:`collapse_progress_bars`); TensorFlow's C++ INFO
    records are removed from stderr (:func:`drop_info_records_from_outputs`).
    """
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for output in cell.get("outputs", []):
            previous = merged[-1] if merged else None
            if (
                output.get("output_type") == "stream"
                and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")
            ):
                previous["text"] += output["text"]
                continue
            merged.append(output)
        for output in merged:
            if output.get("output_type") == "stream":
                output["text"] = collapse_progress_bars(output["text"])
        cell.outputs = merged
    drop_info_records_from_outputs(notebook)


def run_notebooks(
    paths: list[Path],
    profile: str,
    build_dir: Path,
    results_dir: Path,
    timeout: int = 1800,
    progress: bool = True,
) -> list[NotebookRun]:
    """Execute ``paths`` in order; a failure does not stop the later notebooks.

    Args:
        paths: notebooks to run.
        profile: ``"smoke"`` or ``"full"``; passed to each kernel as ``COURSE_PROFILE``.
        build_dir: where the executed copies go (the sources are never written).
        results_dir: where a full-profile run writes one record per passing notebook.
        timeout: int, seconds one cell may run.
        progress: bool, show a progress bar per notebook.

    Returns:
        One :class:`NotebookRun` per notebook.

    Raises:
        ValueError: for an unknown ``profile``.
    """
    if profile not in PROFILE_NAMES:
        raise ValueError(f"`profile` must be one of {PROFILE_NAMES}; received {profile!r}.")
    runs = []
    for index, path in enumerate(paths, start=1):
        if progress:
            print(f"[{index}/{len(paths)}] {path} ({profile} profile)", file=sys.stderr, flush=True)
        # The code as it was when the run started; records this run writes do not count as changes.
        commit = runtime.git_commit(path.parent, ignore=(results_dir,))
        run = _run_one(path, profile, build_dir, timeout, progress)
        if run.passed and profile == "full":
            run.record = results.write_record(
                results_dir,
                path.stem,
                profile=profile,
                metrics=run.metrics,
                seconds=run.seconds,
                hardware=run.environment.get("hardware") or runtime.hardware(),
                versions=run.environment.get("versions") or runtime.library_versions(),
                commit=commit,
            )
        runs.append(run)
    return runs


def summary_table(runs: list[NotebookRun]) -> str:
    """A plain-text table: notebook, status, seconds, headline metric."""
    rows = [("notebook", "status", "seconds", "headline metric")]
    for run in runs:
        top = results.headline(run.metrics)
        metric = "—" if top is None else f"{top[0]} = {results.format_value(top[1]['value'])}"
        rows.append((run.path.stem, run.status.upper(), f"{run.seconds:.1f}", metric))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def record_smoke_times(runs: list[NotebookRun], results_dir: Path) -> Path:
    """Merge the passing runs' seconds into ``results_dir/smoke/seconds.json``; return its path.

    The notebooks' run-time lines (:func:`transformer_course.tooling.publishing.run_time_line`) read it.
    Each entry: ``{"seconds", "hardware", "finished_at"}``; notebooks not in ``runs`` keep theirs.
    """
    import json
    from datetime import datetime

    from .._files import write_text_atomically

    path = Path(results_dir) / "smoke" / "seconds.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    for run in runs:
        if run.passed:
            table[run.path.stem] = {
                "seconds": round(run.seconds, 1),
                "hardware": run.environment.get("hardware") or runtime.hardware(),
                "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
    write_text_atomically(path, json.dumps(dict(sorted(table.items())), indent=1) + "\n")
    return path
