"""The data loaders end to end: download from a local server, verify, convert, cache, read."""

import gzip
import hashlib
import http.server
import io
import os
import socket
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest

from transformer_course import datasets
from transformer_course.datasets import (
    ChecksumError,
    CorruptCacheError,
    DatasetUnavailableError,
    DataSource,
    DownloadError,
    cache_directory,
    load_imdb,
    load_imdb_unlabelled,
    load_spa_eng,
)

# Reviews with the characters a CSV round trip can break: commas, quotes, tabs, <br />, accents.
REVIEWS = {
    ("train", "pos", 0, 9): 'Bromwell High is a cartoon comedy, "quoted" and fun.',
    ("train", "pos", 1, 8): "Tabs\tinside<br /><br />and accents: café, naïve.",
    ("train", "neg", 0, 2): "Dull. Really, really dull.",
    ("train", "neg", 1, 1): "Worst film — ever?",
    ("test", "pos", 0, 10): "A delight.",
    ("test", "neg", 0, 2): "Once again Mr. Costner has dragged out a movie.",
}
UNLABELLED = {10: 'Unrated, "quoted", with, commas.', 2: "Second<br />review\twith a tab.", 0: "First — café."}
PAIRS = [("Go.", "Ve."), ("Hi.", "Hola."), ("Where is it?", "¿Dónde está?")]


def _imdb_archive() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:

        def add(name: str, text: str):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        add("aclImdb/README", "not a review")
        for review_id, text in UNLABELLED.items():  # out of id order, as a tar may list them
            add(f"aclImdb/train/unsup/{review_id}_0.txt", text)
        for (split, label, review_id, rating), text in REVIEWS.items():
            add(f"aclImdb/{split}/{label}/{review_id}_{rating}.txt", text)
    return buffer.getvalue()


def _spa_eng_archive() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        bundle.writestr("spa-eng/_about.txt", "about")
        bundle.writestr("spa-eng/spa.txt", "".join(f"{en}\t{es}\n" for en, es in PAIRS))
    return buffer.getvalue()


class _Server:
    """Serves files from memory on 127.0.0.1; paths starting with /dropped/ break off midway."""

    def __init__(self, files: dict[str, bytes]):
        files = dict(files)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.rsplit("/", 1)[-1]
                if name not in files:
                    self.send_error(404)
                    return
                body = files[name]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.path.startswith("/dropped/"):
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                else:
                    self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    files = {"aclImdb_v1.tar.gz": _imdb_archive(), "spa-eng.zip": _spa_eng_archive()}
    running = _Server(files)
    running.files = files
    yield running
    running.close()


def _source(server, filename, *, prefix="", sha256=None, records=None) -> DataSource:
    body = server.files[filename]
    return DataSource(
        name=f"test {filename}",
        url=f"{server.url}{prefix}/{filename}",
        sha256=sha256 or hashlib.sha256(body).hexdigest(),
        filename=filename,
        expected_records=records,
    )


def _closed_port_url(filename: str) -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/{filename}"  # nothing listens there now


def _files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- download, verify, convert ---------------------------------------------------------------


def test_imdb_download_converts_into_the_cache_layout(server, tmp_path):
    source = _source(server, "aclImdb_v1.tar.gz", records=None)
    train, test = load_imdb(tmp_path, source=source, progress=False)
    assert _files_in(tmp_path) == [
        "downloads/aclImdb_v1.tar.gz",
        "imdb/test.csv.gz",
        "imdb/train.csv.gz",
        "imdb/unsup.csv.gz",
    ]
    expected = {
        split: sorted((text, int(label == "pos")) for (s, label, _, _), text in REVIEWS.items() if s == split)
        for split in ("train", "test")
    }
    assert sorted(zip(train.texts, train.labels.tolist())) == expected["train"]
    assert sorted(zip(test.texts, test.labels.tolist())) == expected["test"]
    assert train.labels.dtype.name == "int64"
    # The cache's header and format are the documented ones.
    with gzip.open(tmp_path / "imdb" / "train.csv.gz", "rt", encoding="utf-8") as stream:
        assert stream.readline() == "text,label\n"


def test_unlabelled_reviews_come_from_the_same_archive_sorted_by_id(server, tmp_path):
    texts = load_imdb_unlabelled(tmp_path, source=_source(server, "aclImdb_v1.tar.gz", records=None), progress=False)
    assert texts == [UNLABELLED[review_id] for review_id in sorted(UNLABELLED)]
    with gzip.open(tmp_path / "imdb" / "unsup.csv.gz", "rt", encoding="utf-8") as stream:
        assert stream.readline() == "text\n"
    # Read again from the cache alone: no second download.
    offline = DataSource("offline", _closed_port_url("x.tar.gz"), "0" * 64, "aclImdb_v1.tar.gz")
    assert load_imdb_unlabelled(tmp_path, source=offline, progress=False) == texts


