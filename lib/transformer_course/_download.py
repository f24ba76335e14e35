"""Download once, verify by sha256, convert, cache: the machinery behind :mod:`transformer_course.datasets`.

A :class:`DataSource` says where an archive comes from and its published checksum; :func:`download`
fetches it into ``<cache dir>/downloads/`` (or takes a copy placed there by hand), checks the
checksum, and :func:`_ensure_cached` converts it once into the cache layout, writing every file
atomically so that an interrupted run leaves no half-written file. The errors name the file, the
address and what to do.

The cache directory is, in order: the ``cache_dir`` argument, the ``COURSE_DATA_DIR``
environment variable, then a per-user cache directory (``platformdirs.user_cache_dir``).
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ._files import atomic_output

# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


class DatasetError(Exception):
    """Base class of every data-loading error in this module."""


class ChecksumError(DatasetError):
    """A downloaded file's sha256 differs from the published one; the file was deleted."""

    def __init__(self, filename: str, expected: str, actual: str):
        self.filename, self.expected, self.actual = filename, expected, actual
        super().__init__(
            f"Checksum mismatch for {filename}: expected sha256 {expected}, got {actual}. "
            "The file was deleted; download it again (a proxy or a changed upstream file can "
            "cause this)."
        )


class DownloadError(DatasetError):
    """A download failed or was cut short; no partial file was kept."""


class DatasetUnavailableError(DownloadError):
    """The data is not in the cache and cannot be downloaded (offline, or downloads disabled)."""


class CorruptCacheError(DatasetError):
    """A cache file exists but cannot be read as the expected data."""

    def __init__(self, path: Path, problem: str):
        self.path = Path(path)
        super().__init__(
            f"The cached file {self.path} is corrupt: {problem}. Delete it and load the data "
            "again to rebuild it from the downloaded archive."
        )


# --------------------------------------------------------------------------------------------
# Cache directory, download and atomic writes
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataSource:
    """Where a data set comes from and what it must hold once converted.

    Attributes:
        name: str, what the data set is called in messages.
        url: str, the canonical upstream address of the archive.
        sha256: str, the archive's published sha256 (64 lowercase hex digits).
        filename: str, the name the archive is saved under in ``<cache dir>/downloads/``.
        expected_records: int or None, rows each split must hold once converted (IMDB: reviews
            per split; spa-eng: sentence pairs); ``None`` skips that check.
    """

    name: str
    url: str
    sha256: str
    filename: str
    expected_records: int | None = None


_CHUNK_BYTES = 1 << 20


def cache_directory(cache_dir: str | os.PathLike | None = None) -> Path:
    """The data cache directory: ``cache_dir``, else ``COURSE_DATA_DIR``, else a per-user cache.

    Args:
        cache_dir: str or path, or None.

    Returns:
        The directory as an absolute ``Path`` (it may not exist yet).
    """
    if cache_dir is None:
        cache_dir = os.environ.get("COURSE_DATA_DIR") or None
    if cache_dir is None:
        import platformdirs

        cache_dir = platformdirs.user_cache_dir("transformer-course")
    return Path(cache_dir).expanduser().resolve()


def pin_data_directory() -> None:
    """Make a relative ``COURSE_DATA_DIR`` absolute, against the current directory.

    Call it in a process that starts notebook kernels (the runner, the test suite) before any
    kernel starts: a kernel runs in the notebook's folder, where a relative path would point
    somewhere else than where the user typed it.
    """
    value = os.environ.get("COURSE_DATA_DIR")
    if value:
        os.environ["COURSE_DATA_DIR"] = str(Path(value).expanduser().resolve())


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(_CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _manual_instructions(source: DataSource, destination: Path, files: str) -> str:
    return (
        f"Download {source.url} by hand (sha256 {source.sha256}) and save it as {destination}, "
        f"then run this again; or set COURSE_DATA_DIR (or pass `cache_dir`) to a folder that "
        f"already holds {files}."
    )


def _ensure_cached(
    root: Path,
    paths: list[Path],
    source: DataSource,
    convert: Callable[[Path, Path], None],
    download_if_missing: bool,
    progress: bool,
) -> None:
    """Make sure the converted ``paths`` exist under ``root``: download and convert if missing.

    ``convert(archive, folder)`` writes the converted files into ``paths[0].parent``.
    """
    if all(path.exists() for path in paths):
        return
    archive_path = root / "downloads" / source.filename
    if not download_if_missing and not archive_path.exists():
        wanted = " and ".join(str(path.relative_to(root)) for path in paths)
        raise DatasetUnavailableError(
            f"{source.name} is not in the cache {root}. " + _manual_instructions(source, archive_path, wanted)
        )
    archive = download(source, root / "downloads", progress=progress)
    convert(archive, paths[0].parent)


def download(source: DataSource, directory: str | os.PathLike, *, progress: bool = True, timeout: float = 60) -> Path:
    """Download ``source`` into ``directory`` and verify its sha256; reuse a verified copy.

    The bytes go to a temporary file beside the destination and are hashed on the way; the file
    is moved into place only when the download is complete and the checksum matches, so an
    interrupted or failed download never leaves a partial or unverified file behind.

    Args:
        source: a :class:`DataSource`.
        directory: where to save ``source.filename`` (created if missing).
        progress: bool, show a progress bar (tqdm) while downloading.
        timeout: float, seconds to wait on the connection before giving up.

    Returns:
        The path of the verified file.

    Raises:
        ChecksumError: the downloaded (or an already present) file has another sha256; the file
            is deleted.
        DatasetUnavailableError: the server cannot be reached (offline); the message says what
            to download by hand and where to put it.
        DownloadError: the connection broke off or the server answered with an error.
    """
    destination = Path(directory) / source.filename
    if destination.exists():
        actual = _sha256_of(destination)
        if actual == source.sha256:
            return destination
        destination.unlink()
        raise ChecksumError(str(destination), source.sha256, actual)

    from tqdm.auto import tqdm

    instructions = _manual_instructions(source, destination, "the converted files")
    with atomic_output(destination) as temporary:
        digest, received = hashlib.sha256(), 0
        try:
            with urllib.request.urlopen(source.url, timeout=timeout) as response:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                with (
                    open(temporary, "wb") as stream,
                    tqdm(
                        total=total,
                        unit="B",
                        unit_scale=True,
                        desc=source.filename,
                        disable=not progress,
                        leave=False,
                    ) as bar,
                ):
                    for chunk in iter(lambda: response.read(_CHUNK_BYTES), b""):
                        stream.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        bar.update(len(chunk))
        except urllib.error.HTTPError as error:
            raise DownloadError(
                f"Downloading {source.url} failed: HTTP {error.code} {error.reason}. {instructions}"
            ) from error
        except urllib.error.URLError as error:
            raise DatasetUnavailableError(
                f"Cannot reach {source.url} ({error.reason}); are you offline? {instructions}"
            ) from error
        except (OSError, EOFError) as error:  # includes http.client.IncompleteRead, timeouts
            raise DownloadError(
                f"The download of {source.url} broke off after {received:,} bytes ({error!r}); "
                f"nothing was kept. Try again. {instructions}"
            ) from error
        if total is not None and received != total:
            raise DownloadError(
                f"The download of {source.url} broke off after {received:,} of {total:,} bytes; "
                f"nothing was kept. Try again. {instructions}"
            )
        actual = digest.hexdigest()
        if actual != source.sha256:
            raise ChecksumError(source.url, source.sha256, actual)
    return destination
