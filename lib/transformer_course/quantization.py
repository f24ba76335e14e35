"""Weights in a few bits: symmetric absmax quantization, one scale per row or per group of a row.

Keras' ``model.quantize("int8")`` gives every output unit of a kernel one scale (its largest
absolute weight maps to 127). Below eight bits one scale per row is too coarse: a single large
weight sets the step for thousands of others. GPTQ, AWQ and llama.cpp's ``Q4`` formats keep one
scale per **group** of 32 to 128 consecutive weights instead, paying a few bits a weight for the
scales. This module holds the arithmetic on NumPy arrays: quantize, dequantize, pack two 4-bit
integers a byte, and count the bits a weight costs.

Shape letters: R rows (output units), C columns (the weights of a row), G groups a row.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import math

import keras
import numpy as np

from ._validation import check_integer
from .lora import _input_axes

__all__ = [
    "absmax_quantize",
    "absmax_dequantize",
    "bits_per_weight",
    "pack_int4",
    "unpack_int4",
    "quantize_model_weights",
]


def _check_bits(bits) -> int:
    bits = check_integer("bits", bits)
    if not 2 <= bits <= 8:
        raise ValueError(f"`bits` must be an integer from 2 to 8; received {bits!r}.")
    return bits


def absmax_quantize(weights, bits: int = 8, group_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric integers and one scale per row, or per group of ``group_size`` weights of a row.

    Each group's largest absolute weight maps to the largest integer ``L = 2^(bits − 1) − 1``
    (127 in int8, 7 in int4); every weight becomes ``round(w / scale)`` with ``scale = max|w| / L``,
    an integer in ``[−L, L]``. A group of zeros gets scale 1 (its integers are 0). Rounding to
    the nearest integer bounds each weight's error by half a step, ``scale / 2``.

    Args:
        weights: float array-like ``(..., C)``: the quantized axis is the last (for a ``Dense``
            kernel ``(in, out)``, pass its transpose: one row per output unit, as Keras does).
        bits: int from 2 to 8.
        group_size: int >= 1, the consecutive weights that share a scale (None: the whole row, C).
            Where it does not divide C, the last group of each row is shorter.

    Returns:
        ``(integers, scales)``: int8 ``(..., C)`` in ``[−L, L]``, and float32 ``(..., G)`` with
        ``G = ⌈C / group_size⌉``; ``integers * scales`` repeated over each group approximates
        ``weights`` (:func:`absmax_dequantize`).

    Raises:
        ValueError: for ``bits`` outside 2..8, weights with no last axis, or a ``group_size`` that
            is not a positive integer.

    Source: absmax quantization as in Dettmers et al., 2022, "LLM.int8()", §3.1 (per row: Keras'
    ``abs_max_quantize``, tested equal); groups of a row as in Frantar et al., 2023, "GPTQ", §5
    ("grouping") and llama.cpp's ``Q4_0`` (blocks of 32 weights, one 16-bit scale each).

    Example:
        >>> integers, scales = absmax_quantize([[0.6, -1.0, 0.25, 2.0]], bits=4, group_size=2)
        >>> integers.tolist(), [round(float(scale), 4) for scale in scales[0]]
        ([[4, -7, 1, 7]], [0.1429, 0.2857])
    """
    bits = _check_bits(bits)
    weights = np.asarray(weights, dtype="float32")
    if weights.ndim < 1 or weights.shape[-1] == 0:
        raise ValueError(f"`weights` must have a last axis to quantize; received shape {weights.shape}.")
    columns = weights.shape[-1]
    group_size = columns if group_size is None else check_integer("group_size", group_size)
    largest_integer = 2 ** (bits - 1) - 1
    padding = [(0, 0)] * (weights.ndim - 1) + [(0, -columns % group_size)]  # zeros: no group's largest changes
    padded = np.pad(weights, padding)
    grouped = padded.reshape(*weights.shape[:-1], -1, group_size)  # (..., G, group_size)
    largest = np.abs(grouped).max(axis=-1, keepdims=True)
    scales = np.where(largest > 0, largest / largest_integer, 1.0).astype("float32")
    integers = np.clip(np.round(grouped / scales), -largest_integer, largest_integer).astype("int8")
    return integers.reshape(padded.shape)[..., :columns], scales[..., 0]