def test_unlabelled_cache_file_with_a_wrong_header_is_named(tmp_path):
    (tmp_path / "imdb").mkdir()
    (tmp_path / "imdb" / "unsup.csv.gz").write_bytes(gzip.compress(b"review,stars\nok,5\n"))
    with pytest.raises(CorruptCacheError, match="header"):
        load_imdb_unlabelled(tmp_path, download_if_missing=False)


def test_second_load_reads_the_cache_without_the_network(server, tmp_path):
    load_imdb(tmp_path, source=_source(server, "aclImdb_v1.tar.gz"), progress=False)
    offline = DataSource("offline", _closed_port_url("x.tar.gz"), "0" * 64, "aclImdb_v1.tar.gz")
    train, test = load_imdb(tmp_path, source=offline, progress=False)
    assert len(train.texts) == 4 and len(test.texts) == 2


def test_spa_eng_download_converts_into_the_cache_layout(server, tmp_path):
    pairs = load_spa_eng(tmp_path, source=_source(server, "spa-eng.zip", records=3), progress=False)
    assert pairs == PAIRS
    assert _files_in(tmp_path) == ["downloads/spa-eng.zip", "spa-eng/spa.txt.gz"]


def test_wrong_checksum_names_file_and_hashes_and_keeps_nothing(server, tmp_path):
    source = _source(server, "aclImdb_v1.tar.gz", sha256="ab" * 32)
    actual = hashlib.sha256(server.files["aclImdb_v1.tar.gz"]).hexdigest()
    with pytest.raises(ChecksumError) as error:
        load_imdb(tmp_path, source=source, progress=False)
    message = str(error.value)
    assert "aclImdb_v1.tar.gz" in message and "ab" * 32 in message and actual in message
    assert _files_in(tmp_path) == []


def test_dropped_connection_leaves_no_partial_file(server, tmp_path):
    source = _source(server, "spa-eng.zip", prefix="/dropped")
    with pytest.raises(DownloadError, match="broke off"):
        load_spa_eng(tmp_path, source=source, progress=False)
    assert _files_in(tmp_path) == []


def test_http_error_is_a_download_error(server, tmp_path):
    source = DataSource("missing", f"{server.url}/nothing-here.zip", "0" * 64, "spa-eng.zip")
    with pytest.raises(DownloadError, match="HTTP 404"):
        load_spa_eng(tmp_path, source=source, progress=False)
    assert _files_in(tmp_path) == []


def test_offline_without_cache_says_what_to_download_and_where(tmp_path):
    url = _closed_port_url("aclImdb_v1.tar.gz")
    source = DataSource("IMDB", url, "c" * 64, "aclImdb_v1.tar.gz")
    with pytest.raises(DatasetUnavailableError) as error:
        load_imdb(tmp_path, source=source, progress=False)
    message = str(error.value)
    assert url in message
    assert str(tmp_path / "downloads" / "aclImdb_v1.tar.gz") in message
    assert "COURSE_DATA_DIR" in message
    assert _files_in(tmp_path) == []


def test_downloads_can_be_refused(tmp_path):
    with pytest.raises(DatasetUnavailableError, match="spa-eng/spa.txt.gz"):
        load_spa_eng(tmp_path, download_if_missing=False)


def test_an_archive_placed_by_hand_is_verified_and_used(server, tmp_path):
    body = server.files["spa-eng.zip"]
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "spa-eng.zip").write_bytes(body)
    source = DataSource("by hand", _closed_port_url("spa-eng.zip"), hashlib.sha256(body).hexdigest(), "spa-eng.zip")
    assert load_spa_eng(tmp_path, source=source, download_if_missing=False, progress=False) == PAIRS


def test_a_bad_archive_placed_by_hand_is_rejected_and_removed(server, tmp_path):
    (tmp_path / "downloads").mkdir()
    (tmp_path / "downloads" / "spa-eng.zip").write_bytes(b"not the archive")
    with pytest.raises(ChecksumError):
        load_spa_eng(tmp_path, source=_source(server, "spa-eng.zip"), progress=False)
    assert _files_in(tmp_path) == []


# --- corrupt caches -------------------------------------------------------------------------


@pytest.fixture
def imdb_cache(server, tmp_path):
    load_imdb(tmp_path, source=_source(server, "aclImdb_v1.tar.gz"), progress=False)
    return tmp_path


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda data: b"garbage, not gzip", "cannot be read"),
        (lambda data: data[: len(data) // 2], "cannot be read"),
        (lambda data: gzip.compress(b"review,stars\nok,5\n"), "header"),
        (lambda data: gzip.compress(b"text,label\nfine,1\nbad,7\n"), "row 3"),
    ],
    ids=["not-gzip", "truncated", "wrong-header", "bad-label"],
)
def test_corrupt_cache_file_gives_a_clear_error(imdb_cache, damage, problem):
    path = imdb_cache / "imdb" / "train.csv.gz"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptCacheError) as error:
        load_imdb(imdb_cache, download_if_missing=False)
    assert str(path) in str(error.value) and problem in str(error.value)
    assert "Delete it" in str(error.value)


