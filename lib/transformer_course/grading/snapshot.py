"""Snapshots of the course package that a sandboxed kernel imports, taken when grading starts.

The notebook's kernel gets the package without the grader's references and case generators
(:mod:`.references` is an empty module there); the kernel that runs the graded calls gets only the
grading protocol (:data:`GRADED_MODULES`). Each is compiled from its own sources, never from the
checkout's ``__pycache__``, so nothing written into the checkout meanwhile reaches a kernel.
"""


from __future__ import annotations

import atexit
import compileall
import shutil
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from .confinement import kernels_folder  # where kernels' folders are made: the confinement decides

__all__ = ["package_folder", "package_snapshot", "graded_snapshot", "GRADED_MODULES"]


def package_folder() -> Path:
    """The folder of the installed ``transformer_course`` package (a checkout's ``lib/`` when editable)."""
    return Path(__file__).resolve().parents[1]



def _make_snapshot(prefix: str, stubbed: Callable[[Path], str | None]) -> Path:
    """A private, read-only-to-kernels copy of the package, compiled from its own sources.

    ``stubbed(relative_path)`` gives the text that replaces a module (None keeps it). Made in a
    temporary folder removed at exit; the checkout's ``__pycache__`` folders are left out.
    """
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=kernels_folder()))
    atexit.register(shutil.rmtree, root, True)
    snapshot = root / "transformer_course"
    shutil.copytree(package_folder(), snapshot, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=False)
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
    """The copy of the course package a student's notebook runs with: an empty :mod:`.references`.

    Made once per grading process and mounted read-only over the package in every sandbox, so
    that a compiled file or a changed module written into the checkout during grading never
    reaches a kernel.

    Returns:
        Path of the snapshot's ``transformer_course`` folder.
    """
    return _make_snapshot("course-package-",
                          lambda path: "" if path == Path("grading", "references", "__init__.py") else None)


# What graded calls can import of the package: the protocol and its audit hook, the value format and the table the
# decoding exercises' cases are made of. Every other module raises ImportError there.
GRADED_MODULES = {Path("__init__.py"), Path("_next_token_table.py"), Path("exercises", "values.py"),
                  Path("grading", "guard.py"), Path("grading", "protocol.py")}
_EMPTY_PACKAGES = {Path("exercises", "__init__.py"), Path("grading", "__init__.py")}


def _graded_stub(path: Path) -> str | None:
    if path in GRADED_MODULES:
        return None
    if path in _EMPTY_PACKAGES:
        return ""
    module = ".".join(("transformer_course", *path.with_suffix("").parts)).removesuffix(".__init__")
    message = (f"{module} is out of reach of graded code: graded functions run where the course package "
               "holds only the grading protocol (write the exercise with NumPy).")
    return f"raise ImportError({message!r}, name={module!r})\n"


@lru_cache(maxsize=1)
def graded_snapshot() -> Path:
    """The copy of the course package the graded calls run with: the protocol and nothing to copy.

    Only :data:`GRADED_MODULES` are kept; every other module of the package, the exercise
    implementations among them, is replaced by one line that raises ``ImportError``. A graded
    function that reaches the package's code in any way (an import, a name resolved at run time,
    a pickle, a decorator from another cell) fails like a missing import.

    Returns:
        Path of the snapshot's ``transformer_course`` folder.
    """
    return _make_snapshot("course-graded-", _graded_stub)


