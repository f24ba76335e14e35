"""The grader's messages: a request the student's kernel runs, one reply line it prints.

The trusted grader sends a student's kernel the name of a function and its arguments; the kernel
calls the function and prints one reply line tagged with a nonce the grader chose. Both sides use
this module. The values travel in the exercises' value format
(:mod:`transformer_course.exercises.values`: JSON, arrays as base64 ``.npy`` bytes, never
pickles), which the students' own checks also use.
"""

from __future__ import annotations

from ..exercises.values import MAX_REPLY_CHARACTERS, decode, encode, plain_value

__all__ = ["encode", "decode", "plain_value", "capture_code", "request_code", "parse_reply",
           "CAPTURED", "MAX_REPLY_CHARACTERS"]


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
    if text.count(nonce) > 1:
        return "forged", None
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
