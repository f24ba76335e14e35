"""Reading a submission's own code, in the grader's process, for what an instructor should look at.

Nothing here runs student code: cells are parsed with :mod:`ast` and their names, attributes,
imports and strings are compared with the places an honest answer has no reason to go:

* the course package and this grader (``transformer_course``, ``transformer_course_grader``: the
  references and the grading protocol);
* stack frames (``sys._getframe``, ``inspect``, ``f_back``/``f_globals``...);
* the interpreter's builtins and import machinery (``__builtins__``, ``__import__``,
  ``importlib``, ``sys.modules``, ``globals()``, ``exec``/``eval``/``compile`` as bare names, so
  ``re.compile`` is no reach);
* the IPython shell (``get_ipython``, ``IPython``, ``ipykernel``);
* the grading protocol itself (``__graded_functions__``, ``_serve``).

A hit is a flag for the instructor, not a verdict: the score is computed as for anyone else.
"""

from __future__ import annotations

import ast

__all__ = ["reaches"]

# Names that count wherever they appear (a name, an attribute, an import or a string).
_ANYWHERE = {
    "the course package": {"transformer_course", "transformer_course_grader"},
    "stack frames": {
        "_getframe",
        "currentframe",
        "f_back",
        "f_globals",
        "f_locals",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "f_builtins",
    },
    "the IPython shell": {"get_ipython", "IPython", "ipykernel", "__IPYTHON__"},
    "the grading protocol": {"__graded_functions__", "_serve"},
}
# Names that count only as a bare name or an import: ``re.compile`` is no reach into builtins.
_AS_NAME = {
    "stack frames": {"inspect"},
    "builtins and the import machinery": {
        "__builtins__",
        "builtins",
        "__import__",
        "importlib",
        "globals",
        "exec",
        "eval",
        "compile",
        "__loader__",
        "__spec__",
    },
}


def _words(tree) -> tuple[set, set]:
    """(every identifier anywhere, the identifiers used as bare names or imported modules)."""
    anywhere, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            anywhere.add(node.attr)
            if node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                names.add("sys.modules")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] + ([node.module] if getattr(node, "module", None) else [])
            for module in modules:
                names.update(module.split("."))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            anywhere.update(part for part in node.value.replace("/", ".").split(".") if part.isidentifier())
    return anywhere | names, names


MAX_INSPECTED_CHARACTERS = 200_000  # a solution cell larger than this is flagged, not parsed (no honest one is near)


def reaches(source: str) -> list[str]:
    """The places of the module docstring that ``source`` names, with the names found.

    Args:
        source: str, the Python source of one cell (IPython magics make it unparsable: then
            every line starting with ``%`` or ``!`` is left out first).

    Returns:
        list of str such as ``"the course package (transformer_course)"``; empty when none.
        Source that cannot be parsed at all gives ``["unparsable code"]``.

    Raises:
        ValueError: for source longer than ``MAX_INSPECTED_CHARACTERS``, which is never parsed
            (the grader flags such a cell without reading it).
    """
    if len(str(source)) > MAX_INSPECTED_CHARACTERS:
        raise ValueError(
            f"`source` is too large to read: {len(str(source)):,} characters; at most "
            f"{MAX_INSPECTED_CHARACTERS:,} are parsed."
        )
    lines = [line for line in str(source).splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        anywhere, names = _words(ast.parse("\n".join(lines)))
    except SyntaxError:
        return []  # a syntax error is the student's own problem, reported when the cell runs
    except (RecursionError, MemoryError, ValueError):
        return ["unparsable code"]
    found = {}
    for place, wanted in _ANYWHERE.items():
        found.setdefault(place, set()).update(anywhere & wanted)
    for place, wanted in _AS_NAME.items():
        found.setdefault(place, set()).update(names & wanted)
    found.setdefault("builtins and the import machinery", set()).update(names & {"sys.modules"})
    return [f"{place} ({', '.join(sorted(hits))})" for place, hits in found.items() if hits]
