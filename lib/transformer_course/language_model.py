"""A GPT-style language model: a stack of decoder blocks without cross-attention (notebook 09).

* :class:`LanguageModel` (and :func:`build_language_model`) — token ids in, next-token
  probabilities at every position out: ``PositionalEmbedding`` + ``TransformerDecoder`` blocks
  with causal self-attention only + an output layer tied to the token embedding.

Its scores live with the other metrics (:func:`~transformer_course.metrics.token_log_probabilities`,
:func:`~transformer_course.metrics.perplexity`, :func:`~transformer_course.metrics.bits_per_character`)
and its training rows with the other training helpers
(:func:`~transformer_course.training.running_text_chunks`,
:class:`~transformer_course.training.RowBatches`); the old names here still work, with a
DeprecationWarning.

Shape letters: B batch, T sequence length, E model width, V vocabulary.

References:
    Radford et al., 2018, "Improving Language Understanding by Generative Pre-Training", §3.1.
    Press and Wolf, 2017, "Using the Output Embedding to Improve Language Models" (tying).
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import importlib
import warnings

import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_model_sizes, check_positive, check_rate, renamed, renamed_config
from .pooling import LastTokenPooling
from .positional import PositionalEmbedding, TokenEmbedding
from .transformer import LlamaDecoder, RMSNorm, TiedTokenDistribution, TokenDistribution, TransformerDecoder

ARCHITECTURES = ("gpt", "llama")
POSITIONS = ("rotary", "learned", "none")  # how a "llama" model sees positions
LLAMA_ROTARY_MAX_WAVELENGTH = 10_000.0  # Touvron et al., 2023, as RoFormer (Su et al., 2021, §3.4.2)

__all__ = [
    "LanguageModel",
    "build_language_model",
    "language_model_classifier",
    "forward_weights",
    "compute_parameters",
    "training_flops_per_token",
]

# Names that moved to the module of their kind: still importable from here, with a DeprecationWarning.
MOVED = {
    "token_log_probabilities": "metrics",
    "perplexity": "metrics",
    "bits_per_character": "metrics",
    "compressor_bits_per_character": "metrics",
    "RowBatches": "training",
    "running_text_chunks": "training",
}


def __getattr__(name):
    if name not in MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = MOVED[name]
    warnings.warn(
        f"transformer_course.language_model.{name} moved to transformer_course.{module}.{name}; "
        f"import it from there (this name will go in the next release).",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(f"{__package__}.{module}"), name)


@keras.saving.register_keras_serializable(package="transformer_course")
class LanguageModel(keras.Model):
    """A decoder-only Transformer language model, trained to predict every next token at once.

    ``PositionalEmbedding`` → ``num_layers`` ``TransformerDecoder`` blocks with causal
    self-attention and no cross-attention → (``final_norm``) → dropout → a softmax over the
    vocabulary, tied to the token embedding by default (Radford et al., 2018, §3.1).

    A functional model with its parts as attributes (``token_embedding``, ``decoder_blocks``, a
    list, ``final_norm``, None without it, ``output_dropout`` and ``output_layer``; the converter of
    :mod:`transformer_course.gpt2_checkpoints` fills them) that owns its passes: the whole graph,
    and :meth:`call_with_cache`, which :class:`~transformer_course.generation.CachedLanguageModel`
    calls one step at a time.
    ``get_config`` returns the arguments below, so a ``.keras`` file reloads with no
    ``custom_objects``.

    Args:
        vocabulary_size: int V, ids ``0 .. V - 1`` (0 = padding). The former name, ``vocab_size``,
            still works, with a DeprecationWarning.
        sequence_length: int, the longest input T accepted.
        embed_dim, intermediate_dim, num_heads: ints E, F, N (N divides E); keyword only, as
            every argument after them.
        num_layers: int, decoder blocks.
        dropout: float in [0, 1), inside every block and before the output layer.
        tie_embeddings: bool, the output layer reuses the token embedding table (default True).
        normalize_first: bool, pre-norm blocks (LayerNorm before each sub-layer, GPT-2's order;
            Radford et al., 2019, §2.3) instead of post-norm (the default, the original
            Transformer's).
        final_norm: bool, a LayerNorm (``final_norm``) after the last block, as GPT-2 has: with
            pre-norm blocks the residual stream is never normalised otherwise.
        activation: the blocks' feed-forward activation: a name Keras knows (``"relu"``, the
            default) or a registered function (GPT-2: :func:`~transformer_course.transformer.gelu_approximate`).
        layer_norm_epsilon: float, every LayerNorm's epsilon (GPT-2: 1e-5).
        architecture: ``"gpt"`` (the default: the blocks above) or ``"llama"``: a token embedding
            with no position table (:class:`~transformer_course.positional.TokenEmbedding`),
            :class:`~transformer_course.transformer.LlamaDecoder` blocks (pre-norm RMSNorm, rotary
            positions, grouped-query attention, SwiGLU, no biases) and a final RMSNorm (Touvron et
            al., 2023, §2.2). ``normalize_first``, ``final_norm`` and ``activation`` are the GPT
            blocks' and must keep their defaults with it.
        num_key_value_heads: int G dividing N, the key/value heads of ``"llama"`` blocks (None:
            G = N, multi-head attention); must stay None with ``"gpt"``.
        positions: ``"rotary"``, ``"learned"`` or ``"none"``, how a ``"llama"`` model sees positions
            (None: ``"rotary"``): rotated queries and keys inside attention; GPT's learned table of
            ``sequence_length`` vectors added to the token embeddings and no rotation (the
            single-factor ablation of rotary positions: every other part stays Llama's); or
            nothing at all, the causal mask the only source of order (**NoPE**, Kazemnejad et al.,
            2023, "The Impact of Positional Encoding on Length Generalization in Transformers").
            Must stay None with ``"gpt"``, whose positions are always learned.
        rotary_max_wavelength: float > 0, the longest wavelength of the rotary positions of
            ``"llama"`` blocks (None: Llama's 10,000; keras-hub calls it ``rope_max_wavelength``,
            Llama 3 uses 500,000); must stay None with ``"gpt"`` and without rotary positions.
        rotary_scaling_factor: float > 0, rotary positions divided by it (None: 1, none):
            **Position Interpolation** (Chen et al., 2023, §2.2), a model trained on rows of L
            read at s·L with ``s``; weights are unchanged, so a trained model's weights load into
            one built with it. Must stay None with ``"gpt"`` and without rotary positions.
        **kwargs: ``name``, ``trainable``, passed to ``keras.Model``.

    Call arguments:
        token_ids: int ``(B, T)``, 0 = padding.

    Returns:
        float32 ``(B, T, V)``: at position t, P(token t + 1 | tokens ≤ t). Padding (id 0) is
        masked in self-attention; the causal mask keeps every position from seeing later ones.

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), ``num_heads`` not
            dividing ``embed_dim``, an unknown ``architecture``, or a GPT option given to a
            ``"llama"`` model (or ``num_key_value_heads``, ``positions``, ``rotary_max_wavelength`` or
            ``rotary_scaling_factor`` to a ``"gpt"`` one), ``positions`` other than ``"rotary"``,
            ``"learned"`` or ``"none"``, or a ``rotary_max_wavelength`` or ``rotary_scaling_factor``
            that is not a positive number or is given without rotary positions.

    Example:
        >>> model = LanguageModel(30, 8, embed_dim=16, intermediate_dim=32, num_heads=2, num_layers=2)
        >>> len(model.decoder_blocks), model.output_shape
        (2, (None, None, 30))
        >>> llama = LanguageModel(30, 8, embed_dim=16, intermediate_dim=24, num_heads=4, architecture="llama",
        ...                       num_key_value_heads=2)
        >>> type(llama.decoder_blocks[0]).__name__, type(llama.final_norm).__name__
        ('LlamaDecoder', 'RMSNorm')
    """

    def __init__(
        self,
        vocabulary_size=None,
        sequence_length=None,
        *,
        embed_dim=256,
        intermediate_dim=1024,
        num_heads=4,
        num_layers=2,
        dropout=0.1,
        tie_embeddings=True,
        normalize_first=False,
        final_norm=False,
        activation="relu",
        layer_norm_epsilon=1e-5,
        architecture="gpt",
        num_key_value_heads=None,
        rotary_max_wavelength=None,
        positions=None,
        rotary_scaling_factor=None,
        vocab_size=None,
        **kwargs,
    ):
        vocabulary_size = renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
        check_model_sizes(
            embed_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            sequence_length=sequence_length,
            num_layers=num_layers,
        )
        llama = _check_architecture(
            architecture,
            num_key_value_heads,
            rotary_max_wavelength,
            positions,
            rotary_scaling_factor,
            normalize_first=normalize_first,
            final_norm=final_norm,
            activation=activation,
        )
        if llama and positions is None:
            positions = "rotary"
        if positions == "rotary" and rotary_max_wavelength is None:
            rotary_max_wavelength = LLAMA_ROTARY_MAX_WAVELENGTH
        activation = keras.activations.get(activation)
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        if positions in ("rotary", "none"):  # positions enter inside attention, or nowhere: none in the embeddings
            token_embedding = TokenEmbedding(vocabulary_size, embed_dim, name="token_embedding")
        else:
            token_embedding = PositionalEmbedding(sequence_length, vocabulary_size, embed_dim, name="token_embedding")
        x = token_embedding(token_ids)
        decoder_blocks = []
        for index in range(num_layers):
            if llama:
                block = LlamaDecoder(
                    intermediate_dim,
                    num_heads,
                    num_key_value_heads or num_heads,
                    dropout=dropout,
                    rotary_max_wavelength=rotary_max_wavelength,
                    layer_norm_epsilon=layer_norm_epsilon,
                    rotary_scaling_factor=rotary_scaling_factor or 1.0,
                    name=f"decoder_{index + 1}",
                )
            else:
                block = TransformerDecoder(
                    intermediate_dim,
                    num_heads,
                    dropout=dropout,
                    activation=activation,
                    layer_norm_epsilon=layer_norm_epsilon,
                    normalize_first=normalize_first,
                    name=f"decoder_{index + 1}",
                )
            decoder_blocks.append(block)
            x = block(x)
        if llama:
            norm = RMSNorm(layer_norm_epsilon, name="final_norm")
        else:
            norm = (
                keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name="final_norm") if final_norm else None
            )
        if norm is not None:
            x = norm(x)
        output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        x = output_dropout(x)
        if tie_embeddings:
            output_layer = TiedTokenDistribution(vocabulary_size, name="output", dtype="float32")
            probabilities = output_layer(token_embedding(x, reverse=True))
        else:
            output_layer = TokenDistribution(vocabulary_size, name="output", dtype="float32")
            probabilities = output_layer(x)
        super().__init__(token_ids, probabilities, **kwargs)
        self.token_embedding, self.decoder_blocks, self.final_norm = token_embedding, decoder_blocks, norm
        self.output_dropout, self.output_layer = output_dropout, output_layer
        self.vocabulary_size, self.sequence_length, self.embed_dim = vocabulary_size, sequence_length, embed_dim
        self.intermediate_dim, self.num_heads, self.num_layers = intermediate_dim, num_heads, num_layers
        self.dropout, self.tie_embeddings, self.normalize_first = dropout, tie_embeddings, normalize_first
        self.activation, self.layer_norm_epsilon = activation, layer_norm_epsilon
        self.architecture, self.num_key_value_heads = architecture, num_key_value_heads
        self.rotary_max_wavelength, self.positions = rotary_max_wavelength, positions
        self.rotary_scaling_factor = rotary_scaling_factor

    def output_distribution(self, hidden):
        """The output layer on decoder states: float ``(B, T, E)`` -> float32 ``(B, T, V)``.

        The states are taken after the last block (and ``final_norm``); with tied embeddings the
        scores come from the token embedding turned around, then the output layer's bias and
        softmax.
        """
        return self.output_layer(self.token_embedding(hidden, reverse=True) if self.tie_embeddings else hidden)

    def initial_caches(self, batch_size, max_length: int, encoder_sequence=None, copies: int = 1) -> list:
        """Every decoder block's empty key/value cache: a list of float ``(B·K, 2, L, N, E // N)`` (G heads, not
        N, in a ``"llama"`` model with ``num_key_value_heads`` G).

        The arguments of every ``initial_caches`` of the course
        (:meth:`~transformer_course.translation.TranslationModel.initial_caches`); a language model
        has no encoder, so ``encoder_sequence`` must stay None. ``copies`` K repeats each row's cache.

        Raises:
            ValueError: for an ``encoder_sequence``.
        """
        return [block.initial_caches(batch_size, max_length, encoder_sequence, copies) for block in self.decoder_blocks]

    def call_with_cache(self, token_ids, caches: list, start_index, last_only: bool = False) -> tuple:
        """The model on new tokens at positions ``start_index ..``, attending over the cached ones (no dropout).

        The one pass over the decoder blocks besides the model's own graph, as keras-hub's
        ``GPT2CausalLM.call_with_cache``: each block writes the new positions' keys and values
        into its cache and attends over every position written so far.

        Args:
            token_ids: int ``(B, t)``, the new tokens (the whole prompt at first, then one a step).
            caches: list from :meth:`initial_caches` (or the previous call), one per block.
            start_index: int (or int scalar tensor), the position of ``token_ids[:, 0]``.
            last_only: bool, the output distribution at the last new position only.

        Returns:
            ``(probabilities, caches)``: float32 ``(B, t, V)`` (``(B, 1, V)`` with ``last_only``),
            and the updated caches.
        """
        x = self.token_embedding(token_ids, start_index=start_index)
        updated = []
        for block, cache in zip(self.decoder_blocks, caches, strict=True):
            x, cache = block(x, self_attention_cache=cache, self_attention_cache_update_index=start_index)
            updated.append(cache)
        x = x[:, -1:, :] if last_only else x
        if self.final_norm is not None:  # a pre-norm model (GPT-2's layout) normalises the last states
            x = self.final_norm(x)
        return self.output_distribution(x), updated

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "vocabulary_size": self.vocabulary_size,
            "sequence_length": self.sequence_length,
            "embed_dim": self.embed_dim,
            "intermediate_dim": self.intermediate_dim,
            "num_heads": self.num_heads,
            "num_layers": self.num_layers,
            "dropout": self.dropout,
            "tie_embeddings": self.tie_embeddings,
            "normalize_first": self.normalize_first,
            "final_norm": self.final_norm is not None and self.architecture == "gpt",
            "activation": keras.activations.serialize(self.activation),
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "architecture": self.architecture,
            "num_key_value_heads": self.num_key_value_heads,
            "rotary_max_wavelength": self.rotary_max_wavelength,
            "positions": self.positions,
            "rotary_scaling_factor": self.rotary_scaling_factor,
        }

    @classmethod
    def from_config(cls, config):
        config = renamed_config(config, vocab_size="vocabulary_size")
        return cls(**{**config, "activation": keras.activations.deserialize(config["activation"])})


def _check_architecture(
    architecture, num_key_value_heads, rotary_max_wavelength, positions, rotary_scaling_factor, **gpt_options
) -> bool:
    """True for a ``"llama"`` model; a ValueError for an unknown architecture or an option it does not take."""
    if architecture not in ARCHITECTURES:
        raise ValueError(f"`architecture` must be one of {ARCHITECTURES}; received {architecture!r}.")
    if architecture == "gpt":
        for name, value, what in (
            ("num_key_value_heads", num_key_value_heads, "grouped-query attention"),
            ("rotary_max_wavelength", rotary_max_wavelength, "rotary positions"),
            ("positions", positions, "rotary, learned or no positions"),
            ("rotary_scaling_factor", rotary_scaling_factor, "rotary positions"),
        ):
            if value is not None:
                raise ValueError(
                    f"`{name}` is an option of architecture='llama' ({what}); received {value!r} with "
                    "architecture='gpt'."
                )
        return False
    if rotary_max_wavelength is not None:
        check_positive("rotary_max_wavelength", rotary_max_wavelength)
    if positions not in (None, *POSITIONS):
        raise ValueError(f"`positions` must be one of {POSITIONS}; received {positions!r}.")
    if rotary_scaling_factor is not None:
        check_positive("rotary_scaling_factor", rotary_scaling_factor)
    rotary_options = {"rotary_max_wavelength": rotary_max_wavelength, "rotary_scaling_factor": rotary_scaling_factor}
    for name, value in rotary_options.items():
        if positions in ("learned", "none") and value is not None:
            raise ValueError(f"`{name}` belongs to rotary positions; received {value!r} with positions={positions!r}.")
    defaults = {"normalize_first": False, "final_norm": False, "activation": "relu"}
    activation = keras.activations.get(gpt_options["activation"])
    gpt_options = {**gpt_options, "activation": getattr(activation, "__name__", activation)}
    changed = [name for name, value in gpt_options.items() if value != defaults[name]]
    if changed:
        raise ValueError(
            f"{', '.join(f'`{name}`' for name in changed)} belong(s) to architecture='gpt': a 'llama' "
            "model is always pre-norm RMSNorm with a final RMSNorm and SwiGLU; received "
            + ", ".join(f"{name}={gpt_options[name]!r}" for name in changed)
            + "."
        )
    if num_key_value_heads is not None:
        check_integer("num_key_value_heads", num_key_value_heads)
    return True


def build_language_model(
    vocabulary_size: int | None = None, sequence_length: int | None = None, **options
) -> LanguageModel:
    """A :class:`LanguageModel`: the two sizes, then its keyword arguments (``embed_dim=``, …).

    Example:
        >>> build_language_model(30, 8, embed_dim=16, intermediate_dim=32, num_heads=2).count_params() > 0
        True
    """
    return LanguageModel(vocabulary_size, sequence_length, **options)


def compute_parameters(vocabulary_size: int, embed_dim: int, intermediate_dim: int, num_layers: int) -> int:
    """The weights a token's forward pass multiplies by, in a GPT-style model with a tied output layer.

    Each block's attention projects to queries, keys, values and back (4·E² weights) and its
    feed-forward network has two matrices (2·E·F); the output layer multiplies by the token-embedding
    matrix (V·E). Biases, norms and the position table are left out (a few thousand weights), and so
    is the embedding *lookup*, which multiplies nothing. Kaplan et al. (2020, §2.1) count only the
    blocks ("non-embedding parameters"); at the sizes a CPU trains, the product with a vocabulary
    of thousands is most of the work, so it is counted here, as Hoffmann et al. (2022) count every
    parameter.

    Args:
        vocabulary_size: int V >= 1.
        embed_dim: int E >= 1.
        intermediate_dim: int F >= 1, the feed-forward width.
        num_layers: int >= 1, blocks.

    Returns:
        int, ``num_layers · (4·E² + 2·E·F) + V·E``.

    Raises:
        ValueError: naming the argument, for a size below 1.

    Example:
        >>> compute_parameters(8258, 256, 1024, 2)  # notebook 09's first model: 1.6 M in the blocks, 2.1 M output
        3686912
    """
    vocabulary_size, embed_dim = (
        check_integer("vocabulary_size", vocabulary_size),
        check_integer("embed_dim", embed_dim),
    )
    intermediate_dim, num_layers = (
        check_integer("intermediate_dim", intermediate_dim),
        check_integer("num_layers", num_layers),
    )
    return num_layers * (4 * embed_dim**2 + 2 * embed_dim * intermediate_dim) + vocabulary_size * embed_dim


def training_flops_per_token(
    vocabulary_size: int, sequence_length: int, embed_dim: int, intermediate_dim: int, num_layers: int
) -> int:
    """Floating-point operations one training token costs a GPT-style model: forward and backward.

    A forward pass multiplies each token's vector by every weight once (a multiply and an add: 2·N
    operations, N from :func:`compute_parameters`) and scores it against the sequence_length keys
    and values of each block (2·2·L·E); the backward pass costs twice the forward (Kaplan et al.,
    2020, §2.1, Table 1: C ≈ 6N per token, plus attention's share). The compute of a training run is
    this times its tokens (updates × batch rows × sequence_length): the x axis of an IsoFLOP sweep
    (Hoffmann et al., 2022, §3.2), the same on every machine.

    Args:
        vocabulary_size, sequence_length, embed_dim, intermediate_dim, num_layers: ints >= 1.

    Returns:
        int, ``3 · (2·N + 4·num_layers·sequence_length·embed_dim)``.

    Raises:
        ValueError: naming the argument, for a size below 1.

    Example:
        >>> training_flops_per_token(8258, 256, 256, 1024, 2)  # 6 x 3,686,912 + 12 x 2 x 256 x 256
        23694336
    """
    parameters = compute_parameters(vocabulary_size, embed_dim, intermediate_dim, num_layers)
    sequence_length = check_integer("sequence_length", sequence_length)
    return 3 * (2 * parameters + 4 * num_layers * sequence_length * embed_dim)


CLASSIFIER_POOLINGS = ("last", "mean")  # what a language-model classifier reads: the last real token, or all of them


def language_model_classifier(
    model: LanguageModel, num_classes: int = 1, pooling: str = "last", dropout: float = 0.0, name: str = "classifier"
) -> keras.Model:
    """A text classifier on a language model: its final states pooled -> dropout -> a dense layer.

    The model's own layers, shared (not copied): token embedding, decoder blocks and final norm,
    then a pooling of the final states over the real tokens (padding, id 0, never counts) and
    ``Dense(num_classes)``: a sigmoid for ``num_classes=1`` (two classes), a softmax otherwise.
    Fine-tuning changes ``model``'s weights too; build a copy first (``LanguageModel.from_config``
    and ``set_weights``) to keep the language model.

    Two poolings:

    * ``"last"``: the last real token's state (:class:`~transformer_course.pooling.LastTokenPooling`),
      the one position that has read the whole text under causal attention; GPT's classifier
      (Radford et al., 2018, §3.2).
    * ``"mean"``: the mean of every real token's state (``keras.layers.GlobalAveragePooling1D``
      with the padding mask): each position has read its own prefix, and the mean gathers what
      all of them hold. A model trained only to predict the next token keeps at its last position
      what the next token needs, not a summary of the text (notebook 12 reads the mean).

    Args:
        model: a :class:`LanguageModel` (either architecture).
        num_classes: int ≥ 1.
        pooling: ``"last"`` or ``"mean"``.
        dropout: float in [0, 1), dropout on the pooled vector (training only).
        name: str, the classifier's name.

    Returns:
        ``keras.Model``: int ``(B, T)`` ids (0 = padding, on the right) -> float32 ``(B, num_classes)``.

    Raises:
        ValueError: for a ``num_classes`` below 1, a ``pooling`` other than the two, or a
            ``dropout`` outside [0, 1).

    Example:
        >>> lm = build_language_model(30, 8, embed_dim=16, intermediate_dim=32, num_heads=2, num_layers=1)
        >>> language_model_classifier(lm).output_shape
        (None, 1)
        >>> language_model_classifier(lm, num_classes=3, pooling="mean", dropout=0.1).output_shape
        (None, 3)
    """
    num_classes = check_integer("num_classes", num_classes)
    if pooling not in CLASSIFIER_POOLINGS:
        raise ValueError(f"`pooling` must be one of {CLASSIFIER_POOLINGS}; received {pooling!r}.")
    dropout = check_rate("dropout", dropout)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    x = model.token_embedding(token_ids)
    for block in model.decoder_blocks:
        x = block(x)
    if model.final_norm is not None:
        x = model.final_norm(x)
    if pooling == "last":
        x = LastTokenPooling(name="last_token")(x)
    else:
        real = ops.not_equal(token_ids, 0)
        x = keras.layers.GlobalAveragePooling1D(name="mean_of_real_tokens")(x, mask=real)
    if dropout:
        x = keras.layers.Dropout(dropout, name="pooled_dropout")(x)
    output = keras.layers.Dense(
        num_classes, activation="sigmoid" if num_classes == 1 else "softmax", name="class_output", dtype="float32"
    )(x)
    return keras.Model(token_ids, output, name=name)


def forward_weights(model: LanguageModel) -> tuple[dict, dict]:
    """A language model's weights as nested dicts of NumPy arrays, and the settings its forward pass needs.

    The layout of exercise 09.5 (``gpt_forward(token_ids, weights, config)``), in which a student
    writes the whole forward pass from these arrays; the block layout is also exercise 05.3's,
    and each ``"attention"`` dict exercise 04.5's. Shape letters: V vocabulary, T the longest
    input, E width, N heads, H = E / N, F the feed-forward width.

    ``weights``:

    * ``"token_embedding"`` (V, E) — also the output layer (tied): logits = h @ table.T + bias;
    * ``"position_embedding"`` (T, E), added to the token embeddings before the first block;
    * ``"blocks"``: a list, one dict per block, in order, each with
      ``"attention"`` (``query_kernel``, ``key_kernel``, ``value_kernel`` (E, N, H), ``query_bias``,
      ``key_bias``, ``value_bias`` (N, H), ``output_kernel`` (N, H, E), ``output_bias`` (E,): Keras'
      ``MultiHeadAttention`` layout), ``"attention_norm"`` and ``"feedforward_norm"`` (``gamma``,
      ``beta`` (E,)), ``"feedforward"`` (``hidden_kernel`` (E, F), ``hidden_bias`` (F,),
      ``output_kernel`` (F, E), ``output_bias`` (E,));
    * ``"final_norm"`` (``gamma``, ``beta``), only when the model has one;
    * ``"output_bias"`` (V,).

    ``config``: ``num_heads`` (int), ``normalize_first`` (bool: pre-norm blocks),
    ``activation`` (``"relu"`` or ``"gelu_approximate"``), ``layer_norm_epsilon`` (float).

    Args:
        model: a :class:`LanguageModel` with tied embeddings.

    Returns:
        ``(weights, config)``; float32 arrays, copies (changing them changes nothing in ``model``).

    Raises:
        ValueError: for a ``"llama"`` model, a model with untied embeddings, or an activation other than ReLU and
            ``gelu_approximate``.

    Example:
        >>> model = build_language_model(20, 6, embed_dim=8, intermediate_dim=16, num_heads=2, num_layers=1)
        >>> weights, config = forward_weights(model)
        >>> weights["blocks"][0]["attention"]["query_kernel"].shape, config["num_heads"]
        ((8, 2, 4), 2)
    """
    if model.architecture != "gpt":
        raise ValueError(
            f"`model` must be a GPT model (the exercise's layout); received architecture={model.architecture!r}."
        )
    if not model.tie_embeddings:
        raise ValueError(
            "`model` must have tied embeddings (tie_embeddings=True): the exercise's output layer is "
            "the token embedding turned around."
        )
    activation = getattr(model.activation, "__name__", str(model.activation))
    if activation not in ("relu", "gelu_approximate"):
        raise ValueError(f"`model`'s activation must be relu or gelu_approximate; received {activation!r}.")

    def arrays(**variables):
        return {name: np.array(ops.convert_to_numpy(variable)) for name, variable in variables.items()}

    def block(decoder):
        attention = decoder.self_attention
        return {
            "attention": arrays(
                **{
                    f"{name}_{part}": getattr(attention, f"{name}_{part}")
                    for name in ("query", "key", "value", "output")
                    for part in ("kernel", "bias")
                }
            ),
            "attention_norm": arrays(gamma=decoder.self_attention_norm.gamma, beta=decoder.self_attention_norm.beta),
            "feedforward": arrays(
                hidden_kernel=decoder.feedforward_hidden.kernel,
                hidden_bias=decoder.feedforward_hidden.bias,
                output_kernel=decoder.feedforward_output.kernel,
                output_bias=decoder.feedforward_output.bias,
            ),
            "feedforward_norm": arrays(gamma=decoder.feedforward_norm.gamma, beta=decoder.feedforward_norm.beta),
        }

    embedding = model.token_embedding
    weights = {
        **arrays(
            token_embedding=embedding.token_embedding.embeddings,
            position_embedding=embedding.position_embedding.embeddings,
        ),
        "blocks": [block(decoder) for decoder in model.decoder_blocks],
        **arrays(output_bias=model.output_layer.bias),
    }
    if model.final_norm is not None:
        weights["final_norm"] = arrays(gamma=model.final_norm.gamma, beta=model.final_norm.beta)
    config = {
        "num_heads": model.num_heads,
        "normalize_first": bool(model.normalize_first),
        "activation": activation,
        "layer_norm_epsilon": float(model.layer_norm_epsilon),
    }
    return weights, config
