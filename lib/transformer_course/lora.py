"""Low-rank adaptation (LoRA), written out on each projection's whole matrix, and its merge.

Hu et al., 2021, *LoRA: Low-Rank Adaptation of Large Language Models*, §4.1: a pre-trained weight
matrix W (d × k) stays frozen, and fine-tuning learns a change of rank r ≪ min(d, k),

    h = x W + (α / r) · x A B,    A (d × r), B (r × k),

with B starting at zero (so the adapted model starts as the pre-trained one) and A random. Only
A and B train: r (d + k) numbers instead of d k.

The course's attention projections are ``keras.layers.EinsumDense`` layers whose kernels have
three axes: ``(E, N, H)`` for the queries, keys and values, ``(N, H, E)`` for the output. Keras'
own ``EinsumDense.enable_lora(r)`` learns A of the kernel's shape but its last axis, times B
``(r, last axis)``: on the output projection that is the matrix above (A ``(N·H, r)``, B
``(r, E)``), but on the query projection it is A ``(E, N, r)`` and B ``(r, H)``: one rank-r change
per head, and the change of the E × N·H matrix has rank up to N·r. :class:`LoRA` reads every
kernel as the matrix it is, the input's axes × the output's axes, whatever its layout (tested
equal to Keras' on the output projection, where the two coincide).
"""

from __future__ import annotations

import math

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
from keras import ops

from ._validation import check_integer, check_positive

__all__ = ["LoRA", "add_lora", "merge_lora", "lora_weights"]


def _input_axes(projection) -> int:
    """How many leading axes of ``projection``'s kernel the input's last axes contract with."""
    if isinstance(projection, keras.layers.EinsumDense):
        inputs, rest = projection.equation.split(",")
        kernel, outputs = rest.split("->")
        contracted = [letter for letter in kernel if letter in inputs and letter not in outputs]
        if kernel[: len(contracted)] != "".join(contracted) or not inputs.endswith("".join(contracted)):
            raise ValueError(
                "`projection` must contract the input's last axes with its kernel's first axes, in order; "
                f"received the equation {projection.equation!r}."
            )
        return len(contracted)
    if isinstance(projection, keras.layers.Dense):
        return 1
    raise TypeError(f"`projection` must be a keras.layers.Dense or EinsumDense; received {type(projection).__name__}.")


