"""Grading throughput: a class's submissions of every notebook with exercises, with 1 and then 2 workers.

Each worker count is timed in the bubblewrap sandbox and unconfined (``--unsafe-no-sandbox``),
side by side in one run, so the sandbox's cost is a ratio measured on the same machine and load.

The class holds two submissions of each notebook with exercises (01-10; or ``--notebook NN`` for
one notebook only): one the instructor's solved notebook, one the untouched release, so both full
runs and "not attempted" runs are timed, and the rate is what a class handing in every notebook
sees. Each submission runs in its own sandboxed kernel in
the smoke profile, exactly as ``transformer-course grade`` runs it. Prints submissions/minute for
each worker count, and the time of one submission of every notebook that has exercises (the
target is at most 60 s each). Needs ``COURSE_DATA_DIR`` pointing at a filled data cache.

    .venv/bin/python benchmarks/grading.py [--notebook all --per-notebook 2]
"""

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from transformer_course.datasets import pin_data_directory
from transformer_course.grading.grader import grade_folder
from transformer_course.grading.sandbox import Limits, sandbox_available
from transformer_course.tooling.runtime import hardware

ROOT = Path(__file__).resolve().parents[1]


def _submissions(folder: Path, notebook: str, count: int, first: int = 0) -> None:
    """``count`` students in ``folder`` (numbered from ``first``), each handing in ``notebook``.

    Solved, untouched, solved, untouched, ...
    """
    source = next((ROOT / "notebooks").glob(f"{notebook}_*.ipynb"))
    release = ROOT / "release" / source.name
    for index in range(count):
        student = folder / f"student_{first + index:03d}"
        student.mkdir(parents=True)
        shutil.copy(source if index % 2 == 0 else release, student / source.name)


def _with_exercises() -> list[str]:
    return sorted({p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")
                   if '"grade_id": "exercise_' in p.read_text(encoding="utf-8")})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notebook", default="all",
                        help="the notebook id graded in the throughput runs, "
                             "or 'all' (default): every one with exercises")
    parser.add_argument("--per-notebook", type=int, default=2, help="submissions of each notebook (default: 2)")
    arguments = parser.parse_args(argv)
    notebooks = _with_exercises() if arguments.notebook == "all" else [arguments.notebook]
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
            grade_folder(scratch / f"single_{notebook}", scratch / f"report_{notebook}", release, limits,
                         progress=False, sandbox=sandbox_available())
            singles[notebook] = time.perf_counter() - start
        for index, notebook in enumerate(notebooks):
            _submissions(scratch / "batch", notebook, arguments.per_notebook, first=index * arguments.per_notebook)
        rates = {}
        for workers in (1, 2):
            for sandbox in ([True, False] if sandbox_available() else [False]):
                start = time.perf_counter()
                grade_folder(scratch / "batch", scratch / f"report_{workers}_{sandbox}", release, limits,
                             workers=workers, progress=False, sandbox=sandbox)
                rates[workers, sandbox] = submissions / (time.perf_counter() - start) * 60

    machine = hardware()
    print(f"Grading {submissions} submissions ({arguments.per_notebook} of each of notebooks {', '.join(notebooks)}; "
          "half solved, half untouched), smoke profile, bubblewrap sandbox "
          f"{'on' if sandbox_available() else 'UNAVAILABLE (graded unconfined)'}")
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
