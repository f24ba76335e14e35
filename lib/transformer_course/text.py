"""Text in, token ids out: standardisation functions and length-bucketed `tf.data` batches.

The standardisation functions are registered with Keras, so a ``TextVectorization`` layer that
uses one saves inside a ``.keras`` model and loads back with no ``custom_objects``.

* :func:`standardize_review` — IMDB reviews: lower case, HTML line breaks (``<br />``) removed,
  punctuation removed.
* :func:`standardize_translation` — English or Spanish sentences for translation: lower case,
  punctuation removed **except** Spanish ``¿`` and ``¡``, accents kept (``á é í ó ú ü ñ``), and
  ``[`` ``]`` kept so the ``[start]`` / ``[end]`` markers survive.
* :func:`standardize_running_text` — IMDB reviews as running text for a language model (notebook
  09): lower case, ``<br />`` removed, sentence punctuation kept as tokens of its own, so
  generated text has sentences.
* :func:`trim_padding` and :func:`bucket_by_length` — batch reviews of similar length together
  so a batch is padded to its bucket, not to the longest review in the data set.
* :func:`vectorized_batches` — texts and labels to bucketed batches (classification, notebook 06).
* :func:`translation_batches` — sentence pairs to teacher-forcing batches (translation, notebook 07).
"""

from __future__ import annotations

import re
import string

from . import _quiet_keras  # noqa: F401  (before Keras: TensorFlow's start-up log filtered)

# isort: split
import keras
import numpy as np

from ._backend import import_tensorflow_quietly
from ._ids import PADDING_ID

# tf.data and tf.strings, whatever the Keras backend; imported without the start-up INFO records.
tf = import_tensorflow_quietly()

__all__ = [
    "standardize_review",
    "standardize_translation",
    "standardize_running_text",
    "TRANSLATION_STRIPPED_CHARACTERS",
    "RUNNING_TEXT_MARKS",
    "trim_padding",
    "bucket_by_length",
    "vectorized_batches",
    "translation_batches",
]

# Unicode separators and control characters (U+0085, U+2028, vertical tab, ...). Splitting text on
# ASCII whitespace leaves them inside words, and a vocabulary holding such a "word" breaks when
# Keras saves it one word per line and reads it back with str.splitlines(). Both
# standardisations turn them into spaces.
UNICODE_SEPARATORS = r"[\pZ\pC]"

# The punctuation a language model keeps as tokens of their own (notebook 09); the apostrophe stays
# inside words ("don't"), every other ASCII mark is dropped.
RUNNING_TEXT_MARKS = '.,!?;:()"'

# Every ASCII punctuation mark except the square brackets of "[start]" and "[end]".
TRANSLATION_STRIPPED_CHARACTERS = string.punctuation.replace("[", "").replace("]", "")


def _check_strings(name: str, texts) -> tf.Tensor:
    texts = tf.convert_to_tensor(texts)
    if texts.dtype != tf.string:
        raise TypeError(f"`{name}` must hold strings; received a tensor of dtype {texts.dtype.name}.")
    return texts


@keras.saving.register_keras_serializable(package="transformer_course")
def standardize_review(texts):
    """Lower-case a batch of reviews, drop ``<br />`` tags and punctuation.

    Without the tag removal, "br" becomes one of the most frequent "words" of IMDB (notebook 03).

    Args:
        texts: string tensor of any shape (a ``TextVectorization`` passes ``(B,)`` or ``(B, 1)``).

    Returns:
        string tensor, the same shape. Words stay separated by whitespace.

    Raises:
        TypeError: if ``texts`` does not hold strings.

    Example:
        >>> standardize_review(tf.constant(["Great!<br /><br />A MUST-see."])).numpy()
        array([b'great  a mustsee'], dtype=object)
    """
    texts = tf.strings.lower(_check_strings("texts", texts))
    texts = tf.strings.regex_replace(texts, r"<br\s*/?>", " ")
    texts = tf.strings.regex_replace(texts, UNICODE_SEPARATORS, " ")
    return tf.strings.regex_replace(texts, f"[{re.escape(string.punctuation)}]", "")


@keras.saving.register_keras_serializable(package="transformer_course")
def standardize_running_text(texts):
    """Lower-case reviews for a language model, keeping sentence punctuation as separate tokens.

    ``<br />`` tags and Unicode separators become spaces; the marks in
    :data:`RUNNING_TEXT_MARKS` (``. , ! ? ; : ( ) "``) get a space on each side, so a
    whitespace split makes each one a token; the apostrophe stays inside its word ("don't" is
    one token); every other ASCII punctuation mark is dropped. Runs of spaces become one.

    Args:
        texts: string tensor of any shape.

    Returns:
        string tensor, the same shape.

    Raises:
        TypeError: if ``texts`` does not hold strings.

    Example:
        >>> standardize_running_text(tf.constant(["Great film!<br />I didn't-like (the) END..."])).numpy()[0].decode()
        "great film ! i didn't like ( the ) end . . ."
    """
    dropped = "".join(mark for mark in string.punctuation if mark not in RUNNING_TEXT_MARKS + "'")
    texts = tf.strings.lower(_check_strings("texts", texts), encoding="utf-8")
    texts = tf.strings.regex_replace(texts, r"<br\s*/?>", " ")
    texts = tf.strings.regex_replace(texts, UNICODE_SEPARATORS, " ")
    texts = tf.strings.regex_replace(texts, f"[{re.escape(dropped)}]", " ")
    texts = tf.strings.regex_replace(texts, f"([{re.escape(RUNNING_TEXT_MARKS)}])", r" \1 ")
    return tf.strings.strip(tf.strings.regex_replace(texts, r"\s+", " "))


