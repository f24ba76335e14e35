"""Images as sequences of patches: the Vision Transformer (notebook 10).

* :func:`extract_patches` — cut images into non-overlapping square patches, each flattened into
  one vector: the "words" of a Vision Transformer (NumPy, written with reshape and transpose).
* :class:`PatchEmbedding` — the same cut inside a Keras layer, followed by one linear projection
  shared by every patch (the same as a ``Conv2D`` whose kernel and stride are the patch size).
* :class:`ClassTokenAndPositions` — a learned ``[CLS]`` vector in front of the patches, and a
  learned position embedding added to every token.
* :class:`VisionTransformer` — patches → pre-norm ``TransformerEncoder`` blocks → a classifier on
  the ``[CLS]`` output.
* :func:`attention_maps` and :func:`attention_rollout` — what the model attends to, layer by
  layer and through the whole stack.
* :func:`shift_images` and :class:`ImageBatches` — random small shifts, the light augmentation
  of notebook 10, and shuffled training batches that apply them afresh every epoch.

Shape letters (notebook 04's table): B batch, height × width image size in pixels, C channels, P
patch size, M = (height/P)·(width/P) patches, T = M + 1 tokens (with ``[CLS]``), E model width,
N heads, D encoder blocks (the depth).

References:
    Dosovitskiy et al., 2021, "An Image is Worth 16x16 Words: Transformers for Image Recognition
    at Scale", ICLR, §3.1 (patches, their linear embedding, the class token, Eq. 1-4) and
    Appendix D.3 (position embeddings). https://arxiv.org/abs/2010.11929
    Abnar and Zuidema, 2020, "Quantifying Attention Flow in Transformers", ACL, §3 (attention
    rollout). https://arxiv.org/abs/2005.00928
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_model_sizes
from .pooling import ClassTokenOutput
from .transformer import TransformerEncoder

__all__ = [
    "extract_patches",
    "PatchEmbedding",
    "ClassTokenAndPositions",
    "VisionTransformer",
    "attention_maps",
    "attention_rollout",
    "shift_images",
    "ImageBatches",
]


def _check_image_shape(shape, patch_size: int) -> tuple[int, int, int]:
    """(rows of patches, columns of patches, channels) for images of ``shape``, or a clear error."""
    if len(shape) != 4:
        raise ValueError(f"`images` must have shape (batch, height, width, channels); received shape {tuple(shape)}.")
    _, height, width, channels = shape
    for name, size in (("height", height), ("width", width)):
        if size is None:
            raise ValueError(f"the image {name} must be known to cut patches; received shape {tuple(shape)}.")
        if size % patch_size:
            raise ValueError(
                f"the image {name} {size} is not divisible by `patch_size` {patch_size}; "
                f"crop or pad the images to a multiple of {patch_size}."
            )
    return height // patch_size, width // patch_size, channels


def extract_patches(images, patch_size: int) -> np.ndarray:
    """Cut images into non-overlapping ``patch_size × patch_size`` patches, flattened row by row.

    Patch n is the n-th patch reading left to right, top to bottom; its vector lists the
    patch's pixels row by row, each pixel's channels together — the order of
    ``keras.ops.image.extract_patches`` and of a ``Conv2D`` kernel ``(P, P, C, E)``.

    Args:
        images: array ``(B, height, width, C)`` (channels last).
        patch_size: int P >= 1; must divide height and width.

    Returns:
        array ``(B, M, P·P·C)`` of the input's dtype, M = (height/P)·(width/P).

    Raises:
        ValueError: if ``images`` is not rank 4, or height or width is not divisible by ``patch_size``
            (the message names the size and the patch size).
    """
    patch_size = check_integer("patch_size", patch_size)
    images = np.asarray(images)
    rows, columns, channels = _check_image_shape(images.shape, patch_size)
    patches = images.reshape(len(images), rows, patch_size, columns, patch_size, channels)
    patches = patches.transpose(0, 1, 3, 2, 4, 5)  # (B, rows, columns, P, P, C): each patch's pixels together
    return patches.reshape(len(images), rows * columns, patch_size * patch_size * channels)


@keras.saving.register_keras_serializable(package="transformer_course")
class PatchEmbedding(keras.layers.Layer):
    """Cut images into patches and map each patch linearly to a vector of ``embed_dim`` numbers.

    Every patch is flattened (as :func:`extract_patches` does) and multiplied by one shared
    ``(P·P·C, E)`` kernel, plus a bias: ViT's Eq. 1, ``x_p E``. Written as a convolution, this is
    a ``Conv2D(E, kernel_size=P, strides=P)``: its kernel ``(P, P, C, E)`` reshaped to
    ``(P·P·C, E)`` is this layer's kernel.

    Args:
        patch_size: int P >= 1; must divide the image height and width.
        embed_dim: int E, the width of each patch's vector.
        kernel_initializer, bias_initializer: Keras initializers of the projection.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        images: float ``(B, height, width, C)``, channels last; height and width known when the layer is built.

    Returns:
        float ``(B, M, E)``, M = (height/P)·(width/P), patches in reading order.

    Raises:
        ValueError: for a ``patch_size`` or ``embed_dim`` that is not a positive integer, images
            that are not rank 4, or an image height or width that ``patch_size`` does not divide
            (the message names both numbers).

    Example:
        >>> tuple(PatchEmbedding(patch_size=2, embed_dim=16)(keras.ops.ones((3, 8, 8, 1))).shape)
        (3, 16, 16)
    """

    def __init__(self, patch_size, embed_dim, kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.patch_size = check_integer("patch_size", patch_size)
        self.embed_dim = check_integer("embed_dim", embed_dim)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)

    def build(self, images_shape):
        self.grid = _check_image_shape(images_shape, self.patch_size)  # (rows, columns, C)
        self.projection = keras.layers.Dense(
            self.embed_dim,
            kernel_initializer=self.kernel_initializer,
            bias_initializer=self.bias_initializer,
            dtype=self.dtype_policy,
            name="projection",
        )
        self.projection.build((None, None, self.patch_size * self.patch_size * self.grid[2]))
        super().build(images_shape)

    def call(self, images):
        rows, columns, channels = self.grid
        size = self.patch_size
        patches = ops.reshape(images, (-1, rows, size, columns, size, channels))
        patches = ops.transpose(patches, (0, 1, 3, 2, 4, 5))  # (B, rows, columns, P, P, C)
        patches = ops.reshape(patches, (-1, rows * columns, size * size * channels))  # (B, M, P·P·C)
        return self.projection(patches)  # (B, M, E)

    def compute_output_shape(self, images_shape):
        rows, columns, _ = _check_image_shape(images_shape, self.patch_size)
        return (images_shape[0], rows * columns, self.embed_dim)

    def get_config(self):
        return {
            **super().get_config(),
            "patch_size": self.patch_size,
            "embed_dim": self.embed_dim,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }


@keras.saving.register_keras_serializable(package="transformer_course")
class ClassTokenAndPositions(keras.layers.Layer):
    """Put a learned ``[CLS]`` vector in front of the patch vectors, then add learned positions.

    ViT's Eq. 1: ``z_0 = [x_class; x_p^1 E; …; x_p^M E] + E_pos``. The ``[CLS]`` vector starts
    at zero and the position table from a normal distribution (standard deviation 0.02), as in
    the paper's code; both are trained with the rest of the model. Position t's vector is row t
    of the table (row 0 belongs to ``[CLS]``); the layer has no idea of 2-D neighbourhood — what
    it learns about it is learned from the data.

    Args:
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        patches: float ``(B, M, E)`` with M known when the layer is built.

    Returns:
        float ``(B, M + 1, E)``; position 0 is ``[CLS]``.

    Raises:
        ValueError: for an input that is not rank 3 or whose M or E is unknown.

    Example:
        >>> tuple(ClassTokenAndPositions()(np.ones((1, 4, 8), "float32")).shape)  # 4 patches, then [CLS] in front
        (1, 5, 8)
    """

    def build(self, patches_shape):
        if len(patches_shape) != 3 or patches_shape[1] is None or patches_shape[2] is None:
            raise ValueError(
                "`patches` must have shape (batch, patches, width) with known patches and width; "
                f"received {tuple(patches_shape)}."
            )
        _, patches, width = patches_shape
        self.class_token = self.add_weight(shape=(width,), initializer="zeros", name="class_token")
        self.position_embedding = self.add_weight(
            shape=(patches + 1, width),
            initializer=keras.initializers.RandomNormal(stddev=0.02),
            name="position_embedding",
        )
        super().build(patches_shape)

    def call(self, patches):
        class_token = ops.cast(self.class_token, patches.dtype)
        class_column = ops.broadcast_to(class_token, (ops.shape(patches)[0], 1, ops.shape(class_token)[0]))
        tokens = ops.concatenate([class_column, patches], axis=1)  # (B, M + 1, E)
        return tokens + ops.cast(self.position_embedding, patches.dtype)

    def compute_output_shape(self, patches_shape):
        return (patches_shape[0], patches_shape[1] + 1, patches_shape[2])


def _image_size(image_size) -> tuple[int, int]:
    if isinstance(image_size, (tuple, list)) and len(image_size) == 2:
        return check_integer("image_size[0]", image_size[0]), check_integer("image_size[1]", image_size[1])
    size = check_integer("image_size", image_size)
    return size, size


@keras.saving.register_keras_serializable(package="transformer_course")
class VisionTransformer(keras.Model):
    """A Vision Transformer classifier: patches → pre-norm encoder blocks → ``[CLS]`` → classes.

    ``PatchEmbedding`` → ``ClassTokenAndPositions`` → dropout → ``num_layers`` pre-norm
    ``TransformerEncoder`` blocks (GELU) → LayerNorm → the ``[CLS]`` output → a softmax layer
    (Dosovitskiy et al., 2021, §3.1, Eq. 1-4; the head is one linear layer, as when fine-tuning).
    Every patch is a real token: there is no padding and no mask.

    A functional model with a constructor of its own: ``get_config`` returns the arguments below,
    so ``model.save("vit.keras")`` and ``keras.models.load_model`` round-trip with no
    ``custom_objects``. Its layers are named ``patch_embedding``, ``class_token_and_positions``,
    ``encoder_1`` …, ``final_norm``, ``class_token_output`` and ``output``.

    Args:
        image_size: int, or ``(height, width)``, in pixels.
        channels: int C.
        patch_size: int P; must divide the height and the width.
        num_classes: int, the classes.
        embed_dim, num_heads, intermediate_dim: ints E, N (divides E) and F; keyword only, as every
            argument after them.
        num_layers: int D, encoder blocks.
        dropout: float in [0, 1), on the embeddings, the attention weights and every sub-layer's
            output.
        **kwargs: ``name``, ``trainable``, passed to ``keras.Model``.

    Call arguments:
        images: float ``(B, height, width, C)``.

    Returns:
        float32 ``(B, num_classes)``, class probabilities.

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), ``num_heads`` not
            dividing ``embed_dim``, or an image size ``patch_size`` does not divide (naming both).

    Example:
        >>> model = VisionTransformer(8, 1, 4, 10, embed_dim=16, num_heads=2, intermediate_dim=32, num_layers=2)
        >>> len(model.encoder_blocks), model.output_shape
        (2, (None, 10))
    """

    def __init__(
        self,
        image_size,
        channels,
        patch_size,
        num_classes,
        *,
        embed_dim=64,
        num_heads=4,
        intermediate_dim=128,
        num_layers=4,
        dropout=0.1,
        **kwargs,
    ):
        height, width = _image_size(image_size)
        check_model_sizes(
            embed_dim,
            num_heads,
            dropout,
            channels=channels,
            patch_size=patch_size,
            num_classes=num_classes,
            intermediate_dim=intermediate_dim,
            num_layers=num_layers,
        )
        _check_image_shape((None, height, width, channels), patch_size)
        images = keras.Input(shape=(height, width, channels), name="images")
        patch_embedding = PatchEmbedding(patch_size, embed_dim, name="patch_embedding")
        class_token_and_positions = ClassTokenAndPositions(name="class_token_and_positions")
        x = class_token_and_positions(patch_embedding(images))
        x = keras.layers.Dropout(dropout, name="embedding_dropout")(x)  # made after: layers draw seeds when made
        encoder_blocks = []
        for index in range(num_layers):
            encoder_blocks.append(
                TransformerEncoder(
                    intermediate_dim,
                    num_heads,
                    dropout=dropout,
                    activation="gelu",
                    normalize_first=True,
                    name=f"encoder_{index + 1}",
                )
            )
            x = encoder_blocks[-1](x)
        final_norm = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")
        x = ClassTokenOutput(name="class_token_output")(final_norm(x))
        output_layer = keras.layers.Dense(num_classes, activation="softmax", dtype="float32", name="output")
        super().__init__(inputs=images, outputs=output_layer(x), **kwargs)
        self.patch_embedding, self.class_token_and_positions = patch_embedding, class_token_and_positions
        self.encoder_blocks, self.final_norm, self.output_layer = encoder_blocks, final_norm, output_layer
        self.image_size = (height, width) if height != width else height
        self.channels, self.patch_size, self.num_classes = channels, patch_size, num_classes
        self.embed_dim, self.num_heads, self.intermediate_dim = embed_dim, num_heads, intermediate_dim
        self.num_layers, self.dropout = num_layers, dropout

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "image_size": self.image_size,
            "channels": self.channels,
            "patch_size": self.patch_size,
            "num_classes": self.num_classes,
            "embed_dim": self.embed_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def attention_maps(model: keras.Model, images) -> np.ndarray:
    """Every encoder block's attention weights for ``images``, at inference (no dropout).

    Args:
        model: a :class:`VisionTransformer`.
        images: float ``(B, height, width, C)``.

    Returns:
        float32 ``(D, B, N, T, T)``, T = patches + 1; row t is a distribution over the
        tokens that position t reads (token 0 is ``[CLS]``).
    """
    x = model.class_token_and_positions(model.patch_embedding(ops.convert_to_tensor(images)))
    maps = []
    for block in model.encoder_blocks:
        x, weights = block(x, training=False, return_attention_scores=True)
        maps.append(ops.convert_to_numpy(weights))
    return np.stack(maps).astype("float32")


def attention_rollout(attention_weights) -> np.ndarray:
    """Attention rollout: the share of each input token in each position's output, across layers.

    Per layer: average the heads, add the identity (the residual connection carries each token's
    own vector past the attention), renormalise the rows to sum to 1; then multiply the layers'
    matrices from the first layer to the last.

    Args:
        attention_weights: array ``(D, B, N, T, T)`` or a list of D arrays
            ``(B, N_heads, T, T)``, each row a distribution over keys.

    Returns:
        float64 ``(B, T, T)``: row t says how much of position t's output comes from each input
        token; every row sums to 1.

    Raises:
        ValueError: if the weights are not ``(D, B, N, T, T)`` with square attention maps.
    """
    weights = np.asarray([np.asarray(layer, dtype="float64") for layer in attention_weights])
    if weights.ndim != 5 or weights.shape[-1] != weights.shape[-2]:
        raise ValueError(
            f"`attention_weights` must have shape (layers, batch, heads, T, T); received shape {weights.shape}."
        )
    tokens = weights.shape[-1]
    rollout = np.broadcast_to(np.eye(tokens), weights.shape[1:2] + (tokens, tokens)).copy()
    for layer in weights:
        mixed = layer.mean(axis=1) + np.eye(tokens)  # heads averaged, residual added
        mixed /= mixed.sum(axis=-1, keepdims=True)
        rollout = mixed @ rollout  # this layer's mixing applied on top of the layers below
    return rollout


def shift_images(images, rng: np.random.Generator, max_shift: int = 1) -> np.ndarray:
    """Move each image by a random whole number of pixels, filling the uncovered border with 0.

    Each image gets its own vertical and horizontal shift, drawn uniformly from
    ``-max_shift .. max_shift``. A digit moved by a pixel is still the same digit: training on
    shifted copies teaches a model a little of the translation invariance a convolution has
    built in.

    Args:
        images: array ``(B, height, width, C)``.
        rng: ``numpy.random.Generator``, the source of the shifts.
        max_shift: int >= 0, pixels, smaller than height and width.

    Returns:
        array of ``images``' shape and dtype.

    Raises:
        ValueError: for images that are not rank 4, or a ``max_shift`` that is negative or not
            smaller than the image.
    """
    images = np.asarray(images)
    if images.ndim != 4:
        raise ValueError(f"`images` must have shape (batch, height, width, channels); received shape {images.shape}.")
    max_shift = check_integer("max_shift", max_shift, minimum=0)
    if max_shift >= min(images.shape[1:3]):
        raise ValueError(
            f"`max_shift` must be smaller than the image ({images.shape[1]}×{images.shape[2]}); received {max_shift}."
        )
    shifted = np.zeros_like(images)
    height, width = images.shape[1:3]
    for index, (down, right) in enumerate(rng.integers(-max_shift, max_shift + 1, size=(len(images), 2))):
        target_rows = slice(max(down, 0), height + min(down, 0))
        source_rows = slice(max(-down, 0), height - max(down, 0))
        target_columns, source_columns = (
            slice(max(right, 0), width + min(right, 0)),
            slice(max(-right, 0), width - max(right, 0)),
        )
        shifted[index, target_rows, target_columns] = images[index, source_rows, source_columns]
    return shifted


class ImageBatches(keras.utils.PyDataset):
    """Shuffled training batches of images and labels, shifted afresh every epoch if asked.

    For ``model.fit`` (and :func:`~transformer_course.training.fit_best`) on NumPy arrays: each
    epoch visits every image once in a new order; with ``max_shift`` > 0 every image is moved by
    :func:`shift_images`, so no two epochs see the same pixels. Works with every Keras backend.

    With ``drop_remainder`` every batch has exactly ``batch_size`` images: the few images that do
    not fill a last batch sit out that epoch (a different few each epoch, as the order changes).
    A compiled (XLA) training step is then compiled for one batch shape instead of two.

    Args:
        images: array ``(B, height, width, C)``.
        labels: array ``(B,)`` (or ``(B, ...)``), kept in step with the images.
        batch_size: int, images per batch (the last batch of an epoch may be smaller unless
            ``drop_remainder``).
        seed: int, seeds the order and the shifts, so a run can be repeated.
        max_shift: int >= 0, pixels; 0 = no augmentation.
        drop_remainder: bool, only full batches (see above).

    Raises:
        ValueError: for images that are not rank 4, labels of another length, sizes that are
            not positive integers, or ``drop_remainder`` with fewer images than ``batch_size``.
    """

    def __init__(
        self, images, labels, batch_size: int, seed: int = 0, max_shift: int = 0, drop_remainder: bool = False, **kwargs
    ):
        super().__init__(**kwargs)
        self.images, self.labels = np.asarray(images), np.asarray(labels)
        if self.images.ndim != 4:
            raise ValueError(
                f"`images` must have shape (batch, height, width, channels); received shape {self.images.shape}."
            )
        if len(self.labels) != len(self.images):
            raise ValueError(
                f"`labels` must have one entry per image ({len(self.images)}); received {len(self.labels)}."
            )
        self.batch_size = check_integer("batch_size", batch_size)
        self.max_shift = check_integer("max_shift", max_shift, minimum=0)
        self.rng = np.random.default_rng(check_integer("seed", seed, minimum=0))
        self.drop_remainder = bool(drop_remainder)
        if self.drop_remainder and len(self.images) < self.batch_size:
            raise ValueError(
                f"`drop_remainder` needs at least `batch_size` ({self.batch_size}) images; "
                f"received {len(self.images)}, which would make no batch at all."
            )
        self.on_epoch_end()

    def __len__(self):
        if self.drop_remainder:
            return len(self.images) // self.batch_size
        return -(-len(self.images) // self.batch_size)

    def __getitem__(self, index):
        chosen = self.order[index * self.batch_size : (index + 1) * self.batch_size]
        images = self.images[chosen]
        if self.max_shift:
            images = shift_images(images, self.rng, self.max_shift)
        return images, self.labels[chosen]

    def on_epoch_end(self):
        self.order = self.rng.permutation(len(self.images))
