"""Importing Keras in the graded kernel: the audit hook's cost, against a plain import and another commit's hook.

Every notebook's graded kernel imports Keras (and so TensorFlow) under the hook of
:mod:`transformer_course_grader.guard`, which walks the stack on every event that builds code;
importing TensorFlow raises about 20,000 of them (``typing`` compiles each forward reference), and
reading a frame's code is itself an audited event. Each arm imports ``keras`` in a fresh process,
with a frame of a notebook cell (``<cell 1>``) at the bottom of the stack, as in the graded kernel;
the arms alternate, so a change of load hits them alike. Prints the median seconds of each arm and
its ratio to the plain import.

    .venv/bin/python benchmarks/graded_import.py [--repeats 3] [--against COMMIT]

``--against`` (default ``HEAD``) loads that commit's ``guard.py`` (``git show``) as a second arm.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformer_course.tooling.runtime import hardware

ROOT = Path(__file__).resolve().parents[1]
GUARD = "grader/lib/transformer_course_grader/guard.py"

CHILD = """
import importlib.util, os, site, sys, time
guard_path = sys.argv[1]
if guard_path != "none":
    spec = importlib.util.spec_from_file_location("guard_under_test", guard_path)
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    trusted = tuple(site.getsitepackages()) + (os.path.dirname(os.__file__),)
    guard.install(trusted=trusted, written={}, home="/tmp")
start = time.perf_counter()
exec(compile("import keras", "<cell 1>", "exec"), {})
print(time.perf_counter() - start)
"""


def _seconds(guard: str) -> float:
    run = subprocess.run(
        [sys.executable, "-c", CHILD, guard],
        capture_output=True,
        text=True,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    if run.returncode:
        raise RuntimeError(run.stderr[-2000:])
    return float(run.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--against", default="HEAD", help="the commit whose guard.py is the second arm")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        other = Path(folder) / "guard_other.py"
        other.write_text(
            subprocess.run(
                ["git", "show", f"{arguments.against}:{GUARD}"], cwd=ROOT, check=True, capture_output=True, text=True
            ).stdout,
            encoding="utf-8",
        )
        arms = {
            "plain import": "none",
            "this checkout's hook": str(ROOT / GUARD),
            f"hook at {arguments.against}": str(other),
        }
        seconds = {name: [] for name in arms}
        _seconds("none")  # a first import fills the file cache
        for _ in range(arguments.repeats):
            for name, guard in arms.items():
                seconds[name].append(_seconds(guard))
    plain, machine = statistics.median(seconds["plain import"]), hardware()
    print(
        f"import keras in a fresh process, median of {arguments.repeats} (arms alternating), "
        f"{time.strftime('%Y-%m-%d')}, Python {sys.version.split()[0]}, {machine['processor']}, "
        f"{machine['cpu_count']} CPUs"
    )
    for name, values in seconds.items():
        median = statistics.median(values)
        print(f"  {name:<28} {median:6.2f} s  {median / plain:5.2f}x plain   ({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
