"""Word vectors from the company words keep: skip-gram with negative sampling (notebook 03).

A word is known by its neighbours: words that occur in the same contexts get similar vectors.
Skip-gram (Mikolov et al., 2013a, "Efficient Estimation of Word Representations in Vector Space",
§3.2) trains each word's vector to predict the words around it; with **negative sampling**
(Mikolov et al., 2013b, "Distributed Representations of Words and Phrases and their
Compositionality", §2.2) the prediction is a yes/no question per pair: is this word a real
neighbour, or one of k words drawn at random?

* :func:`skipgram_pairs` — the (centre, context) pairs of token-id rows, ``window`` words each side.
* :func:`noise_distribution` — the distribution negatives are drawn from: counts to the 3/4 power.
* :class:`SkipGramBatches` — batches of one real pair and ``negatives`` drawn ones per centre word.
* :class:`SkipGram` — two embedding tables (centre words, context words) and a dot product.
* :func:`nearest_words` and :func:`analogy` — cosine neighbours, and ``b - a + c``.

Shape letters: P pairs, B batch, K = 1 + negatives, V vocabulary, D vector width.
"""

from __future__ import annotations

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np
from keras import ops

from ._validation import check_integer
from .masks import PADDING_ID

__all__ = ["skipgram_pairs", "noise_distribution", "SkipGramBatches", "SkipGram", "nearest_words", "analogy"]


def skipgram_pairs(token_ids, window: int) -> np.ndarray:
    """Every (centre, context) pair of each row: the ids up to ``window`` positions either side of each id.

    Args:
        token_ids: int ``(N, T)`` rows of ids (0 = padding, never part of a pair), or one row ``(T,)``.
        window: int ≥ 1, context positions on each side.

    Returns:
        int64 ``(P, 2)``: column 0 the centre id, column 1 the context id; ordered by row, then
        centre position, then context position, left to right.

    Raises:
        ValueError: for a ``window`` below 1 or ``token_ids`` of rank above 2.

    Source: Mikolov et al., 2013a, §3.2 (the continuous skip-gram model).

    Example:
        >>> skipgram_pairs([5, 6, 7], window=1).tolist()
        [[5, 6], [6, 5], [6, 7], [7, 6]]
    """
    window = check_integer("window", window)
    rows = np.asarray(token_ids, dtype="int64")
    if rows.ndim == 1:
        rows = rows[None, :]
    if rows.ndim != 2:
        raise ValueError(f"`token_ids` must be one row (T,) or rows (N, T); received shape {rows.shape}.")
    offsets = np.array([offset for offset in range(-window, window + 1) if offset != 0])  # left to right
    length = rows.shape[1]
    context_positions = np.arange(length)[:, None] + offsets[None, :]  # (T, 2w)
    inside = (context_positions >= 0) & (context_positions < length)
    clipped = np.clip(context_positions, 0, length - 1)
    pairs = []
    for start in range(0, len(rows), 1024):  # a block of rows at a time: (n, T, 2w) stays small
        block = rows[start : start + 1024]
        centres = np.broadcast_to(block[:, :, None], (len(block), length, len(offsets)))
        contexts = block[:, clipped]  # (n, T, 2w)
        keep = inside[None] & (centres != PADDING_ID) & (contexts != PADDING_ID)
        pairs.append(np.stack([centres[keep], contexts[keep]], axis=1))
    return np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype="int64")


def noise_distribution(counts, power: float = 0.75) -> np.ndarray:
    """The distribution negatives are drawn from: each word's count to the 3/4 power, normalised.

    The power lifts rare words above their share of the text and lowers common ones (Mikolov et
    al., 2013b, §2.2, found 3/4 better than the plain unigram distribution or a uniform one).

    Args:
        counts: int or float ``(V,)``, each id's count in the text (padding's is set to 0).
        power: float ≥ 0.

    Returns:
        float64 ``(V,)`` summing to 1, 0 for padding and for unseen ids.

    Raises:
        ValueError: for a negative ``power`` or counts with no positive entry besides padding.

    Example:
        >>> noise_distribution([0, 16, 1], power=0.75).round(3).tolist()
        [0.0, 0.889, 0.111]
    """
    if power < 0:
        raise ValueError(f"`power` must be >= 0; received {power!r}.")
    weights = np.asarray(counts, dtype="float64").copy()
    weights[PADDING_ID] = 0.0
    weights = np.where(weights > 0, weights**power, 0.0)
    if weights.sum() <= 0:
        raise ValueError("`counts` must have a positive count for some id other than padding (0).")
    return weights / weights.sum()


