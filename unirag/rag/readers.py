"""Files -> text, and a reason for every file that could not be read.

Ingest must never stop on one bad file, so each step returns either a result or a `Skipped`
with a one-line reason that ends up in the summary. Markdown, reStructuredText and HTML all come
out as Markdown-style text (ATX `#` headings), so the chunker has one heading syntax to follow.
Symlinks are never followed: that rules out loops and files outside the folder in one rule.
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from ..errors import UniragError
from .chunking import markdown_title

KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "rst",
         ".html": "html", ".htm": "html", ".pdf": "pdf"}
DEFAULT_MAX_BYTES = 20 * 1024 * 1024


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
    """Readable text of one file. `markdown` says whether `#` lines are headings."""

    source: str
    text: str
    title: str
    markdown: bool


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
    return files, skipped, ignored


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def read_bytes(file: SourceFile, max_bytes: int = DEFAULT_MAX_BYTES) -> bytes | Skipped:
    """The raw bytes (hashed to detect changes before any parsing), or why not."""
    try:
        size = file.path.stat().st_size
        if size > max_bytes:
            return Skipped(file.source, f"too large ({size / 2**20:.1f} MB > {max_bytes / 2**20:.0f} MB limit)")
        if size == 0:
            return Skipped(file.source, "empty file")
        return file.path.read_bytes()
    except OSError as err:
        return Skipped(file.source, f"unreadable: {err.strerror or err}")


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parse(file: SourceFile, data: bytes) -> Document | Skipped:
    """Turn the bytes of a file into a Document (Markdown-style text for md/rst/html)."""
    if file.kind == "pdf":
        return _parse_pdf(file, data)
    text, problem = decode(data)
    if text is None:
        return Skipped(file.source, problem)
    title = ""
    if file.kind == "html":
        text, title = html_to_markdown(text)
    elif file.kind == "rst":
        text = rst_to_markdown(text)
    markdown = file.kind != "text"
    if not text.strip():
        return Skipped(file.source, "no text (only whitespace or markup)")
    title = title or (markdown_title(text) if markdown else "") or Path(file.source).stem
    return Document(file.source, text, title, markdown)


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


def _parse_pdf(file: SourceFile, data: bytes) -> Document | Skipped:
    try:
        import io

        from pypdf import PdfReader
    except ImportError:
        return Skipped(file.source, "pypdf not installed (pip install pypdf to read PDFs)")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings lack the file name; the skip says why
    try:
        pages = [page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages]
    except Exception as err:  # pypdf raises many types on malformed files
        return Skipped(file.source, f"PDF failed to parse: {type(err).__name__}: {err}"[:200])
    text = "\n\n".join(p.strip() for p in pages if p.strip())
    if not text:
        return Skipped(file.source, "PDF has no extractable text (scanned images?)")
    return Document(file.source, text, Path(file.source).stem, markdown=False)


# ---------------------------------------------------------------------- HTML
_BLOCKS = {"p", "div", "br", "li", "tr", "section", "article", "header", "footer", "main", "pre",
           "table", "ul", "ol", "blockquote", "hr", "dt", "dd", "nav", "aside", "figure"}
_DROP = {"script", "style", "noscript", "template", "svg", "head"}


class _HTMLText(HTMLParser):
    """Collects visible text; h1-h6 become `#` headings, block tags become line breaks."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title = ""
        self._drop = 0
        self._in_title = False
        self._pre = 0

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self._in_title = True
        elif tag in _DROP:
            self._drop += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "pre":  # fenced, so `#` lines in code never look like headings
            self.out.append("\n```\n")
            self._pre += 1
        elif tag in _BLOCKS:
            self.out.append("\n- " if tag == "li" else "\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False
        elif tag in _DROP:
            self._drop = max(0, self._drop - 1)
        elif tag == "pre":
            self.out.append("\n```\n\n")
            self._pre = max(0, self._pre - 1)
        elif re.fullmatch(r"h[1-6]", tag) or tag == "p":
            self.out.append("\n\n")
        elif tag in _BLOCKS:
            self.out.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data.strip()
        elif self._drop:
            return
        elif self._pre:
            self.out.append(data)
        else:
            data = re.sub(r"\s+", " ", data)
            at_line_start = not self.out or self.out[-1].endswith(("\n", "# ", "- "))
            self.out.append(data.lstrip() if at_line_start else data)


def html_to_markdown(html: str) -> tuple[str, str]:
    """(text with `#` headings, <title>) using only the standard library."""
    parser = _HTMLText()
    parser.feed(html)
    parser.close()
    text = "".join(parser.out)
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return text, parser.title


# ---------------------------------------------------------------------- reStructuredText
_ADORN = re.compile(r"^([=\-~^\"'`#*+<>:._])\1+\s*$")


def rst_to_markdown(text: str) -> str:
    """Rewrite RST section titles (underlined, optionally overlined) as `#` headings.

    RST levels are not fixed characters: the first adornment style seen is level 1, and so on.
    """
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        over = bool(_ADORN.match(line)) and i + 2 < len(lines) and _ADORN.match(lines[i + 2] or "x") is not None
        if over and lines[i + 1].strip() and lines[i + 2][:1] == line[:1]:
            title, style, step = lines[i + 1].strip(), (line[0], True), 3
        elif line.strip() and not _ADORN.match(line) and _ADORN.match(nxt) and len(nxt.rstrip()) >= len(line.rstrip()):
            title, style, step = line.strip(), (nxt[0], False), 2
        else:
            out.append(line)
            i += 1
            continue
        if style not in styles:
            styles.append(style)
        out.append("#" * min(styles.index(style) + 1, 6) + " " + title)
        i += step
    return "\n".join(out)
