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
wrote with ``%%writefile name.py`` comes with the statement that writes it when a needed statement
imports ``name``. Cells are read as IPython reads them (magics become ``get_ipython()`` calls).

Example:
    >>> cells = ["import numpy as np\\nimport transformer_course as tc", "SIZE = 3",
    ...          "def f(x):\\n    return np.zeros(SIZE) + x", "check('01.1', f)"]
    >>> program = program_for(cells, check_cell=3, function_name="f")
    >>> [(unit.cell, unit.text) for unit in program.units]
    [(0, 'import numpy as np'), (1, 'SIZE = 3'), (2, 'def f(x):\\n    return np.zeros(SIZE) + x')]
"""

from __future__ import annotations

import ast
import builtins
import symtable
from dataclasses import dataclass, field

__all__ = ["Unit", "Program", "ParsedCells", "parse_cells", "program_for", "MAX_PROGRAM_CHARACTERS", "PACKAGE"]

PACKAGE = "transformer_course"
MAX_PROGRAM_CHARACTERS = 2**20  # what one graded function may need: far more than any honest answer
_BUILTINS = frozenset(dir(builtins)) | {"get_ipython", "__name__", "__file__", "__builtins__"}


@dataclass(frozen=True)
class Unit:
    """One top-level statement of a cell.

    Attributes:
        cell: int, the cell's index in the notebook.
        text: str, the statement's Python source (as IPython transforms the cell).
        line: int, its first line in the cell (1-based).
        defines: names it binds at the top level (a ``global`` in a function body counts).
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


def _bound_names(statement: ast.stmt) -> set:
    """Names a top-level statement binds in the module (not inside nested scopes)."""
    names = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            for inner in ast.walk(node):  # `global x` in a body, then assigned: bound when it is called
                if isinstance(inner, ast.Global):
                    names.update(inner.names)
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
    return names


def _read_names(text: str) -> tuple[set, set]:
    """(names read at the top level, names function and class bodies read as globals) of one statement."""
    table = symtable.symtable(text, "<statement>", "exec")
    early = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    late = set()
    stack = list(table.get_children())
    while stack:
        child = stack.pop()
        late |= {symbol.get_name() for symbol in child.get_symbols()
                 if symbol.is_referenced() and (symbol.is_global() or
                                                (child.get_type() == "class" and not symbol.is_assigned()))}
        stack.extend(child.get_children())
    return early - _BUILTINS, late - _BUILTINS


def _writefile(statement: ast.stmt) -> tuple[str | None, str | None]:
    """(module name, text) for ``get_ipython().run_cell_magic('writefile', 'name.py', text)``."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run_cell_magic"
            and len(call.args) == 3 and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in call.args)
            and call.args[0].value == "writefile"):
        return None, None
    name = call.args[1].value.strip()
    if name.startswith("-") or not name.endswith(".py") or "/" in name or not name[:-3].isidentifier():
        return None, None
    return name[:-3], call.args[2].value


def _package_import(statement: ast.stmt) -> str | None:
    """What a statement imports of the course package, anywhere in it (``transformer_course.masks``), else None."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == PACKAGE:
                return name
    return None


def _units(index: int, source: str) -> list[Unit]:
    """The top-level statements of one cell; raises SyntaxError if it does not parse."""
    text = _python(source)
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    units = []
    starts = [statement.lineno for statement in tree.body]
    ends = [statement.end_lineno for statement in tree.body]
    for number, statement in enumerate(tree.body):
        first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", []))])
        statement_text = "".join(lines[first - 1:statement.end_lineno]).rstrip()
        if (number and ends[number - 1] == statement.lineno) or (number + 1 < len(starts)
                                                                and starts[number + 1] == statement.end_lineno):
            statement_text = ast.get_source_segment(text, statement)  # `a = 1; b = 2`: one line, two statements
        early, late = _read_names(statement_text)
        modules = {alias.name.split(".")[0] for node in ast.walk(statement) if isinstance(node, ast.Import)
                   for alias in node.names}
        modules |= {node.module.split(".")[0] for node in ast.walk(statement)
                    if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        writes_module, writes_body = _writefile(statement)
        units.append(Unit(index, statement_text, first, frozenset(_bound_names(statement)), frozenset(early),
                          frozenset(late), frozenset(modules), writes_module, writes_body, _package_import(statement)))
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


def parse_cells(cells: list[str]) -> ParsedCells:
    """Read every cell of a notebook once, for any number of :func:`program_for` calls.

    Args:
        cells: the source of every cell, ``""`` for Markdown cells.

    Returns:
        :class:`ParsedCells`. A cell that does not parse (a syntax error, too deeply nested code)
        adds no statement and is named in ``unparsable``; nothing is raised.
    """
    units: list[Unit] = []
    unparsable = {}
    for index, source in enumerate(cells):
        if not source.strip():
            continue
        try:
            units.extend(_units(index, source))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            unparsable[index] = f"{type(error).__name__}: {getattr(error, 'msg', error)}"
    return ParsedCells(tuple(units), unparsable)


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
    units = [unit for unit in parsed.units if unit.cell < check_cell]
    program.unparsable = {index: why for index, why in parsed.unparsable.items() if index < check_cell}

    def last_binding(name, before):
        return next((position for position in range(before - 1, -1, -1) if name in units[position].defines), None)

    def last_writer(module, before):
        return next((position for position in range(before - 1, -1, -1) if units[position].writes_module == module),
                    None)

    start = last_binding(function_name, len(units))
    if start is None:
        where = "; ".join(f"cell {index + 1} does not parse ({reason})" for index, reason in program.unparsable.items())
        program.missing = f"`{function_name}` is not defined in any cell before its check" + (
            f": {where}" if where else "")
        return program
    needed, waiting = {start}, [start]
    while waiting:
        position = waiting.pop()
        unit = units[position]
        wanted = [last_binding(name, position) for name in unit.early - unit.defines]
        wanted += [last_binding(name, len(units)) for name in unit.late]
        wanted += [last_writer(module, position) for module in unit.modules]
        for other in wanted:
            if other is not None and other not in needed:
                needed.add(other)
                waiting.append(other)
    program.units = [units[position] for position in sorted(needed)]
    program.package_import = next(((unit.cell, unit.package_import) for unit in program.units if unit.package_import),
                                  None)
    return program
