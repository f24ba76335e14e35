"""Replaced-token detection (ELECTRA): pre-training an encoder on every position, not only the masked 15%.

A masked language model learns from the positions it must fill in, about 15% of each input.
ELECTRA (Clark et al., 2020, "ELECTRA: Pre-training Text Encoders as Discriminators Rather Than
Generators", ICLR, §2) trains two encoders together:

* a small **generator**, a masked language model, fills the masked positions with tokens it
  **samples** from its own predictions;
* the **discriminator**, the encoder kept afterwards, reads the result and says for **every**
  position whether its token is the original or a replacement. A sampled token equal to the
  original counts as original.

The loss is the generator's masked-LM loss plus λ = 50 times the discriminator's (§2). Nothing
flows back from the discriminator into the generator through the sampling: a draw has no
gradient (the paper notes it cannot backpropagate through it, §2). Generator and discriminator
share the token and position embeddings (§3.2); the generator is a fraction of the
discriminator's width (§3.2 finds 1/4 to 1/2 best). The discriminator never sees ``[MASK]``.

* :class:`ElectraPretrainer` — both encoders, the sampling and the discriminator's head.
* :class:`ReplaceWithSamples` — the sampling step as a layer.
* :class:`ReplacedTokenDetectionLoss` — the discriminator's loss over real tokens.
* :class:`ElectraBatches` and :func:`electra_inputs` — pre-training batches in the form
  :class:`ElectraPretrainer` reads.
* :func:`constant_guess_loss`, :func:`replaced_rate` and :func:`detection_quality` — the
  discriminator's floor (the loss of one constant guess at the replaced-token rate), the rate
  as a training metric, and its held-out loss, floor, ROC AUC and recall.

The discriminator is a :class:`~transformer_course.transformer.BertStyleEncoder`, the body
:class:`~transformer_course.bert.BertPretrainer` is built on too (``pooler = None``: it trains
none), so :func:`~transformer_course.bert.build_bert_classifier` fine-tunes it as it fine-tunes a
BERT-style encoder.

Shape letters: B batch, T positions, P masked positions per row, V vocabulary, E width.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer, check_model_sizes
from .masks import padding_mask
from .pooling import GatherPositions
from .positional import PositionalEmbedding, SegmentEmbedding
from .pretraining import PretrainingBatches, gather_selected, mask_tokens
from .transformer import BertStyleEncoder, TiedTokenDistribution, TransformerEncoder

__all__ = [
    "ElectraPretrainer",
    "ReplaceWithSamples",
    "ReplacedTokenDetectionLoss",
    "ElectraBatches",
    "electra_inputs",
    "constant_guess_loss",
    "replaced_rate",
    "detection_quality",
    "DISCRIMINATOR_WEIGHT",
]

DISCRIMINATOR_WEIGHT = 50.0  # λ of Clark et al., 2020, §2


@keras.saving.register_keras_serializable(package="transformer_course")
class ReplaceWithSamples(keras.layers.Layer):
    """Put a token drawn from the generator at each masked position; say which tokens changed.

    Each draw comes from the generator's distribution at that position (its own probabilities,
    temperature 1) by inverting its cumulative sum: one uniform number u per position, and the
    draw is the first id whose cumulative probability exceeds u·(total), so an id of probability
    0 is never drawn. That is one random number a position, where Gumbel-max sampling
    (``argmax(log p + g)``) needs a Gumbel number and two logarithms for every id of the
    vocabulary (``benchmarks/electra_step.py`` times both). The draws are integers: no gradient
    reaches the generator through them.

    Args:
        seed: optional int, seeds the draws.
        **kwargs: passed to ``keras.layers.Layer``.

    Call arguments:
        probabilities: float ``(B, P, V)``, the generator's distributions at the masked positions.
        original_ids: int ``(B, T)``, the uncorrupted input.
        positions: int ``(B, P)``, where the masked positions are.
        labels: int ``(B, P)``, the original id at each masked position; 0 marks an unused slot
            (:func:`~transformer_course.pretraining.gather_selected` pads with 0), which is not replaced.

    Returns:
        ``(corrupted_ids, replaced)``: int32 ``(B, T)``, the input with the draws in place, and
        float32 ``(B, T)``, 1 where the token differs from the original (a draw equal to the
        original is 0).

    Example:
        >>> import numpy as np
        >>> certain = np.zeros((1, 1, 6), "float32"); certain[0, 0, 5] = 1.0  # the generator is sure: id 5
        >>> corrupted, replaced = ReplaceWithSamples(seed=0)(certain, np.array([[2, 3, 4]]), np.array([[1]]),
        ...                                                  np.array([[3]]))
        >>> keras.ops.convert_to_numpy(corrupted).tolist(), keras.ops.convert_to_numpy(replaced).tolist()
        ([[2, 5, 4]], [[0.0, 1.0, 0.0]])
    """

    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, probabilities, original_ids, positions, labels):
        draws = self.draw(probabilities)  # (B, P)
        original_ids = ops.cast(original_ids, "int32")
        used = ops.cast(ops.not_equal(labels, 0), "int32")  # (B, P)
        slots = ops.one_hot(ops.cast(positions, "int32"), ops.shape(original_ids)[1], dtype="int32")  # (B, P, T)
        slots = slots * ops.expand_dims(used, -1)
        chosen = ops.sum(slots, axis=1) > 0  # (B, T)
        drawn_at = ops.sum(slots * ops.expand_dims(draws, -1), axis=1)  # (B, T), each position drawn at most once
        corrupted = ops.where(chosen, drawn_at, original_ids)
        return corrupted, ops.cast(ops.not_equal(corrupted, original_ids), "float32")

    def draw(self, probabilities):
        """One id per distribution: float ``(B, P, V)`` -> int32 ``(B, P)``, by the inverse cumulative sum."""
        cumulative = ops.cumsum(ops.stop_gradient(ops.cast(probabilities, "float32")), axis=-1)  # (B, P, V)
        uniform = keras.random.uniform(ops.shape(cumulative)[:-1], seed=self.seed_generator)  # (B, P)
        threshold = ops.expand_dims(uniform * cumulative[..., -1], -1)  # in [0, total): u < 1
        # The first id whose cumulative sum passes the threshold; an id of probability 0 never does (its sum
        # equals the one before it), so it is never drawn.
        drawn = ops.sum(ops.cast(cumulative <= threshold, "int32"), axis=-1)
        return ops.minimum(drawn, ops.shape(cumulative)[-1] - 1)

    def compute_output_spec(self, probabilities, original_ids, positions, labels):
        return (
            keras.KerasTensor(original_ids.shape, dtype="int32"),
            keras.KerasTensor(original_ids.shape, dtype="float32"),
        )

    def get_config(self):
        return {**super().get_config(), "seed": self.seed}


@keras.saving.register_keras_serializable(package="transformer_course")
class ReplacedTokenDetectionLoss(keras.losses.Loss):
    """The discriminator's loss: binary cross-entropy of "replaced?" at every real token, averaged.

    Call arguments:
        y_true: ignored (the labels are made inside the model, by the sampling); any ``(B,)``.
        y_pred: float ``(B, T, 3)``: the probability that each token was replaced, the label (1 =
            replaced), and 1 for a real token (0 for padding, never counted).

    Returns:
        float32 scalar: the mean over real tokens (0 if there are none).

    Source: Clark et al., 2020, §2, the loss L_Disc.
    """

    def __init__(self, name: str = "replaced_token_detection", **kwargs):
        super().__init__(name=name, reduction=None, **kwargs)

    def get_config(self):
        return {"name": self.name}  # the reduction is fixed: a saved, compiled model reloads

    def call(self, y_true, y_pred):
        y_pred = ops.cast(y_pred, "float32")
        probability, label, real = y_pred[..., 0], y_pred[..., 1], y_pred[..., 2]
        probability = ops.clip(probability, keras.config.epsilon(), 1.0 - keras.config.epsilon())
        per_token = -(label * ops.log(probability) + (1.0 - label) * ops.log(1.0 - probability))
        return ops.sum(per_token * real) / ops.maximum(ops.sum(real), 1.0)


@keras.saving.register_keras_serializable(package="transformer_course")
class ElectraPretrainer(BertStyleEncoder, keras.Model):
    """ELECTRA's generator and discriminator, trained together (Clark et al., 2020, §2 and §3.2).

    * Shared: the token + position embedding (``token_embedding``) and the segment embedding.
    * Generator: shared embeddings → LayerNorm → a projection to width ``generator_fraction · E``
      → ``generator_layers`` post-norm encoder blocks → the masked positions → dense (activation)
      → LayerNorm → a projection back to E → scores against every token embedding (tied) → softmax.
    * :class:`ReplaceWithSamples` puts the generator's draws at the masked positions of the
      *original* input (the discriminator never sees ``[MASK]``).
    * Discriminator: shared embeddings → ``embedding_norm`` → dropout → ``num_layers`` encoder
      blocks (``encoder_blocks``) → a dense layer, one sigmoid per position: P(replaced).

    Compile with ``loss={"generator": MaskedCrossEntropy(), "discriminator":
    ReplacedTokenDetectionLoss()}`` and ``loss_weights={"generator": 1.0, "discriminator":
    DISCRIMINATOR_WEIGHT}``; the discriminator's target is a dummy (zeros ``(B,)``).

    Args:
        vocabulary_size: int V.
        sequence_length: int T.
        max_predictions: int P.
        embed_dim, num_heads, intermediate_dim, num_layers: the discriminator's sizes (keyword only).
        generator_fraction: float in (0, 1], the generator's width, heads and feed-forward width
            as a share of the discriminator's (at least 1 head; the width a multiple of its heads).
        generator_layers: int, or None for ``num_layers``.
        dropout: float in [0, 1).
        activation: the feed-forward activation (``"gelu"``, as BERT's and ELECTRA's).
        seed: optional int, seeds the draws.
        **kwargs: ``name``, ``trainable``, passed to ``keras.Model``.

    Call arguments:
        inputs: ``{"token_ids": int (B, T)`` the masked input, ``"original_ids": int (B, T)``,
        ``"segment_ids": int (B, T)``, ``"mask_positions": int (B, P)``, ``"mask_labels": int (B, P)``
        (the original ids there, 0 for unused slots)``}``.

    Returns:
        ``{"generator": float32 (B, P, V), "discriminator": float32 (B, T, 3)}``: the generator's
        distributions at the masked positions, and per position P(replaced), the label and the
        real-token indicator (what :class:`ReplacedTokenDetectionLoss` reads).

    Raises:
        ValueError: for non-positive sizes, a ``dropout`` outside [0, 1), ``num_heads`` not
            dividing ``embed_dim``, or a ``generator_fraction`` outside (0, 1].

    Example:
        >>> model = ElectraPretrainer(50, 8, 2, embed_dim=16, num_heads=4, intermediate_dim=32, num_layers=1)
        >>> model.generator_width, sorted(model.output)
        (4, ['discriminator', 'generator'])
    """

    def __init__(
        self,
        vocabulary_size,
        sequence_length,
        max_predictions,
        *,
        embed_dim=256,
        num_heads=4,
        intermediate_dim=1024,
        num_layers=4,
        generator_fraction=0.25,
        generator_layers=None,
        dropout=0.1,
        activation="gelu",
        seed=None,
        **kwargs,
    ):
        check_model_sizes(
            embed_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            sequence_length=sequence_length,
            max_predictions=max_predictions,
            intermediate_dim=intermediate_dim,
            num_layers=num_layers,
        )
        if isinstance(generator_fraction, bool) or not 0 < generator_fraction <= 1:
            raise ValueError(f"`generator_fraction` must be in (0, 1]; received {generator_fraction!r}.")
        generator_layers = (
            num_layers if generator_layers is None else check_integer("generator_layers", generator_layers)
        )
        generator_heads = max(1, round(num_heads * generator_fraction))
        generator_width = max(
            generator_heads, round(embed_dim * generator_fraction) // generator_heads * generator_heads
        )
        activation = keras.activations.get(activation)
        inputs = {
            name: keras.Input(shape=(None,), dtype="int32", name=name)
            for name in ("token_ids", "original_ids", "segment_ids")
        }
        inputs.update(
            {
                name: keras.Input(shape=(max_predictions,), dtype="int32", name=name)
                for name in ("mask_positions", "mask_labels")
            }
        )
        token_embedding = PositionalEmbedding(sequence_length, vocabulary_size, embed_dim, name="token_embedding")
        segment_embedding = SegmentEmbedding(2, embed_dim, name="segment_embedding")
        # The generator, on the masked input.
        g = segment_embedding(token_embedding(inputs["token_ids"]), segment_ids=inputs["segment_ids"])
        g = keras.layers.LayerNormalization(epsilon=1e-12, name="generator_embedding_norm")(g)
        g = keras.layers.Dense(generator_width, name="generator_projection")(g)
        for index in range(generator_layers):
            g = TransformerEncoder(
                max(1, round(intermediate_dim * generator_fraction)),
                generator_heads,
                dropout=dropout,
                activation=activation,
                layer_norm_epsilon=1e-12,
                name=f"generator_{index + 1}",
            )(g)
        g = GatherPositions(name="generator_gather")([g, inputs["mask_positions"]])
        g = keras.layers.Dense(generator_width, activation=activation, name="generator_transform")(g)
        g = keras.layers.LayerNormalization(epsilon=1e-12, name="generator_norm")(g)
        g = keras.layers.Dense(embed_dim, name="generator_output_projection")(g)
        generator = TiedTokenDistribution(vocabulary_size, name="generator", dtype="float32")(
            token_embedding(g, reverse=True)
        )
        # The sampling, then the discriminator on the corrupted original.
        corrupted, replaced = ReplaceWithSamples(seed, name="replace_with_samples")(
            generator, inputs["original_ids"], inputs["mask_positions"], inputs["mask_labels"]
        )
        x = segment_embedding(token_embedding(corrupted), segment_ids=inputs["segment_ids"])
        x, embedding_norm, embedding_dropout, encoder_blocks = self.build_body(
            x,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            num_heads=num_heads,
            dropout=dropout,
            activation=activation,
        )
        replaced_probability = keras.layers.Dense(1, activation="sigmoid", name="discriminator_head", dtype="float32")(
            x
        )[..., 0]
        real = ops.cast(padding_mask(inputs["original_ids"]), "float32")
        discriminator = keras.layers.Identity(name="discriminator", dtype="float32")(
            ops.stack([replaced_probability, replaced, real], axis=-1)
        )
        super().__init__(inputs, {"generator": generator, "discriminator": discriminator}, **kwargs)
        self.token_embedding, self.segment_embedding = token_embedding, segment_embedding
        self.embedding_norm, self.embedding_dropout = embedding_norm, embedding_dropout
        self.encoder_blocks, self.pooler = encoder_blocks, None
        self.vocabulary_size, self.sequence_length, self.max_predictions = (
            vocabulary_size,
            sequence_length,
            max_predictions,
        )
        self.embed_dim, self.num_heads, self.intermediate_dim = embed_dim, num_heads, intermediate_dim
        self.num_layers, self.dropout, self.activation, self.seed = num_layers, dropout, activation, seed
        self.generator_fraction, self.generator_layers = generator_fraction, generator_layers
        self.generator_width = generator_width

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "vocabulary_size": self.vocabulary_size,
            "sequence_length": self.sequence_length,
            "max_predictions": self.max_predictions,
            "embed_dim": self.embed_dim,
            "num_heads": self.num_heads,
            "intermediate_dim": self.intermediate_dim,
            "num_layers": self.num_layers,
            "generator_fraction": self.generator_fraction,
            "generator_layers": self.generator_layers,
            "dropout": self.dropout,
            "activation": keras.activations.serialize(self.activation),
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config):
        return cls(**{**config, "activation": keras.activations.deserialize(config["activation"])})


class ElectraBatches(PretrainingBatches):
    """Batches for :class:`ElectraPretrainer`: the chosen positions all ``[MASK]``, masked afresh every batch.

    The same rows, order and rounds as :class:`~transformer_course.pretraining.PretrainingBatches`
    (whose arguments it takes, ``next_labels`` excepted), but each chosen token (15%) becomes
    ``[MASK]``: ELECTRA's generator input, ``REPLACE(x, m, [MASK])`` (Clark et al., 2020, §2),
    without BERT's 10% random and 10% unchanged. The uncorrupted rows travel with the batch: the
    generator's draws go into them, and the discriminator reads the result.

    Yields:
        ``({"token_ids": int32 (B, T)`` masked, ``"original_ids": int32 (B, T)``, ``"segment_ids"``,
        ``"mask_positions": int32 (B, P)``, ``"mask_labels": int32 (B, P)}``, ``{"generator": int32
        (B, P)`` the labels again, ``"discriminator": float32 (B,)`` zeros, a placeholder target``})``.

    Raises:
        ValueError: as :class:`~transformer_course.pretraining.PretrainingBatches`.

    Example:
        >>> rows = np.arange(5, 13, dtype="int32").reshape(2, 4)
        >>> batches = ElectraBatches(rows, None, 2, 20, 4, special_token_ids=(), max_predictions=3, seed=0)
        >>> inputs, targets = batches[0]
        >>> sorted(inputs), sorted(targets)
        (['mask_labels', 'mask_positions', 'original_ids', 'segment_ids', 'token_ids'], ['discriminator', 'generator'])
        >>> bool(np.all((inputs["token_ids"] == inputs["original_ids"]) | (inputs["token_ids"] == 4)))
        True
    """

    def __init__(
        self,
        token_ids,
        segment_ids,
        batch_size: int,
        vocabulary_size: int,
        mask_token_id: int,
        special_token_ids,
        max_predictions: int,
        seed: int = 0,
        batches_per_epoch: int | None = None,
        **kwargs,
    ):
        super().__init__(
            token_ids,
            segment_ids,
            None,
            batch_size,
            vocabulary_size,
            mask_token_id,
            special_token_ids,
            max_predictions,
            seed=seed,
            batches_per_epoch=batches_per_epoch,
            **kwargs,
        )

    def __getitem__(self, index):
        rows = self.rounds.batch(index)
        return electra_inputs(
            self.token_ids[rows],
            self.rng,
            self.vocabulary_size,
            self.mask_token_id,
            self.unselectable,
            self.max_predictions,
            segment_ids=self.segment_ids[rows],
        )


def electra_inputs(
    token_ids,
    rng,
    vocabulary_size: int,
    mask_token_id: int,
    unselectable_token_ids,
    max_predictions: int,
    segment_ids=None,
):
    """One batch for :class:`ElectraPretrainer`: 15% chosen and all ``[MASK]``, the original rows beside them.

    Positions are chosen as :func:`~transformer_course.pretraining.mask_tokens` chooses them
    (the same draws from ``rng``, so the same positions as BERT's masking with the same seed); each
    chosen token among a row's first ``max_predictions`` becomes ``[MASK]`` (ELECTRA's generator
    input, Clark et al., 2020, §2); a chosen position past them stays itself.

    Args:
        token_ids: int ``(B, T)``, the original rows (0 = padding).
        rng: ``numpy.random.Generator``.
        vocabulary_size, mask_token_id, unselectable_token_ids: as :func:`mask_tokens`.
        max_predictions: int P.
        segment_ids: int ``(B, T)``, or None for segment 0 everywhere.

    Returns:
        ``(inputs, targets)`` as :class:`ElectraBatches` yields them.

    Example:
        >>> inputs, targets = electra_inputs(np.array([[5, 6, 7, 8]]), np.random.default_rng(0), 20, 4, (0,), 2)
        >>> sorted(inputs), targets["generator"].shape
        (['mask_labels', 'mask_positions', 'original_ids', 'segment_ids', 'token_ids'], (1, 2))
    """
    original = np.asarray(token_ids, "int32")
    masked, labels, selected = mask_tokens(
        original,
        rng,
        vocabulary_size,
        mask_token_id,
        mask_token_rate=1.0,
        random_token_rate=0.0,
        unselectable_token_ids=unselectable_token_ids,
    )
    positions, position_labels = gather_selected(selected, labels, max_predictions)
    scored = np.zeros(original.shape, bool)  # the chosen positions among each row's first P
    rows_with, slots = np.nonzero(position_labels)
    scored[rows_with, positions[rows_with, slots]] = True
    inputs = {
        "token_ids": np.where(scored, masked, original),
        "original_ids": original,
        "segment_ids": np.zeros_like(original) if segment_ids is None else np.asarray(segment_ids, "int32"),
        "mask_positions": positions,
        "mask_labels": position_labels,
    }
    return inputs, {"generator": position_labels, "discriminator": np.zeros(len(original), "float32")}


def constant_guess_loss(rate):
    """The discriminator's floor: the binary cross-entropy of one constant guess at the replaced-token rate.

    A discriminator that says "replaced with probability r" at every token, whatever it reads,
    scores best when r is the share of replaced tokens, and then its loss is the binary entropy
    H(r) = −r·ln r − (1 − r)·ln(1 − r) nats a token. A discriminator whose loss sits at H(r) has
    learned nothing about which tokens were replaced.

    Args:
        rate: float or float array in [0, 1], the share of real tokens that were replaced.

    Returns:
        float (or float64 array of ``rate``'s shape): H(rate) in nats; 0 at 0 and 1.

    Raises:
        ValueError: for a rate outside [0, 1], naming it.

    Example:
        >>> round(constant_guess_loss(0.5), 4), constant_guess_loss(0.0)
        (0.6931, 0.0)
    """
    values = np.asarray(rate, "float64")
    if np.any(~np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise ValueError(f"`rate` must lie in [0, 1]; received {rate!r}.")
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = 0.0 - (
            np.where(values > 0, values * np.log(values), 0.0)
            + np.where(values < 1, (1 - values) * np.log1p(-values), 0.0)
        )
    return float(entropy) if entropy.ndim == 0 else entropy


@keras.saving.register_keras_serializable(package="transformer_course")
def replaced_rate(y_true, y_pred):
    """The share of each row's real tokens that the generator's draws replaced: a Keras metric.

    Compile :class:`ElectraPretrainer` with ``metrics={"discriminator": [replaced_rate]}`` and the
    training logs carry ``discriminator_replaced_rate``, from which :func:`constant_guess_loss`
    gives the floor of the discriminator's loss on the same batches.

    Args:
        y_true: ignored (the discriminator's placeholder target).
        y_pred: float ``(B, T, 3)``, the discriminator's output (P(replaced), label, real token).

    Returns:
        float32 ``(B,)``: replaced tokens / real tokens in each row (0 for a row without any).

    Example:
        >>> judged = np.array([[[0.9, 1, 1], [0.2, 0, 1], [0.1, 0, 1], [0.5, 0, 0]]], "float32")
        >>> [round(float(value), 4) for value in keras.ops.convert_to_numpy(replaced_rate(None, judged))]
        [0.3333]
    """
    y_pred = ops.cast(y_pred, "float32")
    label, real = y_pred[..., 1], y_pred[..., 2]
    return ops.sum(label * real, axis=-1) / ops.maximum(ops.sum(real, axis=-1), 1.0)


def detection_quality(model, inputs, batch_size: int = 256) -> dict:
    """How well ``model``'s discriminator tells replaced tokens from originals on held-out inputs.

    Runs the whole pre-training model (the generator draws afresh: each call makes its own
    replacements, and the labels are the ones it made), and scores every real token.

    Args:
        model: an :class:`ElectraPretrainer`.
        inputs: one batch's inputs as :func:`electra_inputs` returns them (its first element).
        batch_size: int >= 1, rows per forward pass.

    Returns:
        dict of floats: ``loss`` (the discriminator's binary cross-entropy, nats a real token),
        ``rate`` (replaced / real tokens), ``floor`` (:func:`constant_guess_loss` of that rate),
        ``below_floor`` (1 − loss / floor: 0 at the floor, 1 for a perfect discriminator),
        ``auc`` (ROC AUC of P(replaced) over the real tokens, scikit-learn's ``roc_auc_score``:
        0.5 for a guess), ``recall`` (replaced tokens given P(replaced) > 0.5) and
        ``generator_accuracy`` (the generator's most likely token equals the original, over the
        masked positions).

    Raises:
        ValueError: for a ``batch_size`` below 1, or inputs in which no token was replaced.

    Source: Clark et al., 2020, §2 (the discriminator's task); the AUC is this course's yardstick.

    Example:
        >>> model = ElectraPretrainer(30, 8, 2, embed_dim=8, num_heads=2, intermediate_dim=16, num_layers=1, seed=0)
        >>> rows = np.random.default_rng(0).integers(5, 30, (16, 8))
        >>> inputs, _ = electra_inputs(rows, np.random.default_rng(1), 30, 4, (0,), 2)
        >>> report = detection_quality(model, inputs)
        >>> sorted(report), 0 <= report["auc"] <= 1
        (['auc', 'below_floor', 'floor', 'generator_accuracy', 'loss', 'rate', 'recall'], True)
    """
    from sklearn.metrics import roc_auc_score

    batch_size = check_integer("batch_size", batch_size)
    probabilities, labels, hits, blanks = [], [], 0, 0
    rows = len(inputs["token_ids"])
    for start in range(0, rows, batch_size):
        batch = {key: value[start : start + batch_size] for key, value in inputs.items()}
        outputs = model(batch, training=False)
        judged = ops.convert_to_numpy(outputs["discriminator"])  # (b, T, 3)
        real = judged[..., 2] > 0
        probabilities.append(judged[..., 0][real])
        labels.append(judged[..., 1][real])
        guesses = np.argmax(ops.convert_to_numpy(outputs["generator"]), axis=-1)  # (b, P)
        used = batch["mask_labels"] != 0
        hits += int(np.sum((guesses == batch["mask_labels"]) & used))
        blanks += int(np.sum(used))
    probability, label = np.concatenate(probabilities).astype("float64"), np.concatenate(labels)
    if not label.any():
        raise ValueError("`inputs` gave no replaced token to detect (every draw equalled the original).")
    clipped = np.clip(probability, 1e-7, 1 - 1e-7)
    loss = float(-np.mean(label * np.log(clipped) + (1 - label) * np.log1p(-clipped)))
    rate = float(label.mean())
    floor = constant_guess_loss(rate)
    return {
        "loss": loss,
        "rate": rate,
        "floor": floor,
        "below_floor": 1.0 - loss / floor,
        "auc": float(roc_auc_score(label, probability)),
        "recall": float(np.mean(probability[label > 0] > 0.5)),
        "generator_accuracy": hits / max(blanks, 1),
    }
