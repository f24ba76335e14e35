"""Runs that resume: a notebook's long work cut into stages, each kept when it finishes.

A full run stopped anywhere — a closed Colab tab, a killed kernel, a machine's time running out —
continues from its last finished stage when it is run again. A stage is a unit the notebook already
has: one sweep point, one fine-tuning arm at one seed, one pre-training round (through
:func:`~transformer_course.training.fit_best`'s ``resume_folder``, which keeps the state after
every round).

Stages live in a folder of the course's cache, one per notebook, profile and settings::

    <runs directory>/<notebook>/<profile>/<key>/

The runs directory is ``COURSE_RUNS_DIR`` when set, else ``runs/`` in the per-user cache
(``platformdirs.user_cache_dir("transformer-course")``); the data cache (``COURSE_DATA_DIR``) is
never written. ``key`` is a hash of the notebook's settings in that profile and of the course
package's own source, so a changed setting or a changed package never resumes a stale stage. A
changed *notebook* (its cells) is not in the key: clear its stages after editing what a stage
computes — ``transformer-course runs clear 09``, or ``transformer-course run 09 --fresh``.

Example::

    stages = RunStages("09", settings)
    point = stages.stage("size 128", lambda: train_and_score(128))   # JSON-able result, kept
    model, history, facts = fit_best(..., resume_folder=stages.folder_for("training"))
    stages.report()   # which stages were taken from an earlier sitting, and which ran now
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from .._files import write_text_atomically

__all__ = ["RunStages", "runs_directory", "settings_key", "clear_runs"]

_PACKAGE = Path(__file__).resolve().parents[1]


def runs_directory() -> Path:
    """Where every notebook's stages are kept: ``COURSE_RUNS_DIR``, else ``runs/`` in the per-user cache."""
    configured = os.environ.get("COURSE_RUNS_DIR", "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    import platformdirs

    return Path(platformdirs.user_cache_dir("transformer-course")) / "runs"


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _jsonable(item) for key, item in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


@cache
def _package_fingerprint() -> str:
    """A hash of the course package's own source files (``*.py``), in a fixed order."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*.py")):
        digest.update(path.relative_to(_PACKAGE).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def settings_key(notebook_id: str, profile_name: str, settings: Mapping[str, Any]) -> str:
    """The 16-hex-digit key of a run: a hash of the notebook, the profile, its settings and the package source.

    Args:
        notebook_id: str, ``"09"``.
        profile_name: str, ``"full"`` or ``"smoke"``.
        settings: the notebook's settings (a :class:`~transformer_course.tooling.profiles.Settings`).

    Returns:
        str of 16 hexadecimal digits; equal settings give equal keys, any changed setting another.
    """
    text = json.dumps(
        {"notebook": notebook_id, "profile": profile_name, "settings": _jsonable(settings)}, sort_keys=True
    )
    return hashlib.sha256((text + _package_fingerprint()).encode()).hexdigest()[:16]


def _file_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"`name` must be a non-empty str naming the stage; received {name!r}.")
    return re.sub(r"[^A-Za-z0-9._=-]+", "_", name.strip())


class RunStages:
    """The stages of one notebook's run, kept in a folder keyed by its settings.

    Args:
        notebook_id: str, the notebook's two-digit id.
        settings: the notebook's settings, as :func:`~transformer_course.tooling.runtime.start_notebook`
            returns them (their notebook and profile are read from them when they are ``Settings``).
        profile_name: str, the profile; default: the settings' own, else the active profile.
        directory: the runs directory; default :func:`runs_directory`.

    Attributes:
        folder: Path, this run's folder (created).
        ran, skipped: lists of stage names run in this sitting and taken from an earlier one.
    """

    def __init__(self, notebook_id: str, settings: Mapping[str, Any], profile_name: str | None = None,
                 directory: str | os.PathLike | None = None):  # fmt: skip
        if profile_name is None:
            profile_name = getattr(settings, "_profile_name", None)
        if profile_name is None:
            from .profiles import profile

            profile_name = profile().name
        self.notebook_id, self.profile_name = notebook_id, profile_name
        self.key = settings_key(notebook_id, profile_name, settings)
        root = Path(directory) if directory is not None else runs_directory()
        self.folder = root / notebook_id / profile_name / self.key
        self.folder.mkdir(parents=True, exist_ok=True)
        self.ran: list[str] = []
        self.skipped: list[str] = []

    def stage(self, name: str, compute: Callable[[], Any]) -> Any:
        """The result of stage ``name``: read back if an earlier sitting finished it, else computed and kept.

        Args:
            name: str, the stage's name, unique in the run (``"size 128"``, ``"arm lora seed 2"``).
            compute: callable with no arguments returning JSON-able data (dicts, lists, numbers, str),
                the stage's record; models a stage trains go in :meth:`folder_for` (its
                ``.keras`` files, or :func:`~transformer_course.training.fit_best`'s ``resume_folder``).

        Returns:
            What ``compute`` returned, or what it returned in the sitting that finished the stage (JSON
            turns tuples into lists).

        Raises:
            ValueError: for an empty name, or a result that is not JSON-able.
        """
        path = self.folder / f"{_file_name(name)}.json"
        if path.exists():
            self.skipped.append(name)
            return json.loads(path.read_text(encoding="utf-8"))["result"]
        result = compute()
        try:
            text = json.dumps({"stage": name, "result": result})
        except TypeError as error:
            raise ValueError(
                f"Stage {name!r} must return JSON-able data (dicts, lists, numbers, str): {error}"
            ) from None
        write_text_atomically(path, text)  # the stage counts as finished only once its whole record is written
        self.ran.append(name)
        return json.loads(text)["result"]

    def done(self, name: str) -> bool:
        """True when an earlier sitting (or this one) finished stage ``name``."""
        return (self.folder / f"{_file_name(name)}.json").exists()

    def folder_for(self, name: str) -> Path:
        """A folder for what stage ``name`` keeps besides its record: weights, a training run's state (created)."""
        folder = self.folder / _file_name(name)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def summary(self) -> str:
        """One line on which stages were taken from an earlier sitting and which ran now."""
        if self.skipped:
            return (f"Stages taken from an earlier sitting ({self.folder}): {', '.join(self.skipped)}; "
                    f"run now: {', '.join(self.ran) or 'none'}.")  # fmt: skip
        return f"Every stage ran in this sitting ({len(self.ran)}); each is kept in {self.folder}."

    def report(self) -> None:
        """Print :meth:`summary`. It returns nothing, so a notebook cell that ends with it shows the line once."""
        print(self.summary())


def clear_runs(notebook_id: str | None = None, directory: str | os.PathLike | None = None) -> list[Path]:
    """Delete the kept stages of one notebook (every profile and key), or of every notebook.

    Args:
        notebook_id: str, ``"09"``; None clears every notebook's.
        directory: the runs directory; default :func:`runs_directory`.

    Returns:
        The folders removed.
    """
    root = Path(directory) if directory is not None else runs_directory()
    folders = [root / notebook_id] if notebook_id is not None else sorted(root.glob("[0-9][0-9]"))
    removed = []
    for folder in folders:
        if folder.is_dir():
            shutil.rmtree(folder)
            removed.append(folder)
    return removed
