"""Near-identical solutions: between students, and against the course package's own implementations.

A heuristic, for the instructor to read, never a score. A copy with the names changed and the
comments rewritten is still a copy. What is compared for an exercise is its **program**: the graded
function and the statements it needs — its helpers (in other cells, or in a module the notebook
wrote), constants and imports (``exercises.slicing``) — not whole cells, so an answer spread over cells
and a copy pasted below the untouched stub are compared whole, and nothing else dilutes them. A
program is **normalised** with Python's own tokenizer: comments, docstrings and blank lines are
dropped, every local name becomes ``N``, every number ``0`` and every string ``S``; keywords,
operators, attribute names (``.tril``) and builtins (``range``) are kept, because they are what a
solution *does*, and an imported name is **resolved** to what it imports (``np.tril``,
``numpy.tril`` and ``tril`` after ``from numpy import tril`` read alike). Two programs are compared
by the **Jaccard similarity** of their sets of 5-token sequences (shingles): 1.0 for the same code
under other names, near 0 for unrelated code; independent statements in another order break only the
sequences that cross their edges. The package's implementation is read two ways, its
function alone and its function with the helpers and imports of its module that it uses, and a
program is as close to it as to the closer of the two.

Before a program is normalised, statements that change nothing are **dropped** (:func:`strip_no_ops`):
``pass``, a bare constant or name, and an assignment in a function to a local name that nothing in
it reads — padding that would dilute a copy; the program's own identity helpers are inlined (a
function that returns its one argument, through which a copy may pass every name it reads); and each
list, set or dict comprehension is written as the loop it stands for, so that a copy whose loops
became comprehensions (or the other way round) reads as the copy it is.

Every exercise is compared with **known answers** (:func:`known_answers`): the package's
implementation where there is one (its ``twin`` in the grader's registry,
:data:`.references.REGISTRY`), the grader's reference (with
the helpers of its module it uses), the instructor's solution in the course's source notebooks
where the checkout holds them. A student's program is listed beside a known answer when it
*contains* that much of it — the share of the answer's 5-token sequences found in the program — so
a copy that carries extra helpers or padding is still a copy.

Students are compared pairwise (Jaccard), and those at or above :data:`SIMILARITY_THRESHOLD` are
listed as **groups** (the connected students: five students sharing one program are one line, not
ten pairs), at most :data:`MAX_GROUPS` per exercise. **Short natural answers are not listed as
copies**, by two rules: a program shorter than :data:`MIN_SHINGLES` 5-token sequences is not
compared between students, nor a known answer that short; and a group holding
:data:`COMMON_SHARE` of the students who answered an exercise, or more (three students at least), is
*the usual answer* — many students reaching one short program independently, as with
``x.reshape(b, t, h, d).transpose(0, 2, 1, 3)`` — and is reported as a count, not as a group to read.
It never changes a score: read the cells and decide.
"""

from __future__ import annotations

import builtins
import inspect
import io
import keyword
import textwrap
import tokenize
from functools import cache
from itertools import combinations

__all__ = [
    "normalise",
    "similarity",
    "containment",
    "program_text",
    "strip_no_ops",
    "known_answers",
    "SIMILARITY_THRESHOLD",
    "package_twin",
    "similar_solutions",
    "MAX_SOLUTION_TOKENS",
    "MIN_SHINGLES",
    "MAX_GROUPS",
    "COMMON_SHARE",
]

SIMILARITY_THRESHOLD = 0.8
MIN_SHINGLES = 12  # a program with fewer 5-token sequences is a short, natural answer: not compared
MAX_GROUPS = 25  # groups listed per exercise (the rest counted)
COMMON_SHARE = 0.1  # a group with this share of the students who answered (3 at least) is the usual answer
MAX_SOLUTION_TOKENS = 4000  # a solution's normalised tokens kept in grades.json (more is cut)
SHINGLE = 5
_KEPT_NAMES = set(dir(builtins)) | {"np", "numpy", "keras", "ops", "tf", "torch", "jax", "math", "collections", "self"}


