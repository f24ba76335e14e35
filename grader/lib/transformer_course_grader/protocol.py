"""The grader's messages: requests two kernels run, one reply line each request prints.

Graded functions never run where the course package's code can be reached, and never come from
an object the student's runtime produced:

1. The student's kernel runs the notebook, as the student did; nothing is taken from it.
2. The grader reads the submission's cells and finds, for each exercise, the top-level statements
   its function needs (``exercises.slicing``). A second kernel, whose copy of the package holds only this
   module, the audit hook of :mod:`.guard`, the value format and the exercises' ``NextTokenTable``
   (:func:`.sandbox.graded_snapshot`), runs those statements (:func:`program_code`) and calls the
   function on the grader's cases (:func:`request_code`). A statement or a call that names any
   other part of the package, or builds code at run time, fails there.

Each reply line is tagged with a nonce the grader chose. The cases' values travel in the exercises'
value format (:mod:`transformer_course.exercises.values`: JSON, arrays as base64 ``.npy`` bytes,
never pickles), which the students' own checks also use.
"""

from __future__ import annotations

import json

from transformer_course.exercises.values import MAX_REPLY_CHARACTERS, decode, encode, plain_value

__all__ = [
    "encode",
    "decode",
    "plain_value",
    "program_code",
    "request_code",
    "parse_reply",
    "CAPTURED",
    "FAILURES",
    "MAX_REPLY_CHARACTERS",
]

CAPTURED = "__graded_functions__"
FAILURES = "__graded_failures__"


def program_code(exercise_id: str, function_name: str, statements: list, written: dict) -> str:
    """Python source the graded kernel runs once per exercise: the statements its function needs.

    Args:
        exercise_id: str, ``"NN.k"``.
        function_name: str, the graded function.
        statements: list of ``(cell index, first line, text)``, in notebook order
            (``exercises.slicing.program_for``).
        written: {file name: text} of every module the notebook writes with ``%%writefile``.

    The kernel compiles the statements (file ``<cell N>``), installs the audit hook of
    :mod:`.guard` (once), runs them one by one in a fresh module namespace — a statement that
    raises is recorded and the next runs — and keeps the function it ends with. It prints nothing.
    """
    payload = json.dumps({"statements": [list(statement) for statement in statements], "written": written})
    return (
        "from transformer_course_grader.protocol import _prepare as __prepare\n"
        f"__prepare(globals(), {exercise_id!r}, {function_name!r}, {payload!r})\n"
        "del __prepare\n"
    )


def _trusted_folders() -> tuple:
    """The folders of this environment's modules: Python, its packages, the course and grader packages (read-only)."""
    import os
    import sys

    import transformer_course

    # The folders holding this grader and the course package (each a snapshot mounted over the installed one).
    packages = {
        os.path.dirname(os.path.dirname(os.path.abspath(path))) for path in (__file__, transformer_course.__file__)
    }
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, *packages}
    folders |= {
        entry
        for entry in sys.path
        if entry
        and os.path.isabs(entry)
        and os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages")
    }
    return tuple(sorted({path for folder in folders for path in (folder, os.path.realpath(folder))}))


def _prepare(namespace: dict, exercise_id: str, function_name: str, payload: str) -> None:
    """Graded-kernel side of :func:`program_code`."""
    import builtins
    import os
    import sys

    from . import guard

    program = json.loads(payload)
    compiled, failures = [], []
    for cell, line, text in program["statements"]:
        try:  # compiled before the hook is installed; line numbers as in the cell
            compiled.append(
                (
                    cell,
                    line,
                    compile(
                        "\n" * (line - 1) + text, guard.STATEMENT_FILE.format(cell=cell + 1), "exec", dont_inherit=True
                    ),
                )
            )
        except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
            failures.append(f"cell {cell + 1}, line {line}: {type(error).__name__}: {error}")
    if os.getcwd() not in sys.path:  # as Jupyter puts the notebook's folder first: modules it wrote import
        sys.path.insert(0, os.getcwd())
    guard.install(_trusted_folders(), program["written"], home=os.getcwd())
    module = {"__name__": "__main__", "__builtins__": builtins, "get_ipython": namespace.get("get_ipython")}
    for cell, line, code in compiled:
        try:
            exec(code, module)
        except Exception as error:  # noqa: BLE001 - the statement's names stay unbound; the calls will say why
            failures.append(f"cell {cell + 1}, line {line}: {type(error).__name__}: {str(error)[:300]}")
    namespace.setdefault(CAPTURED, {})[exercise_id] = module.get(function_name)
    namespace.setdefault(FAILURES, {})[exercise_id] = failures


