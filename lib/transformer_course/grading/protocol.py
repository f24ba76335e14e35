"""The grader's wire format: values as JSON, arrays as base64 ``.npy`` bytes, never pickles.

The trusted grader sends a student's kernel the name of a function and its arguments; the kernel
calls the function and prints one reply line tagged with a nonce the grader chose. Both sides use
this module. Decoding never executes anything: arrays are read with ``allow_pickle=False``, and
the only object rebuilt is a :class:`NextTokenTable` (a table of numbers).
"""

from __future__ import annotations

import base64
import io
import json

import numpy as np

__all__ = ["encode", "decode", "NextTokenTable", "capture_code", "request_code", "parse_reply", "CAPTURED"]


class NextTokenTable:
    """A next-token model given by a table: ``P(next | decoded)`` depends on the last id only.

    Call: int ``(K, t)`` ids decoded so far -> float ``(K, V)`` = ``table[decoded[:, -1]]``.
    """

    def __init__(self, table):
        self.table = np.asarray(table, dtype="float64")

    def __call__(self, decoded):
        return self.table[np.asarray(decoded)[:, -1]]


def _array_to_text(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _encode(value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return {"__number__": repr(value), "__int__": isinstance(value, int)}
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError("object arrays cannot be encoded")
        return {"__array__": _array_to_text(value)}
    if isinstance(value, NextTokenTable):
        return {"__next_token_table__": _array_to_text(value.table)}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return {"__dict__": {str(key): _encode(item) for key, item in value.items()}}
    raise TypeError(f"cannot encode a value of type {type(value).__name__}")


def encode(value) -> str:
    """Encode None, bools, numbers, strings, arrays, tuples, lists, dicts and next-token tables.

    Raises:
        TypeError: for anything else (a function, an object array, a model...).
    """
    return json.dumps(_encode(value))


def _decode(value):
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return np.load(io.BytesIO(base64.b64decode(value["__array__"])), allow_pickle=False)
    if "__number__" in value:
        return int(value["__number__"]) if value.get("__int__") else float(value["__number__"])
    if "__next_token_table__" in value:
        return NextTokenTable(np.load(io.BytesIO(base64.b64decode(value["__next_token_table__"])), allow_pickle=False))
    if "__tuple__" in value:
        return tuple(_decode(item) for item in value["__tuple__"])
    if "__dict__" in value:
        return {key: _decode(item) for key, item in value["__dict__"].items()}
    raise ValueError(f"unknown encoded value with keys {sorted(value)[:5]}")


def decode(text: str):
    """Inverse of :func:`encode`.

    Raises:
        ValueError: for text that is not a valid encoding (the grader treats it as a wrong answer).
    """
    try:
        return _decode(json.loads(text))
    except (json.JSONDecodeError, TypeError, KeyError, OSError) as error:
        raise ValueError(f"not a valid encoded value: {error}") from error


CAPTURED = "__graded_functions__"


def capture_code(exercise_id: str, function_name: str) -> str:
    """Source run right after an exercise's solution cell: remember the student's function then.

    Later cells may rebind the name (to the package's version, so the notebook runs on); the
    grader grades what the student wrote, as it was when their cell ran.
    """
    return (f"globals().setdefault({CAPTURED!r}, {{}})[{exercise_id!r}] = "
            f"globals().get({function_name!r})")


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
    captured = namespace.get(CAPTURED, {})
    function = captured.get(exercise_id) if exercise_id in captured else namespace.get(function_name)
    if not callable(function):
        print(nonce, "missing")
        return
    try:
        result = function(**decode(payload))
    except NotImplementedError:
        print(nonce, "not-attempted")
        return
    except Exception as error:  # noqa: BLE001 - reported to the grader as text
        print(nonce, "raised", f"{type(error).__name__}: {str(error)[:200]}".replace("\n", " "))
        return
    module = str(getattr(function, "__module__", None) or "?").replace(" ", "_")
    try:
        print(nonce, "ok", module, encode(result))
    except (TypeError, ValueError):
        print(nonce, "unencodable", type(result).__name__)


def parse_reply(text: str, nonce: str) -> tuple[str, object]:
    """Find the reply line tagged ``nonce`` in a kernel's output.

    Returns:
        ``(kind, value)``: ``("ok", (module of the function, decoded result))``, ``("missing", None)``,
        ``("not-attempted", None)``, ``("raised", message)``, ``("unencodable", type name)``,
        or ``("no-reply", None)`` when no line carries the nonce.
    """
    for line in text.splitlines():
        if not line.startswith(nonce + " "):
            continue
        kind, _, rest = line[len(nonce) + 1:].partition(" ")
        if kind == "ok":
            module, _, encoded = rest.partition(" ")
            try:
                return "ok", (module, decode(encoded))
            except ValueError:
                return "no-reply", None
        return kind, rest or None
    return "no-reply", None
