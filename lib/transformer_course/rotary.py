"""Rotary position embedding (RoPE): positions as rotations of the queries and keys.

Where :mod:`transformer_course.positional` adds a position to each token's embedding, rotary
embedding adds nothing: inside attention, each query and key is rotated by an angle proportional
to its position, so a score depends on the offset between the two positions only. Llama and most
decoders since 2023 use it; :class:`transformer_course.attention.GroupedQueryAttention` applies it.

Shape letters: B batch, T sequence length, N heads, H head width.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
from keras import ops

from ._validation import check_positive

__all__ = ["rotary_embedding"]


def rotary_embedding(x, start_index=0, max_wavelength: float = 10_000.0, scaling_factor: float = 1.0):
    """Rotate each head's vector by its position: the rotary position embedding (RoPE).

    The H features of a head are read as H/2 pairs, feature ``i`` with feature ``i + H/2`` (the
    "rotate half" layout of GPT-NeoX, Llama and keras-hub). Pair ``i`` at position p is rotated
    by the angle ``p θ_i``, with ``θ_i = max_wavelength ** (-2i / H)``. Rotating a query at
    position p and a key at position q leaves their dot product a function of ``p - q`` only:
    attention scores see offsets, never absolute positions, and no position is added to the
    token embeddings.

    Args:
        x: float ``(B, T, N, H)``, queries or keys split into heads; H even.
        start_index: int (or int scalar tensor), the position of ``x[:, 0]`` (a cached step's
            new tokens start after the cached ones).
        max_wavelength: float, the longest wavelength, 10,000 as in RoFormer and Llama.
        scaling_factor: float > 0, the positions are divided by it before the rotation (1: none).
            **Position Interpolation** (Chen et al., 2023, "Extending Context Window of Large
            Language Models via Positional Interpolation", §2.2): a model trained on rows of L
            reads rows of s·L with ``scaling_factor=s``, so every position it sees falls inside the
            range of angles it trained on (at fractional positions), instead of beyond it.

    Returns:
        float ``(B, T, N, H)``, the same dtype: ``x cos(pθ) + rotate_half(x) sin(pθ)``, where
        ``rotate_half`` maps the halves ``(x₁, x₂)`` to ``(−x₂, x₁)``.

    Raises:
        ValueError: if ``x`` is not rank 4 or its last axis is odd, or ``scaling_factor`` is not a
            positive number.

    Source: Su et al., 2021, "RoFormer: Enhanced Transformer with Rotary Position Embedding",
    §3.4.2; equal to ``keras_hub.layers.RotaryEmbedding`` (tested, its ``scaling_factor`` too).

    Example:
        >>> import numpy as np
        >>> x = np.ones((1, 3, 2, 4), "float32")
        >>> tuple(rotary_embedding(x).shape)
        (1, 3, 2, 4)
    """
    if len(x.shape) != 4 or x.shape[-1] is None or x.shape[-1] % 2:
        raise ValueError(f"`x` must have shape (batch, length, heads, even head width); received {tuple(x.shape)}.")
    check_positive("scaling_factor", scaling_factor)
    x = ops.convert_to_tensor(x)  # a NumPy array too: on PyTorch, array * tensor is not defined
    width = x.shape[-1]
    inverse_frequency = 1.0 / (max_wavelength ** (ops.arange(0, width, 2, dtype="float32") / width))  # (H/2,)
    positions = ops.cast(ops.arange(ops.shape(x)[1]), "float32") + ops.cast(start_index, "float32")  # (T,)
    positions = positions / scaling_factor
    angles = ops.einsum("t,i->ti", positions, inverse_frequency)  # (T, H/2)
    angles = ops.concatenate([angles, angles], axis=-1)[None, :, None, :]  # (1, T, 1, H): pair i twice
    cos, sin = ops.cast(ops.cos(angles), x.dtype), ops.cast(ops.sin(angles), x.dtype)
    first, second = ops.split(x, 2, axis=-1)
    return x * cos + ops.concatenate([-second, first], axis=-1) * sin
