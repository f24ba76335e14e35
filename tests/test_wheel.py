"""The built wheel, not the editable checkout: installed in a fresh environment and used from a
folder outside the repository, it runs the command line, `check`, `release` and a released notebook
in the smoke profile, and holds no grader's references (a student's install): its `grade` refuses,
saying where grading is done.

Building the wheel needs setuptools from the package index (pip's build isolation), as any user's
install does. The fresh environment gets the wheel only; its dependencies are the ones already
installed for the test run, reached through a path entry that sees their files but not this
checkout's editable install, so every `transformer_course` import resolves to the wheel.
"""

from __future__ import annotations

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
NOTEBOOK = "04_self_attention.ipynb"


def _run(*command, cwd, timeout=600):
    done = subprocess.run([str(part) for part in command], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONNOUSERSITE": "1", "COURSE_PROFILE": "smoke"})
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, transformer-course script, a working folder outside the checkout)."""
    folder = tmp_path_factory.mktemp("wheel")
    # Built from the files a clone holds (tracked, or new and not ignored): a checkout's own build/ folder, left
    # by an earlier build, would put its stale modules in the wheel.
    source = folder / "source"
    listed = _run("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", folder / "dist", source, cwd=folder)
    wheel = next((folder / "dist").glob("transformer_course-*.whl"))
    environment = folder / "fresh"
    _run(sys.executable, "-m", "venv", "--without-pip", environment, cwd=folder)
    python = environment / "bin" / "python"
    site_packages = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                              cwd=folder).strip())
    (site_packages / "course_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--quiet", wheel, cwd=folder)
    work = folder / "elsewhere"
    work.mkdir()
    return python, environment / "bin" / "transformer-course", work, wheel


def test_the_wheel_ships_the_package_and_its_license_only(installed):
    python, _, work, wheel = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "transformer_course/exercises/catalog.py" in names and "transformer_course/grading/sandbox.py" in names
    assert not [name for name in names if name.startswith(("tests/", "notebooks/", "release/"))]
    # No student's install holds the grader's references or its secret-case generators.
    assert not [name for name in names if "references" in name], names
    refused = subprocess.run([python, "-c", "import transformer_course.grading.references"], cwd=work,
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "ModuleNotFoundError" in refused.stderr
    location = _run(python, "-c", "import transformer_course; print(transformer_course.__file__)", cwd=work)
    assert str(ROOT) not in location and "site-packages" in location
    # Every declared dependency range is met by the tested versions.
    _run(sys.executable, "-m", "pip", "--python", python, "check", cwd=work)


def test_the_installed_command_line_checks_releases_refuses_to_grade_and_runs_a_smoke_notebook(installed):
    python, command, work, _ = installed
    assert "release" in _run(command, "--help", cwd=work)
    verdict = _run(python, "-c", "import numpy as np\nfrom transformer_course.exercises import check\n"
                   "check('07.1', lambda length: np.tril(np.ones((length, length), bool)))", cwd=work)
    assert "✓" in verdict
    (work / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, work / "notebooks" / NOTEBOOK)
    _run(command, "release", "--notebooks-dir", "notebooks", "--out", "release", cwd=work)
    released = (work / "release" / NOTEBOOK).read_text(encoding="utf-8")
    assert 'NotImplementedError(\\"Exercise 04.1\\")' in released
    (work / "submissions" / "student").mkdir(parents=True)
    shutil.copy(ROOT / "notebooks" / NOTEBOOK, work / "submissions" / "student" / NOTEBOOK)
    # Grading needs the references, which only a checkout holds: the wheel's `grade` refuses, saying where.
    refused = subprocess.run([command, "grade", "submissions", "--out", "report", "--release-dir", "release"],
                             cwd=work, capture_output=True, text=True)
    assert refused.returncode == 2 and "holds no grader's references" in refused.stderr, refused.stderr
    assert "pip install -e ." in refused.stderr and not (work / "report").exists()
    # A student's notebook (the release: no hidden tests, which need the references) runs to its end.
    table = _run(command, "run", "04", "--profile", "smoke", "--quiet", "--notebooks-dir", "release",
                 "--build-dir", "build", cwd=work)
    assert "PASSED" in table
