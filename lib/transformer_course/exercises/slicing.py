"""What a graded function needs from its notebook, found by reading the code, never by running it.

The grader grades **source**: the graded kernel receives the text of the top-level statements a
function needs — the statement that defines it last before its check cell, the statements that
define the names it uses (a helper, a constant, ``import numpy as np``), and theirs in turn —
and runs them where the course package is absent (:func:`.protocol.program_code`). Nothing the
student's own kernel computed is carried over: a module-level value the notebook computed with the
package's help (a table, a model) fails there like a missing name.

Names are resolved as Python would at the check cell: a name a function body uses is its last
binding before the check cell; a name a top-level statement uses (a decorator, a default value, a
constant computed from another) is its last binding before that statement. A module the notebook
wrote with ``%%writefile name.py``, or with ``open("name.py", "w").write(TEXT)`` (also inside
``with open(...) as file:``, and ``Path("name.py").write_text(TEXT)``) of a constant text, comes
with the statement that writes it when a needed statement imports ``name``. Cells are read as
IPython reads them (magics become ``get_ipython()`` calls), except that a cell magic that runs its
body as Python (``%%time``, ``%%capture``, ``%%timeit``, ``%%prun``) is read as that body.

Three bindings Python makes that no name shows are followed too: a star import (``from numpy import
*``) may bind any name, so every one after a name's last explicit binding comes along; a ``global``
statement in a function body binds the name when the function is *called*, so the top-level binding
before it (a counter's ``calls = 0``) comes along with that function.

Its cost is O(n log n) in the number of top-level statements (an index of each name's bindings,
searched by bisection), at most :data:`MAX_STATEMENTS` of them, within a time budget of its own
(:class:`SlicingTooLong` past either).

Example:
    >>> cells = ["import numpy as np\\nimport transformer_course as tc", "SIZE = 3",
    ...          "def f(x):\\n    return np.zeros(SIZE) + x", "check('01.1', f)"]
    >>> program = program_for(cells, check_cell=3, function_name="f")
    >>> [(unit.cell, unit.text) for unit in program.units]
    [(0, 'import numpy as np'), (1, 'SIZE = 3'), (2, 'def f(x):\\n    return np.zeros(SIZE) + x')]
"""

from __future__ import annotations

import ast
import bisect
import builtins
import functools
import importlib
import re
import symtable
import time
from dataclasses import dataclass, field

__all__ = [
    "Unit",
    "Program",
    "ParsedCells",
    "parse_cells",
    "program_for",
    "SlicingTooLong",
    "MAX_PROGRAM_CHARACTERS",
    "MAX_STATEMENTS",
    "PACKAGES",
    "PYTHON_CELL_MAGICS",
]

# What graded code may not import: the course package and its grader.
PACKAGES = ("transformer_course", "transformer_course_grader")
MAX_PROGRAM_CHARACTERS = 2**20  # what one graded function may need: far more than any honest answer
_BUILTINS = frozenset(dir(builtins)) | {"get_ipython", "__name__", "__file__", "__builtins__"}
MAX_STATEMENTS = 20_000  # top-level statements read in one notebook: a hundred times a long honest one
# Cell magics that run their body as Python in the notebook's namespace: the body is what is graded.
PYTHON_CELL_MAGICS = frozenset({"time", "capture", "timeit", "prun"})
_CELL_MAGIC = re.compile(r"\A\s*%%(\w+)[^\n]*(?:\n|\Z)")
STAR = "*"  # what a star import binds in :attr:`Unit.defines`: any name


class SlicingTooLong(ValueError):
    """A notebook the slicer will not read: more than :data:`MAX_STATEMENTS` statements, or past its time budget."""


@dataclass(frozen=True)
class Unit:
    """One top-level statement of a cell.

    Attributes:
        cell: int, the cell's index in the notebook.
        text: str, the statement's Python source (as IPython transforms the cell).
        line: int, its first line in the cell (1-based).
        defines: names it binds at the top level (a ``global`` in a function body counts; a star
            import binds :data:`STAR`).
        called_defines: those of ``defines`` it binds only through ``global`` in a function body.
        early: names it reads when it runs (its own top-level code, decorators, default values).
        late: names its function and class bodies read when they are called.
        modules: top-level names of the modules it imports.
        writes_module: the module name ``%%writefile name.py`` creates, else None.
        writes_body: the text that cell magic writes, else None.
        package_import: the course package module it imports, anywhere in it, else None.
    """

    cell: int
    text: str
    line: int
    defines: frozenset
    early: frozenset
    late: frozenset
    modules: frozenset
    writes_module: str | None = None
    writes_body: str | None = None
    package_import: str | None = None
    called_defines: frozenset = frozenset()