@keras.saving.register_keras_serializable(package="transformer_course")
class LoRA(keras.layers.Layer):
    """A frozen ``Dense`` or ``EinsumDense`` projection plus a trainable rank-r change of its matrix.

    ``LoRA(projection, rank)(x)`` is ``projection(x) + (alpha / rank) · x A B``, with the kernel
    read as a matrix: its leading axes (those the input's last axes contract with, product d)
    by the rest (product k). It is computed as the projection's own product with the merged
    kernel ``W + (alpha / rank) A B`` (:meth:`merged_kernel`, formed once a call, as Keras'
    ``enable_lora`` does), then its bias and activation. A is ``(d, rank)``, drawn from
    ``a_initializer`` (Keras' choice, He-uniform, by default); B is ``(rank, k)``, zeros: the
    layer starts equal to the projection.
    The projection is frozen (kernel and bias); A and B are the layer's only trainable weights.

    Args:
        projection: a built ``keras.layers.Dense`` or ``EinsumDense`` (equation of the form
            ``"...in,in out->...out"``, as every projection of the course's attention layers).
        rank: int r >= 1.
        alpha: float > 0, the scale's numerator (None: ``rank``, so α / r = 1, as Keras' default).
        rank_stabilized: bool, the scale α / √r instead of α / r (**rsLoRA**, Kalajdzievski, 2023,
            "A Rank Stabilization Scaling Factor for Fine-Tuning with LoRA", §3: with α / r the
            change's size falls as r grows, so higher ranks learn slower at one rate; α / √r keeps
            it steady, and a rank sweep at one α then varies the rank alone).
        a_initializer: a Keras initializer for A.
        b_initializer: a Keras initializer for B (zeros, the paper's choice and Keras', by default;
            anything else starts away from the projection, as a test of the layer may want).
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        inputs: float ``(..., *input axes)``, what the projection takes.

    Returns:
        float, the projection's output shape: ``(B, T, N, H)`` for a query projection.

    Raises:
        TypeError: for a projection that is neither ``Dense`` nor ``EinsumDense``.
        ValueError: for an unbuilt projection, one whose equation does not contract the input's
            last axes with the kernel's first ones, a quantized one, a non-positive ``rank`` or
            ``alpha``.

    Source: Hu et al., 2021, §4.1 (A random, B zero, the scale α / r); Kalajdzievski, 2023 (α / √r).

    Example:
        >>> import numpy as np
        >>> query = keras.layers.EinsumDense("bte,enh->btnh", (None, 4, 8))
        >>> query.build((None, None, 32))
        >>> adapted = LoRA(query, rank=2)
        >>> x = np.ones((1, 3, 32), "float32")
        >>> tuple(adapted(x).shape), [tuple(w.shape) for w in adapted.trainable_weights]
        ((1, 3, 4, 8), [(32, 2), (2, 32)])
        >>> bool(np.allclose(adapted(x), query(x)))  # B = 0: the projection itself, to begin with
        True
    """

    def __init__(
        self,
        projection,
        rank,
        alpha=None,
        a_initializer="he_uniform",
        b_initializer="zeros",
        rank_stabilized=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.input_axes = _input_axes(projection)
        if not projection.built:
            raise ValueError(f"`projection` must be built first; received an unbuilt {type(projection).__name__}.")
        if getattr(projection, "quantization_mode", None) is not None:
            raise ValueError(f"`projection` must be a float layer; received one in {projection.quantization_mode}.")
        self.rank = check_integer("rank", rank)
        self.alpha = check_positive("alpha", rank if alpha is None else alpha)
        self.rank_stabilized = bool(rank_stabilized)
        self.a_initializer = keras.initializers.get(a_initializer)
        self.b_initializer = keras.initializers.get(b_initializer)
        self.projection = projection
        for weight in projection.weights:
            weight.trainable = False
        kernel_shape = tuple(projection.kernel.shape)
        self.kernel_shape = kernel_shape
        self.supports_masking = True  # as the course's projections: a padding mask rides along to attention
        self.fan_in = math.prod(kernel_shape[: self.input_axes])
        self.fan_out = math.prod(kernel_shape[self.input_axes :])

    @property
    def scale(self) -> float:
        """α / r, or α / √r with ``rank_stabilized``."""
        return self.alpha / (math.sqrt(self.rank) if self.rank_stabilized else self.rank)

    def build(self, inputs_shape=None):
        self.lora_a = self.add_weight(
            name="lora_a", shape=(self.fan_in, self.rank), initializer=self.a_initializer, dtype="float32"
        )
        self.lora_b = self.add_weight(
            name="lora_b", shape=(self.rank, self.fan_out), initializer=self.b_initializer, dtype="float32"
        )
        super().build(inputs_shape)

    def call(self, inputs):
        # x (W + (α / r) A B): the merged kernel is formed once a step (a d × r by r × k product) and the
        # projection's own product applied with it, as Keras' enable_lora does; the same outputs as
        # x W + (α / r) (x A) B, without two more products over every token.
        kernel = ops.cast(self.merged_kernel(), inputs.dtype)
        if isinstance(self.projection, keras.layers.EinsumDense):
            outputs = ops.einsum(self.projection.equation, inputs, kernel)
        else:
            outputs = ops.matmul(inputs, kernel)
        if self.projection.bias is not None:
            outputs = outputs + ops.cast(self.projection.bias, outputs.dtype)
        return self.projection.activation(outputs) if self.projection.activation is not None else outputs

    def merged_kernel(self):
        """The projection's kernel with the change folded in, ``W + (α / r) · A B``, in the kernel's shape."""
        change = ops.reshape(ops.matmul(self.lora_a, self.lora_b), self.kernel_shape)
        return self.projection.kernel + ops.cast(self.scale, self.projection.kernel.dtype) * change

    def compute_output_shape(self, inputs_shape):
        return self.projection.compute_output_shape(inputs_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "projection": keras.layers.serialize(self.projection),
            "rank": self.rank,
            "alpha": self.alpha,
            "rank_stabilized": self.rank_stabilized,
            "a_initializer": keras.initializers.serialize(self.a_initializer),
            "b_initializer": keras.initializers.serialize(self.b_initializer),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)  # the caller's config stays whole
        return cls(keras.layers.deserialize(config.pop("projection")), **config)  # built from its build config


_ATTENTION_PROJECTIONS = ("query_dense", "key_dense", "value_dense", "output_dense")
_FEEDFORWARD_PROJECTIONS = ("gate", "up", "down")  # a LlamaDecoder's SwiGLU network


def _replace(owner, attribute: str, layer) -> None:
    """Set a sub-layer of a built layer, as Keras' own ``enable_lora`` adds weights to one: unlocked, then locked."""
    owner._tracker.unlock()
    try:
        setattr(owner, attribute, layer)
    finally:
        owner._tracker.lock()


def add_lora(
    model, rank: int, alpha=None, feedforward: bool = False, seed: int | None = None, rank_stabilized: bool = False
) -> list[LoRA]:
    """Freeze every weight of a language model and give its projections trainable low-rank changes.

    Each decoder block's attention projections (queries, keys, values, output) are wrapped in
    :class:`LoRA`; with ``feedforward``, the SwiGLU network's three matrices too (Hu et al. adapted
    the attention alone; Thinking Machines' "LoRA Without Regret", 2025, finds the feed-forward
    layers matter as much). Every other weight is frozen: the embeddings, the norms, the
    unwrapped projections. A classifier head built on the model afterwards trains as usual.

    Args:
        model: a built :class:`~transformer_course.language_model.LanguageModel` with
            ``architecture="llama"`` (its blocks' projections are Keras layers).
        rank: int r >= 1.
        alpha: float > 0 (None: ``rank``).
        feedforward: bool, adapt the feed-forward networks too.
        seed: int, seeds the A matrices (None: Keras' global seed).
        rank_stabilized: bool, every adapter's scale α / √r (rsLoRA) instead of α / r.

    Returns:
        list of the :class:`LoRA` layers added, block by block.

    Raises:
        ValueError: for a model without ``"llama"`` blocks, or one already adapted.

    An adapted model trains and predicts as any Keras model, but its ``.keras`` file would not
    know the LoRA layers: save :func:`merge_lora`'s copy (or the adapters' weights).

    Example:
        >>> from transformer_course.language_model import LanguageModel
        >>> lm = LanguageModel(30, 8, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="llama")
        >>> adapters = add_lora(lm, rank=2)
        >>> len(adapters), sum(int(ops.size(w)) for w in lm.trainable_weights)  # 2 blocks, 4 projections, 2 (16 + 16)
        (8, 512)
    """
    blocks = getattr(model, "decoder_blocks", None) or []
    if not blocks or getattr(model, "architecture", None) != "llama":
        raise ValueError(
            "`model` must be a LanguageModel with architecture='llama'; received "
            f"{type(model).__name__} with architecture={getattr(model, 'architecture', None)!r}."
        )
    if lora_weights(model):
        raise ValueError("`model` already has LoRA layers; add them once (merge_lora folds them in).")
    for weight in model.weights:
        weight.trainable = False
    adapters = []
    for index, block in enumerate(blocks):
        owners = [(block.attention, _ATTENTION_PROJECTIONS)]
        if feedforward:
            owners.append((block.feedforward, _FEEDFORWARD_PROJECTIONS))
        for owner, attributes in owners:
            for attribute in attributes:
                initializer = "he_uniform" if seed is None else keras.initializers.HeUniform(seed=seed + len(adapters))
                adapter = LoRA(getattr(owner, attribute), rank, alpha, a_initializer=initializer,
                               rank_stabilized=rank_stabilized,
                               name=f"lora_{index + 1}_{getattr(owner, attribute).name}")  # fmt: skip
                adapter.build()
                _replace(owner, attribute, adapter)
                adapters.append(adapter)
    return adapters


def _adapters(model) -> list[LoRA]:
    """The :class:`LoRA` layers of a language model's blocks, in block order."""
    found = []
    for block in getattr(model, "decoder_blocks", None) or []:
        owners = ((getattr(block, "attention", None), _ATTENTION_PROJECTIONS),
                  (getattr(block, "feedforward", None), _FEEDFORWARD_PROJECTIONS))  # fmt: skip
        for owner, attributes in owners:
            found.extend(getattr(owner, name) for name in attributes if isinstance(getattr(owner, name, None), LoRA))
    return found


def lora_weights(model) -> list:
    """The A and B matrices of every :class:`LoRA` layer of a language model's blocks (empty when none).

    Args:
        model: a :class:`~transformer_course.language_model.LanguageModel`.

    Returns:
        list of Keras variables: each adapter's A ``(d, r)`` then B ``(r, k)``, block by block.

    Example:
        >>> from transformer_course.language_model import LanguageModel
        >>> lm = LanguageModel(30, 8, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="llama")
        >>> len(lora_weights(lm)), len(lora_weights(lm)) < len(lora_weights(add_lora(lm, 2) and lm))
        (0, True)
    """
    return [weight for adapter in _adapters(model) for weight in (adapter.lora_a, adapter.lora_b)]


def merge_lora(model):
    """A copy of an adapted language model with every change folded into its kernel: no LoRA left.

    Each adapted projection's kernel becomes ``W + (α / r) · A B``; every other weight is copied.
    The copy computes what the adapted model computes (to float rounding) at the cost of the
    original model: the deployment step of Hu et al., §4.1 ("no additional inference latency").

    Args:
        model: a :class:`~transformer_course.language_model.LanguageModel` after :func:`add_lora`.

    Returns:
        a new ``LanguageModel`` of the same configuration, unadapted, every weight trainable.

    Raises:
        ValueError: for a model without LoRA layers.

    Example:
        >>> import numpy as np
        >>> from transformer_course.language_model import LanguageModel
        >>> lm = LanguageModel(30, 8, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="llama")
        >>> adapters = add_lora(lm, rank=2)
        >>> _ = adapters[0].lora_b.assign(np.ones((2, 16), "float32"))  # a change to fold in
        >>> ids = np.array([[3, 4, 5]])
        >>> merged = merge_lora(lm)
        >>> bool(np.allclose(merged(ids), lm(ids), atol=1e-6)), len(lm.weights) - len(merged.weights)
        (True, 16)
    """
    adapters = _adapters(model)
    if not adapters:
        raise ValueError("`model` has no LoRA layers to merge; add them with add_lora first.")
    merged = {id(adapter.projection.kernel): adapter.merged_kernel() for adapter in adapters}
    own = {id(weight) for weight in lora_weights(model)}
    values = [merged.get(id(weight), weight) for weight in model.weights if id(weight) not in own]
    copy = type(model).from_config(model.get_config())
    copy.set_weights([ops.convert_to_numpy(value) for value in values])
    return copy
