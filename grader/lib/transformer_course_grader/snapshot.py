"""Snapshots of the packages a sandboxed kernel imports, taken when grading starts.

Two packages are mounted, read-only, over their installed folders in every kernel
(:func:`kernel_mounts`): the course package and this grader. The notebook's kernel gets the whole
course package (:func:`package_snapshot`); the kernel that runs the graded calls gets only the
modules of :data:`GRADED_MODULES` (:func:`graded_snapshot`). Both get a copy of the grader holding
only the grading protocol and its audit hook (:func:`grader_snapshot`): the references, the case
generators and the rest of the grader are not there at all. Each copy is compiled from its own
sources, never from the checkout's ``__pycache__``, so nothing written into the checkout meanwhile
reaches a kernel.
"""

from __future__ import annotations

import atexit
import compileall
import os
import shutil
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import transformer_course

from .confinement import kernels_folder  # where kernels' folders are made: the confinement decides

__all__ = [
    "package_folder",
    "grader_folder",
    "package_snapshot",
    "graded_snapshot",
    "grader_snapshot",
    "kernel_mounts",
    "kernel_python_path",
    "GRADED_MODULES",
    "GRADER_MODULES",
]


def package_folder() -> Path:
    """The folder of the installed ``transformer_course`` package (a checkout's ``lib/`` when editable)."""
    return Path(transformer_course.__file__).resolve().parent


def grader_folder() -> Path:
    """The folder of the installed ``transformer_course_grader`` package (``grader/lib/`` when editable)."""
    return Path(__file__).resolve().parent


def _make_snapshot(prefix: str, source: Path, stubbed: Callable[[Path], str | None]) -> Path:
    """A private, read-only-to-kernels copy of the package in ``source``, compiled from its own sources.

    ``stubbed(relative_path)`` gives the text that replaces a module (None keeps it). Made in a
    temporary folder removed at exit; the checkout's ``__pycache__`` folders are left out.
    """
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=kernels_folder()))
    atexit.register(shutil.rmtree, root, True)
    snapshot = root / source.name
    shutil.copytree(source, snapshot, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=False)
    for path in snapshot.rglob("*.py"):
        text = stubbed(path.relative_to(snapshot))
        if text is not None:
            path.write_text(text, encoding="utf-8")
    compileall.compile_dir(snapshot, quiet=2)  # compiled here, from the snapshot's own sources: imports stay fast
    for path in (root, *snapshot.rglob("*")):  # readable inside whatever the grader's umask
        path.chmod(0o755 if path.is_dir() else 0o644)
    return snapshot


@lru_cache(maxsize=1)
def package_snapshot() -> Path:
    """The copy of the course package a student's notebook runs with: the whole package, as installed.

    Made once per grading process and mounted read-only over the package in every sandbox, so
    that a compiled file or a changed module written into the checkout during grading never
    reaches a kernel.

    Returns:
        Path of the snapshot's ``transformer_course`` folder.
    """
    return _make_snapshot("course-package-", package_folder(), lambda path: None)


# What graded calls can import of the course package: the value format and the table the decoding exercises' cases
# are made of; of the grader, the protocol and its audit hook (in every kernel). Every other module raises ImportError.
GRADED_MODULES = {Path("__init__.py"), Path("_next_token_table.py"), Path("exercises", "values.py")}
GRADER_MODULES = {Path("guard.py"), Path("protocol.py")}
_EMPTY_PACKAGES = {Path("exercises", "__init__.py")}


def _out_of_reach(package: str, path: Path) -> str:
    module = ".".join((package, *path.with_suffix("").parts)).removesuffix(".__init__")
    message = (
        f"{module} is out of reach of graded code: graded functions run where the course package "
        "holds only the grading protocol (write the exercise with NumPy)."
    )
    return f"raise ImportError({message!r}, name={module!r})\n"


def _graded_stub(path: Path) -> str | None:
    if path in GRADED_MODULES:
        return None
    return "" if path in _EMPTY_PACKAGES else _out_of_reach("transformer_course", path)


def _grader_stub(path: Path) -> str | None:
    if path in GRADER_MODULES:
        return None
    return "" if path == Path("__init__.py") else _out_of_reach("transformer_course_grader", path)


@lru_cache(maxsize=1)
def grader_snapshot() -> Path:
    """The copy of this grader every kernel sees: the protocol and its audit hook, nothing else.

    The references and case generators, the reports, the sandbox's own code: each replaced by one
    line that raises ``ImportError``, so no kernel can read them, whether the grader is a checkout
    (``pip install -e grader``) or a wheel in the same ``site-packages`` the kernels read.

    Returns:
        Path of the snapshot's ``transformer_course_grader`` folder.
    """
    return _make_snapshot("course-grader-", grader_folder(), _grader_stub)


def kernel_mounts(package: Path | None = None) -> list[tuple[Path, Path]]:
    """``(snapshot, installed folder)`` pairs a sandbox mounts read-only: the course package and the grader.

    Args:
        package: the course package's copy, :func:`package_snapshot` (None, the default) or
            :func:`graded_snapshot`.
    """
    return [(package or package_snapshot(), package_folder()), (grader_snapshot(), grader_folder())]


def kernel_python_path(package: Path | None = None) -> str:
    """``PYTHONPATH`` of an unconfined kernel: the same copies as :func:`kernel_mounts`, ahead of the installed ones."""
    return os.pathsep.join(str(snapshot.parent) for snapshot, _ in kernel_mounts(package))


@lru_cache(maxsize=1)
def graded_snapshot() -> Path:
    """The copy of the course package the graded calls run with: the value format and nothing to copy.

    Only :data:`GRADED_MODULES` are kept; every other module of the package, the exercise
    implementations among them, is replaced by one line that raises ``ImportError``. A graded
    function that reaches the package's code in any way (an import, a name resolved at run time,
    a pickle, a decorator from another cell) fails like a missing import.

    Returns:
        Path of the snapshot's ``transformer_course`` folder.
    """
    return _make_snapshot("course-graded-", package_folder(), _graded_stub)
