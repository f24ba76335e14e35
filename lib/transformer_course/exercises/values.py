"""The value format of exercise cases and graded replies: JSON, arrays as base64 ``.npy`` bytes.

Public cases (``public_cases.json``), the grader's requests and the student kernel's replies all
hold values in this format. Decoding never executes anything: arrays are read with
``allow_pickle=False`` after their header is checked against their size, and the only object
rebuilt is a :class:`transformer_course.decoding.NextTokenTable` (a table of numbers). It imports
nothing of the course but that table, so graded calls can decode values where the rest of the
package is out of reach.
"""

from __future__ import annotations

import base64
import io
import json

import numpy as np

from .._next_token_table import NextTokenTable

__all__ = ["encode", "decode", "plain_value", "MAX_REPLY_CHARACTERS"]

# The longest encoded value read (a graded call returns small arrays); longer is no value.
MAX_REPLY_CHARACTERS = 16 * 2**20
_MAX_NESTING = 32  # tuples, lists and dicts inside one another in one value


def plain_value(value, depth: int = 0):
    """``value`` with every array-like turned into a NumPy array, for comparing and for encoding.

    The one conversion both :func:`transformer_course.exercises.check` and the grader apply to a
    student's result: a TensorFlow, JAX or PyTorch tensor, a Keras tensor or anything else with
    ``numpy()`` or ``__array__`` becomes ``np.ndarray``; tuples, lists and dict values are
    converted item by item; every other value is returned as it is.

    Raises:
        ValueError: for values nested more than 32 levels deep.
    """
    if depth > _MAX_NESTING:
        raise ValueError(f"values nested more than {_MAX_NESTING} levels deep")
    if isinstance(value, (np.ndarray, str, bytes, int, float, bool, type(None), NextTokenTable)):
        return value
    if isinstance(value, tuple):
        return tuple(plain_value(item, depth + 1) for item in value)
    if isinstance(value, list):
        return [plain_value(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {key: plain_value(item, depth + 1) for key, item in value.items()}
    if isinstance(value, np.generic):
        return np.asarray(value)
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a PyTorch tensor, maybe requiring grad
        value = value.detach().cpu()
    if hasattr(value, "numpy") and callable(value.numpy):
        try:
            return np.asarray(value.numpy())
        except Exception:  # noqa: BLE001 - fall back on __array__
            pass
    if hasattr(value, "__array__"):
        return np.asarray(value)
    return value


def _array_to_text(array: np.ndarray) -> str:
    buffer = io.BytesIO()
    # np.require keeps a 0-d array 0-d (np.ascontiguousarray would make it shape (1,)).
    np.save(buffer, np.require(array, requirements="C"), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _encode(value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):  # before int and float: np.float64 is a float, and its repr is np.float64(…)
        value = np.asarray(value)  # a 0-d array: its dtype and shape () travel with it
    if isinstance(value, (int, float)):  # Python's own, or a subclass: written as the plain number
        return {
            "__number__": repr(int(value)) if isinstance(value, int) else repr(float(value)),
            "__int__": isinstance(value, int),
        }
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

    A NumPy scalar (``np.float32(1.5)``, ``np.int64(3)``, ``np.bool_(True)``) is encoded as the 0-d
    array it is, so it decodes with its dtype and shape ``()``, like a 0-d array; Python's ``int`` and
    ``float`` decode as themselves.

    Raises:
        TypeError: for anything else (a function, an object array, a model...).
    """
    return json.dumps(_encode(value))


def _text_to_array(text) -> np.ndarray:
    """Read base64 ``.npy`` bytes, checking first that the header's shape fits the bytes sent.

    A header may announce any shape; loading it would allocate that much memory first.
    """
    if not isinstance(text, str):
        raise ValueError("an encoded array must be a base64 string")
    data = base64.b64decode(text, validate=True)
    buffer = io.BytesIO(data)
    version = np.lib.format.read_magic(buffer)
    read_header = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in read_header:
        raise ValueError(f"unsupported .npy version {version}")
    shape, _, dtype = read_header[version](buffer)
    if dtype.hasobject:
        raise ValueError("object arrays are not accepted")
    expected = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if expected != len(data) - buffer.tell():
        raise ValueError("the array's header does not match its data")
    buffer.seek(0)
    return np.load(buffer, allow_pickle=False)


def _decode(value, depth: int = 0):
    if depth > _MAX_NESTING:
        raise ValueError(f"values nested more than {_MAX_NESTING} levels deep")
    if isinstance(value, list):
        return [_decode(item, depth + 1) for item in value]
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return _text_to_array(value["__array__"])
    if "__number__" in value:
        return int(value["__number__"]) if value.get("__int__") else float(value["__number__"])
    if "__next_token_table__" in value:
        return NextTokenTable(_text_to_array(value["__next_token_table__"]))
    if "__tuple__" in value:
        return tuple(_decode(item, depth + 1) for item in value["__tuple__"])
    if "__dict__" in value:
        return {key: _decode(item, depth + 1) for key, item in value["__dict__"].items()}
    raise ValueError(f"unknown encoded value with keys {sorted(value)[:5]}")


def decode(text: str):
    """Inverse of :func:`encode`.

    Raises:
        ValueError: for text that is not a valid encoding (the grader treats it as a wrong answer).
    """
    if len(text) > MAX_REPLY_CHARACTERS:
        raise ValueError(f"an encoded value longer than {MAX_REPLY_CHARACTERS} characters")
    try:
        return _decode(json.loads(text))
    except (
        ValueError,
        TypeError,
        KeyError,
        AttributeError,
        OSError,
        RecursionError,
        MemoryError,
        OverflowError,
    ) as error:
        # Named by type only: the text came from a student's kernel.
        raise ValueError(f"not a valid encoded value ({type(error).__name__})") from None