@keras.saving.register_keras_serializable(package="transformer_course")
def standardize_translation(texts):
    """Lower-case English or Spanish text and drop punctuation, keeping ``¿ ¡``, accents and ``[ ]``.

    ``¿`` and ``¡`` are separated from the next word by a space so that "¿qué" becomes the two
    tokens "¿" and "qué": the model learns to open a question once, not once per question word.
    Accented letters are untouched (``tf.strings.lower`` lower-cases "Á" to "á").

    Args:
        texts: string tensor of any shape, UTF-8.

    Returns:
        string tensor, the same shape.

    Raises:
        TypeError: if ``texts`` does not hold strings.

    Example:
        >>> standardize_translation(tf.constant(["¿Dónde está el baño?"])).numpy()[0].decode()
        '¿ dónde está el baño'
    """
    texts = tf.strings.lower(_check_strings("texts", texts), encoding="utf-8")
    texts = tf.strings.regex_replace(texts, UNICODE_SEPARATORS, " ")
    texts = tf.strings.regex_replace(texts, f"[{re.escape(TRANSLATION_STRIPPED_CHARACTERS)}]", "")
    texts = tf.strings.regex_replace(texts, "([¿¡])", r"\1 ")
    return tf.strings.strip(tf.strings.regex_replace(texts, r"\s+", " "))


def trim_padding(token_ids):
    """Drop the trailing padding (id 0) of one vectorised sequence.

    Args:
        token_ids: int ``(T,)``, ids with padding only at the end (what ``TextVectorization``
            with ``output_sequence_length`` produces: id 0 is never a real token).

    Returns:
        int ``(L,)`` with ``L`` = number of non-zero ids.
    """
    length = tf.reduce_sum(tf.cast(tf.not_equal(token_ids, PADDING_ID), tf.int32))
    return token_ids[:length]


def bucket_by_length(dataset: tf.data.Dataset, boundaries, batch_size: int) -> tf.data.Dataset:
    """Batch ``(token_ids, label)`` pairs of similar length, each batch padded to its bucket.

    A review of 120 tokens padded to 600 costs five times the feed-forward work and
    (600/120)² = 25 times the attention work of the same review padded to 127. With a model that
    ignores padding (every layer masks it), bucketing changes the speed and nothing else.

    Args:
        dataset: unbatched ``tf.data.Dataset`` of ``(int (L,), label)``, lengths ``L`` varying.
        boundaries: increasing ints; bucket ``i`` holds lengths in
            ``[boundaries[i-1], boundaries[i])`` and is padded to ``boundaries[i] - 1``. Every
            ``L`` must be below ``boundaries[-1]``.
        batch_size: int, examples per batch (the last batch of a bucket may be smaller).

    Returns:
        a batched ``tf.data.Dataset`` of ``(int (B, boundary - 1), label (B,))``; a fixed set of
        shapes, so a compiled (XLA) model compiles once per bucket.

    Raises:
        ValueError: if ``boundaries`` is empty or not strictly increasing, or ``batch_size`` is
            not a positive integer.
    """
    boundaries = [int(b) for b in boundaries]
    if not boundaries or any(b <= a for a, b in zip(boundaries, boundaries[1:])) or boundaries[0] < 2:
        raise ValueError(f"`boundaries` must be strictly increasing integers >= 2; received {boundaries!r}.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer; received {batch_size!r}.")
    return dataset.bucket_by_sequence_length(
        element_length_func=lambda ids, label: tf.shape(ids)[0],
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[batch_size] * (len(boundaries) + 1),
        pad_to_bucket_boundary=True,
    )


