"""One mask contract for every attention layer in the course.

Masks are boolean, and **True means "is a real token / may be attended to"**.

* A padding mask has shape ``(B, T)``: which positions of a sequence hold real tokens.
* An attention mask has shape ``(B, T, S)``: may query position t attend to key position s.
* A causal mask has shape ``(T, S)`` (normally T == S), lower-triangular, broadcast over the
  batch: position t may attend to positions 0..t, never to the future.

Masks combine with AND. In self-attention the query and key padding masks come from the same
sequence; in a decoder's cross-attention the key mask comes from the **source** sequence.

Shape letters: B batch, T query (target) length, S key (source) length.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
from keras import ops

from ._ids import PADDING_ID

__all__ = [
    "PADDING_ID",
    "padding_mask",
    "key_mask",
    "causal_mask",
    "attention_mask",
    "combine_masks",
    "masked_softmax",
    "keras_mask",
]


def padding_mask(token_ids, padding_id: int = PADDING_ID):
    """Which positions hold real tokens.

    The only function of the course that tells padding from real tokens on tensors; NumPy code
    compares with :data:`PADDING_ID`.

    Args:
        token_ids: int tensor or array ``(B, T)`` (any shape: the mask has the same one).
        padding_id: int, the id used for padding (:data:`PADDING_ID`, 0, in this course).

    Returns:
        bool ``(B, T)``: True where ``token_ids != padding_id``.

    Example:
        >>> ops.convert_to_numpy(padding_mask([[5, 3, 0]])).tolist()
        [[True, True, False]]
    """
    return ops.not_equal(token_ids, padding_id)


def key_mask(padding_mask):
    """A padding mask as an attention mask over the keys: which positions every query may read.

    Args:
        padding_mask: bool ``(B, S)``, True = real token (any truthy dtype), or None.

    Returns:
        bool ``(B, 1, S)``, broadcasting over the T queries of an attention mask ``(B, T, S)``;
        None for None (no mask: every key may be read).

    Example:
        >>> tuple(key_mask(ops.convert_to_tensor([[True, True, False]])).shape)
        (1, 1, 3)
    """
    return None if padding_mask is None else ops.expand_dims(ops.cast(padding_mask, "bool"), 1)


def causal_mask(query_length: int, key_length: int | None = None, offset=0):
    """Lower-triangular mask: query position t may attend to key positions 0..t only.

    Args:
        query_length: int, T (a scalar tensor, such as a dynamic shape, is accepted too).
        key_length: int, S; defaults to T.
        offset: int (or int scalar tensor) >= 0, the position of query 0 among the keys. During
            cached generation the T new queries sit at positions ``offset .. offset + T - 1`` of
            a cache of S keys, and query t may attend to keys ``0 .. offset + t``.

    Returns:
        bool ``(T, S)``: entry ``[t, s]`` is ``s <= offset + t``.

    Raises:
        ValueError: if a length is not a positive integer, or ``offset`` is a negative int.
    """
    key_length = query_length if key_length is None else key_length
    for name, value in (("query_length", query_length), ("key_length", key_length)):
        if isinstance(value, bool) or (isinstance(value, (int, float)) and (value < 1 or value != int(value))):
            raise ValueError(f"`{name}` must be a positive integer; received {value!r}.")
    if isinstance(offset, bool) or (isinstance(offset, (int, float)) and (offset < 0 or offset != int(offset))):
        raise ValueError(f"`offset` must be a non-negative integer; received {offset!r}.")
    rows = ops.expand_dims(ops.arange(query_length), 1)  # (T, 1)
    rows = rows + ops.cast(offset, rows.dtype)  # absolute query positions
    columns = ops.expand_dims(ops.arange(key_length), 0)  # (1, S)
    return ops.greater_equal(rows, columns)


def combine_masks(*masks):
    """AND together the masks that are not None (they broadcast against each other).

    Returns:
        The combined bool mask, or None if every argument is None.
    """
    combined = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        combined = mask if combined is None else ops.logical_and(combined, mask)
    return combined


def attention_mask(query_padding_mask=None, key_padding_mask=None, causal: bool = False):
    """Build a ``(B, T, S)`` attention mask from padding masks and, optionally, causality.

    Args:
        query_padding_mask: optional bool ``(B, T)`` from the query sequence. A padded query
            position may attend to nothing (its output is ignored downstream anyway).
        key_padding_mask: optional bool ``(B, S)`` from the key/value sequence (the **source**
            sequence in cross-attention): no query may attend to a padded key.
        causal: bool, also forbid attending to later positions (self-attention in a decoder).

    Returns:
        bool ``(B, T, S)`` (or ``(1, T, S)`` when only ``causal`` is given), or None when there
        is nothing to mask.

    Raises:
        ValueError: if ``causal`` is set but no lengths are known (pass at least one mask, or use
            :func:`causal_mask` directly).
    """
    query_part = None if query_padding_mask is None else ops.expand_dims(query_padding_mask, -1)
    key_part = None if key_padding_mask is None else ops.expand_dims(key_padding_mask, -2)
    causal_part = None
    if causal:
        if query_padding_mask is None and key_padding_mask is None:
            raise ValueError(
                "`causal=True` needs `query_padding_mask` or `key_padding_mask` to know the "
                "lengths; use causal_mask(T) on its own otherwise."
            )
        reference_query = query_padding_mask if query_padding_mask is not None else key_padding_mask
        reference_key = key_padding_mask if key_padding_mask is not None else query_padding_mask
        causal_part = ops.expand_dims(causal_mask(int(reference_query.shape[-1]), int(reference_key.shape[-1])), 0)
    return combine_masks(query_part, key_part, causal_part)


def masked_softmax(scores, mask=None, axis: int = -1):
    """Softmax over ``axis`` in which masked positions get a weight of exactly 0.

    Every attention layer of the course turns scores into weights here: Luong's and Bahdanau's
    (one decoder state over the source positions) and scaled dot-product attention (every query
    over every key).

    Masked scores are replaced by a large negative number before the softmax, so they underflow
    to 0 and the other weights of the row sum to 1. A row with **no** allowed position would come
    out uniform that way (every score equally negative); it gets all-zero weights instead, so
    nothing is averaged from positions the mask forbids. The softmax runs in float32 whatever the
    scores' dtype (float16 cannot hold the large negative number) and returns that dtype.

    Args:
        scores: float ``(..., S)`` alignment scores (before the softmax).
        mask: optional bool, broadcastable to ``scores``; True = may attend. None = a plain
            softmax.
        axis: int, the axis to normalise over (the key / source positions). Defaults to -1.

    Returns:
        float, the shape and dtype of ``scores``: each row sums to 1 over its allowed positions,
        or is all zeros if it has none.
    """
    dtype = scores.dtype
    scores = ops.cast(scores, "float32")
    if mask is None:
        return ops.cast(ops.softmax(scores, axis=axis), dtype)
    mask = ops.cast(mask, "bool")
    scores = ops.where(mask, scores, ops.full_like(scores, -1e9))  # exp(-1e9 - max) is exactly 0
    weights = ops.where(mask, ops.softmax(scores, axis=axis), ops.zeros_like(scores))  # fully masked rows -> 0
    return ops.cast(weights, dtype)


def keras_mask(tensor):
    """The padding mask Keras carries along with ``tensor``, or None.

    A layer that makes a mask (``Embedding(mask_zero=True)``, ``PositionalEmbedding``) or passes
    one on (``TransformerEncoder``) attaches it to its eager output; the next layer receives it as
    ``mask``. Keras keeps it as the tensor's ``_keras_mask`` attribute or, for tensors that take
    no attributes (JAX arrays), in a table of its own keyed by the tensor. Keras has no public
    function for reading it, so this one reads both places (tested with Keras 3.8 to 3.15, on
    TensorFlow, JAX and PyTorch).

    Args:
        tensor: an eager output of a Keras layer ``(B, T, ...)``.

    Returns:
        bool ``(B, T)`` (True = real token), or None when no mask was attached.
    """
    mask = getattr(tensor, "_keras_mask", None)
    if mask is not None:
        return mask
    try:
        from keras.src.backend.common import global_state
    except ImportError:  # a Keras that keeps masks only as the attribute
        return None
    table = global_state.get_global_attribute("_keras_mask_dict")
    return None if table is None else table.get(id(tensor))
