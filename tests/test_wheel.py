"""The built wheels, not the editable checkout: the course's alone (a student's install) and the
grader's beside it (an instructor's), each installed in a fresh environment and used from a folder
outside the repository.

The student's environment runs the command line, `check` and a released notebook in the smoke
profile, holds nothing of the grader and answers a grading command with where grading went. The
instructor's releases a notebook and grades one submission with the grader installed from its wheel
into the same `site-packages` the sandboxed kernels read, where the references must stay out of
their reach.

Building a wheel needs setuptools from the package index (pip's build isolation), as any user's
install does. The fresh environments get the wheels only; their dependencies are the ones already
installed for the test run, reached through a path entry that sees their files but not this
checkout's editable installs, so every `transformer_course` and `transformer_course_grader` import
resolves to a wheel.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.tensorflow  # Keras on TensorFlow: no jax/torch backend session collects it

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "05_transformer_encoder.ipynb"  # the released notebook whose smoke run is shortest


def _run(*command, cwd, timeout=600):
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONNOUSERSITE": "1", "COURSE_PROFILE": "smoke"},
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _environment(folder: Path, name: str, wheels: list[Path]) -> Path:
    """A fresh environment holding ``wheels`` (and the test run's dependencies through a path entry); its bin/."""
    environment = folder / name
    _run(sys.executable, "-m", "venv", "--without-pip", environment, cwd=folder)
    python = environment / "bin" / "python"
    site_packages = Path(
        _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=folder).strip()
    )
    (site_packages / "course_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", *wheels, cwd=folder)
    return environment / "bin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """{"course": course wheel, "grader": grader wheel, "student": bin/ with the course alone,
    "instructor": bin/ with both, "work": a working folder outside the checkout}."""
    folder = tmp_path_factory.mktemp("wheel")
    # Built from the files a clone holds (tracked, or new and not ignored): a checkout's own build/ folder, left
    # by an earlier build, would put its stale modules in a wheel.
    source = folder / "source"
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    for project in (source, source / "grader"):
        _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", folder / "dist", project, cwd=folder)
    wheels = {
        "course": next((folder / "dist").glob("transformer_course-*.whl")),
        "grader": next((folder / "dist").glob("transformer_course_grader-*.whl")),
    }
    work = folder / "elsewhere"
    work.mkdir()
    return {
        **wheels,
        "work": work,
        "student": _environment(folder, "student", [wheels["course"]]),
        "instructor": _environment(folder, "instructor", [wheels["course"], wheels["grader"]]),
    }


def test_the_course_wheel_ships_the_package_and_its_license_and_nothing_of_the_grader(installed):
    python, work = installed["student"] / "python", installed["work"]
    names = zipfile.ZipFile(installed["course"]).namelist()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "transformer_course/exercises/catalog.py" in names
    assert not [name for name in names if name.startswith(("tests/", "notebooks/", "release/", "grader/"))]
    # No student's install holds the grader, its references or its secret-case generators.
    assert not [
        name
        for name in names
        if name.startswith("transformer_course_grader") or "/grading/" in name or "references" in name
    ], names
    refused = subprocess.run(
        [python, "-c", "import transformer_course_grader"], cwd=work, capture_output=True, text=True
    )
    assert refused.returncode != 0 and "ModuleNotFoundError" in refused.stderr
    location = _run(python, "-c", "import transformer_course; print(transformer_course.__file__)", cwd=work)
    assert str(ROOT) not in location and "site-packages" in location
    # Every declared dependency range is met by the tested versions.
    _run(sys.executable, "-m", "pip", "--python", python, "check", cwd=work)


def test_the_students_install_checks_runs_a_released_notebook_and_sends_grading_to_the_grader(installed):
    python, command, work = (
        installed["student"] / "python",
        installed["student"] / "transformer-course",
        installed["work"],
    )
    verdict = _run(
        python,
        "-c",
        "import numpy as np\nfrom transformer_course.exercises import check\n"
        "check('07.1', lambda length: np.tril(np.ones((length, length), bool)))",
        cwd=work,
    )
    assert "✓" in verdict
    refused = subprocess.run(
        [command, "grade", "submissions", "--out", "report"], cwd=work, capture_output=True, text=True
    )
    assert refused.returncode == 2 and "transformer-course-grader grade" in refused.stderr, refused.stderr
    assert not (work / "report").exists()
    # A student's notebook (the release: no hidden tests) runs to its end.
    (work / "student-release").mkdir()
    shutil.copy(ROOT / "release" / NOTEBOOK, work / "student-release" / NOTEBOOK)
    table = _run(
        command,
        "run",
        "05",
        "--profile",
        "smoke",
        "--quiet",
        "--notebooks-dir",
        "student-release",
        "--build-dir",
        "build",
        cwd=work,
    )
    assert "PASSED" in table


def test_the_grader_wheel_installs_beside_the_course_releases_and_grades(installed):
    python, command, work = (
        installed["instructor"] / "python",
        installed["instructor"] / "transformer-course-grader",
        installed["work"],
    )
    names = zipfile.ZipFile(installed["grader"]).namelist()
    assert "transformer_course_grader/references/__init__.py" in names and "transformer_course_grader/cli.py" in names
    assert not [name for name in names if name.startswith(("tests/", "transformer_course/"))], names
    location = _run(
        python, "-c", "import transformer_course_grader; print(transformer_course_grader.__file__)", cwd=work
    )
    assert str(ROOT) not in location and "site-packages" in location
    _run(sys.executable, "-m", "pip", "--python", python, "check", cwd=work)
    (work / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, work / "notebooks" / NOTEBOOK)
    _run(command, "release", "--notebooks-dir", "notebooks", "--out", "release", cwd=work)
    assert 'NotImplementedError(\\"Exercise 05.1\\")' in (work / "release" / NOTEBOOK).read_text(encoding="utf-8")
    # The instructor's own notebook, graded as a submission: full marks, with the grader's references in the
    # site-packages the sandbox's kernels read (mounted over by a copy holding only the protocol).
    (work / "submissions" / "instructor").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, work / "submissions" / "instructor" / NOTEBOOK)
    confinement = [] if shutil.which("bwrap") else ["--unsafe-no-sandbox"]
    _run(
        command,
        "grade",
        "submissions",
        "--out",
        "report",
        "--release-dir",
        "release",
        "--quiet",
        *confinement,
        cwd=work,
    )
    with open(work / "report" / "grades.csv", encoding="utf-8") as handle:
        [row] = list(csv.DictReader(handle))
    assert row["student"] == "instructor" and float(row["total"]) == float(row["max"]) > 0, row