def _imported_names(source: str) -> dict:
    """{name: the tokens it stands for} of the imports in ``source``: ``np`` -> numpy, ``tril`` -> numpy . tril."""
    import ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = " . ".join(alias.name.split(".")).split()
                else:
                    names[alias.name.split(".")[0]] = [alias.name.split(".")[0]]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = " . ".join([*node.module.split("."), alias.name]).split()
    return names


def normalise(source: str) -> list[str]:
    """The tokens of ``source`` that say what it does, names and literals abstracted (see the module).

    Args:
        source: str, Python code (a program or a notebook cell; IPython lines such as ``%time`` are
            dropped).

    Returns:
        list of str tokens; empty for code Python's tokenizer cannot read. An import's own tokens are
        dropped and the names it binds are replaced by what they import.

    Example:
        >>> normalise("import numpy as np\\nx = np.tril(y)") == normalise("from numpy import tril\\nz = tril(w)")
        True
    """
    lines = [line for line in str(source).splitlines() if not line.lstrip().startswith(("%", "!"))]
    imported = _imported_names("\n".join(lines))
    tokens, previous, at_statement_start, in_import = [], "", True, False
    try:
        for token in tokenize.generate_tokens(io.StringIO(textwrap.dedent("\n".join(lines)) + "\n").readline):
            kind, text = token.type, token.string
            if kind in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER):
                continue
            if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
                at_statement_start, in_import = True, False
                continue
            if at_statement_start and text in ("import", "from"):
                in_import = True
            if in_import:  # what an import binds is resolved where the name is used
                previous = text
                continue
            if kind == tokenize.STRING:
                if not at_statement_start:  # a docstring or a bare string statement says nothing
                    tokens.append("S")
            elif kind == tokenize.NUMBER:
                tokens.append("0")
            elif kind == tokenize.NAME and previous != "." and text in imported:
                tokens.extend(imported[text])
            elif kind == tokenize.NAME:
                tokens.append(text if keyword.iskeyword(text) or previous == "." or text in _KEPT_NAMES else "N")
            else:
                tokens.append(text)
            at_statement_start = False
            previous = text
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    return tokens


def _shingles(tokens) -> set:
    """The 5-token sequences of a normalised token list (the whole list when it is shorter)."""
    tokens = list(tokens)
    return {tuple(tokens[i : i + SHINGLE]) for i in range(max(1, len(tokens) - SHINGLE + 1))} if tokens else set()


def _jaccard(first: set, second: set) -> float:
    return len(first & second) / len(first | second) if first and second else 0.0


def similarity(first, second) -> float:
    """Jaccard similarity of two normalised token lists' 5-token shingles, in [0, 1].

    Example:
        >>> similarity(normalise("def f(x):\\n    return x * 2 + 1"), normalise("def g(y):\\n    return y * 3 + 5"))
        1.0
    """
    return _jaccard(_shingles(first), _shingles(second))


def containment(answer, program) -> float:
    """The share of ``answer``'s 5-token sequences found in ``program`` (normalised token lists), in [0, 1].

    1.0 when the program holds the whole answer, whatever else it holds.

    Example:
        >>> answer = normalise("def f(x):\n    return x * 2 + 1")
        >>> containment(answer, normalise("def helper(y):\n    return y\ndef f(x):\n    return x * 2 + 1"))
        1.0
    """
    known = _shingles(answer)
    return len(known & _shingles(program)) / len(known) if known else 0.0


def program_text(program) -> str:
    """The code of a ``exercises.slicing.Program``: its statements, a written module's text in place of the magic."""
    return "\n".join(unit.writes_body if unit.writes_module else unit.text for unit in program.units)


