"""Grading throughput: a class's submissions of every notebook with exercises, with 1 and then 2 workers.

Each worker count is timed in the bubblewrap sandbox and unconfined (``--unsafe-no-sandbox``),
side by side in one run, so the sandbox's cost is a ratio measured on the same machine and load.

The class holds two submissions of each notebook with exercises (01-13; or ``--notebook NN`` for
one notebook only): one the instructor's solved notebook, one the untouched release, so both full
runs and "not attempted" runs are timed, and the rate is what a class handing in every notebook
sees. Each submission is graded exactly as ``transformer-course-grader grade`` grades it (its graded
functions in a sandboxed kernel; whole notebooks run only with ``--run-notebooks``). Prints submissions/minute for
each worker count, and the time of one submission of every notebook that has exercises (the
target is at most 60 s each). Needs ``COURSE_DATA_DIR`` pointing at a filled data cache.

With ``--against DIR`` (a checkout of another commit, e.g. made by ``git worktree add``, with an
environment of its own in ``DIR/.venv`` where the package is installed from ``DIR``), it instead
compares the two grader versions side by side: the same class shape (each checkout grades its own
notebooks and release with its own environment, so its kernels import its own package),
sandboxed, with 1 and 2 workers, the two checkouts alternating in fresh processes, and prints this
checkout's rate over the other's, with the points the solved submissions got (a grader that could
not run the notebooks would look fast).

    .venv/bin/python benchmarks/grading.py [--notebook all --per-notebook 2]
    .venv/bin/python benchmarks/grading.py --against /tmp/before --repeats 1
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from transformer_course.datasets import pin_data_directory
from transformer_course.tooling.runtime import hardware
from transformer_course_grader.grader import grade_folder
from transformer_course_grader.sandbox import Limits, sandbox_available

ROOT = Path(__file__).resolve().parents[1]


def _submissions(folder: Path, notebook: str, count: int, first: int = 0, root: Path = ROOT) -> None:
    """``count`` students in ``folder`` (numbered from ``first``), each handing in ``notebook`` of ``root``.

    Solved, untouched, solved, untouched, ...
    """
    source = next((root / "notebooks").glob(f"{notebook}_*.ipynb"))
    release = root / "release" / source.name
    for index in range(count):
        student = folder / f"student_{first + index:03d}"
        student.mkdir(parents=True)
        shutil.copy(source if index % 2 == 0 else release, student / source.name)


def _with_exercises() -> list[str]:
    return sorted(
        {
            p.name[:2]
            for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
            if '"grade_id": "exercise_' in p.read_text(encoding="utf-8")
        }
    )


def _one_batch(root: Path, notebooks: list[str], per_notebook: int, workers: int) -> None:
    """Grade one class of ``root``'s notebooks, sandboxed; print its seconds and the solved submissions' points.

    Run (``--one-batch``) in a fresh process by a checkout's own environment, so that each grader
    version grades with its own code (the sandbox mounts a snapshot of the package that environment imports).
    """
    pin_data_directory()
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for index, notebook in enumerate(notebooks):
            _submissions(scratch / "batch", notebook, per_notebook, first=index * per_notebook, root=root)
        start = time.perf_counter()
        results = grade_folder(
            scratch / "batch",
            scratch / "report",
            root / "release",
            Limits(cell_seconds=300, notebook_seconds=900, memory_mb=6144),
            workers=workers,
            progress=False,
            sandbox=True,
        )
        seconds = time.perf_counter() - start
    solved = []  # the exercises (not the written answers) of the notebook each solved submission handed in
    for result in results:
        number = int(result.student.split("_")[1])
        if number % per_notebook % 2 == 0 and result.notebook.startswith(notebooks[number // per_notebook] + "_"):
            solved += [x for x in result.exercises if not x.exercise.split(".")[1].startswith("w")]
    print(
        json.dumps(
            {"seconds": seconds, "points": sum(x.points for x in solved), "max": sum(x.max_points for x in solved)}
        )
    )


def _environment_python(checkout: Path) -> str:
    """The Python of ``checkout``'s own environment, which must import the package from ``checkout``."""
    python = checkout / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit(
            f"--against: {checkout} has no environment of its own ({python}); make one with "
            f"python3 -m venv {checkout}/.venv && {checkout}/.venv/bin/pip install -e {checkout}"
        )
    found = subprocess.run(
        [str(python), "-c", "import transformer_course; print(transformer_course.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to((checkout / "lib").resolve()):
        raise SystemExit(f"--against: {python} imports the package from {found}, not from {checkout}/lib")
    return str(python)


def _compare(other: Path, notebooks: list[str], per_notebook: int, repeats: int) -> int:
    """Sandboxed throughput of this checkout and of ``other``, alternating; prints the ratios."""
    checkouts = {
        "this checkout": (ROOT, _environment_python(ROOT)),
        other.name: (other.resolve(), _environment_python(other.resolve())),
    }
    seconds = {(name, workers): [] for name in checkouts for workers in (1, 2)}
    points = {}
    for _ in range(repeats):
        for workers in (1, 2):
            for name, (root, python) in checkouts.items():
                script = root / "benchmarks" / "grading.py"  # each checkout's own: the grader's modules moved once
                done = subprocess.run(
                    [
                        python,
                        str(script),
                        "--one-batch",
                        str(root),
                        "--notebook",
                        ",".join(notebooks),
                        "--per-notebook",
                        str(per_notebook),
                        "--workers",
                        str(workers),
                    ],
                    cwd=root,
                    capture_output=True,
                    text=True,
                )
                if done.returncode:
                    raise SystemExit(f"grading with {name} ({root}) failed:\n{done.stderr[-4000:]}")
                outcome = json.loads(done.stdout.strip().splitlines()[-1])
                seconds[name, workers].append(outcome["seconds"])
                print(
                    f"  ({name}, {workers} worker(s): {outcome['seconds']:.0f} s, "
                    f"{outcome['points']} of {outcome['max']} points)",
                    file=sys.stderr,
                    flush=True,
                )
                points[name] = (outcome["points"], outcome["max"])
    submissions = per_notebook * len(notebooks)
    machine = hardware()
    print(
        f"Grading {submissions} submissions ({per_notebook} of each of notebooks {', '.join(notebooks)}; "
        f"half solved, half untouched), smoke profile, bubblewrap sandbox, {repeats} round(s), best round kept"
    )
    print(f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores")
    for name, (got, most) in points.items():
        print(f"  {name}: the solved submissions got {got} of {most} exercise points")
    for workers in (1, 2):
        rates = {name: submissions / min(seconds[name, workers]) * 60 for name in checkouts}
        this, that = rates.values()
        print(
            f"  {workers} worker(s): this checkout {this:5.1f}/min, {other.name} {that:5.1f}/min, "
            f"this / other: x{this / that:.2f}"
        )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--notebook",
        default="all",
        help="the notebook ids graded in the throughput runs, comma-separated (05,07), "
        "or 'all' (default): every one with exercises",
    )
    parser.add_argument("--per-notebook", type=int, default=2, help="submissions of each notebook (default: 2)")
    parser.add_argument("--against", type=Path, help="another checkout: compare the two graders side by side")
    parser.add_argument("--repeats", type=int, default=1, help="rounds of the comparison (default: 1)")
    parser.add_argument("--one-batch", type=Path, metavar="CHECKOUT", help=argparse.SUPPRESS)  # used by --against
    parser.add_argument("--workers", type=int, default=1, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.one_batch:
        _one_batch(arguments.one_batch, arguments.notebook.split(","), arguments.per_notebook, arguments.workers)
        return 0
    notebooks = _with_exercises() if arguments.notebook == "all" else arguments.notebook.split(",")
    if arguments.against:
        if not sandbox_available():
            parser.error("--against compares sandboxed grading, and bubblewrap is not available here")
        return _compare(arguments.against, notebooks, arguments.per_notebook, arguments.repeats)
    submissions = arguments.per_notebook * len(notebooks)
    pin_data_directory()
    limits = Limits(cell_seconds=300, notebook_seconds=900, memory_mb=6144)
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        release = scratch / "release"
        shutil.copytree(ROOT / "release", release)
        singles = {}
        for notebook in _with_exercises():
            _submissions(scratch / f"single_{notebook}", notebook, 1)
            start = time.perf_counter()
            grade_folder(
                scratch / f"single_{notebook}",
                scratch / f"report_{notebook}",
                release,
                limits,
                progress=False,
                sandbox=sandbox_available(),
            )
            singles[notebook] = time.perf_counter() - start
        for index, notebook in enumerate(notebooks):
            _submissions(scratch / "batch", notebook, arguments.per_notebook, first=index * arguments.per_notebook)
        rates = {}
        for workers in (1, 2):
            for sandbox in [True, False] if sandbox_available() else [False]:
                start = time.perf_counter()
                grade_folder(
                    scratch / "batch",
                    scratch / f"report_{workers}_{sandbox}",
                    release,
                    limits,
                    workers=workers,
                    progress=False,
                    sandbox=sandbox,
                )
                rates[workers, sandbox] = submissions / (time.perf_counter() - start) * 60

    machine = hardware()
    print(
        f"Grading {submissions} submissions ({arguments.per_notebook} of each of notebooks {', '.join(notebooks)}; "
        "half solved, half untouched), smoke profile, bubblewrap sandbox "
        f"{'on' if sandbox_available() else 'UNAVAILABLE (graded unconfined)'}"
    )
    print(f"machine: {machine['accelerator'] or machine['processor']}, {machine['cpu_count']} CPU cores")
    for (workers, sandbox), rate in rates.items():
        where = "sandbox   " if sandbox else "unconfined"
        ratio = f"   sandbox / unconfined: x{rate / rates[workers, False]:.2f}" if sandbox else ""
        print(f"  {workers} worker(s), {where}: {rate:6.1f} submissions/minute{ratio}")
    print("one submission of each notebook with exercises (target <= 60 s):")
    for notebook, seconds in singles.items():
        print(f"  {notebook}: {seconds:5.1f} s  {'ok' if seconds <= 60 else 'OVER'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
