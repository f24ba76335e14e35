"""The course's real data: IMDB reviews and English–Spanish sentence pairs.

(The reversal task of notebooks 01 and 02 is made on the fly: :mod:`transformer_course.reversal`.)

The two data sets are downloaded once from their canonical upstream address, verified by sha256,
converted into the cache layout below, and read from the cache from then on::

    <cache dir>/imdb/train.csv.gz      25,000 reviews, header ``text,label``
    <cache dir>/imdb/test.csv.gz       25,000 reviews
    <cache dir>/spa-eng/spa.txt.gz     118,964 lines ``English<TAB>Spanish``

The cache directory is, in order: the ``cache_dir`` argument, the ``COURSE_DATA_DIR``
environment variable, then a per-user cache directory (``platformdirs.user_cache_dir``).
A read-only cache that already holds the files is fine: loading never writes to it.
"""

from __future__ import annotations

import csv
import gzip
import os
import random
import re
import shutil
import tarfile
import zipfile
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ._download import (
    ChecksumError,
    CorruptCacheError,
    DatasetError,
    DatasetUnavailableError,
    DataSource,
    DownloadError,
    _ensure_cached,
    cache_directory,
    download,
    pin_data_directory,
)
from ._files import atomic_output

__all__ = [
    "load_imdb",
    "load_imdb_unlabelled",
    "distinct_texts",
    "DistinctTexts",
    "load_spa_eng",
    "split_pairs",
    "cache_directory",
    "pin_data_directory",
    "download",
    "DataSource",
    "TextSplit",
    "IMDB_SOURCE",
    "SPA_ENG_SOURCE",
    "DatasetError",
    "ChecksumError",
    "DownloadError",
    "DatasetUnavailableError",
    "CorruptCacheError",
]


IMDB_SOURCE = DataSource(
    name="IMDB movie reviews (aclImdb v1, Maas et al. 2011)",
    url="https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
    sha256="c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe",
    filename="aclImdb_v1.tar.gz",
    expected_records=25_000,
)

SPA_ENG_SOURCE = DataSource(
    name="English-Spanish sentence pairs (Tatoeba via manythings.org/anki, 2018-05-13)",
    url="https://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip",
    sha256="0c4fd7825d3d872488d38c157f784e035edab4f2ff0df25a2a208790ecb5b58f",
    filename="spa-eng.zip",
    expected_records=118_964,
)

# --------------------------------------------------------------------------------------------
# IMDB
# --------------------------------------------------------------------------------------------


class TextSplit(NamedTuple):
    """One split of a labelled text data set.

    Attributes:
        texts: list of N str, the raw texts.
        labels: int64 array of shape ``(N,)``.
    """

    texts: list
    labels: np.ndarray


class DistinctTexts(NamedTuple):
    """Texts fit to pre-train on, and what was dropped to get them (:func:`distinct_texts`).

    Attributes:
        texts: list of str, each candidate kept, once, in first-seen order.
        excluded: int, candidates dropped because they occur among the excluded texts.
        repeated: int, second (and later) copies dropped.
    """

    texts: list
    excluded: int
    repeated: int


def distinct_texts(candidates: Sequence[str], excluded: Iterable[str]) -> DistinctTexts:
    """The candidates a model may pre-train on: none that occurs among ``excluded``, and each once.

    What notebooks 08, 09 and 11 do to IMDB's training and unlabelled reviews before pre-training:
    the archive holds exact duplicates, some of them of test reviews, and a model that has read a
    test review, even without its label, has seen the very text it is graded on. Order is kept
    (the first copy of each text stays where it was).

    Args:
        candidates: sequence of str (e.g. ``train.texts + load_imdb_unlabelled()``).
        excluded: iterable of str that must not be trained on (e.g. ``test.texts``).

    Returns:
        :class:`DistinctTexts`: the kept texts and the two counts; ``len(candidates)`` is
        ``len(texts) + excluded + repeated``.

    Example:
        >>> distinct_texts(["a", "b", "a", "t", "c", "b"], excluded=["t"])
        DistinctTexts(texts=['a', 'b', 'c'], excluded=1, repeated=2)
    """
    excluded = set(excluded)
    kept = list(dict.fromkeys(text for text in candidates if text not in excluded))
    dropped = sum(text in excluded for text in candidates)
    return DistinctTexts(kept, dropped, len(candidates) - dropped - len(kept))