def strip_no_ops(source: str) -> str:
    """``source`` without the statements that change nothing: ``pass``, a bare constant or name, and, in a
    function, an assignment to a local name that nothing in the function reads (repeated until none is left);
    its identity helpers inlined and its comprehensions written as loops (the normal form compared).

    Returns ``source`` unchanged where it does not parse.

    Example:
        >>> print(strip_no_ops("def f(x):\n    unused = 3\n    pass\n    x\n    return x + 1"))
        def f(x):
            return x + 1
    """
    import ast
    from collections import Counter

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source

    def loads(node) -> Counter:
        return Counter(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))

    def assigned(statement) -> list:
        """The names a simple assignment binds, or [] for anything else (a target that is not a plain name)."""
        targets = (
            statement.targets
            if isinstance(statement, ast.Assign)
            else ([statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else [])
        )
        return [target.id for target in targets] if targets and all(isinstance(t, ast.Name) for t in targets) else []

    def bodies(statement):
        """The statement lists inside a statement, as the pruning walks them."""
        for field_name in ("body", "orelse", "finalbody"):
            inner = getattr(statement, field_name, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                yield inner
        if isinstance(statement, ast.Try):
            yield from (handler.body for handler in statement.handlers)

    def strip(function) -> None:
        """Remove, at once, every statement that repeated passes would remove: a worklist over how often each
        name is read, in time linear in the function's size (a chain of unused assignments is one pass)."""
        kept_names = {name for n in ast.walk(function) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
        reads, statements, waiting = loads(function), [], [function.body]
        while waiting:
            for statement in waiting.pop():
                statements.append(statement)
                waiting.extend(bodies(statement))
        binders: dict = {}
        for statement in statements:
            for name in assigned(statement):
                binders.setdefault(name, []).append(statement)

        def dead(statement) -> bool:
            if isinstance(statement, ast.Pass):
                return True
            if isinstance(statement, ast.Expr) and isinstance(statement.value, (ast.Constant, ast.Name)):
                return True
            names = assigned(statement)
            return bool(names) and all(reads[name] <= 0 and name not in kept_names for name in names)

        removed, queue = set(), [statement for statement in statements if dead(statement)]
        while queue:
            statement = queue.pop()
            if id(statement) in removed:
                continue
            removed.add(id(statement))
            for name, count in loads(statement).items():
                reads[name] -= count
                if reads[name] <= 0:
                    queue.extend(other for other in binders.get(name, ()) if id(other) not in removed and dead(other))

        def prune(body) -> list:
            for statement in body:
                for field_name in ("body", "orelse", "finalbody"):
                    inner = getattr(statement, field_name, None)
                    if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                        setattr(statement, field_name, prune(inner) or [ast.Pass()])
                if isinstance(statement, ast.Try):
                    for handler in statement.handlers:
                        handler.body = prune(handler.body) or [ast.Pass()]
            return [statement for statement in body if id(statement) not in removed]

        function.body = prune(function.body) or [ast.Pass()]

    try:
        tree = _comprehensions_as_loops(_inline_identities(tree))
        for function in [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]:
            strip(function)
        return ast.unparse(tree)
    except (RecursionError, ValueError):
        return source


def _comprehensions_as_loops(tree):
    """``tree`` with each list, set and dict comprehension of a simple statement written as the loop it stands
    for: ``x = [f(a) for a in b if c]`` reads as ``x = []``, ``for a in b:``, ``if c:``, ``x.append(f(a))``,
    and one inside an expression (``return np.array([... for ...])``) as such a loop into a list of its own,
    just before its statement. A copy whose loops became comprehensions, or the other way round, reads as
    the copy it is; honest programs are only read, never run, so nothing they compute changes."""
    import ast

    simple = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.Expr)
    comprehensions = (ast.ListComp, ast.SetComp, ast.DictComp)
    counter = iter(range(1 << 30))

    def outermost(statement) -> list:
        """The comprehensions of a simple statement's own expressions, not those nested in another or a lambda."""
        found, stack = [], [statement]
        while stack:
            node = stack.pop()
            if isinstance(node, comprehensions):
                found.append(node)
            elif not isinstance(node, (ast.Lambda, ast.GeneratorExp)):
                stack.extend(ast.iter_child_nodes(node))
        return found

    def as_loop(comprehension, name: str) -> list:
        target = ast.Name(name, ast.Load())
        if isinstance(comprehension, ast.DictComp):
            empty = ast.Dict([], [])
            inner = ast.Assign([ast.Subscript(target, comprehension.key, ast.Store())], comprehension.value)
        else:
            add = "append" if isinstance(comprehension, ast.ListComp) else "add"
            empty = ast.List([], ast.Load()) if add == "append" else ast.Call(ast.Name("set", ast.Load()), [], [])
            inner = ast.Expr(ast.Call(ast.Attribute(target, add, ast.Load()), [comprehension.elt], []))
        for generator in reversed(comprehension.generators):
            for condition in reversed(generator.ifs):
                inner = ast.If(condition, [inner], [])
            inner = ast.For(generator.target, generator.iter, [inner], [])
        return [ast.Assign([ast.Name(name, ast.Store())], empty), inner]

    def rewrite(body: list) -> list:
        written = []
        for statement in body:
            for field_name in ("body", "orelse", "finalbody"):
                inner = getattr(statement, field_name, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    setattr(statement, field_name, rewrite(inner))
            if isinstance(statement, ast.Try):
                for handler in statement.handlers:
                    handler.body = rewrite(handler.body)
            if not isinstance(statement, simple):
                written.append(statement)
                continue
            if (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, comprehensions)
            ):
                written += as_loop(statement.value, statement.targets[0].id)  # x = [...]: the loop fills x
                continue
            for comprehension in outermost(statement):
                name = f"comprehension_{next(counter)}"
                written += as_loop(comprehension, name)
                for parent in ast.walk(statement):  # the comprehension's place now reads its list
                    for field_name, value in ast.iter_fields(parent):
                        if value is comprehension:
                            setattr(parent, field_name, ast.Name(name, ast.Load()))
                        elif isinstance(value, list):
                            value[:] = [ast.Name(name, ast.Load()) if item is comprehension else item for item in value]
            written.append(statement)
        return written

    tree.body = rewrite(tree.body)
    return ast.fix_missing_locations(tree)


def _inline_identities(tree):
    """``tree`` with the program's own identity helpers inlined: a function bound once that returns its one
    argument unchanged (``def same(v): return v``, ``same = lambda v: v``) has each call ``same(x)`` replaced by
    ``x`` and its definition dropped. A copy whose every name read passes through such a helper reads again as
    the copy it is; nothing an honest program computes changes."""
    import ast

    def returns_its_argument(arguments, body) -> bool:
        plain = arguments.args + arguments.posonlyargs
        if len(plain) != 1 or arguments.kwonlyargs or arguments.vararg or arguments.kwarg or arguments.defaults:
            return False
        return isinstance(body, ast.Name) and body.id == plain[0].arg

    bindings: dict = {}
    for node in ast.walk(tree):
        names = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names = [node.id]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(alias.asname or alias.name).split(".")[0] for alias in node.names]
        for name in names:
            bindings[name] = bindings.get(name, 0) + 1
    identities, definitions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and not node.decorator_list:
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and returns_its_argument(node.args, body[0].value):
                identities.add(node.name)
                definitions.add(id(node))
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Lambda)
            and returns_its_argument(node.value.args, node.value.body)
        ):
            identities.add(node.targets[0].id)
            definitions.add(id(node))
    identities = {name for name in identities if bindings.get(name) == 1}  # bound once: no other meaning
    if not identities:
        return tree

    class Inline(ast.NodeTransformer):
        def visit_Call(self, node):
            self.generic_visit(node)
            if (
                isinstance(node.func, ast.Name)
                and node.func.id in identities
                and len(node.args) == 1
                and not node.keywords
                and not isinstance(node.args[0], ast.Starred)
            ):
                return node.args[0]
            return node

        def generic_visit(self, node):
            for field_name, value in ast.iter_fields(node):
                if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                    kept = [statement for statement in value if id(statement) not in definitions]
                    setattr(node, field_name, kept or [ast.Pass()])
            return super().generic_visit(node)

    return ast.fix_missing_locations(Inline().visit(tree))