def request_code(exercise_id: str, function_name: str, arguments: dict, nonce: str) -> str:
    """Python source that the student's kernel runs to call one function on given arguments.

    It prints exactly one line: ``<nonce> ok <module> <encoded result>``, or ``<nonce> missing``,
    ``<nonce> not-attempted``, ``<nonce> raised <type>: <message>`` or ``<nonce> unencodable
    <type>``.
    """
    payload = encode(arguments)
    return (
        "from transformer_course_grader.protocol import _serve as __serve\n"
        f"__serve(globals(), {exercise_id!r}, {function_name!r}, {payload!r}, {nonce!r})\n"
        "del __serve\n"
    )


def _serve(namespace: dict, exercise_id: str, function_name: str, payload: str, nonce: str) -> None:
    """Kernel side of :func:`request_code` (runs in the untrusted kernel; only prints)."""
    function = namespace.get(CAPTURED, {}).get(exercise_id)
    if not callable(function):
        print(
            "\n" + nonce,
            "missing",
            " / ".join(namespace.get(FAILURES, {}).get(exercise_id, []))[:600].replace("\n", " "),
        )
        return
    failed = namespace.get(FAILURES, {}).get(exercise_id, [])
    # On a line of its own, whatever the function printed without a final newline.
    print("\n" + reply_line(function, decode(payload), nonce, failed))


def reply_line(function, arguments: dict, nonce: str, failed=()) -> str:
    """Call ``function(**arguments)`` and give the line a graded call replies with, tagged ``nonce``.

    ``<nonce> ok <module> <encoded result>``, ``<nonce> not-attempted`` (it raised NotImplementedError),
    ``<nonce> raised <type>: <message>`` or ``<nonce> unencodable <type>``: what :func:`parse_reply` reads.
    ``failed`` are the graded run's failures for this exercise; a NameError names the first.
    """
    try:
        result = function(**arguments)
    except NotImplementedError:
        return f"{nonce} not-attempted"
    except Exception as error:  # noqa: BLE001 - reported to the grader as text
        because = f" (in the graded run, {failed[0][:300]})" if failed and isinstance(error, NameError) else ""
        return f"{nonce} raised " + f"{type(error).__name__[:100]}: {str(error)[:200]}{because}".replace("\n", " ")
    module = str(getattr(function, "__module__", None) or "?").replace(" ", "_")
    try:
        return f"{nonce} ok {module} {encode(plain_value(result))}"
    except (TypeError, ValueError, RecursionError):
        return f"{nonce} unencodable {type(result).__name__}"


def parse_reply(text: str, nonce: str) -> tuple[str, object]:
    """Find the reply line tagged ``nonce`` in a kernel's output.

    Returns:
        ``(kind, value)``: ``("ok", (module of the function, decoded result))``, ``("missing", None)``,
        ``("not-attempted", None)``, ``("raised", message)``, ``("unencodable", type name)``,
        ``("no-reply", None)`` when no line carries the nonce, or ``("forged", None)`` when the
        nonce appears more than once (only the grader's request prints it, once).
    """
    kind, rest = _tagged_line(text, nonce)
    if kind == "ok":
        module, _, encoded = rest.partition(" ")
        try:
            return "ok", (module, decode(encoded))
        except ValueError:
            return "no-reply", None
    return kind, rest or None


def _tagged_line(text: str, nonce: str) -> tuple[str, str]:
    """``(kind, rest)`` of the first line ``<nonce> <kind> <rest>`` in ``text``.

    ``("forged", "")`` when the nonce appears more than once (only the grader's request prints
    it, once); ``("no-reply", "")`` when no line carries it.
    """
    if text.count(nonce) > 1:
        return "forged", ""
    for line in text.splitlines():
        if line.startswith(nonce + " "):
            kind, _, rest = line[len(nonce) + 1 :].partition(" ")
            return kind, rest
    return "no-reply", ""