def vectorized_batches(
    texts, labels, vectorizer, batch_size: int, bucket_boundaries=None, shuffle: bool = False, seed: int = 0
) -> tf.data.Dataset:
    """A `tf.data` pipeline from raw texts to batches of token ids: vectorise once, cache, batch.

    Steps: vectorise in chunks of 256 texts (``TextVectorization`` is faster on batches), cache
    the ids in memory, shuffle each epoch (if asked), batch — padded to the vectoriser's
    ``output_sequence_length``, or per length bucket — and prefetch the next batch while the
    model trains on this one.

    Args:
        texts: sequence of N strings.
        labels: sequence of N labels (any dtype ``tf.data`` accepts).
        vectorizer: an adapted ``keras.layers.TextVectorization`` with ``output_sequence_length``
            set (padding at the end, id 0).
        batch_size: int, examples per batch.
        bucket_boundaries: optional increasing ints for :func:`bucket_by_length`; the last one
            must exceed ``output_sequence_length``. None pads every batch to the full length.
        shuffle: bool, reshuffle the examples every epoch.
        seed: int, the shuffle seed.

    Returns:
        ``tf.data.Dataset`` of ``(int64 (B, T), labels (B,))``.

    Raises:
        ValueError: if ``texts`` and ``labels`` differ in length, or for bad boundaries.
    """
    if len(texts) != len(labels):
        raise ValueError(f"`texts` and `labels` must have the same length; received {len(texts)} and {len(labels)}.")
    dataset = tf.data.Dataset.from_tensor_slices((list(texts), list(labels)))
    dataset = (
        dataset.batch(256)
        .map(lambda text, label: (vectorizer(text), label), num_parallel_calls=tf.data.AUTOTUNE)
        .unbatch()
    )
    if bucket_boundaries is not None:
        dataset = dataset.map(lambda ids, label: (trim_padding(ids), label))
    dataset = dataset.cache()
    if bucket_boundaries is None:
        batches = -(-len(texts) // batch_size)
    else:  # one pass fills the cache and counts the batches each bucket will make
        lengths = np.array(list(dataset.map(lambda ids, label: tf.shape(ids)[0]).as_numpy_iterator()), dtype=int)
        per_bucket = np.bincount(
            np.searchsorted(bucket_boundaries, lengths, side="right"), minlength=len(bucket_boundaries) + 1
        )
        batches = int(np.sum(-(-per_bucket // batch_size)))
    if shuffle:
        dataset = dataset.shuffle(len(texts), seed=seed, reshuffle_each_iteration=True)
    if bucket_boundaries is None:
        dataset = dataset.batch(batch_size)
    else:
        dataset = bucket_by_length(dataset, bucket_boundaries, batch_size)
    # Unbatching loses the batch count; state it, so Keras shows progress and does not warn
    # that the data "ran out" at the end of the first epoch.
    return dataset.apply(tf.data.experimental.assert_cardinality(batches)).prefetch(tf.data.AUTOTUNE)


def translation_batches(
    pairs,
    source_vectorizer,
    target_vectorizer,
    batch_size: int,
    bucket_boundaries,
    shuffle: bool = False,
    seed: int = 0,
    wrap=None,
) -> tf.data.Dataset:
    """Sentence pairs to teacher-forcing batches, grouped by target length.

    Steps: wrap each target in its markers, vectorise in chunks of 256, cut each sentence's
    padding off, split the target into the decoder input (shifted right: without its last token)
    and the label (shifted left: without ``[start]``), cache, shuffle each epoch (if asked), and
    batch pairs of similar target length together, each batch padded to its longest sentence.

    Args:
        pairs: sequence of ``(source, target)`` strings.
        source_vectorizer, target_vectorizer: adapted ``TextVectorization`` layers with
            ``output_sequence_length`` set (longer sentences are cut there).
        batch_size: int, pairs per batch.
        bucket_boundaries: increasing ints; batches group labels of lengths
            ``[boundaries[i-1], boundaries[i])``.
        shuffle: bool, reshuffle the pairs every epoch.
        seed: int, the shuffle seed.
        wrap: function ``target -> target with markers``; default ``"[start] {target} [end]"``.

    Returns:
        ``tf.data.Dataset`` of ``({"source_ids": int64 (B, S'), "target_ids": int64 (B, T')},
        label int64 (B, T'))``, padded with 0 to each batch's longest sentence, its length (the
        number of batches) known to Keras.

    Raises:
        ValueError: if ``pairs`` is empty or ``batch_size`` is not a positive integer.
    """
    if not len(pairs):
        raise ValueError("`pairs` is empty; there is nothing to batch.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive integer; received {batch_size!r}.")
    wrap = wrap or (lambda target: f"[start] {target} [end]")
    sources, targets = [source for source, _ in pairs], [wrap(target) for _, target in pairs]
    dataset = (
        tf.data.Dataset.from_tensor_slices((sources, targets))
        .batch(256)
        .map(
            lambda source, target: (source_vectorizer(source), target_vectorizer(target)),
            num_parallel_calls=tf.data.AUTOTUNE,
        )
        .unbatch()
    )

    def teacher_forcing(source, target):  # decoder input = target shifted right, label = shifted left
        target = trim_padding(target)
        return {"source_ids": trim_padding(source), "target_ids": target[:-1]}, target[1:]

    dataset = dataset.map(teacher_forcing).cache()

    def bucketed(data):
        return data.bucket_by_sequence_length(
            lambda inputs, label: tf.shape(label)[0],
            list(bucket_boundaries),
            [batch_size] * (len(bucket_boundaries) + 1),
        )

    count = sum(1 for _ in bucketed(dataset))  # one pass fills the cache and counts the batches
    if shuffle:
        dataset = dataset.shuffle(len(pairs), seed=seed, reshuffle_each_iteration=True)
    return bucketed(dataset).apply(tf.data.experimental.assert_cardinality(count)).prefetch(tf.data.AUTOTUNE)
