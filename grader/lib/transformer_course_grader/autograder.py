"""A Gradescope autograder for one assignment: the zip a Gradescope programming assignment takes.

Gradescope builds an image from the zip once (``setup.sh``), then for every submission copies the
student's files to ``/autograder/submission``, runs ``/autograder/run_autograder`` and shows
``/autograder/results/results.json``: the score, one test per exercise with its verdict, and
regrade requests against them. (Gradescope's documentation: "Autograder Specifications".) The
way otter-grader serves Gradescope courses, this grader does the grading itself:

* :func:`write_gradescope_autograder` writes the zip: ``setup.sh`` (Python's venv and
  bubblewrap from the image's packages, the course and this grader from the copies in the zip —
  the grader's references included, which students never get — and the data sets, checked by
  sha256),
  ``run_autograder``, the released notebooks of the assignment and ``settings.json``.
* :func:`main`, run by ``run_autograder``, grades the submission with
  :func:`~transformer_course_grader.grader.grade_folder` exactly as ``transformer-course-grader grade``
  does (the same limits, the notebook run whole in the smoke profile, hidden cases drawn from a
  seed fixed in the zip and the student's Gradescope user id (:func:`student_key`), so each student
  gets cases of their own and a regrade the same ones) and writes ``results.json`` with
  :func:`~transformer_course_grader.exports.gradescope_results`. A submission that cannot be
  graded gets a score of 0 and the reason as its output, never a crash without a result.

Gradescope runs each submission in its own container, which already separates students from each
other, but not a submission from the autograder: unconfined, the notebook would run as the grader,
read the seed and the references, and could rewrite ``results.json`` after it was written. So every
submission runs in the bubblewrap sandbox (``sandbox="auto"`` and ``"always"``, alike now), and where
bubblewrap cannot run in the container (unprivileged user namespaces are often off inside Docker)
the submission gets 0 with that reason, for the course staff to fix; ``"never"`` runs it
unconfined, only for testing the autograder with notebooks you trust.

Use Gradescope's Ubuntu 24.04 base image: the course needs Python 3.11 or newer.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

__all__ = ["write_gradescope_autograder", "main", "student_key", "SANDBOX_CHOICES"]

SANDBOX_CHOICES = ("auto", "always", "never")

_SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 24.04 base image).
set -euo pipefail
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap
python3 -m venv /autograder/venv
/autograder/venv/bin/pip install -q -r /autograder/source/course/requirements.txt
/autograder/venv/bin/pip install -q --no-deps -e /autograder/source/course -e /autograder/source/course/grader
# The data sets the notebooks read, into the course's cache, checked by sha256.
/autograder/venv/bin/python -c "from transformer_course.datasets import load_imdb, load_imdb_unlabelled, \\
load_spa_eng; load_imdb(); load_imdb_unlabelled(); load_spa_eng()"
"""

_RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission: grade it, write /autograder/results/results.json.
root="${AUTOGRADER_ROOT:-/autograder}"
exec "${COURSE_PYTHON:-$root/venv/bin/python}" -m transformer_course_grader.autograder "$root"
"""

_COURSE_FILES = (
    "pyproject.toml",
    "requirements.txt",
    "README.md",
    "LICENSE",
    "grader/pyproject.toml",
    "grader/README.md",
    "grader/LICENSE",
)


def write_gradescope_autograder(
    out,
    notebooks: list[str],
    project_root=".",
    release_dir=None,
    seed: int | None = None,
    cell_timeout: float = 60,
    notebook_timeout: float = 600,
    sandbox: str = "auto",
) -> Path:
    """Write the autograder zip of one assignment for a Gradescope programming assignment.

    Args:
        out: path of the zip to write (``.zip``).
        notebooks: the assignment's notebooks by number (``["04"]``, ``["04", "05"]``).
        project_root: the course's checkout (its ``lib/``, ``pyproject.toml``, ``requirements.txt``, and
            the grader's ``grader/``).
        release_dir: the released notebooks; None: ``project_root/release``.
        seed: int, the secret seed of the hidden cases (None, the default: a fresh one of 128 random bits,
            :func:`~transformer_course_grader.grader.draw_seed`; never a guessable 0), keyed with each
            student's Gradescope user id:
            every student gets cases of their own, and a regrade the same ones. Keep the zip private (it
            holds the references).
        cell_timeout, notebook_timeout: seconds per cell and per notebook, as ``grade``'s options.
        sandbox: ``"auto"`` or ``"always"`` (bubblewrap; where it cannot run, a submission gets 0 and the
            reason, never graded unconfined) or ``"never"`` (unconfined: only for notebooks you trust).

    Returns:
        the path written.

    Raises:
        ValueError: an empty ``notebooks``, a notebook with no released copy, or an unknown
            ``sandbox``, each naming what was received.
        FileNotFoundError: ``project_root`` is not a checkout of the course.

    Example:
        >>> write_gradescope_autograder("autograder-04.zip", ["04"])  # doctest: +SKIP
        PosixPath('autograder-04.zip')
    """
    root = Path(project_root)
    release = root / "release" if release_dir is None else Path(release_dir)
    if sandbox not in SANDBOX_CHOICES:
        raise ValueError(f"`sandbox` must be one of {', '.join(SANDBOX_CHOICES)}; received {sandbox!r}.")
    if not notebooks:
        raise ValueError("`notebooks` must name at least one notebook (['04']); received none.")
    for name in (*_COURSE_FILES[:2], "grader/lib/transformer_course_grader/references/__init__.py"):
        if not (root / name).is_file():
            raise FileNotFoundError(f"`project_root` {str(root)!r} is not a checkout of the course: no {name}.")
    released = {}
    for number in notebooks:
        found = sorted(release.glob(f"{number}_*.ipynb"))
        if not found:
            raise ValueError(
                f"no released notebook {number} in {str(release)!r} (run `transformer-course-grader release`)."
            )
        released[number] = found[0]
    if seed is None:
        from .grader import draw_seed

        seed = draw_seed()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    settings = {
        "notebooks": list(notebooks),
        "seed": int(seed),
        "cell_timeout": cell_timeout,
        "notebook_timeout": notebook_timeout,
        "sandbox": sandbox,
    }
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in (("setup.sh", _SETUP), ("run_autograder", _RUN)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable, as Gradescope runs them
            archive.writestr(info, text)
        archive.writestr("settings.json", json.dumps(settings, indent=1) + "\n")
        for name in _COURSE_FILES:
            if (root / name).is_file():
                archive.write(root / name, f"course/{name}")
        for path in sorted([*(root / "lib").rglob("*"), *(root / "grader" / "lib").rglob("*")]):
            if path.is_file() and "__pycache__" not in path.parts and not path.name.endswith(".pyc"):
                archive.write(path, f"course/{path.relative_to(root).as_posix()}")
        for path in released.values():
            archive.write(path, f"release/{path.name}")
    return out


def student_key(metadata: dict) -> str:
    """The name a Gradescope submission is graded under: its students' user ids and the assignment's id.

    The secret cases are drawn per student (a keyed hash of this name and the exercise), so every
    student of a Gradescope course gets cases of their own, and a regrade the same ones; a group's
    members share theirs. Read from Gradescope's ``submission_metadata.json``, never from a folder name
    (every upload arrives as ``/autograder/submission``).

    Args:
        metadata: the parsed ``submission_metadata.json`` (``users``: a list with each student's ``id``;
            ``assignment``: with its ``id``).

    Returns:
        str such as ``"user-1234-assignment-56"`` (ids sorted, joined with ``+`` for a group).

    Raises:
        ValueError: for metadata without a user id or an assignment id.

    Example:
        >>> student_key({"users": [{"id": 1234, "name": "Ada"}], "assignment": {"id": 56}})
        'user-1234-assignment-56'
    """
    users = metadata.get("users") if isinstance(metadata, dict) else None
    ids = sorted(str(user.get("id")) for user in users or [] if isinstance(user, dict) and user.get("id") is not None)
    assignment = (metadata.get("assignment") or {}).get("id") if isinstance(metadata, dict) else None
    if not ids or assignment is None:
        raise ValueError(
            "submission_metadata.json names no user id or no assignment id: the secret cases are drawn for each "
            "student from them."
        )
    key = f"user-{'+'.join(ids)}-assignment-{assignment}"
    return "".join(character if character.isalnum() or character in "+-_" else "_" for character in key)


def _failed(results_dir: Path, reason: str) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "results.json").write_text(
        json.dumps(
            {
                "score": 0.0,
                "output": f"The submission could not be graded: {reason}",
                "output_format": "text",
                "visibility": "visible",
                "tests": [],
            },
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    """Grade ``AUTOGRADER_ROOT/submission`` and write ``AUTOGRADER_ROOT/results/results.json``.

    Args:
        argv: ``[root]``, the autograder's folder (Gradescope's ``/autograder``, holding ``source/``
            as the zip unpacked, ``submission/`` and ``results/``); None reads ``sys.argv``.

    Returns:
        0 whenever a ``results.json`` was written (a submission that could not be graded gets a
        score of 0 and the reason); 2 when not even that was possible.
    """
    from transformer_course.datasets import pin_data_directory

    from .exports import gradescope_results
    from .grader import grade_folder
    from .sandbox import Limits, SandboxUnavailable

    root = Path((sys.argv[1:] if argv is None else argv)[0]).resolve()
    results_dir = root / "results"
    pin_data_directory()  # the kernels run in the notebook's folder
    try:
        settings = json.loads((root / "source" / "settings.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        print(f"autograder: settings.json unreadable: {error}", file=sys.stderr)
        return 2
    submitted = sorted((root / "submission").rglob("*.ipynb"))
    if not submitted:
        _failed(results_dir, "no notebook (.ipynb) was submitted; upload the notebook of this assignment.")
        return 0
    try:
        name = student_key(json.loads((root / "submission_metadata.json").read_text(encoding="utf-8")))
    except (OSError, ValueError) as error:
        _failed(results_dir, f"Gradescope's submission_metadata.json could not be read ({error}).")
        return 0
    limits = Limits(settings["cell_timeout"], settings["notebook_timeout"])
    with tempfile.TemporaryDirectory() as work:
        student = Path(work) / "submissions" / name
        student.mkdir(parents=True)
        for path in submitted:
            shutil.copy2(path, student / path.name)
        report = Path(work) / "report"
        arguments = {"limits": limits, "seed": settings["seed"], "progress": False, "notebooks": settings["notebooks"]}
        try:
            try:
                grade_folder(
                    student.parent,
                    report,
                    root / "source" / "release",
                    sandbox=settings["sandbox"] != "never",
                    **arguments,
                )
            except SandboxUnavailable as error:
                # Never the container alone: unconfined, a submission runs as the grader, reads the seed and the
                # references in /autograder/source, and can rewrite results.json after it is written.
                print(f"autograder: the bubblewrap sandbox cannot run in this container: {error}", file=sys.stderr)
                _failed(
                    results_dir,
                    "the bubblewrap sandbox cannot run in this autograder's container, and a submission is never "
                    "graded unconfined (it could read the autograder's secrets and rewrite its own score). This is "
                    "for your course staff to fix: the image needs unprivileged user namespaces for bubblewrap.",
                )
                return 0
            results = gradescope_results(report, name, notebooks=settings["notebooks"], written=False)
        except Exception as error:  # noqa: BLE001 (any failure becomes the student's visible reason)
            _failed(results_dir, f"{type(error).__name__}: {error}")
            return 0
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