class SkipGramBatches(keras.utils.PyDataset):
    """Batches for skip-gram with negative sampling: each real pair with ``negatives`` random context words.

    Every epoch shuffles the pairs and draws new negatives from ``noise``.

    Args:
        pairs: int ``(P, 2)`` from :func:`skipgram_pairs`.
        noise: float ``(V,)`` from :func:`noise_distribution`.
        negatives: int k ≥ 1, noise words per real pair (5–20 for small data, Mikolov et al., 2013b).
        batch_size: int.
        seed: int.

    Yields:
        ``({"centre": int (B,), "context": int (B, 1 + k)}, float32 labels (B, 1 + k))``: the
        real context first (label 1), then the k drawn ones (label 0; a drawn word that happens
        to be the real one keeps label 0, as in the paper).
    """

    def __init__(self, pairs, noise, negatives: int, batch_size: int, seed: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.pairs = np.asarray(pairs, dtype="int32")
        self.noise = np.asarray(noise, dtype="float64")
        self.negatives = check_integer("negatives", negatives)
        self.batch_size = check_integer("batch_size", batch_size)
        self.rng = np.random.default_rng(check_integer("seed", seed, minimum=0))
        self.order = self.rng.permutation(len(self.pairs))

    def __len__(self):
        return -(-len(self.pairs) // self.batch_size)

    def __getitem__(self, index):
        batch = self.pairs[self.order[index * self.batch_size : (index + 1) * self.batch_size]]
        drawn = self.rng.choice(len(self.noise), size=(len(batch), self.negatives), p=self.noise).astype("int32")
        context = np.concatenate([batch[:, 1:], drawn], axis=1)
        labels = np.zeros(context.shape, dtype="float32")
        labels[:, 0] = 1.0
        return {"centre": batch[:, 0], "context": context}, labels

    def on_epoch_end(self):
        self.order = self.rng.permutation(len(self.pairs))


@keras.saving.register_keras_serializable(package="transformer_course")
class SkipGram(keras.Model):
    """Skip-gram with negative sampling: P(real neighbour) = σ(centre vector · context vector).

    Two tables: ``centre_embedding`` (the word vectors kept afterwards) and
    ``context_embedding`` (a word's vector when it is the neighbour). Trained with binary
    cross-entropy on :class:`SkipGramBatches`.

    Args:
        vocabulary_size: int V.
        embed_dim: int D.
        **kwargs: passed to ``keras.Model``.

    Call arguments:
        inputs: ``{"centre": int (B,), "context": int (B, K)}``.

    Returns:
        float32 ``(B, K)``, the probability that each context word is a real neighbour.

    Raises:
        ValueError: for non-positive sizes.

    Source: Mikolov et al., 2013b, equation (4).

    Example:
        >>> model = SkipGram(20, 4)
        >>> tuple(model({"centre": np.array([3]), "context": np.array([[4, 5, 6]])}).shape)
        (1, 3)
    """

    def __init__(self, vocabulary_size, embed_dim, **kwargs):
        vocabulary_size = check_integer("vocabulary_size", vocabulary_size)
        embed_dim = check_integer("embed_dim", embed_dim)
        inputs = {
            "centre": keras.Input(shape=(), dtype="int32", name="centre"),
            "context": keras.Input(shape=(None,), dtype="int32", name="context"),
        }
        centre_embedding = keras.layers.Embedding(vocabulary_size, embed_dim, name="centre_embedding")
        context_embedding = keras.layers.Embedding(vocabulary_size, embed_dim, name="context_embedding")
        centre = centre_embedding(inputs["centre"])  # (B, D)
        context = context_embedding(inputs["context"])  # (B, K, D)
        scores = keras.layers.Dot(axes=(1, 2), name="scores")([centre, context])  # (B, K)
        probabilities = keras.layers.Activation("sigmoid", name="probabilities", dtype="float32")(scores)
        super().__init__(inputs, probabilities, **kwargs)
        self.centre_embedding, self.context_embedding = centre_embedding, context_embedding
        self.vocabulary_size, self.embed_dim = vocabulary_size, embed_dim

    def word_vectors(self) -> np.ndarray:
        """The centre-word table, float32 NumPy ``(V, D)``: the word vectors."""
        return np.asarray(ops.convert_to_numpy(self.centre_embedding.embeddings))

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "vocabulary_size": self.vocabulary_size,
            "embed_dim": self.embed_dim,
        }


def nearest_words(vectors, query, count: int = 5, exclude=()) -> list[tuple[int, float]]:
    """The ``count`` ids whose vectors have the highest cosine similarity to ``query``.

    Args:
        vectors: float ``(V, D)``; row 0 (padding) is never returned.
        query: float ``(D,)``.
        count: int ≥ 1.
        exclude: ids never returned (the words of an analogy's question).

    Returns:
        list of ``(id, cosine)`` pairs, most similar first (fewer than ``count`` when fewer ids
        are left).

    Raises:
        ValueError: for a ``count`` below 1 or a ``query`` whose width is not D.

    Example:
        >>> nearest_words(np.array([[0, 0], [1, 0], [0, 1], [1, 1]], "float32"), np.array([1.0, 0.1]), 2)
        [(1, 0.995), (3, 0.774)]
    """
    count = check_integer("count", count)
    vectors, query = np.asarray(vectors, dtype="float64"), np.asarray(query, dtype="float64")
    if query.shape != vectors.shape[1:]:
        raise ValueError(f"`query` must have shape {vectors.shape[1:]}; received {query.shape}.")
    norms = np.linalg.norm(vectors, axis=1) * max(np.linalg.norm(query), 1e-12)
    cosines = vectors @ query / np.maximum(norms, 1e-12)
    cosines[[PADDING_ID, *exclude]] = -np.inf
    best = [index for index in np.argsort(-cosines, kind="stable") if np.isfinite(cosines[index])][:count]
    return [(int(index), round(float(cosines[index]), 3)) for index in best]


def analogy(vectors, a: int, b: int, c: int, count: int = 5) -> list[tuple[int, float]]:
    """ "a is to b as c is to ?": the nearest words to ``b - a + c``, the three question words left out.

    Each vector is scaled to length 1 first (Mikolov et al., 2013c, "Linguistic Regularities in
    Continuous Space Word Representations", §4: king − man + woman ≈ queen).

    Args:
        vectors: float ``(V, D)``.
        a, b, c: ints, ids.
        count: int ≥ 1.

    Returns:
        as :func:`nearest_words`.

    Example:
        >>> table = np.array([[0, 0], [1, 0], [1, 1], [0, 1], [-1, 1]], "float32")
        >>> analogy(table, 1, 2, 3, count=1)
        [(4, 0.816)]
    """
    vectors = np.asarray(vectors, dtype="float64")
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return nearest_words(unit, unit[b] - unit[a] + unit[c], count, exclude=(a, b, c))