def test_wrong_record_count_is_a_corrupt_cache(imdb_cache):
    with pytest.raises(CorruptCacheError, match="holds 4 reviews, not 25,000"):
        load_imdb(imdb_cache)  # the real source expects 25,000 a split


def test_corrupt_spa_eng_line_is_named(tmp_path):
    folder = tmp_path / "spa-eng"
    folder.mkdir()
    (folder / "spa.txt.gz").write_bytes(gzip.compress(b"Go.\tVe.\nno tab here\n"))
    with pytest.raises(CorruptCacheError, match="line 2"):
        load_spa_eng(tmp_path)


# --- the cache directory --------------------------------------------------------------------


def test_cache_directory_order(monkeypatch, tmp_path):
    monkeypatch.setenv("COURSE_DATA_DIR", str(tmp_path / "from-env"))
    assert cache_directory(tmp_path / "given") == tmp_path / "given"
    assert cache_directory() == tmp_path / "from-env"
    monkeypatch.delenv("COURSE_DATA_DIR")
    assert "transformer-course" in str(cache_directory())


# --- the real data (the pre-filled cache CI points COURSE_DATA_DIR at) ----------------------

shared = pytest.mark.skipif(
    not (os.environ.get("COURSE_DATA_DIR") and Path(os.environ["COURSE_DATA_DIR"], "imdb", "train.csv.gz").exists()),
    reason="COURSE_DATA_DIR does not point at a filled data cache",
)


@shared
def test_real_imdb_has_the_original_split():
    train, test = load_imdb(download_if_missing=False)
    for split in (train, test):
        assert len(split.texts) == 25_000
        assert split.labels.sum() == 12_500
    assert train.texts[0].startswith("I grew up watching Scooby")


@shared
def test_conversion_order_reproduces_the_real_cache():
    """The converter's row order, applied to the original ids, gives the cache's exact rows."""
    train, test = load_imdb(download_if_missing=False)
    keys = [(label, review_id) for label in (0, 1) for review_id in range(12_500)]
    order = datasets._imdb_row_order(keys)
    assert [label for label, _ in order] == train.labels.tolist() == test.labels.tolist()
    assert train.texts[order.index((1, 0))].startswith("Bromwell High is a cartoon comedy")
    assert test.texts[order.index((0, 0))].startswith("Once again Mr. Costner has dragged out a movie")


@shared
def test_real_spa_eng_has_every_pair():
    pairs = load_spa_eng(download_if_missing=False)
    assert len(pairs) == 118_964
    assert pairs[0] == ("Go.", "Ve.")
    assert any("¿" in spanish for _, spanish in pairs[:2000])


@shared
def test_conversion_reproduces_the_real_unlabelled_file(tmp_path):
    """An archive whose train/unsup holds the 50,000 real reviews (in shuffled member order)
    converts to the decompressed text whose sha256 the data README gives."""
    texts = load_imdb_unlabelled(download_if_missing=False)
    assert len(texts) == 50_000 and texts[0] and texts[-1]
    archive = tmp_path / "aclImdb_v1.tar.gz"
    # A gzip stream of stored blocks (level 0): read as any .tar.gz is, without 3 s of compressing 50,000 reviews.
    with tarfile.open(archive, mode="w:gz", compresslevel=0) as tar:

        def add(name, text):
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        for review_id in reversed(range(len(texts))):
            add(f"aclImdb/train/unsup/{review_id}_0.txt", texts[review_id])
        add("aclImdb/train/pos/0_9.txt", "One labelled review.")
        add("aclImdb/test/neg/0_2.txt", "Another one.")
    datasets._convert_imdb(archive, tmp_path)
    with gzip.open(tmp_path / "unsup.csv.gz", "rb") as stream:
        digest = hashlib.sha256(stream.read()).hexdigest()
    assert digest == "be8a8ec279f704601111fc55ce240aadbb50ffca77c72d93bc71627b336560f1"


def test_distinct_texts_drops_excluded_texts_and_second_copies_and_counts_both():
    kept = datasets.distinct_texts(["b", "t", "a", "b", "t", "c", "a", "b"], excluded=iter(["t", "x"]))
    assert kept.texts == ["b", "a", "c"] and kept.excluded == 2 and kept.repeated == 3
    assert len(kept.texts) + kept.excluded + kept.repeated == 8
    assert datasets.distinct_texts([], ["t"]) == ([], 0, 0)
