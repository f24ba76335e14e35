"""File helpers shared by the package: atomic writes (a reader sees the old file or the new one,
never half), and the replacement of a generated block between two marker lines."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; move it into place only if the block succeeds.

    The parent folder is created. On an exception the temporary file is removed and ``path`` is
    left as it was. The file gets the permissions ``path`` had, or for a new file those a plain
    ``open()`` would give it (0666 less the umask), not the private 0600 of a temporary file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    os.close(handle)
    temporary = Path(temporary)
    if path.exists():
        mode = path.stat().st_mode & 0o7777
    else:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        yield temporary
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def write_text_atomically(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return ``path`` as a Path."""
    with atomic_output(path) as temporary:
        temporary.write_text(text, encoding="utf-8", newline="")
    return Path(path)


def replace_between_markers(text: str, markers: tuple[str, str], body: str, where: str = "the text") -> str:
    r"""``text`` with what lies between its two marker lines replaced by ``body``; the markers stay.

    The README's results table and the students' exercise catalogue are generated blocks of this
    kind: ``<start marker>\n<body>\n<end marker>``.

    Args:
        text: str, the whole document.
        markers: (start, end), two str that each occur in ``text``, the start first.
        body: str, the new block, without the markers and without surrounding newlines.
        where: str, what ``text`` is (a path), for the error message.

    Returns:
        str, the new document; equal to ``text`` when the block was already ``body``.

    Raises:
        ValueError: if ``text`` lacks either marker or has the end before the start.

    Example:
        >>> replace_between_markers("a\n<!-- s -->\nold\n<!-- e -->\nb", ("<!-- s -->", "<!-- e -->"), "new")
        'a\n<!-- s -->\nnew\n<!-- e -->\nb'
    """
    start_marker, end_marker = markers
    start, end = text.find(start_marker), text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"{where} must contain the lines {start_marker} and {end_marker}.")
    return f"{text[:start]}{start_marker}\n{body}\n{text[end:]}"
