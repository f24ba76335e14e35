"""The grader's messages: requests two kernels run, one reply line each request prints.

Graded functions never run where the course package's code can be reached:

1. The student's kernel runs the notebook; then, for each exercise, :func:`export_code` asks it
   for the function the student wrote, **by value**: pickled with ``cloudpickle``, which copies
   functions defined in the notebook (and what they refer to there) and names everything else by
   its module. The grader never unpickles it; it only reads the pickle's opcodes
   (:mod:`.provenance`).
2. A second kernel, whose copy of the package holds only this module, the value format and the
   exercises' ``NextTokenTable`` (:func:`.sandbox.graded_snapshot`), rebuilds each function
   (:func:`load_code`) and calls it on the grader's cases (:func:`request_code`). A function that
   names any other part of the package fails there like a missing import.

Each reply line is tagged with a nonce the grader chose. The cases' values travel in the exercises'
value format (:mod:`transformer_course.exercises.values`: JSON, arrays as base64 ``.npy`` bytes,
never pickles), which the students' own checks also use.
"""

from __future__ import annotations

import base64
import binascii

from ..exercises.values import MAX_REPLY_CHARACTERS, decode, encode, plain_value

__all__ = ["encode", "decode", "plain_value", "capture_code", "export_code", "parse_export", "load_code",
           "request_code", "parse_reply", "CAPTURED", "MAX_REPLY_CHARACTERS", "MAX_FUNCTION_BYTES"]

# The largest pickled function the grader takes from a kernel (an exercise's function and what
# it refers to in the notebook: kilobytes); base64 of it fits one reply line.
MAX_FUNCTION_BYTES = (MAX_REPLY_CHARACTERS - 1024) // 4 * 3


CAPTURED = "__graded_functions__"


def capture_code(exercise_id: str, function_name: str) -> str:
    """Source run right after an exercise's solution cell: remember the student's function then.

    Later cells may rebind the name (to the package's version, so the notebook runs on); the
    grader grades what the student wrote, as it was when their cell ran.
    """
    return (f"globals().setdefault({CAPTURED!r}, {{}})[{exercise_id!r}] = "
            f"globals().get({function_name!r})")


def export_code(exercise_id: str, function_name: str, nonce: str) -> str:
    """Python source that the student's kernel runs after the notebook: the graded function, by value.

    It prints exactly one line: ``<nonce> function <base64 of the cloudpickle>``, or
    ``<nonce> missing``, ``<nonce> unpicklable <type>`` or ``<nonce> too-large <bytes>``.
    """
    return (
        "from transformer_course.grading.protocol import _export as __export\n"
        f"__export(globals(), {exercise_id!r}, {function_name!r}, {nonce!r})\n"
        "del __export\n"
    )


def _graded_function(namespace: dict, exercise_id: str, function_name: str):
    """The function captured after the exercise's cell, else the name's current binding."""
    captured = namespace.get(CAPTURED, {})
    return captured.get(exercise_id) if exercise_id in captured else namespace.get(function_name)


def _export(namespace: dict, exercise_id: str, function_name: str, nonce: str) -> None:
    """Kernel side of :func:`export_code` (runs in the student's kernel; only prints)."""
    function = _graded_function(namespace, exercise_id, function_name)
    if not callable(function):
        print("\n" + nonce, "missing")
        return
    try:
        data = _dumps(_plain(function) or function)
    except Exception as error:  # noqa: BLE001 - reported to the grader as the type's name
        print("\n" + nonce, "unpicklable", type(error).__name__[:100])
        return
    if len(data) > MAX_FUNCTION_BYTES:
        print("\n" + nonce, "too-large", len(data))
        return
    print("\n" + nonce + " function " + base64.b64encode(data).decode("ascii"))


def _plain(value):
    """The plain function behind a wrapper that pickles by name, or None.

    ``functools.cache`` / ``lru_cache`` (the function it wraps: the same results, computed afresh)
    and TensorFlow's ``tf.function`` (its Python function, run eagerly). Pickled by name, either
    would be looked up in the graded kernel's ``__main__``, where the notebook never ran.
    """
    import functools

    if isinstance(value, functools._lru_cache_wrapper):
        return value.__wrapped__
    if type(value).__module__.startswith("tensorflow.") and callable(getattr(value, "python_function", None)):
        return value.python_function
    return None


