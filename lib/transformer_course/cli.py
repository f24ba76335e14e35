"""The ``transformer-course`` command.

``transformer-course run [NOTEBOOK ...] [--profile smoke|full]`` executes notebooks headless, in
order, with nbclient, writing executed copies to a build folder (never over the sources), and
prints a table: notebook, status, seconds, headline metric. A full-profile run writes one record
per notebook to ``results/``.

``transformer-course results [--update-readme README.md]`` prints the table of recorded results,
or rewrites the README's copy of it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import results, runtime
from .profiles import PROFILE_NAMES

__all__ = ["main", "run_notebooks", "NotebookRun", "drop_info_records_from_outputs"]


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
                f"error: NOTEBOOK {name!r} matches {len(matches)} notebooks in {notebooks_dir}; "
                f"available: {listing}"
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
        saved = {key: os.environ.get(key) for key in ("COURSE_PROFILE", results.METRICS_FILE_VARIABLE,
                                                      "TF_CPP_MIN_LOG_LEVEL", "TMPDIR")}
        # The kernel's temporary files (TensorFlow's autograph writes one per traced function)
        # go into the scratch folder, which is removed after the run.
        os.environ.update(
            {"COURSE_PROFILE": profile, results.METRICS_FILE_VARIABLE: str(metrics_file),
             "TMPDIR": str(kernel_temporary)}
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
        except Exception as error:  # a cell error, a timeout, a dead or unstartable kernel
            run.status = "failed"
            index = current["index"] if isinstance(error, (CellExecutionError, CellTimeoutError, DeadKernelError)) else None
            where = "outside the cells (kernel start-up or shut-down)" if index is None else f"cell {index + 1} of {len(notebook.cells)}"
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

    drop_info_records_from_outputs(notebook)
    build_dir.mkdir(parents=True, exist_ok=True)
    run.executed_copy = build_dir / path.name
    nbformat.write(notebook, run.executed_copy)
    return run


def drop_info_records_from_outputs(notebook) -> None:
    """Remove TensorFlow's C++ INFO records from every stderr output of ``notebook``, in place.

    Records logged after start-up (XLA's "Compiled cluster using XLA!", oneDNN notices on Intel
    CPUs) depend on the machine, so they must not land in a stored notebook; warnings and errors
    stay (see :func:`transformer_course.runtime.drop_info_records`). A stderr output left empty
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
        metric = "—" if top is None else f"{top[0]} = {top[1]['value']:.4f}"
        rows.append((run.path.stem, run.status.upper(), f"{run.seconds:.1f}", metric))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def _command_run(arguments) -> int:
    paths = find_notebooks(arguments.notebooks, Path(arguments.notebooks_dir))
    runs = run_notebooks(
        paths,
        arguments.profile,
        Path(arguments.build_dir),
        Path(arguments.results_dir),
        timeout=arguments.timeout,
        progress=not arguments.quiet,
    )
    print(summary_table(runs))
    for run in runs:
        if not run.passed:
            print(f"\nFAILED {run.path}, {run.failure}\n  executed copy with the traceback: {run.executed_copy}")
        elif run.record:
            print(f"recorded {run.record}")
    if arguments.profile != "full":
        print(f"\n{arguments.profile} profile: a quick check that everything runs; its numbers mean nothing.")
    return 0 if all(run.passed for run in runs) else 1


def _command_results(arguments) -> int:
    if arguments.update_readme:
        changed = results.update_readme_table(arguments.update_readme, arguments.results_dir)
        print(f"{arguments.update_readme}: {'updated' if changed else 'already up to date'}")
    else:
        print(results.results_table(results.load_records(arguments.results_dir)))
    return 0


def _publication_targets(notebooks_dir: Path) -> tuple[Path | None, list[Path]]:
    """The checkout that holds ``notebooks_dir`` (None outside one) and the files carrying Colab links."""
    root = notebooks_dir.resolve().parent
    if not (root / "pyproject.toml").is_file():
        return None, []
    files = sorted(notebooks_dir.glob("[0-9][0-9]_*.ipynb")) + sorted(notebooks_dir.glob("[0-9][0-9]_*.py"))
    return root, files + [path for path in [root / "README.md"] if path.is_file()]


def _command_release(arguments) -> int:
    from ._files import write_text_atomically
    from .grading.markup import MarkupError, release_folder
    from .publishing import publication, stamp

    notebooks_dir = Path(arguments.notebooks_dir)
    try:
        root, targets = _publication_targets(notebooks_dir)
        setting = publication(root)
        texts = {path: path.read_text(encoding="utf-8") for path in targets}
        unstamped = {path: stamp(text, setting) for path, text in texts.items() if stamp(text, setting) != text}
        if not arguments.check:
            for path, stamped in unstamped.items():
                write_text_atomically(path, stamped)
                print(f"stamped {path} with {setting.repository} at {setting.ref}")
            for path in release_folder(notebooks_dir, arguments.out):
                text = path.read_text(encoding="utf-8")
                if stamp(text, setting) != text:  # sources outside a checkout keep their own links
                    write_text_atomically(path, stamp(text, setting))
                print(f"wrote {path}")
            return 0
        with tempfile.TemporaryDirectory() as fresh:
            stale = [path.name for path in release_folder(notebooks_dir, fresh)
                     if not (Path(arguments.out) / path.name).exists()
                     or (Path(arguments.out) / path.name).read_bytes() != stamp(path.read_text(encoding="utf-8"), setting).encode("utf-8")]
    except (FileNotFoundError, MarkupError, ImportError, ValueError) as error:
        print(f"release: {error}", file=sys.stderr)
        return 2
    if unstamped:
        print(f"release: Colab links or install lines disagree with {setting.repository} at {setting.ref} "
              f"in {', '.join(str(path) for path in unstamped)}; run `transformer-course release`", file=sys.stderr)
    if stale:
        print(f"release: out of date in {arguments.out}: {', '.join(stale)}; run `transformer-course release`",
              file=sys.stderr)
    if unstamped or stale:
        return 1
    print(f"release: {arguments.out} is up to date")
    return 0