def package_twin(exercise_id: str) -> str | None:
    """``"module:qualified name"`` of the course package's own implementation of ``exercise_id``'s function, or None.

    Read from the grader's registry (:data:`.references.REGISTRY`), where each exercise is declared once.
    """
    from . import references

    registration = references.REGISTRY.get(exercise_id)
    return registration.twin if registration else None


@cache
def known_answers(exercise_id: str) -> tuple:
    """``((where, normalised tokens), ...)``: the answers to ``exercise_id`` a student could copy — the package's
    implementation (alone and with its module's helpers), the grader's reference (with its module's helpers)
    and the instructor's solution where the course's source notebooks are beside the package (a checkout)."""
    from . import references

    found = [("the course package's own implementation", tokens) for tokens in _package_tokens(exercise_id)]
    registration = references.REGISTRY.get(exercise_id)
    reference = registration.reference if registration else None
    name = getattr(reference, "__name__", "")
    if name.isidentifier():
        from transformer_course.exercises.slicing import program_for

        program = program_for(_parsed_references(), 1, name)
        if not program.missing:
            found.append(("the grader's reference", tuple(normalise(strip_no_ops(program_text(program))))))
    solution = _instructors_solution(exercise_id)
    if solution:
        found.append(("the instructor's solution", solution))
    return tuple((where, tokens) for where, tokens in found if len(_shingles(tokens)) >= MIN_SHINGLES)


