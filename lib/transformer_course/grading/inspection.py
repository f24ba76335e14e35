"""Reading a submission's own code, in the grader's process, for what an instructor should look at.

Nothing here runs student code: cells are parsed with :mod:`ast` and their names, attributes,
imports and strings are compared with the places an honest answer has no reason to go:

* the course package (``transformer_course``: its references and its grading protocol);
* stack frames (``sys._getframe``, ``inspect``, ``f_back``/``f_globals``...);
* the interpreter's builtins and import machinery (``__builtins__``, ``__import__``,
  ``importlib``, ``sys.modules``, ``globals()``, ``exec``/``eval``/``compile``);
* the IPython shell (``get_ipython``, ``IPython``, ``ipykernel``);
* the grading protocol itself (``__graded_functions__``, ``_serve``).

A hit is a flag for the instructor, not a verdict: the score is computed as for anyone else.
"""

from __future__ import annotations

import ast

__all__ = ["reaches"]

_PLACES = {
    "the course package": {"transformer_course"},
    "stack frames": {"_getframe", "currentframe", "inspect", "f_back", "f_globals", "f_locals", "tb_frame",
                     "gi_frame", "cr_frame", "f_builtins"},
    "builtins and the import machinery": {"__builtins__", "builtins", "__import__", "importlib", "modules",
                                          "globals", "exec", "eval", "compile", "__loader__", "__spec__"},
    "the IPython shell": {"get_ipython", "IPython", "ipykernel", "__IPYTHON__"},
    "the grading protocol": {"__graded_functions__", "_serve", "protocol", "grading"},
}


def _words(tree) -> set:
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] + ([node.module] if getattr(node, "module", None) else [])
            for module in modules:
                words.update(module.split("."))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words.update(part for part in node.value.replace("/", ".").split(".") if part.isidentifier())
    return words


def reaches(source: str) -> list[str]:
    """The places of the module docstring that ``source`` names, with the names found.

    Args:
        source: str, the Python source of one cell (IPython magics make it unparsable: then
            every line starting with ``%`` or ``!`` is left out first).

    Returns:
        list of str such as ``"the course package (transformer_course)"``; empty when none.
        Source that cannot be parsed at all gives ``["unparsable code"]``.
    """
    lines = [line for line in str(source).splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tree = ast.parse("\n".join(lines))
        words = _words(tree)
    except SyntaxError:
        return []  # a syntax error is the student's own problem, reported when the cell runs
    except (RecursionError, MemoryError, ValueError):
        return ["unparsable code"]
    found = []
    for place, names in _PLACES.items():
        hits = sorted(words & names)
        if hits:
            found.append(f"{place} ({', '.join(hits)})")
    return found
