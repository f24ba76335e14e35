"""The Gradescope autograder: the zip holds what Gradescope runs, and run_autograder, in Gradescope's folder
layout, grades a submission into a results.json (a solved notebook gets every point, an empty upload a reason).

Gradescope's layout (its "Autograder Specifications"): the zip unpacked in ``/autograder/source``, the
student's files in ``/autograder/submission``, the result in ``/autograder/results/results.json``. Here the
folder is a temporary one (``AUTOGRADER_ROOT``) and the Python is this environment's (``COURSE_PYTHON``):
``setup.sh``, which installs them on Gradescope, is checked for what it installs, not run.
"""

import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from transformer_course.exercises import EXERCISES
from transformer_course_grader.autograder import write_gradescope_autograder
from transformer_course_grader.sandbox import sandbox_available

pytestmark = pytest.mark.tensorflow  # grading runs the notebook in a kernel
ROOT = Path(__file__).resolve().parents[2]
# The autograder grades only inside bubblewrap (Gradescope's setup.sh installs it); where it cannot run here, a
# submission gets the reason and no score, which its own test below checks.
needs_sandbox = pytest.mark.skipif(not sandbox_available(), reason="bubblewrap cannot run here")


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("autograder")
    # 05: the released notebook whose smoke run is shortest
    archive = write_gradescope_autograder(folder / "autograder.zip", ["05"], ROOT, seed=7)
    with zipfile.ZipFile(archive) as unpacked:
        names = unpacked.namelist()
        modes = {info.filename: info.external_attr >> 16 for info in unpacked.infolist()}
        unpacked.extractall(folder / "source")
    for name in ("setup.sh", "run_autograder"):
        (folder / "source" / name).chmod(0o755)
    return folder, names, modes


def _run(folder, submission_files, user=1234, path_first=None):
    root = folder / f"run_{len(list(folder.glob('run_*')))}"
    (root / "submission").mkdir(parents=True)
    (root / "results").mkdir()
    if user is not None:  # Gradescope's submission_metadata.json, as it writes it (the fields read here)
        metadata = {
            "id": 99,
            "users": [{"id": user, "name": "Ada", "email": "ada@example.org"}],
            "assignment": {"id": 5},
        }
        (root / "submission_metadata.json").write_text(json.dumps(metadata))
    (root / "source").symlink_to(folder / "source")
    for name, path in submission_files.items():
        (root / "submission" / name).write_bytes(path.read_bytes())
    environment = {**os.environ, "AUTOGRADER_ROOT": str(root), "COURSE_PYTHON": sys.executable}
    if path_first is not None:
        environment["PATH"] = f"{path_first}{os.pathsep}{environment['PATH']}"
    subprocess.run(["bash", str(folder / "source" / "run_autograder")], env=environment, check=True, timeout=900)
    return json.loads((root / "results" / "results.json").read_text())


def test_the_zip_holds_what_gradescope_runs(autograder):
    _, names, modes = autograder
    assert {
        "setup.sh",
        "run_autograder",
        "settings.json",
        "release/05_transformer_encoder.ipynb",
        "course/pyproject.toml",
        "course/requirements.txt",
        "course/grader/lib/transformer_course_grader/references/__init__.py",
    } <= set(names)
    assert modes["setup.sh"] & stat.S_IXUSR and modes["run_autograder"] & stat.S_IXUSR
    assert not any("__pycache__" in name for name in names)
    setup = (autograder[0] / "source" / "setup.sh").read_text()
    assert "bubblewrap" in setup and "-r /autograder/source/course/requirements.txt" in setup
    assert json.loads((autograder[0] / "source" / "settings.json").read_text())["seed"] == 7


