"""What graded code may be made of, decided from its source before it runs.

The grader grades the statements a function needs (:mod:`.slicing`): known text. This module reads
that text — the student's own statements and the modules the notebook writes, never an installed
library — and refuses the constructs that build or load code, or reach the interpreter's or the
grader's internals, so that what runs is what the notebook shows. A refused exercise scores 0 with
the reason (the line and the construct); nothing of it runs.

Refused, each for what it opens:

* **code from data**: calls of ``exec``, ``eval``, ``compile``, ``__import__`` and ``breakpoint``;
  ``getattr``/``setattr``/``delattr`` with a name that is not a constant (or is a dunder name);
* **the interpreter's internals**: the attributes of functions, code objects, frames, tracebacks,
  generators and classes that reach code or namespaces (``__code__``, ``__globals__``,
  ``__builtins__``, ``__closure__``, ``__self__``, ``__func__``, ``__subclasses__``, ``__mro__``,
  ``__bases__``, ``__dict__``, ``__annotations__``, ``f_globals``, ``f_back``, ``tb_frame``,
  ``gi_frame``, ``co_code`` and their like), the names ``__builtins__``, ``__loader__``,
  ``__spec__`` and ``__annotations__``, and ``sys.modules``, ``sys.meta_path``,
  ``sys.path_hooks``, ``sys._getframe``, ``sys.settrace`` and their like;
* **modules whose job is loading or building code**: ``ctypes``, ``marshal``, ``pickle`` (and
  ``dill``, ``cloudpickle``, ``shelve``), ``importlib``, ``imp``, ``runpy``, ``zipimport``,
  ``code``, ``codeop``, ``pkgutil``, ``builtins``, ``gc``, ``inspect``, ``types``, ``subprocess`` and
  ``multiprocessing`` (and ``os.system``, ``os.exec*`` and their like, which start a program);
* **a private name of a module** (``dataclasses._create_fn``, ``from collections import _x``): a
  library's internals, where it builds code from text it trusts;
* **a string or bytes constant longer than** :data:`MAX_CONSTANT_CHARACTERS`: no answer needs
  one; a program carried as data does.

A module the notebook writes (``%%writefile``) is read by the same rules. An honest answer meets
none of them: NumPy, ``functools``, ``math``, ``itertools``, ``dataclasses``, ``collections``,
``typing``, ``enum``, ``global`` state and helpers in other cells all pass.

The runtime audit hook of :mod:`.guard` stays in the graded kernel as a tripwire behind this policy.

Example:
    >>> [problem.reason for problem in problems_in("import marshal\\ncode = marshal.loads(DATA)")]
    ['imports marshal, a module that loads or builds code']
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["Problem", "problems_in", "MAX_CONSTANT_CHARACTERS", "REFUSED_MODULES", "REFUSED_ATTRIBUTES"]

MAX_CONSTANT_CHARACTERS = 4096  # the longest string or bytes constant an answer may hold

REFUSED_CALLS = frozenset({"exec", "eval", "compile", "__import__", "breakpoint", "globals", "vars"})
NAMED_ACCESS = frozenset({"getattr", "setattr", "delattr"})
REFUSED_MODULES = frozenset(
    {
        "ctypes",
        "marshal",
        "pickle",
        "dill",
        "cloudpickle",
        "shelve",
        "importlib",
        "imp",
        "runpy",
        "zipimport",
        "code",
        "codeop",
        "builtins",
        "gc",
        "inspect",
        "types",
        "_imp",
        "_frozen_importlib",
        "_frozen_importlib_external",
        "subprocess",
        "multiprocessing",
        "pkgutil",
    }
)
REFUSED_OS = frozenset(
    {
        "system",
        "popen",
        "execv",
        "execve",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "execvp",
        "execvpe",
        "spawnv",
        "spawnve",
        "spawnl",
        "spawnle",
        "posix_spawn",
        "posix_spawnp",
        "fork",
    }
)
CODE_SUFFIXES = (".py", ".pyc", ".pyw", ".so", ".zip", ".pth", ".egg")
REFUSED_ATTRIBUTES = frozenset(
    {
        # functions, methods, classes and modules
        "__code__",
        "__globals__",
        "__builtins__",
        "__closure__",
        "__self__",
        "__func__",
        "__subclasses__",
        "__mro__",
        "__bases__",
        "__base__",
        "__dict__",
        "__annotations__",
        "__getattribute__",
        "__reduce__",
        "__reduce_ex__",
        "__loader__",
        "__spec__",
        "__wrapped__",
        "__kwdefaults__",
        "__defaults__",
        "__traceback__",
        # frames, tracebacks, generators and coroutines
        "f_globals",
        "f_locals",
        "f_builtins",
        "f_back",
        "f_code",
        "tb_frame",
        "tb_next",
        "gi_frame",
        "gi_code",
        "cr_frame",
        "cr_code",
        "ag_frame",
        "ag_code",
        # code objects
        "co_code",
        "co_consts",
        "co_names",
        "replace",
    }
)
# `replace` only on what is clearly a code object is refused: `str.replace` is everyday code (see _refused_attribute).
REFUSED_NAMES = frozenset({"__builtins__", "__loader__", "__spec__", "__annotations__"})
REFUSED_SYS = frozenset(
    {
        "modules",
        "meta_path",
        "path_hooks",
        "path_importer_cache",
        "_getframe",
        "settrace",
        "setprofile",
        "addaudithook",
        "_current_frames",
        "breakpointhook",
        "excepthook",
        "displayhook",
        "__dict__",
    }
)


@dataclass(frozen=True)
class Problem:
    """One refused construct.

    Attributes:
        line: int, its line in the statement's text (1-based).
        reason: str, what was refused and why, in one phrase.
    """

    line: int
    reason: str


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _refused_attribute(node: ast.Attribute) -> bool:
    if node.attr == "replace":  # only a code object's .replace(co_...=...) builds code; str.replace is honest
        return isinstance(node.value, ast.Attribute) and node.value.attr in ("__code__", "gi_code", "f_code")
    return node.attr in REFUSED_ATTRIBUTES


def _writes_code(call: ast.Call) -> bool:
    """``open(name, mode)`` that writes (``w``, ``a``, ``x``, ``+``) to a computed name or a code file's name."""
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    if mode is None:
        return False
    if not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)):
        return True  # a mode computed at run time may write
    if not set(mode.value) & set("wax+"):
        return False
    name = call.args[0] if call.args else None
    return not (isinstance(name, ast.Constant) and isinstance(name.value, str)) or name.value.endswith(CODE_SUFFIXES)


