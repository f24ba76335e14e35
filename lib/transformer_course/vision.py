"""Images as sequences of patches, for the Vision Transformer (notebook 10).

* :func:`extract_patches` — cut images into non-overlapping square patches, each flattened into
  one vector: the "words" of a Vision Transformer.
* :func:`attention_rollout` — how much each input token feeds each output position, through a
  stack of attention layers.

Shape letters: B batch, H × W image size in pixels, C channels, P patch size, N = (H/P)·(W/P)
patches, L layers, T tokens.

References:
    Dosovitskiy et al., 2021, "An Image is Worth 16x16 Words: Transformers for Image Recognition
    at Scale", §3.1 (patches and their linear embedding). https://arxiv.org/abs/2010.11929
    Abnar and Zuidema, 2020, "Quantifying Attention Flow in Transformers", §3 (attention rollout).
"""

from __future__ import annotations

import numpy as np

from ._validation import check_integer

__all__ = ["extract_patches", "attention_rollout"]


def extract_patches(images, patch_size: int) -> np.ndarray:
    """Cut images into non-overlapping ``patch_size × patch_size`` patches, flattened row by row.

    Patch n is the n-th patch reading left to right, top to bottom; its vector lists the
    patch's pixels row by row, each pixel's channels together — the order of
    ``keras.ops.image.extract_patches``.

    Args:
        images: array ``(B, H, W, C)`` (channels last).
        patch_size: int P >= 1; must divide H and W.

    Returns:
        array ``(B, N, P·P·C)`` of the input's dtype, N = (H/P)·(W/P).

    Raises:
        ValueError: if ``images`` is not rank 4, or H or W is not divisible by ``patch_size``
            (the message names the size and the patch size).
    """
    patch_size = check_integer("patch_size", patch_size)
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(f"`images` must have shape (batch, height, width, channels); received shape {images.shape}.")
    batch, height, width, channels = images.shape
    for name, size in (("height", height), ("width", width)):
        if size % patch_size:
            raise ValueError(f"the image {name} {size} is not divisible by `patch_size` {patch_size}; "
                             f"crop or pad the images to a multiple of {patch_size}.")
    rows, columns = height // patch_size, width // patch_size
    patches = images.reshape(batch, rows, patch_size, columns, patch_size, channels)
    patches = patches.transpose(0, 1, 3, 2, 4, 5)  # (B, rows, columns, P, P, C): each patch's pixels together
    return patches.reshape(batch, rows * columns, patch_size * patch_size * channels)


def attention_rollout(attention_weights) -> np.ndarray:
    """Attention rollout: the share of each input token in each position's output, across layers.

    Per layer: average the heads, add the identity (the residual connection carries each token's
    own vector past the attention), renormalise the rows to sum to 1; then multiply the layers'
    matrices from the first layer to the last.

    Args:
        attention_weights: array ``(L, B, N_heads, T, T)`` or a list of L arrays
            ``(B, N_heads, T, T)``, each row a distribution over keys.

    Returns:
        float64 ``(B, T, T)``: row t says how much of position t's output comes from each input
        token; every row sums to 1.

    Raises:
        ValueError: if the weights are not ``(L, B, heads, T, T)`` with square attention maps.
    """
    weights = np.asarray([np.asarray(layer, dtype="float64") for layer in attention_weights])
    if weights.ndim != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError("`attention_weights` must have shape (layers, batch, heads, T, T); "
                         f"received shape {weights.shape}.")
    tokens = weights.shape[-1]
    rollout = np.broadcast_to(np.eye(tokens), weights.shape[1:2] + (tokens, tokens)).copy()
    for layer in weights:
        mixed = layer.mean(axis=1) + np.eye(tokens)  # heads averaged, residual added
        mixed /= mixed.sum(axis=-1, keepdims=True)
        rollout = mixed @ rollout  # this layer's mixing applied on top of the layers below
    return rollout