_IMDB_MEMBER = re.compile(r"^aclImdb/(train|test)/(neg|pos)/(\d+)_(\d+)\.txt$")
_IMDB_UNLABELLED_MEMBER = re.compile(r"^aclImdb/train/unsup/(\d+)_0\.txt$")
IMDB_UNLABELLED_RECORDS = 50_000
_IMDB_LABELS = {"neg": 0, "pos": 1}
_IMDB_SHUFFLE_SEED = 1337


def _imdb_row_order(keys: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The cache's row order: sort by (label, review id) — neg before pos — then shuffle."""
    ordered = sorted(keys)
    random.Random(_IMDB_SHUFFLE_SEED).shuffle(ordered)
    return ordered


def _convert_imdb(archive: Path, folder: Path) -> None:
    """Convert ``aclImdb_v1.tar.gz`` into ``folder/{train,test,unsup}.csv.gz`` (atomic writes).

    ``train`` and ``test``: header ``text,label``, rows in :func:`_imdb_row_order`. ``unsup``
    (the 50,000 unlabelled reviews of ``train/unsup``): header ``text``, rows sorted by review id.
    """
    reviews: dict[str, dict[tuple[int, int], str]] = {"train": {}, "test": {}}
    unlabelled: dict[int, str] = {}
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                match = _IMDB_MEMBER.match(member.name)
                unlabelled_match = _IMDB_UNLABELLED_MEMBER.match(member.name)
                if not (match or unlabelled_match) or not member.isfile():
                    continue
                text = tar.extractfile(member).read().decode("utf-8")
                if unlabelled_match:
                    unlabelled[int(unlabelled_match.group(1))] = text
                    continue
                split, label, review_id, _rating = match.groups()
                reviews[split][(_IMDB_LABELS[label], int(review_id))] = text
    except (tarfile.TarError, OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        raise CorruptCacheError(archive, f"cannot read it as the IMDB archive ({error})") from error
    for split, rows in reviews.items():
        if not rows:
            raise CorruptCacheError(archive, f"it holds no aclImdb/{split}/(pos|neg) reviews")
        with atomic_output(folder / f"{split}.csv.gz") as temporary:
            with gzip.open(temporary, "wt", encoding="utf-8", newline="") as stream:
                writer = csv.writer(stream, lineterminator="\n")
                writer.writerow(["text", "label"])
                for key in _imdb_row_order(list(rows)):
                    writer.writerow([rows[key], key[0]])
    if not unlabelled:
        raise CorruptCacheError(archive, "it holds no aclImdb/train/unsup reviews")
    with atomic_output(folder / "unsup.csv.gz") as temporary:
        with gzip.open(temporary, "wt", encoding="utf-8", newline="") as stream:
            writer = csv.writer(stream, lineterminator="\n")
            writer.writerow(["text"])
            for review_id in sorted(unlabelled):
                writer.writerow([unlabelled[review_id]])


def _read_imdb_csv(path: Path, header: list[str], expected_records: int | None, row_is_valid, what: str) -> list:
    """The rows of a cached IMDB CSV file with this ``header``.

    A row failing ``row_is_valid`` is named in the error as not ``what``.
    """
    rows = []
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as stream:
            reader = csv.reader(stream)
            found = next(reader, None)
            if found != header:
                raise CorruptCacheError(path, f"its header is {found!r}, not {header!r}")
            for row in reader:
                if len(row) != len(header) or not row_is_valid(row):
                    raise CorruptCacheError(path, f"row {reader.line_num} is not {what}")
                rows.append(row)
    except (OSError, EOFError, zlib.error, csv.Error, UnicodeDecodeError) as error:
        raise CorruptCacheError(path, f"it cannot be read ({error})") from error
    if expected_records is not None and len(rows) != expected_records:
        raise CorruptCacheError(path, f"it holds {len(rows):,} reviews, not {expected_records:,}")
    return rows


def _read_imdb_split(path: Path, expected_records: int | None) -> TextSplit:
    rows = _read_imdb_csv(
        path, ["text", "label"], expected_records, lambda row: row[1] in ("0", "1"), "a text and a 0/1 label"
    )
    return TextSplit([text for text, _ in rows], np.asarray([int(label) for _, label in rows], dtype="int64"))


def load_imdb(
    cache_dir: str | os.PathLike | None = None,
    *,
    source: DataSource = IMDB_SOURCE,
    download_if_missing: bool = True,
    progress: bool = True,
) -> tuple[TextSplit, TextSplit]:
    """The IMDB Large Movie Review Dataset, original 25,000 / 25,000 train / test split.

    Texts are the raw reviews (mixed case, punctuation, ``<br />`` tags); labels are 1 for a
    positive review (rating >= 7) and 0 for a negative one (rating <= 4). Rows come shuffled in
    a fixed order, so a plain validation split is not single-class.

    Args:
        cache_dir: the cache directory; see :func:`cache_directory`.
        source: where to download from if the cache lacks the files (tests pass their own).
        download_if_missing: bool, download when the cache lacks the files; if False, raise.
        progress: bool, show a progress bar while downloading.

    Returns:
        ``(train, test)``, two :class:`TextSplit` of 25,000 reviews each.

    Raises:
        DatasetUnavailableError: the files are not cached and cannot be downloaded; the message
            says what to download and where to put it.
        ChecksumError, DownloadError: the download failed; nothing partial is kept.
        CorruptCacheError: a cached file cannot be read or holds the wrong number of reviews.

    Source:
        Maas et al., 2011. "Learning Word Vectors for Sentiment Analysis", ACL-HLT.
        https://ai.stanford.edu/~amaas/data/sentiment/
    """
    root = cache_directory(cache_dir)
    paths = [root / "imdb" / "train.csv.gz", root / "imdb" / "test.csv.gz"]
    _ensure_cached(root, paths, source, _convert_imdb, download_if_missing, progress)
    train, test = (_read_imdb_split(path, source.expected_records) for path in paths)
    return train, test


def _read_imdb_unlabelled(path: Path, expected_records: int | None) -> list[str]:
    return [row[0] for row in _read_imdb_csv(path, ["text"], expected_records, lambda row: True, "one text")]


def load_imdb_unlabelled(
    cache_dir: str | os.PathLike | None = None,
    *,
    source: DataSource = IMDB_SOURCE,
    download_if_missing: bool = True,
    progress: bool = True,
) -> list[str]:
    """The 50,000 unlabelled reviews of the IMDB archive (``aclImdb/train/unsup``), as raw text.

    They come from the same archive as :func:`load_imdb` and are meant for unsupervised
    learning (pre-training). They contain no test reviews by design, but some exact duplicates of
    test (and training) texts exist in the archive: drop those before pre-training.

    Args:
        cache_dir: the cache directory; see :func:`cache_directory`.
        source: where to download from if the cache lacks the file (tests pass their own); its
            ``expected_records`` is the labelled splits' count, so the 50,000 here is checked
            only when it is set.
        download_if_missing: bool, download when the cache lacks the file; if False, raise.
        progress: bool, show a progress bar while downloading.

    Returns:
        list of 50,000 str, sorted by review id (not shuffled).

    Raises:
        DatasetUnavailableError: the file is not cached and cannot be downloaded; the message
            says what to download and where to put it.
        ChecksumError, DownloadError: the download failed; nothing partial is kept.
        CorruptCacheError: the cached file cannot be read or holds the wrong number of reviews.

    Example:
        >>> reviews = load_imdb_unlabelled()  # doctest: +SKIP
        >>> len(reviews)  # doctest: +SKIP
        50000

    Source:
        Maas et al., 2011. "Learning Word Vectors for Sentiment Analysis", ACL-HLT.
        https://ai.stanford.edu/~amaas/data/sentiment/
    """
    root = cache_directory(cache_dir)
    path = root / "imdb" / "unsup.csv.gz"
    _ensure_cached(root, [path], source, _convert_imdb, download_if_missing, progress)
    expected = IMDB_UNLABELLED_RECORDS if source.expected_records is not None else None
    return _read_imdb_unlabelled(path, expected)


# --------------------------------------------------------------------------------------------
# English-Spanish pairs
# --------------------------------------------------------------------------------------------

_SPA_ENG_MEMBER = "spa-eng/spa.txt"


def _convert_spa_eng(archive: Path, folder: Path) -> None:
    """Copy ``spa-eng/spa.txt`` out of the zip into ``folder/spa.txt.gz`` (atomic write)."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            with bundle.open(_SPA_ENG_MEMBER) as member, atomic_output(folder / "spa.txt.gz") as temporary:
                with (
                    open(temporary, "wb") as raw,
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=9, mtime=0) as stream,
                ):
                    shutil.copyfileobj(member, stream)
    except KeyError as error:
        raise CorruptCacheError(archive, f"it has no member {_SPA_ENG_MEMBER}") from error
    except (zipfile.BadZipFile, OSError, zlib.error) as error:
        raise CorruptCacheError(archive, f"cannot read it as a zip archive ({error})") from error


def _read_spa_eng(path: Path, expected_records: int | None) -> list[tuple[str, str]]:
    pairs = []
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as stream:
            for number, line in enumerate(stream, start=1):
                fields = line.rstrip("\n").split("\t")
                if len(fields) != 2 or not fields[0] or not fields[1]:
                    raise CorruptCacheError(path, f"line {number} is not 'English<TAB>Spanish': {line[:80]!r}")
                pairs.append((fields[0], fields[1]))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError) as error:
        raise CorruptCacheError(path, f"it cannot be read ({error})") from error
    if expected_records is not None and len(pairs) != expected_records:
        raise CorruptCacheError(path, f"it holds {len(pairs):,} pairs, not {expected_records:,}")
    return pairs


def load_spa_eng(
    cache_dir: str | os.PathLike | None = None,
    *,
    source: DataSource = SPA_ENG_SOURCE,
    download_if_missing: bool = True,
    progress: bool = True,
) -> list[tuple[str, str]]:
    """English–Spanish sentence pairs from the Tatoeba Project (manythings.org/anki, 2018).

    Args:
        cache_dir: the cache directory; see :func:`cache_directory`.
        source: where to download from if the cache lacks the file (tests pass their own).
        download_if_missing: bool, download when the cache lacks the file; if False, raise.
        progress: bool, show a progress bar while downloading.

    Returns:
        A list of 118,964 ``(english, spanish)`` str pairs, in file order (short to long).
        Spanish keeps its accents and ¿ ¡.

    Raises:
        DatasetUnavailableError: the file is not cached and cannot be downloaded; the message
            says what to download and where to put it.
        ChecksumError, DownloadError: the download failed; nothing partial is kept.
        CorruptCacheError: the cached file cannot be read or holds the wrong number of pairs.

    Source:
        Tatoeba (tatoeba.org), via manythings.org/anki; CC-BY 2.0 FR.
    """
    root = cache_directory(cache_dir)
    path = root / "spa-eng" / "spa.txt.gz"
    _ensure_cached(root, [path], source, _convert_spa_eng, download_if_missing, progress)
    return _read_spa_eng(path, source.expected_records)


def split_pairs(pairs, fractions=(0.7, 0.15, 0.15), seed: int = 0):
    """Shuffle sentence pairs with a fixed seed and cut them into train, validation and test.

    Args:
        pairs: a sequence of items (for example ``(english, spanish)`` tuples).
        fractions: three positive floats summing to 1: the train, validation and test shares.
        seed: int, seeds the shuffle; the same seed and input give the same split.

    Returns:
        ``(train, validation, test)``, three lists that together hold every pair exactly once;
        the test list takes whatever rounding leaves over.

    Raises:
        ValueError: if ``fractions`` is not three positive numbers summing to 1, or ``pairs``
            is empty.
    """
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1.0) > 1e-9:
        raise ValueError(f"`fractions` must be three positive numbers summing to 1; received {fractions!r}.")
    items = list(pairs)
    if not items:
        raise ValueError("`pairs` is empty: there is nothing to split.")
    order = np.random.default_rng(seed).permutation(len(items))
    train_end = int(round(fractions[0] * len(items)))
    validation_end = train_end + int(round(fractions[1] * len(items)))
    shuffled = [items[i] for i in order]
    return shuffled[:train_end], shuffled[train_end:validation_end], shuffled[validation_end:]