def absmax_dequantize(integers, scales, group_size: int | None = None) -> np.ndarray:
    """The weights :func:`absmax_quantize`'s integers and scales stand for: float32 ``(..., C)``.

    Args:
        integers: int ``(..., C)``.
        scales: float ``(..., G)``: each scale serves ``group_size`` consecutive integers.
        group_size: int, as given to :func:`absmax_quantize` (None: C / G, which G must divide).

    Raises:
        ValueError: if the leading axes differ, or the scales are not ⌈C / group_size⌉ a row.

    Example:
        >>> absmax_dequantize([[4, -7, 1, 7]], [[0.5, 0.25]]).tolist()
        [[2.0, -3.5, 0.25, 1.75]]
    """
    integers, scales = np.asarray(integers), np.asarray(scales, dtype="float32")
    columns, groups = integers.shape[-1], scales.shape[-1]
    if group_size is None and groups and columns % groups == 0:
        group_size = columns // groups
    if integers.shape[:-1] != scales.shape[:-1] or not group_size or groups != -(-columns // group_size):
        raise ValueError(
            f"`scales` {scales.shape} must have `integers`' leading axes {integers.shape[:-1]} and one scale for "
            f"each group of `group_size` ({group_size}) of the {columns} integers of a row."
        )
    return integers.astype("float32") * np.repeat(scales, group_size, axis=-1)[..., :columns]


def bits_per_weight(bits: int, group_size: int, scale_bits: int = 16) -> float:
    """What a weight costs in storage: its own bits plus its share of its group's scale.

    Args:
        bits: int from 2 to 8, the integer's.
        group_size: int >= 1, the weights sharing one scale (a row's length for one scale a row).
        scale_bits: int >= 1, a scale's (16: a float16 scale, as llama.cpp's ``Q4_0`` stores it).

    Returns:
        float, ``bits + scale_bits / group_size``: 4.5 for int4 in groups of 32 with 16-bit scales.

    Raises:
        ValueError: for arguments out of range.

    Example:
        >>> bits_per_weight(4, 32), bits_per_weight(4, 128), bits_per_weight(8, 256, scale_bits=32)
        (4.5, 4.125, 8.125)
    """
    bits = _check_bits(bits)
    return bits + check_integer("scale_bits", scale_bits) / check_integer("group_size", group_size)


def pack_int4(integers) -> np.ndarray:
    """Two 4-bit integers a byte: int ``(..., C)`` in [−8, 7], C even -> uint8 ``(..., C / 2)``.

    Each integer is stored as its 4-bit two's complement, the even column in the low half of the
    byte and the odd column in the high half. :func:`unpack_int4` reverses it exactly.

    Raises:
        ValueError: for an odd last axis or integers outside [−8, 7].

    Example:
        >>> pack_int4([[1, -1, 7, -8]]).tolist(), unpack_int4(pack_int4([[1, -1, 7, -8]])).tolist()
        ([[241, 135]], [[1, -1, 7, -8]])
    """
    integers = np.asarray(integers)
    if integers.ndim < 1 or integers.shape[-1] % 2:
        raise ValueError(f"`integers` must have an even last axis; received shape {integers.shape}.")
    if integers.size and (integers.min() < -8 or integers.max() > 7):
        raise ValueError(f"`integers` must lie in [-8, 7]; received [{integers.min()}, {integers.max()}].")
    nibbles = (integers.astype("int16") & 0xF).astype("uint8")
    return nibbles[..., 0::2] | (nibbles[..., 1::2] << 4)


def unpack_int4(packed) -> np.ndarray:
    """:func:`pack_int4` reversed: uint8 ``(..., B)`` -> int8 ``(..., 2B)`` in [−8, 7]."""
    packed = np.asarray(packed, dtype="uint8")
    nibbles = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], 2 * packed.shape[-1])
    return np.where(nibbles > 7, nibbles.astype("int16") - 16, nibbles).astype("int8")


def quantize_model_weights(model, bits: int, group_size: int | None = None) -> dict[str, np.ndarray]:
    """Round every projection kernel and embedding table of ``model`` to ``bits``, in place; what a file would hold.

    Each ``Dense`` and ``EinsumDense`` kernel is read as a matrix, one row per output unit (the
    input axes: what a row's weights multiply), quantized by :func:`absmax_quantize` in groups of
    ``group_size`` along the row, and replaced by its dequantized values: the model then computes
    what a model stored in ``bits`` would (a "fake-quantized" model; its arithmetic stays
    float32, so this measures the rounding's cost, not an integer kernel's speed). Each
    ``Embedding`` table and the course's token embeddings are quantized per token row the same way.
    Norms' scales and biases stay float32, as in Keras' own ``quantize("int8")``.

    Args:
        model: a built float Keras model (not quantized, no LoRA layers).
        bits: int from 2 to 8.
        group_size: int >= 1, weights a scale (None: one scale a row).

    Returns:
        dict of the arrays a file would store, by weight path: for each quantized weight its
        integers (packed two a byte, :func:`pack_int4`, when ``bits`` <= 4; int8 otherwise, under
        ``path + "/integers"``) and its float16 scales (``path + "/scales"``); every other weight as
        it is, float32. ``numpy.savez`` writes them; the file's size is what the format costs.

    Raises:
        ValueError: for ``bits`` outside 2..8 or a non-positive ``group_size``.

    Example:
        >>> from transformer_course.language_model import LanguageModel
        >>> model = LanguageModel(30, 8, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="llama")
        >>> stored = quantize_model_weights(model, bits=4, group_size=8)
        >>> table = "token_embedding/token_embedding/embeddings"  # (30, 16): 30 rows of 16, two groups of 8 each
        >>> stored[table + "/integers"].shape, stored[table + "/scales"].shape  # two 4-bit integers a byte
        ((30, 8), (30, 2))
    """
    bits = _check_bits(bits)
    quantized, stored = set(), {}
    # Every nested layer, as Keras' own Model.quantize walks them (Keras has no public recursive list).
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
            weight, axes = layer.kernel, _input_axes(layer)
        elif isinstance(layer, keras.layers.Embedding):
            weight, axes = layer.embeddings, None  # one row a token: the table's last axis is the row
        else:
            continue
        values = keras.ops.convert_to_numpy(weight).astype("float32")
        rows = values.reshape(-1, values.shape[-1]) if axes is None else values.reshape(
            math.prod(values.shape[:axes]), -1).T  # fmt: skip
        integers, scales = absmax_quantize(rows, bits, group_size)
        restored = absmax_dequantize(integers, scales, group_size or rows.shape[-1])
        weight.assign((restored if axes is None else restored.T).reshape(values.shape))
        packable = bits <= 4 and integers.shape[-1] % 2 == 0
        stored[f"{weight.path}/integers"] = pack_int4(integers) if packable else integers
        stored[f"{weight.path}/scales"] = scales.astype("float16")
        quantized.add(id(weight))
    for weight in model.weights:
        if id(weight) not in quantized:
            stored[weight.path] = keras.ops.convert_to_numpy(weight)
    return stored