def _dumps(function) -> bytes:
    """``cloudpickle.dumps(function)`` with what the notebook itself defined travelling by value.

    Modules the notebook wrote into its own folders (``%%writefile helpers.py``, then ``import
    helpers``) are pickled by value, as the notebook's own functions are; a cached or
    ``tf.function`` helper becomes its plain function (:func:`_plain`).
    """
    import copy
    import io
    import os
    import sys
    import tempfile

    import cloudpickle

    folders = tuple(os.path.realpath(folder) + os.sep for folder in
                    {os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir()} if folder not in ("", os.sep))
    installed = tuple(os.path.realpath(prefix) + os.sep for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or name.split(".")[0] == "transformer_course":
            continue
        path = os.path.realpath(path)
        installed_elsewhere = any(f"{os.sep}{name}{os.sep}" in path for name in ("site-packages", "dist-packages"))
        if path.startswith(folders) and not path.startswith(installed) and not installed_elsewhere:
            cloudpickle.register_pickle_by_value(module)

    class Pickler(cloudpickle.CloudPickler):
        def reducer_override(self, value):
            plain = _plain(value)
            if plain is not None:  # copy.copy(a function) is the function: the plain one stands in its place
                return copy.copy, (plain,)
            return super().reducer_override(value)

    buffer = io.BytesIO()
    Pickler(buffer, protocol=cloudpickle.DEFAULT_PROTOCOL).dump(function)
    return buffer.getvalue()


def parse_export(text: str, nonce: str) -> tuple[str, object]:
    """Find the reply to :func:`export_code` tagged ``nonce``.

    Returns:
        ``("function", pickle bytes)``, ``("missing", None)``, ``("unpicklable", type name)``,
        ``("too-large", size text)``, ``("no-reply", None)``, or ``("forged", None)`` when the
        nonce appears more than once.
    """
    kind, rest = _tagged_line(text, nonce)
    if kind == "function":
        try:
            data = base64.b64decode(rest.strip(), validate=True)
        except (binascii.Error, ValueError):
            return "no-reply", None
        return ("function", data) if 0 < len(data) <= MAX_FUNCTION_BYTES else ("no-reply", None)
    return kind, rest[:200] or None


def load_code(exercise_id: str, pickled: bytes) -> str:
    """Python source that the graded kernel runs once per exercise: rebuild the student's function.

    A function that cannot be rebuilt there (it names a part of the course package that is out
    of reach, or its pickle raises) is replaced by one that raises the same error on every call,
    so each case reports why.
    """
    return (
        "from transformer_course.grading.protocol import _load as __load\n"
        f"__load(globals(), {exercise_id!r}, {base64.b64encode(pickled).decode('ascii')!r})\n"
        "del __load\n"
    )


class _Unreachable:
    """Stands for a graded function that could not be rebuilt: every call raises its error."""

    def __init__(self, error: Exception):
        self.error = error

    def __call__(self, *arguments, **keywords):
        raise self.error


def _load(namespace: dict, exercise_id: str, encoded: str) -> None:
    """Graded-kernel side of :func:`load_code`."""
    import pickle

    try:
        function = pickle.loads(base64.b64decode(encoded))  # cloudpickle's format; this kernel only
    except Exception as error:  # noqa: BLE001 - every case of the exercise reports it
        function = _Unreachable(error)
    namespace.setdefault(CAPTURED, {})[exercise_id] = function


def request_code(exercise_id: str, function_name: str, arguments: dict, nonce: str) -> str:
    """Python source that the student's kernel runs to call one function on given arguments.

    It prints exactly one line: ``<nonce> ok <module> <encoded result>``, or ``<nonce> missing``,
    ``<nonce> not-attempted``, ``<nonce> raised <type>: <message>`` or ``<nonce> unencodable
    <type>``.
    """
    payload = encode(arguments)
    return (
        "from transformer_course.grading.protocol import _serve as __serve\n"
        f"__serve(globals(), {exercise_id!r}, {function_name!r}, {payload!r}, {nonce!r})\n"
        "del __serve\n"
    )


def _serve(namespace: dict, exercise_id: str, function_name: str, payload: str, nonce: str) -> None:
    """Kernel side of :func:`request_code` (runs in the untrusted kernel; only prints)."""
    function = _graded_function(namespace, exercise_id, function_name)
    if not callable(function):
        print("\n" + nonce, "missing")
        return
    try:
        result = function(**decode(payload))
    except NotImplementedError:
        print("\n" + nonce, "not-attempted")
        return
    except Exception as error:  # noqa: BLE001 - reported to the grader as text
        print("\n" + nonce, "raised", f"{type(error).__name__[:100]}: {str(error)[:200]}".replace("\n", " "))
        return
    module = str(getattr(function, "__module__", None) or "?").replace(" ", "_")
    try:
        reply = f"{nonce} ok {module} {encode(plain_value(result))}"
    except (TypeError, ValueError, RecursionError):
        reply = f"{nonce} unencodable {type(result).__name__}"
    # On a line of its own, whatever the function printed without a final newline.
    print("\n" + reply)


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
            kind, _, rest = line[len(nonce) + 1:].partition(" ")
            return kind, rest
    return "no-reply", ""
