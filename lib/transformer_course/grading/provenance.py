"""Does a pickled graded function name or hold the course package's own code? Read, never run.

A student's function comes from their kernel as a ``cloudpickle`` (:func:`.protocol.export_code`).
The grader never unpickles it: :func:`package_code_in` walks its opcodes with ``pickletools``
(which only parses) and looks for three traces of the package:

* ``"name"``: a **name** in the package (``transformer_course.masks``): a function, module or
  object pickled by reference, however the student reached it (an import, ``pkgutil.resolve_name``,
  a pickle of their own, a wrapper, a decorator). No honest answer carries one: graded code runs
  where the package holds only the grading protocol.
* ``"code"``: one of the package's **source files** as a code object's file name: the package's
  own code object, copied (``types.FunctionType(f.__code__, ...)``) or relabelled
  (``f.__module__ = "__main__"``). No honest answer carries one either.
* ``"program"``: the **compiled code** of one of the package's subject functions (the same
  bytecode, naming the same globals and attributes): its source recompiled elsewhere, or, for a
  short function, an honest answer that happens to be the same program. The grader flags it for
  the instructor and does not change the score.

These are the traces a copy carries, not the only line of defence: the graded kernel has no copy
of the package's implementations at all (:func:`.sandbox.graded_snapshot`), so a name that slips
through (one assembled at run time) fails there like a missing import. What cannot be seen this
way is a student who types the package's source out by hand and changes it; the report's
similarity section (:mod:`.similarity`) lists solutions close to the package's.
"""

from __future__ import annotations

import pickletools
import re
from functools import lru_cache
from pathlib import Path

__all__ = ["package_code_in", "package_bytecode", "MIN_CODE_BYTES"]

PACKAGE = "transformer_course"
MIN_CODE_BYTES = 32  # shorter bodies (a one-line accessor) are too common to be worth a flag
_SOURCE_FILE = re.compile(rf"(^|[/\\]){PACKAGE}[/\\].+\.py$")
_NOT_SUBJECT = ("grading", "exercises", "tooling")  # the grader's references are the exercises' answers
_MAX_OPCODES = 2_000_000  # a graded function's pickle has thousands; more is not a function


def _code_objects(code):
    yield code
    for constant in code.co_consts:
        if hasattr(constant, "co_code"):
            yield from _code_objects(constant)


@lru_cache(maxsize=1)
def package_bytecode() -> dict[bytes, tuple[str, frozenset]]:
    """The bytecode of every named function of the subject modules -> (dotted name, names it uses).

    Compiled here from the source files (nothing is imported), with this Python: the same bytes
    a kernel of the same Python holds for those functions. Comprehensions, lambdas, bodies
    shorter than ``MIN_CODE_BYTES`` and the grader's own packages are left out.
    """
    folder = Path(__file__).resolve().parents[1]
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = path.relative_to(folder).with_suffix("").parts
        if parts[0] in _NOT_SUBJECT:
            continue
        module = ".".join((PACKAGE, *parts)).removesuffix(".__init__")
        try:
            code = compile(path.read_text(encoding="utf-8"), str(path), "exec")
        except (OSError, SyntaxError, ValueError):
            continue
        for inner in _code_objects(code):
            if not inner.co_name.startswith("<") and len(inner.co_code) >= MIN_CODE_BYTES:
                qualified = f"{module}.{getattr(inner, 'co_qualname', inner.co_name)}"
                found.setdefault(inner.co_code, (qualified, frozenset(inner.co_names)))
    return found


def package_code_in(pickled: bytes) -> tuple[str, str] | None:
    """The first trace of the package's code in ``pickled``: ``(kind, sentence)``, or None.

    Args:
        pickled: bytes of a pickle (``cloudpickle.dumps`` of a graded function).

    Returns:
        ``("name", "refers to the course package (transformer_course.masks)")``,
        ``("code", "holds the course package's own code (from masks.py)")``,
        ``("program", "holds the compiled code of the course package's transformer_course.masks.causal_mask")``
        or None. Bytes that are not a pickle ``pickletools`` can read give ``("code", ...)`` too:
        the grader runs nothing it cannot read.
    """
    bytecode = package_bytecode()
    strings, programs = set(), []
    try:
        for count, (_, argument, _) in enumerate(pickletools.genops(pickled)):
            if count > _MAX_OPCODES:
                return "code", "is a pickle too large to read"
            if isinstance(argument, str):
                # GLOBAL's argument is "module name"; STACK_GLOBAL's module is a string of its own.
                for word in argument.split():
                    if word == PACKAGE or word.startswith(PACKAGE + "."):
                        return "name", f"refers to the course package ({word[:100]})"
                if _SOURCE_FILE.search(argument):
                    return "code", f"holds the course package's own code (from {Path(argument).name[:100]})"
                strings.add(argument)
            elif isinstance(argument, (bytes, bytearray)) and bytes(argument) in bytecode:
                programs.append(bytecode[bytes(argument)])
    except Exception as error:  # noqa: BLE001 - any malformed pickle: not run, and said so
        return "code", f"is not a pickle the grader can read ({type(error).__name__})"
    for name, names in programs:
        if names <= strings:
            return "program", f"holds the compiled code of the course package's {name}"
    return None
