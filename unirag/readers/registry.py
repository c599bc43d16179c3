"""Files -> text, and a reason for every file that could not be read.

Ingest must never stop on one bad file, so each step returns either a result or a `Skipped` with a
one-line reason that ends up in the summary. Markdown (MyST's too), MDX, reStructuredText, AsciiDoc,
HTML, PDF and notebooks all come out as Markdown-style text (ATX `#` headings), so the chunker has
one heading syntax to follow (plain text too: its title lines found by layout, `plaintext.py`); of
an HTML page only its main content is read, not the navigation and footer it shares with its site; a
Markdown file's front matter gives the page its title and first paragraph. Symlinks are never
followed: that rules out loops and files outside the folder in one rule.

Each format is one module that registers its `Reader` (`base.py`: its suffixes, the version of its
reading, how it reads, what variant it sniffs); this module walks folders and dispatches on them. A
new format is one module plus its line in the import below.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from unirag.errors import UniragError
from unirag.readers import includes
# each module registers its format's reader when imported; the order is the order variants are tried
from unirag.readers import markdown, rst, myst, mdx, html, asciidoc, plaintext, notebook, pdf  # noqa: F401
from unirag.readers.base import READERS, Document, Reader, Skipped, SourceFile, decode  # noqa: F401

KINDS = {suffix: reader.name for reader in READERS.values() for suffix in reader.suffixes}
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
# The version of each kind's reading (each reader's `format`, whose module says what each number
# brought); part of every chunk id, so that a changed reading re-reads its files (kinds absent: 0)
READER_FORMATS = {reader.name: reader.format for reader in READERS.values() if reader.format}
# A file that reads fine but is no page is skipped (`skip_reason`): an HTML page that asks not to be
# indexed, an mdBook's SUMMARY.md. Such files have a number of their own, which no reading takes,
# so that ingest drops the chunks an earlier reading stored for them
SKIPPED_FORMAT = 1000


def walk(root: Path) -> tuple[list[SourceFile], list[Skipped], int]:
    """Supported files under root (sorted), skipped entries, and the count of other files ignored.

    Hidden files and folders (.git, .unirag, ...) are ignored silently.
    """
    root = Path(root)
    if not root.exists():
        if root.is_symlink():  # exists() follows the link: a loop or a dangling target
            raise UniragError(f"{root} is a symlink loop or points to nothing; pass the real file or folder")
        raise UniragError(f"no such file or folder: {root}; check the path")
    if root.is_file():
        kind = KINDS.get(root.suffix.lower())
        if kind is None:
            raise UniragError(f"{root} is not a supported file ({', '.join(sorted(KINDS))})")
        return [SourceFile(root, root.name, kind)], [], 0
    if not root.is_dir():
        raise UniragError(f"{root} is neither a file nor a folder")
    files, skipped, ignored = [], [], 0

    def on_error(err: OSError) -> None:
        skipped.append(Skipped(_rel(Path(err.filename or root), root), f"unreadable folder: {err.strerror}"))

    for folder, dirs, names in os.walk(root, onerror=on_error):
        base = Path(folder)
        for d in list(dirs):
            if d.startswith(".") or (base / d).is_symlink():
                dirs.remove(d)
                if not d.startswith("."):
                    skipped.append(Skipped(_rel(base / d, root), "symlinked folder (not followed)"))
        dirs.sort()
        for name in sorted(names):
            path = base / name
            kind = KINDS.get(path.suffix.lower())
            if name.startswith("."):
                continue
            if kind is None:
                ignored += 1
            elif path.is_symlink():
                skipped.append(Skipped(_rel(path, root), "symlink (not followed)"))
            else:
                files.append(SourceFile(path, _rel(path, root), kind))
    files.sort(key=lambda f: f.source)
    return _without_fragments(files, skipped, root) + (ignored,)


def _without_fragments(files: list[SourceFile], skipped: list[Skipped],
                       root: Path) -> tuple[list[SourceFile], list[Skipped]]:
    """The files less the RST and AsciiDoc include fragments (`includes.fragments`), each of which
    becomes a skip that names the page it is read in. Only a .txt or AsciiDoc file can be a
    fragment, so a folder without one is not read here."""
    if not any(file.kind in ("text", "asciidoc") for file in files):
        return files, skipped
    pages = {}
    for file in files:
        if file.kind in ("rst", "text", "asciidoc") and (text := _small_text(file.path)) is not None:
            pages[file.path] = text
    inside = includes.fragments(pages, root)
    if not inside:
        return files, skipped
    kept = [f for f in files if f.path not in inside]
    skipped = skipped + [Skipped(f.source, f"included by {_rel(inside[f.path], root)}, read as part of it")
                         for f in files if f.path in inside]
    return kept, skipped


def _small_text(path: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> str | None:
    """A file's text, or None when it is too large, unreadable or not text."""
    try:
        if path.stat().st_size > max_bytes:
            return None
        return decode(path.read_bytes())[0]
    except OSError:
        return None


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def read_bytes(file: SourceFile, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes | Skipped:
    """The raw bytes (hashed to detect changes before any parsing), or why not. The include
    directives of an RST or AsciiDoc file, and a Markdown file's mdBook ones, are replaced by the
    files they name (`includes.py`), so that its hash changes when one of them does."""
    try:
        size = file.path.stat().st_size
        if size > max_bytes:
            return Skipped(file.source, f"too large ({size / 2**20:.1f} MB > {max_bytes / 2**20:.0f} MB limit)")
        if size == 0:
            return Skipped(file.source, "empty file")
        data = file.path.read_bytes()
    except OSError as err:
        return Skipped(file.source, f"unreadable: {err.strerror or err}")
    reader = READERS[file.kind]
    if reader.expand is not None and reader.include_marker in data and (text := decode(data)[0]) is not None:
        root = file.path.parents[len(Path(file.source).parts) - 1]  # the folder the walk started in
        expanded = reader.expand(text, file.path, root, lambda path: _small_text(path, max_bytes))
        if expanded != text:
            return expanded.encode()
    return data


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def skip_reason(file: SourceFile, data: bytes) -> str | None:
    """Why a file that reads fine is no page (it asks not to be indexed; it is an mdBook's
    SUMMARY.md), or None: its kind's reader's `skip`."""
    skip = READERS[file.kind].skip
    return skip(file, data) if skip is not None else None


def reader_for(file: SourceFile, data: bytes) -> Reader:
    """The reader of a file: a variant that claims its kind and recognises its text (MyST in a .md
    file, RST in a .txt file), else its kind's own."""
    variants = [reader for reader in READERS.values() if file.kind in reader.claims and reader.sniff is not None]
    if variants:
        text = decode(data)[0] or ""
        for reader in variants:
            if reader.sniff(text):
                return reader
    return READERS[file.kind]


def reader_format(file: SourceFile, data: bytes) -> int:
    """The version of the reading this file gets (its reader's `format`; 0 for a kind never changed)."""
    if skip_reason(file, data) is not None:
        return SKIPPED_FORMAT
    return reader_for(file, data).format


def parse(file: SourceFile, data: bytes) -> Document | Skipped:
    """Turn the bytes of a file into a Document (Markdown-style text)."""
    if (reason := skip_reason(file, data)) is not None:
        return Skipped(file.source, reason)
    return reader_for(file, data).read(file, data)