def _command_grade(arguments) -> int:
    from .grading.grader import draw_seed, grade_folder, parse_shard
    from .grading.sandbox import Limits, SandboxUnavailable

    try:
        shard = None if arguments.shard is None else parse_shard(arguments.shard)
    except ValueError as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2

    limits = Limits(arguments.cell_timeout, arguments.notebook_timeout, arguments.memory_mb)
    if arguments.unsafe_no_sandbox:
        print("grade: warning: --unsafe-no-sandbox: students' code runs unconfined, with network and this "
              "machine's files in reach; the report says so", file=sys.stderr)
    seed = draw_seed() if arguments.seed is None else arguments.seed
    try:
        results = grade_folder(arguments.submissions, arguments.out, arguments.release_dir, limits,
                               workers=arguments.workers, seed=seed, progress=not arguments.quiet,
                               shard=shard, sandbox=not arguments.unsafe_no_sandbox)
    except (FileNotFoundError, ImportError, SandboxUnavailable) as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2
    students = {result.student for result in results}
    print(f"graded {len(results)} notebook(s) of {len(students)} student(s); report in {arguments.out}")
    print(f"secret seed {seed} (kept in grades.json; `--seed {seed}` grades with the same cases again)")
    return 0


def _command_merge_grades(arguments) -> int:
    from .grading.grader import MergeError, merge_grades

    try:
        results = merge_grades(arguments.shards, arguments.out)
    except MergeError as error:
        print(f"merge-grades: {error}", file=sys.stderr)
        return 1
    students = {result.student for result in results}
    print(f"merged {len(arguments.shards)} shard(s): {len(results)} notebook(s) of {len(students)} student(s); "
          f"report in {arguments.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="transformer-course", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="execute notebooks headless and print a summary table")
    run.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help="paths or ids (01); default: all, in order")
    run.add_argument("--profile", choices=PROFILE_NAMES, default=os.environ.get("COURSE_PROFILE") or "full")
    run.add_argument("--notebooks-dir", default="notebooks", help="where NN_*.ipynb live (default: notebooks)")
    run.add_argument("--build-dir", default="build/executed", help="executed copies go here (default: build/executed)")
    run.add_argument("--results-dir", default="results", help="full-profile records go here (default: results)")
    run.add_argument("--timeout", type=int, default=1800, help="seconds one cell may run (default: 1800)")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(handler=_command_run)

    table = commands.add_parser("results", help="print the table of recorded full-profile results")
    table.add_argument("--results-dir", default="results")
    table.add_argument("--update-readme", metavar="README", help="rewrite the table in this README")
    table.set_defaults(handler=_command_results)

    release = commands.add_parser("release", help="write student notebooks: solutions stubbed, hidden tests removed")
    release.add_argument("--notebooks-dir", default="notebooks", help="source notebooks (default: notebooks)")
    release.add_argument("--out", default="release", help="where the student notebooks go (default: release)")
    release.add_argument("--check", action="store_true",
                         help="write nothing; exit 1 if the folder in --out is not what release would write")
    release.set_defaults(handler=_command_release)

    grade = commands.add_parser("grade", help="grade a folder of submissions (SUBMISSIONS/<student>/NN_*.ipynb)")
    grade.add_argument("submissions", metavar="SUBMISSIONS_DIR")
    grade.add_argument("--out", required=True, metavar="REPORT_DIR", help="grades.csv, grades.json and report.md go here")
    grade.add_argument("--release-dir", default="release", help="the released notebooks (default: release)")
    grade.add_argument("--unsafe-no-sandbox", action="store_true",
                       help="run students' code without the bubblewrap sandbox (only for code you trust)")
    grade.add_argument("--workers", type=int, default=1, help="notebooks graded at once (default: 1)")
    grade.add_argument("--cell-timeout", type=float, default=60, help="seconds per cell or graded call (default: 60)")
    grade.add_argument("--notebook-timeout", type=float, default=600, help="seconds per notebook (default: 600)")
    grade.add_argument("--memory-mb", type=int, default=4096, help="memory per kernel in MiB (default: 4096)")
    grade.add_argument("--seed", type=int, help="the grading cases' secret seed (default: a fresh one each run; "
                                                "the one used is kept in grades.json)")
    grade.add_argument("--shard", metavar="K/N", help="grade only shard K of N of the students (a fixed share by "
                                                    "name); combine the N reports with merge-grades")
    grade.add_argument("--quiet", action="store_true", help="no progress bar")
    merge = commands.add_parser("merge-grades", help="combine the reports of `grade --shard K/N` runs into one")
    merge.add_argument("shards", nargs="+", metavar="SHARD_REPORT_DIR")
    merge.add_argument("--out", required=True, metavar="REPORT_DIR", help="where the combined reports go")
    grade.set_defaults(handler=_command_grade)
    merge.set_defaults(handler=_command_merge_grades)

    arguments = parser.parse_args(argv)
    from .datasets import pin_data_directory

    pin_data_directory()  # kernels run in the notebooks' folder, not where the command was typed
    return arguments.handler(arguments)


if __name__ == "__main__":
    sys.exit(main())