@needs_sandbox
def test_a_solved_submission_gets_every_point_and_an_empty_one_a_reason(autograder, tmp_path):
    folder = autograder[0]
    # A solved notebook whose 05.2 also tries to read the zip's seed and raise it into its feedback.
    notebook = nbformat.read(ROOT / "notebooks" / "05_transformer_encoder.ipynb", as_version=4)
    settings = folder / "source" / "settings.json"  # Gradescope's /autograder/source/settings.json
    feed_forward = next(cell for cell in notebook.cells if cell.source.startswith("def feed_forward("))
    feed_forward.source = feed_forward.source.replace(
        '"""\n', f'"""\n    raise ValueError(open({str(settings)!r}).read())\n', 1
    )
    nbformat.write(notebook, tmp_path / "05_transformer_encoder.ipynb")
    solved = _run(folder, {"05_transformer_encoder.ipynb": tmp_path / "05_transformer_encoder.ipynb"})
    points = sum(exercise.points for exercise in EXERCISES.values() if exercise.id.startswith("05."))
    tests = {test["number"]: test for test in solved["tests"]}
    # The file is not there in the sandbox: 05.2 (and 05.3, which calls it) raise FileNotFoundError, and no seed
    # reaches the feedback.
    assert solved["score"] == tests["05.1"]["max_score"] and tests["05.1"]["status"] == "passed", solved
    assert settings.exists() and '"seed"' not in json.dumps(solved) and "FileNotFoundError" in tests["05.2"]["output"]
    solved = _run(folder, {"05_transformer_encoder.ipynb": ROOT / "notebooks" / "05_transformer_encoder.ipynb"})
    assert solved["score"] == points, solved
    empty = _run(folder, {})
    assert empty["score"] == 0 and "no notebook (.ipynb) was submitted" in empty["output"]
    anonymous = _run(folder, {"05_transformer_encoder.ipynb": ROOT / "notebooks" / "05_transformer_encoder.ipynb"},
                     user=None)  # fmt: skip
    assert anonymous["score"] == 0 and "submission_metadata.json could not be read" in anonymous["output"]


def test_each_gradescope_student_gets_secret_cases_of_their_own_and_a_regrade_the_same():
    from transformer_course_grader import grader
    from transformer_course_grader.autograder import student_key

    def metadata(*users, assignment=5):
        return {"users": [{"id": user} for user in users], "assignment": {"id": assignment}}

    keys = [student_key(metadata(1)), student_key(metadata(2)), student_key(metadata(1, assignment=6))]
    assert len(set(keys)) == 3 and student_key(metadata(2, 1)) == student_key(metadata(1, 2)) == "user-1+2-assignment-5"
    exercise = EXERCISES["04.1"]
    secret = [str(grader._cases(exercise, 7, key)[5:]) for key in keys]
    assert len(set(secret)) == 3 and secret[0] == str(grader._cases(exercise, 7, keys[0])[5:])
    for broken in ({}, {"users": [], "assignment": {"id": 5}}, metadata(1, assignment=None)):
        with pytest.raises(ValueError, match="no user id or no assignment id"):
            student_key(broken)


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="no released notebook 99"):
        write_gradescope_autograder(tmp_path / "a.zip", ["99"], ROOT)
    with pytest.raises(ValueError, match="`sandbox` must be one of auto, always, never; received 'maybe'"):
        write_gradescope_autograder(tmp_path / "a.zip", ["04"], ROOT, sandbox="maybe")
    with pytest.raises(FileNotFoundError, match="is not a checkout of the course"):
        write_gradescope_autograder(tmp_path / "a.zip", ["04"], tmp_path)


def test_an_autograder_written_without_a_seed_gets_a_fresh_secret_one(tmp_path):
    seeds = set()
    for name in ("a", "b"):
        with zipfile.ZipFile(write_gradescope_autograder(tmp_path / f"{name}.zip", ["05"], ROOT)) as archive:
            seeds.add(json.loads(archive.read("settings.json"))["seed"])
    assert len(seeds) == 2 and min(seeds) > 2**64  # 128 random bits, not 0 (one chance in 2**64 to fail)


def test_where_bubblewrap_cannot_run_a_submission_gets_the_reason_and_is_never_run_unconfined(autograder, tmp_path):
    # Gradescope's usual container: no user namespaces, so bwrap fails. A failing `bwrap` first on PATH stands in.
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    marker = tmp_path / "ran-unconfined"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('x')")])
    submitted = tmp_path / "05_transformer_encoder.ipynb"
    nbformat.write(notebook, submitted)
    results = _run(autograder[0], {"05_transformer_encoder.ipynb": submitted}, path_first=fake)
    assert results["score"] == 0 and "never graded unconfined" in results["output"] and results["tests"] == []
    assert not marker.exists()  # none of the submission's code ran