@dataclass
class Program:
    """The statements one graded function needs, in notebook order, or why there are none.

    Attributes:
        units: list of :class:`Unit`.
        unparsable: {cell index: "SyntaxError: ..."} for cells before the check that do not parse.
        missing: str or None: why no definition of the function was found.
        package_import: (cell index, module) of a needed statement that imports the course package.
    """

    units: list = field(default_factory=list)
    unparsable: dict = field(default_factory=dict)
    missing: str | None = None
    package_import: tuple | None = None

    @property
    def characters(self) -> int:
        return sum(len(unit.text) for unit in self.units)

    def writefiles(self) -> dict:
        """{file name: text} of the modules the program writes with ``%%writefile``."""
        return {f"{unit.writes_module}.py": unit.writes_body for unit in self.units if unit.writes_module}


def _python(source: str) -> str:
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def _bound_names(statement: ast.stmt) -> tuple[set, set]:
    """(names a top-level statement binds in the module, not inside nested scopes; those of them it
    binds only through ``global`` in a function or class body, when that body runs)."""
    names, called = set(), set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            for inner in ast.walk(node):  # `global x` in a body, then assigned: bound when it is called
                if isinstance(inner, ast.Global):
                    called.update(inner.names)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        if isinstance(node, ast.NamedExpr):
            names.add(node.target.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(statement)
    return names | called, called - names


def _read_names(text: str) -> tuple[set, set]:
    """(names read at the top level, names function and class bodies read as globals) of one statement."""
    table = symtable.symtable(text, "<statement>", "exec")
    early = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    late = set()
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        # A name a body declares `global` counts as read: `calls += 1` reads it, though symtable marks an
        # augmented assignment's target as assigned only.
        late |= {
            symbol.get_name()
            for symbol in child.get_symbols()
            if symbol.is_declared_global()
            or (
                symbol.is_referenced()
                and (symbol.is_global() or (child.get_type() == "class" and not symbol.is_assigned()))
            )
        }
        stack.extend(child.get_children())
    return early - _BUILTINS, late - _BUILTINS


def _text(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _module_file(name: str | None) -> str | None:
    """``name`` without ``.py`` where it is a module file in the notebook's folder, else None."""
    if name is None:
        return None
    name = name.strip()
    if name.startswith("-") or not name.endswith(".py") or "/" in name or not name[:-3].isidentifier():
        return None
    return name[:-3]


def _opened_for_writing(node) -> str | None:
    """The module name of ``open("name.py", "w")`` (mode ``w``, ``x`` or ``wt``, by position or keyword), else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open" and node.args):
        return None
    mode = (
        _text(node.args[1])
        if len(node.args) > 1
        else next((_text(keyword.value) for keyword in node.keywords if keyword.arg == "mode"), "r")
    )
    return _module_file(_text(node.args[0])) if mode in ("w", "x", "wt", "xt") else None


def _writefile(statement: ast.stmt) -> tuple[str | None, str | None]:
    """(module name, text) of a statement that writes a module file of constant text, else (None, None).

    ``get_ipython().run_cell_magic('writefile', 'name.py', text)`` (``%%writefile``),
    ``open('name.py', 'w').write(text)``, ``Path('name.py').write_text(text)`` (or ``pathlib.Path``),
    and ``with open('name.py', 'w') as file:`` whose body is ``file.write(text)`` calls only.
    """
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and len(call.args) >= 1:
        method, owner = call.func.attr, call.func.value
        if (
            method == "run_cell_magic"
            and len(call.args) == 3
            and all(_text(a) is not None for a in call.args)
            and call.args[0].value == "writefile"
        ):
            name = _module_file(call.args[1].value)
            return (name, call.args[2].value) if name else (None, None)
        if method == "write" and len(call.args) == 1 and _text(call.args[0]) is not None:
            name = _opened_for_writing(owner)
            return (name, call.args[0].value) if name else (None, None)
        if (
            method == "write_text"
            and _text(call.args[0]) is not None
            and isinstance(owner, ast.Call)
            and len(owner.args) == 1
            and (
                (isinstance(owner.func, ast.Name) and owner.func.id == "Path")
                or (isinstance(owner.func, ast.Attribute) and owner.func.attr == "Path")
            )
        ):
            name = _module_file(_text(owner.args[0]))
            return (name, call.args[0].value) if name else (None, None)
    if isinstance(statement, ast.With) and len(statement.items) == 1:
        item = statement.items[0]
        name = _opened_for_writing(item.context_expr)
        target = item.optional_vars.id if isinstance(item.optional_vars, ast.Name) else None
        parts = [
            inner.value.args[0].value
            for inner in statement.body
            if isinstance(inner, ast.Expr)
            and isinstance(inner.value, ast.Call)
            and isinstance(inner.value.func, ast.Attribute)
            and inner.value.func.attr == "write"
            and isinstance(inner.value.func.value, ast.Name)
            and inner.value.func.value.id == target
            and len(inner.value.args) == 1
            and _text(inner.value.args[0]) is not None
        ]
        if name and target and parts and len(parts) == len(statement.body):
            return name, "".join(parts)
    return None, None


@functools.lru_cache(maxsize=256)
def _package_exports(module: str) -> frozenset | None:
    """The names ``from module import *`` binds, for a module of the course package; None if it cannot be told."""
    try:
        imported = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - not a module of the package (a misspelt name): it may bind anything
        return None
    names = getattr(imported, "__all__", None)
    if names is None:
        names = [name for name in vars(imported) if not name.startswith("_")]
    return frozenset(str(name) for name in names)


def _may_bind(star: Unit, name: str) -> bool:
    """Whether the star import ``star`` may bind ``name``: any name, but where it imports a module of the course
    package, whose exports are known (an honest ``from transformer_course.plots import *`` after ``import numpy as
    np`` does not bind ``np``, and so is not part of a function that reads ``np``)."""
    if not star.package_import or not star.package_import.endswith(".*"):
        return True
    exports = _package_exports(star.package_import[:-2])
    return exports is None or name in exports


def _package_import(statement: ast.stmt) -> str | None:
    """What a statement imports of the course package or its grader (``transformer_course.masks``), else None."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] in PACKAGES:
                return name
    return None


def _python_body(source: str) -> tuple[str, int]:
    """(the cell's Python, lines dropped before it): a cell magic of :data:`PYTHON_CELL_MAGICS` (one, or one
    inside another: ``%%capture`` then ``%%time``) is read as its body, which is what runs."""
    offset = 0
    while (match := _CELL_MAGIC.match(source)) and match.group(1) in PYTHON_CELL_MAGICS:
        offset += match.group(0).count("\n")
        source = source[match.end() :]
    return source, offset


def _segment(lines: list, statement: ast.stmt) -> str:
    """The statement's own text (``ast.get_source_segment``, without splitting the whole text again for each
    statement: a cell of thousands of ``a = 1; b = 2`` statements stays linear). ``lines``: the text's lines
    as UTF-8 bytes (the offsets are in bytes)."""
    first, last = statement.lineno - 1, statement.end_lineno - 1
    if first == last:
        return lines[first][statement.col_offset : statement.end_col_offset].decode("utf-8")
    return b"".join(
        [lines[first][statement.col_offset :], *lines[first + 1 : last], lines[last][: statement.end_col_offset]]
    ).decode("utf-8")


def _units(index: int, source: str, deadline: float | None = None, room: int | None = None) -> list[Unit]:
    """The top-level statements of one cell; raises SyntaxError if it does not parse, and
    :class:`SlicingTooLong` past ``deadline`` (a ``time.monotonic()`` value) or past ``room`` statements."""
    body, offset = _python_body(source)
    text = "\n" * offset + _python(body)  # line numbers stay those of the cell
    tree = ast.parse(text)
    if room is not None and len(tree.body) > room:
        raise SlicingTooLong(
            f"the notebook has more than {MAX_STATEMENTS:,} top-level statements (at cell {index + 1})"
        )
    lines = text.splitlines(keepends=True)
    encoded = [line.encode("utf-8") for line in lines]
    units = []
    starts = [statement.lineno for statement in tree.body]
    ends = [statement.end_lineno for statement in tree.body]
    for number, statement in enumerate(tree.body):
        if deadline is not None and time.monotonic() >= deadline:  # checked inside the cell, not only between cells
            raise SlicingTooLong(f"reading the notebook's code took too long (stopped inside cell {index + 1})")
        first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
        statement_text = "".join(lines[first - 1 : statement.end_lineno]).rstrip()
        if (number and ends[number - 1] == statement.lineno) or (
            number + 1 < len(starts) and starts[number + 1] == statement.end_lineno
        ):
            statement_text = _segment(encoded, statement)  # `a = 1; b = 2`: one line, two statements
        early, late = _read_names(statement_text)
        modules = {
            alias.name.split(".")[0]
            for node in ast.walk(statement)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        modules |= {
            node.module.split(".")[0]
            for node in ast.walk(statement)
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
        }
        writes_module, writes_body = _writefile(statement)
        defines, called_defines = _bound_names(statement)
        units.append(
            Unit(
                index,
                statement_text,
                first,
                frozenset(defines),
                frozenset(early),
                frozenset(late),
                frozenset(modules),
                writes_module,
                writes_body,
                _package_import(statement),
                frozenset(called_defines),
            )
        )
    return units


@dataclass(frozen=True)
class ParsedCells:
    """A notebook's cells read once: every top-level statement, and the cells that do not parse.

    Attributes:
        units: tuple of :class:`Unit`, in notebook order.
        unparsable: dict, cell index -> why it does not parse.
    """

    units: tuple
    unparsable: dict
    bindings: dict = field(default_factory=dict)  # name -> positions in ``units`` that bind it, ascending
    writers: dict = field(default_factory=dict)  # module name -> positions that write it, ascending
    cells: tuple = ()  # each unit's cell index, ascending (to cut the units at a check cell by bisection)


def parse_cells(cells: list[str], budget_seconds: float | None = None) -> ParsedCells:
    """Read every cell of a notebook once, for any number of :func:`program_for` calls.

    Args:
        cells: the source of every cell, ``""`` for Markdown cells.
        budget_seconds: float or None, the most seconds the reading may take.

    Returns:
        :class:`ParsedCells`. A cell that does not parse (a syntax error, too deeply nested code)
        adds no statement and is named in ``unparsable``.

    Raises:
        SlicingTooLong: past :data:`MAX_STATEMENTS` top-level statements or ``budget_seconds``.
    """
    deadline = None if budget_seconds is None else time.monotonic() + budget_seconds
    units: list[Unit] = []
    unparsable = {}
    for index, source in enumerate(cells):
        if not source.strip():
            continue
        if deadline is not None and time.monotonic() >= deadline:
            raise SlicingTooLong(
                f"reading the notebook's code took more than {budget_seconds:g} s (stopped at cell {index + 1})"
            )
        try:
            units.extend(_units(index, source, deadline, MAX_STATEMENTS - len(units)))
        except SlicingTooLong:
            raise
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            unparsable[index] = f"{type(error).__name__}: {getattr(error, 'msg', error)}"
        if len(units) > MAX_STATEMENTS:
            raise SlicingTooLong(
                f"the notebook has more than {MAX_STATEMENTS:,} top-level statements (at cell {index + 1})"
            )
    bindings: dict = {}
    writers: dict = {}
    for position, unit in enumerate(units):
        for name in unit.defines:
            bindings.setdefault(name, []).append(position)
        if unit.writes_module:
            writers.setdefault(unit.writes_module, []).append(position)
    return ParsedCells(tuple(units), unparsable, bindings, writers, tuple(unit.cell for unit in units))


def program_for(cells: list[str] | ParsedCells, check_cell: int, function_name: str) -> Program:
    """The statements that the function ``function_name`` needs at the check cell ``check_cell``.

    Args:
        cells: the source of every cell of the notebook, ``""`` for Markdown cells, or those cells
            already read by :func:`parse_cells` (a notebook with many exercises is read once).
        check_cell: int, the index of the exercise's check cell; only cells before it count.
        function_name: str, the graded function's name.

    Returns:
        :class:`Program`; ``missing`` says why when no statement before the check defines the name,
        ``package_import`` names a needed statement that imports the course package.
    """
    parsed = cells if isinstance(cells, ParsedCells) else parse_cells(cells[:check_cell])
    program = Program()
    units = parsed.units
    end = bisect.bisect_left(parsed.cells, check_cell)  # the units before the check cell: units[:end]
    program.unparsable = {index: why for index, why in parsed.unparsable.items() if index < check_cell}
    stars = parsed.bindings.get(STAR, [])

    def last(positions, before):
        """The last of ``positions`` (ascending) before ``before``, or None."""
        at = bisect.bisect_left(positions, before) - 1
        return positions[at] if at >= 0 else None

    def bindings_of(name, before):
        """The statements that may give ``name`` its value at ``before``: its last binding; before it, back to a
        binding made at the top level, those that bind it only through ``global``; after it, star imports."""
        positions = parsed.bindings.get(name, [])
        at = bisect.bisect_left(positions, before) - 1
        found = []
        while at >= 0:
            found.append(positions[at])
            if name not in units[positions[at]].called_defines:
                break
            at -= 1
        after = found[0] if found else -1
        found += [
            star
            for star in stars[bisect.bisect_right(stars, after) : bisect.bisect_left(stars, before)]
            if _may_bind(units[star], name)
        ]
        return found

    start = last(parsed.bindings.get(function_name, []), end)
    if start is None:
        where = "; ".join(f"cell {index + 1} does not parse ({reason})" for index, reason in program.unparsable.items())
        program.missing = f"`{function_name}` is not defined in any cell before its check" + (
            f": {where}" if where else ""
        )
        return program
    needed, waiting = {start}, [start]
    while waiting:
        position = waiting.pop()
        unit = units[position]
        wanted = [found for name in unit.early - unit.defines for found in bindings_of(name, position)]
        wanted += [found for name in unit.late for found in bindings_of(name, end)]
        wanted += [last(parsed.writers.get(module, []), position) for module in unit.modules]
        for other in wanted:
            if other is not None and other not in needed:
                needed.add(other)
                waiting.append(other)
    program.units = [units[position] for position in sorted(needed)]
    program.package_import = next(
        ((unit.cell, unit.package_import) for unit in program.units if unit.package_import), None
    )
    return program