def problems_in(text: str) -> list[Problem]:
    """The refused constructs of one statement or module text, in order (``[]`` when it may run).

    Args:
        text: str, Python source (a top-level statement of a cell as :mod:`.slicing` gives it, magics
            already turned into ``get_ipython()`` calls, or a module the notebook writes).

    Returns:
        list of :class:`Problem`; a text that does not parse gives one problem saying so.
    """
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return [Problem(getattr(error, "lineno", None) or 1, f"does not parse ({type(error).__name__})")]
    problems: list[Problem] = []
    # The names that stand for sys and os: their own (the statement that imports them is often another cell's,
    # read separately) and any alias this text gives them (import sys as s).
    modules = {"sys": {"sys"}, "os": {"os"}}

    def refuse(node, reason):
        problems.append(Problem(getattr(node, "lineno", 1), reason))

    try:
        nodes = list(ast.walk(tree))
    except RecursionError:
        return [Problem(1, "is nested too deeply to read")]
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top in REFUSED_MODULES:
                    refuse(node, f"imports {alias.name}, a module that loads or builds code")
                if any(part.startswith("_") and not _dunder(part) for part in alias.name.split(".")[1:]):
                    refuse(node, f"imports {alias.name}, a module's private part")
                if alias.name in modules:
                    modules[alias.name].add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if node.level == 0 and top in REFUSED_MODULES:
                refuse(node, f"imports from {node.module}, a module that loads or builds code")
            if node.module in ("sys", "os"):
                for alias in node.names:
                    if alias.name in (REFUSED_SYS if node.module == "sys" else REFUSED_OS) or alias.name == "*":
                        refuse(node, f"imports {node.module}.{alias.name}, the interpreter's internals or a process")
            for alias in node.names:
                if alias.name.startswith("_"):
                    refuse(node, f"imports {alias.name} from {node.module}, a module's private name")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("globals", "vars"):
                refuse(node, f"calls {node.func.id}(), which reaches a namespace and its builtins by name")
            elif node.func.id in REFUSED_CALLS:
                refuse(node, f"calls {node.func.id}(), which runs code built from data")
            elif node.func.id in NAMED_ACCESS:
                name = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                    refuse(node, f"calls {node.func.id}() with a name computed at run time")
                elif name.value.startswith("_") or name.value in REFUSED_ATTRIBUTES:
                    refuse(
                        node, f"calls {node.func.id}() on {name.value}, the interpreter's internals or a private name"
                    )
            elif node.func.id == "open" and _writes_code(node):
                refuse(node, "opens a file for writing whose name is computed or is code's (.py, .so, .zip…)")
        elif isinstance(node, ast.Attribute):
            if _refused_attribute(node):
                refuse(node, f"reads .{node.attr}, the interpreter's internals")
            elif isinstance(node.value, ast.Name) and node.value.id in modules["sys"] and node.attr in REFUSED_SYS:
                refuse(node, f"uses sys.{node.attr}, the interpreter's internals")
            elif isinstance(node.value, ast.Name) and node.value.id in modules["os"] and node.attr in REFUSED_OS:
                refuse(node, f"uses os.{node.attr}, which starts a program")
            elif node.attr in ("write_text", "write_bytes"):
                refuse(
                    node,
                    f"writes a file with .{node.attr}() (a module the notebook writes is graded from its "
                    "constant text only)",
                )
            elif (
                node.attr.startswith("_")
                and not _dunder(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id not in ("self", "cls")
            ):
                refuse(node, f"reads {node.value.id}.{node.attr}, a private name")
        elif isinstance(node, ast.Name) and node.id in REFUSED_NAMES:
            refuse(node, f"uses {node.id}, the interpreter's internals")
        elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
            if len(node.value) > MAX_CONSTANT_CHARACTERS:
                refuse(
                    node,
                    f"holds a constant of {len(node.value):,} characters (at most "
                    f"{MAX_CONSTANT_CHARACTERS:,}): code carried as data",
                )
            elif node.value in REFUSED_NAMES or node.value in REFUSED_ATTRIBUTES - {"replace"}:
                refuse(node, f"names {node.value!s}, the interpreter's internals")
    return problems