@cache
def _source_notebook(path):
    """A source notebook and its cells read by the slicer, once for all of its exercises."""
    import nbformat

    from transformer_course.exercises.slicing import parse_cells

    notebook = nbformat.read(path, as_version=4)
    return notebook, parse_cells([cell.source if cell.cell_type == "code" else "" for cell in notebook.cells])


@cache
def _parsed_references():
    """The grader's references module, read once by the slicer for every exercise's known answer."""
    from transformer_course.exercises.slicing import parse_cells

    from . import references

    return parse_cells([inspect.getsource(references)])


def _instructors_solution(exercise_id: str) -> tuple:
    """The normalised program of the instructor's solution to ``exercise_id`` in ``notebooks/`` of a checkout."""
    from pathlib import Path

    folder = Path(__file__).resolve().parents[3] / "notebooks"
    paths = sorted(folder.glob(f"{exercise_id.split('.')[0]}_*.ipynb")) if folder.is_dir() else []
    if not paths:
        return ()
    try:
        from transformer_course.exercises import EXERCISES
        from transformer_course.exercises.slicing import program_for

        from .markup import exercise_id_of

        notebook, parsed = _source_notebook(paths[0])
        check = next(
            (
                index
                for index, cell in enumerate(notebook.cells)
                if exercise_id_of(cell) == exercise_id and cell.get("metadata", {}).get("nbgrader", {}).get("grade")
            ),
            None,
        )
        if check is None:
            return ()
        program = program_for(parsed, check, EXERCISES[exercise_id].function_name)
        return () if program.missing else tuple(normalise(strip_no_ops(program_text(program))))
    except Exception:  # noqa: BLE001 - a notebook that cannot be read adds no known answer
        return ()


def _package_source(module_name: str, qualified: str) -> tuple[str, str]:
    """``(the definition's source, its module's source)``, read from the module's file without importing it.

    Importing would run the module (most of the package's modules import Keras, seconds per grading
    run); the text is all the comparison needs. ``qualified`` is a function's name or ``Class.method``.

    Raises:
        ImportError: no such module file; LookupError: no such definition in it.
    """
    import ast
    import importlib.util

    spec = importlib.util.find_spec(module_name)
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ImportError(f"no source file for {module_name}")
    with open(spec.origin, encoding="utf-8") as file:
        module_source = file.read()
    body, node = ast.parse(module_source).body, None
    for part in qualified.split("."):
        node = next(
            (
                item
                for item in body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and item.name == part
            ),
            None,
        )
        if node is None:
            raise LookupError(f"{module_name} defines no {qualified}")
        body = node.body
    first = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])
    lines = module_source.splitlines(keepends=True)[first - 1 : node.end_lineno]
    return "".join(lines), module_source


