"""Sequence classification with a Transformer encoder: the sentiment classifier of notebook 06.

A Transformer encoder returns one vector per token; a classifier needs one vector per text.
Two ways to pool, both built in :mod:`.pooling` (their names are importable from here too):

* **global max pooling** (Chollet, "Deep Learning with Python", 2nd ed., §11.4): for each
  feature, its largest value over the real tokens. :class:`MaskedGlobalMaxPooling1D` skips
  padding — ``keras.layers.GlobalMaxPooling1D`` does not, so a padded position could win the max
  and a review's score would depend on how much padding its batch happened to have.
* a **[CLS] token** (Devlin et al., 2019, BERT, §3): :class:`PrependClassToken` puts an extra
  token in front of every sequence; attention lets it gather from the whole text, and its output
  vector is the text's summary.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np

from ._validation import check_integer, check_rate, check_texts, renamed
from .pooling import ClassTokenOutput, MaskedGlobalMaxPooling1D, PrependClassToken
from .positional import PositionalEmbedding
from .transformer import TransformerEncoder

__all__ = [
    "MaskedGlobalMaxPooling1D",
    "PrependClassToken",
    "ClassTokenOutput",
    "build_sentiment_classifier",
    "build_end_to_end_classifier",
    "predict_sentiment",
    "POOLINGS",
]

POOLINGS = ("max", "cls")


def build_sentiment_classifier(
    vocabulary_size: int | None = None,
    sequence_length: int | None = None,
    embed_dim: int = 256,
    num_heads: int = 2,
    intermediate_dim: int = 32,
    num_layers: int = 1,
    positions: bool = True,
    pooling: str = "max",
    dropout: float = 0.5,
    name: str | None = None,
    *,
    vocab_size: int | None = None,
) -> keras.Model:
    """A binary text classifier: embedding → Transformer encoder(s) → pooling → dropout → sigmoid.

    The defaults are the IMDB model of Chollet, "Deep Learning with Python", 2nd ed., §11.4.3.
    The encoder block is :class:`~transformer_course.transformer.TransformerEncoder` (post-norm,
    Vaswani et al., 2017, §3.1). Every layer honours the padding mask, so the prediction for a
    text does not depend on how much padding follows it.

    Args:
        vocabulary_size: int, token ids ``0 .. vocabulary_size - 1`` (0 = padding); ``vocab_size``,
            its former name, still works with a DeprecationWarning.
        sequence_length: int, the longest input accepted (rows of the position table).
        embed_dim, num_heads, intermediate_dim: ints, E, N (divides E) and the feed-forward width.
        num_layers: int, encoder blocks stacked, sharing no weights.
        positions: bool, add a learned position embedding (``PositionalEmbedding``); without it
            the model sees a bag of words, only mixed by attention.
        pooling: ``"max"`` (masked global max pooling) or ``"cls"`` (a ``[CLS]`` token with id
            ``vocabulary_size``, output at position 0).
        dropout: float in [0, 1), before the output layer (the encoder blocks use none).
        name: optional model name.

    Returns:
        ``keras.Model`` from int ``(B, T)`` token ids to float32 ``(B, 1)``, P(positive).
        Its layers are named ``embedding``, ``encoder_1`` …, ``pooling`` and ``output``.

    Raises:
        ValueError: for non-positive sizes, an unknown ``pooling``, a ``dropout`` outside [0, 1),
            or a ``num_heads`` that does not divide ``embed_dim``.

    Example:
        >>> build_sentiment_classifier(100, 20, embed_dim=16, num_heads=2, intermediate_dim=8).output_shape
        (None, 1)
    """
    vocabulary_size = check_integer(
        "vocabulary_size", renamed("vocabulary_size", vocabulary_size, "vocab_size", vocab_size)
    )
    sequence_length = check_integer("sequence_length", sequence_length)
    embed_dim = check_integer("embed_dim", embed_dim)
    num_layers = check_integer("num_layers", num_layers)
    if pooling not in POOLINGS:
        raise ValueError(f"`pooling` must be one of {POOLINGS}; received {pooling!r}.")
    check_rate("dropout", dropout)
    if check_integer("num_heads", num_heads) and embed_dim % num_heads:
        raise ValueError(f"`num_heads` ({num_heads}) must divide `embed_dim` ({embed_dim}).")

    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    ids, rows, length = token_ids, vocabulary_size, sequence_length
    if pooling == "cls":
        ids = PrependClassToken(vocabulary_size, name="prepend_cls")(token_ids)
        rows, length = vocabulary_size + 1, sequence_length + 1
    if positions:
        x = PositionalEmbedding(length, rows, embed_dim, name="embedding")(ids)
    else:
        x = keras.layers.Embedding(rows, embed_dim, mask_zero=True, name="embedding")(ids)
    for index in range(num_layers):
        x = TransformerEncoder(intermediate_dim, num_heads, name=f"encoder_{index + 1}")(x)
    x = (MaskedGlobalMaxPooling1D if pooling == "max" else ClassTokenOutput)(name="pooling")(x)
    x = keras.layers.Dropout(dropout, name="dropout")(x)
    probability = keras.layers.Dense(1, activation="sigmoid", name="output")(x)
    return keras.Model(token_ids, probability, name=name)


def build_end_to_end_classifier(vectorizer, model: keras.Model, name: str | None = None) -> keras.Model:
    """Join a ``TextVectorization`` layer and a token-id classifier into one model on raw strings.

    The result saves to one ``.keras`` file holding the vocabulary, the standardisation function
    (if it is registered with Keras, as ``text.standardize_review`` is) and the weights.

    Args:
        vectorizer: an adapted ``keras.layers.TextVectorization`` (``output_mode="int"``).
        model: a ``keras.Model`` from int token ids ``(B, T)`` to probabilities ``(B, 1)``.
        name: optional model name.

    Returns:
        ``keras.Model`` from a string ``(B,)`` batch to float32 ``(B, 1)``.

    Example:
        >>> vectorizer = keras.layers.TextVectorization(max_tokens=100, output_sequence_length=20)
        >>> vectorizer.adapt(["a fine film", "a dull film"])
        >>> model = build_sentiment_classifier(100, 20, embed_dim=16, num_heads=2, intermediate_dim=8)
        >>> tuple(build_end_to_end_classifier(vectorizer, model)(np.array(["a fine film", "a dull one"])).shape)
        (2, 1)
    """
    text = keras.Input(shape=(), dtype="string", name="text")
    return keras.Model(text, model(vectorizer(text)), name=name)


def predict_sentiment(model: keras.Model, reviews, batch_size: int = 64):
    """P(positive) for one review or a list of reviews, through an end-to-end string model.

    Any string is accepted: an empty one (the model sees only padding and returns its prior),
    any language (unknown words become the out-of-vocabulary id 1), any length (the vectoriser
    keeps the first ``output_sequence_length`` tokens).

    Args:
        model: a model from :func:`build_end_to_end_classifier` (or one reloaded from ``.keras``).
        reviews: a ``str``, or a list/tuple of ``str``.
        batch_size: int, reviews per forward pass.

    Returns:
        float for a single string; float32 NumPy ``(N,)`` for a list (``(0,)`` for an empty list).

    Raises:
        TypeError: if ``reviews`` is neither a string nor a list/tuple of strings; the message
            names what was received (and the position of the first non-string).
    """
    single, items = check_texts("reviews", reviews)
    if not items:
        return np.zeros((0,), dtype="float32")
    probabilities = model.predict(np.array(items, dtype=object), batch_size=batch_size, verbose=0)[:, 0]
    return float(probabilities[0]) if single else probabilities.astype("float32")
