"""What every reader shares: the file it reads, what it returns, and the register of readers.

A format is one module that builds a `Reader` and passes it to `register` when it is imported;
`registry.py` imports each such module once, and dispatches on the `Reader`s registered. So a new
format is one new module plus its import line in `registry.py`.
"""

from __future__ import annotations

import bisect
import codecs
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SourceFile:
    """A candidate file: its path and its name relative to the ingested folder (POSIX)."""

    path: Path
    source: str
    kind: str


@dataclass(frozen=True)
class Skipped:
    source: str
    reason: str


@dataclass
class Document:
    """Readable text of one file. `markdown` says whether `#` lines are headings. `pages`: where
    each page starts in `text` (character offsets, the first page's first) for a format that has
    pages (PDF), else empty; page n (1-based) holds text[pages[n-1]:pages[n]]."""

    source: str
    text: str
    title: str
    markdown: bool
    pages: tuple[int, ...] = ()

    def page_span(self, start: int, end: int) -> tuple[int, int] | None:
        """(first page, last page), 1-based, of text[start:end]; None for a format without pages.
        A page with no text starts where the next one does, and is never the one named."""
        if not self.pages:
            return None

        def page(offset: int) -> int:
            return max(bisect.bisect_right(self.pages, offset), 1)

        return page(start), page(max(end - 1, start))


@dataclass(frozen=True)
class Reader:
    """One format: how its files are found, read, and versioned.

    name: the kind of its files (`SourceFile.kind`, the key of `READER_FORMATS`).
    suffixes: the file name endings it reads (lower case, with the dot).
    format: the version of its reading, part of every chunk id of its files: bump it when the same
        file comes out as different text, and ingest re-reads those files (0: never changed).
    read: (file, its bytes) -> a Document, or Skipped with the one-line reason.
    sniff, claims: a variant of another format (MyST of Markdown, RST in a .txt file) names the
        kinds whose files it may read (`claims`) and the test on their text that says it should
        (`sniff`); it then reads them, with its own format number.
    skip: why a file that reads fine is no page, or None (asked of unchanged files too, so it
        must be cheap).
    expand: the file's text with its include directives replaced by the files they name
        (`includes.py`), asked only when `include_marker` is in its bytes; (text, its path, the
        root folder, a reader of other files' text) -> text.
    """

    name: str
    suffixes: tuple[str, ...]
    format: int
    read: Callable[[SourceFile, bytes], Document | Skipped]
    sniff: Callable[[str], bool] | None = None
    claims: tuple[str, ...] = ()
    skip: Callable[[SourceFile, bytes], str | None] | None = None
    expand: Callable | None = None
    include_marker: bytes = b""


READERS: dict[str, Reader] = {}  # by name, in the order registered (a variant is tried in this order)


def register(reader: Reader) -> Reader:
    """Add a format's reader; a second reader of the same name or suffix is a programming error."""
    if reader.name in READERS:
        raise ValueError(f"a reader named {reader.name!r} is registered already")
    taken = {suffix for other in READERS.values() for suffix in other.suffixes}
    if clash := taken & set(reader.suffixes):
        raise ValueError(f"{reader.name}: suffixes {sorted(clash)} are read by another reader already")
    READERS[reader.name] = reader
    return reader


class Unreadable(Exception):
    """Raised by a format's conversion: the file is skipped with this message as its reason."""


_BOMS = [(codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")]


def decode(data: bytes) -> tuple[str | None, str]:
    """(text, "") for UTF-8 or the encoding a BOM names; (None, reason) otherwise: no guessing."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data.decode(encoding)
                break
            except UnicodeDecodeError:
                return None, f"invalid {encoding} text after its byte-order mark"
    else:
        if b"\x00" in data[:8192]:
            return None, "binary content (NUL bytes) despite a text extension"
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            return None, f"not UTF-8 (bad byte at offset {err.start}) and no BOM; convert it to UTF-8"
    return text.replace("\r\n", "\n").replace("\r", "\n"), ""