@cache
def _package_tokens(exercise_id: str) -> tuple:
    """The package's implementation of an exercise, read two ways: its function alone, and as a program
    (the function with its module's helpers and imports). Empty where there is none."""
    from transformer_course.exercises.slicing import program_for

    target = package_twin(exercise_id)
    if target is None:
        return ()
    module_name, _, qualified = target.partition(":")
    try:
        function_source, module_source = _package_source(module_name, qualified)
        function = tuple(normalise(strip_no_ops(textwrap.dedent(function_source))))
        if "." in qualified:  # a method: its class holds what it uses
            return (function,)
        program = program_for([module_source], 1, qualified)
        return (function,) if program.missing else (function, tuple(normalise(strip_no_ops(program_text(program)))))
    except (ImportError, LookupError, OSError, SyntaxError, UnicodeDecodeError):
        return ()


def similar_solutions(solutions: dict, threshold: float = SIMILARITY_THRESHOLD) -> dict:
    """Groups of students, and students and the known answers, whose solutions are near-identical.

    Args:
        solutions: ``{student: {exercise id: normalised tokens (list or space-separated str)}}``.
        threshold: float, the smallest similarity (between students) or containment (of a known answer) listed.

    Returns:
        ``{exercise id: {"groups": [(lowest similarity, highest similarity, [students]), ...],
        "package": [(containment, student, where), ...], "common": [students in each usual answer, ...],
        "short": int, "more_groups": int}}`` for the exercises with anything listed, closest first; ``short``
        counts the programs too short to compare between students, ``more_groups`` the groups past
        :data:`MAX_GROUPS`.
    """
    found = {}
    exercises = sorted({exercise for cells in solutions.values() for exercise in cells})
    for exercise in exercises:
        tokens = {
            student: cells[exercise].split() if isinstance(cells[exercise], str) else list(cells[exercise])
            for student, cells in solutions.items()
            if cells.get(exercise)
        }
        shingles = {student: _shingles(own) for student, own in tokens.items()}
        compared = sorted(student for student, own in shingles.items() if len(own) >= MIN_SHINGLES)
        links = {(a, b): _jaccard(shingles[a], shingles[b]) for a, b in combinations(compared, 2)}
        links = {pair: score for pair, score in links.items() if score >= threshold}
        everyone = _connected(links)
        common_size = max(3, COMMON_SHARE * len(shingles))
        common = sorted(len(group[2]) for group in everyone if len(group[2]) >= common_size)[::-1]
        groups = [group for group in everyone if len(group[2]) < common_size]
        groups.sort(key=lambda group: (-group[1], -len(group[2]), group[2]))
        copies = []
        for where, answer in known_answers(exercise):
            known = _shingles(answer)
            for student, own in shingles.items():
                score = len(known & own) / len(known)
                if score >= threshold:
                    copies.append((round(score, 3), student, where))
        best = {}
        for score, student, where in sorted(copies, reverse=True):
            best.setdefault(student, (score, student, where))  # each student once, beside the closest answer
        copies = sorted(best.values(), key=lambda item: (-item[0], item[1]))
        if groups or copies or common:
            found[exercise] = {
                "groups": groups[:MAX_GROUPS],
                "package": copies,
                "common": common,
                "short": len(shingles) - len(compared),
                "more_groups": max(0, len(groups) - MAX_GROUPS),
            }
    return found


def _connected(links: dict) -> list:
    """``[(lowest, highest similarity, [students]), ...]``: the connected groups of the linked pairs."""
    parent: dict = {}

    def root(student):
        while parent.setdefault(student, student) != student:
            parent[student] = parent[parent[student]]
            student = parent[student]
        return student

    for first, second in links:
        parent[root(first)] = root(second)
    members: dict = {}
    for student in parent:
        members.setdefault(root(student), []).append(student)
    groups = []
    for group in members.values():
        scores = [score for (first, second), score in links.items() if first in group and second in group]
        groups.append((round(min(scores), 3), round(max(scores), 3), sorted(group)))
    return groups
