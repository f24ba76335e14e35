"""Near-identical solutions: between students, and against the course package's own implementations.

A heuristic, for the instructor to read, never a score. A copy with the names changed and the
comments rewritten is still a copy. What is compared for an exercise is its **program**: the graded
function and the statements it needs — its helpers (in other cells, or in a module the notebook
wrote), constants and imports (:mod:`.slicing`) — not whole cells, so an answer spread over cells
and a copy pasted below the untouched stub are compared whole, and nothing else dilutes them. A
program is **normalised** with Python's own tokenizer: comments, docstrings and blank lines are
dropped, every local name becomes ``N``, every number ``0`` and every string ``S``; keywords,
operators, attribute names (``.tril``) and builtins (``range``) are kept, because they are what a
solution *does*, and an imported name is **resolved** to what it imports (``np.tril``,
``numpy.tril`` and ``tril`` after ``from numpy import tril`` read alike). Two programs are compared
by the **Jaccard similarity** of their sets of 5-token sequences (shingles): 1.0 for the same code
under other names, near 0 for unrelated code. The package's implementation is read two ways, its
function alone and its function with the helpers and imports of its module that it uses, and a
program is as close to it as to the closer of the two.

The report lists, for each exercise, the pairs of students at or above
:data:`SIMILARITY_THRESHOLD`, and each student that close to the package's implementation of the
exercise (:data:`PACKAGE_IMPLEMENTATIONS`). It never changes a score: short exercises have few
ways to be written, and honest students can meet there; read the cells and decide.
"""

from __future__ import annotations

import builtins
import inspect
import io
import keyword
import pkgutil
import textwrap
import tokenize
from functools import cache
from itertools import combinations

__all__ = ["normalise", "similarity", "program_text", "SIMILARITY_THRESHOLD", "PACKAGE_IMPLEMENTATIONS",
           "similar_solutions", "MAX_SOLUTION_TOKENS"]

SIMILARITY_THRESHOLD = 0.8
MAX_SOLUTION_TOKENS = 4000  # a solution's normalised tokens kept in grades.json (more is cut)
SHINGLE = 5
# The package function each exercise's answer mirrors (what a student could copy by hand).
PACKAGE_IMPLEMENTATIONS = {
    "01.1": "transformer_course.reversal:one_hot_encode",
    "03.3": "transformer_course.bpe:BytePairEncoding._encode_piece",
    "03.4": "transformer_course.word_vectors:skipgram_pairs",
    "04.1": "transformer_course.attention:scaled_dot_product_attention",
    "04.4": "transformer_course.positional:sinusoidal_encoding",
    "07.1": "transformer_course.masks:causal_mask",
    "07.2": "transformer_course.decoding:greedy_decode",
    "08.3": "transformer_course.pretraining:mask_tokens",
    "09.1": "transformer_course.decoding:apply_temperature",
    "09.2": "transformer_course.decoding:top_p_filter",
    "10.1": "transformer_course.vision:extract_patches",
    "10.2": "transformer_course.vision:attention_rollout",
    "11.1": "transformer_course.rotary:rotary_embedding",
    "11.2": "transformer_course.transformer:RMSNorm.call",
}
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
    return {tuple(tokens[i:i + SHINGLE]) for i in range(max(1, len(tokens) - SHINGLE + 1))} if tokens else set()


def _jaccard(first: set, second: set) -> float:
    return len(first & second) / len(first | second) if first and second else 0.0


def similarity(first, second) -> float:
    """Jaccard similarity of two normalised token lists' 5-token shingles, in [0, 1].

    Example:
        >>> similarity(normalise("def f(x):\\n    return x * 2 + 1"), normalise("def g(y):\\n    return y * 3 + 5"))
        1.0
    """
    return _jaccard(_shingles(first), _shingles(second))


def program_text(program) -> str:
    """The code of a :class:`.slicing.Program`: its statements, a written module's text in place of the magic."""
    return "\n".join(unit.writes_body if unit.writes_module else unit.text for unit in program.units)


@cache
def _package_tokens(exercise_id: str) -> tuple:
    """The package's implementation of an exercise, read two ways: its function alone, and as a program
    (the function with its module's helpers and imports). Empty where there is none."""
    from .slicing import program_for

    target = PACKAGE_IMPLEMENTATIONS.get(exercise_id)
    if target is None:
        return ()
    module_name, _, qualified = target.partition(":")
    try:
        function = tuple(normalise(inspect.getsource(pkgutil.resolve_name(target))))
        if "." in qualified:  # a method: its class holds what it uses
            return (function,)
        program = program_for([inspect.getsource(pkgutil.resolve_name(module_name))], 1, qualified)
        return (function,) if program.missing else (function, tuple(normalise(program_text(program))))
    except (ImportError, AttributeError, OSError, TypeError):
        return ()


def similar_solutions(solutions: dict, threshold: float = SIMILARITY_THRESHOLD) -> dict:
    """Pairs of students, and students and the package, whose solutions are near-identical.

    Args:
        solutions: ``{student: {exercise id: normalised tokens (list or space-separated str)}}``.
        threshold: float, the smallest similarity listed.

    Returns:
        ``{exercise id: {"pairs": [(similarity, student, student), ...], "package": [(similarity,
        student), ...]}}`` for the exercises with anything listed, highest similarity first.
    """
    found = {}
    exercises = sorted({exercise for cells in solutions.values() for exercise in cells})
    for exercise in exercises:
        shingles = {student: _shingles(cells[exercise].split() if isinstance(cells[exercise], str) else cells[exercise])
                    for student, cells in solutions.items() if cells.get(exercise)}  # once a student
        scores = {(a, b): _jaccard(shingles[a], shingles[b]) for a, b in combinations(sorted(shingles), 2)}
        pairs = sorted(((round(score, 3), a, b) for (a, b), score in scores.items() if score >= threshold),
                       reverse=True)
        package = [_shingles(tokens) for tokens in _package_tokens(exercise)]
        against = {student: max((_jaccard(own, form) for form in package), default=0.0)
                   for student, own in shingles.items()}
        copies = sorted(((round(score, 3), s) for s, score in against.items() if score >= threshold), reverse=True)
        if pairs or copies:
            found[exercise] = {"pairs": pairs, "package": copies}
    return found
