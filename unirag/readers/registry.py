"""Files -> text, and a reason for every file that could not be read.

Ingest must never stop on one bad file, so each step returns either a result or a `Skipped` with a
one-line reason that ends up in the summary. Markdown (MyST's too), MDX, reStructuredText, AsciiDoc,
HTML, PDF and notebooks all come out as Markdown-style text (ATX `#` headings), so the chunker has
one heading syntax to follow (plain text too: its title lines found by layout, `plaintext.py`); of
an HTML page only its main content is read, not the navigation and footer it shares with its site; a
Markdown file's front matter gives the page its title and first paragraph. Symlinks are never
followed: that rules out loops and files outside the folder in one rule.
"""

from __future__ import annotations

import codecs
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from unirag.errors import UniragError
from unirag.readers import includes
from unirag.readers.asciidoc import asciidoc_to_markdown
from unirag.readers.markdown import HEADING, markdown_title, outside_code
from unirag.readers.mdx import mdx_to_markdown
from unirag.readers.myst import looks_like_myst, myst_to_markdown
from unirag.readers.notebook import NotANotebook, notebook_to_markdown
from unirag.readers.pdf import pdf_to_markdown
from unirag.readers.plaintext import text_to_markdown
from unirag.readers.rst import looks_like_rst, rst_to_markdown
from unirag.readers.html import NOINDEX_REASON, asks_not_to_be_indexed, html_to_markdown, page_head

KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "rst",
         ".html": "html", ".htm": "html", ".pdf": "pdf", ".ipynb": "notebook", ".mdx": "mdx",
         ".adoc": "asciidoc", ".asciidoc": "asciidoc"}
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
# Bump a kind's number when its reader turns the same file into different text: ingest then
# re-reads and re-embeds those files instead of keeping their old chunks (kinds absent: 0).
# html 1: the main content only (navigation, sidebars, header/footer and permalinks dropped);
# 3: sequential navigation and the page's own table of contents dropped too, which DocBook and
# Texinfo pages mark without landmarks, listings side by side in one block on lines of their own,
# and code holding ``` anywhere fenced with ~~~ (`webpage.py`; 2 was the no-index pages' number);
# 4: footnote marks and their links back dropped; 5: a footnote's own number label too;
# 6: indexes and long tables of contents dropped anywhere on the page, a row opening with a
# "#" cell kept from reading as a heading; 7: any line of text opening with "#" kept so (escaped)
# 8: a list item's paragraph on its bullet's line, a menu and a lead table of contents dropped;
# 9: a definition's text after the definitions nested in it comes after its term again; 10: a
# tooltip's "ⓘ" (rustdoc) dropped as a mark
# markdown 1: HTML comments dropped (outside code); 2: front matter read (title, description);
# 3 (and mdx, notebook 1): footnote marks dropped (`strip_footnote_marks`); myst 4: a Markdown file
# written in MyST, its directives, roles, targets and comments read as the page shows them
# (`myst.py`; a number of its own, after markdown's 3, so that plain Markdown files keep their
# reading and MyST ones, which were read as plain Markdown, are read again); 5: a tab's title
# shown; 6: a tab's or card's title as the label of its first paragraph ("MacOS: ...").
# (mdBook's includes need no number: read in place, they change the bytes a page's hash is taken
# of, `read_bytes`)
# rst 1: directives, literal blocks, roles and links read (`rst.py`), not only section titles;
# a .txt file written in RST (Sphinx's include fragments, older Sphinx sources) is read as one;
# 2: include directives read in place (`includes.py`); 3: a role's "<...>" read as its target only
# after a space (":ref:`title <target>`"), so ":genex:`$<TARGET_OBJECTS>`" keeps its text;
# 4: a list-table's rows as table rows, a directive as a list item, sphinx-design's boxes, Click's
# examples, one-word references, a note's literal block; 5: a tab's title shown (sphinx-tabs);
# 6: a tab's or card's title as the label of its first paragraph
# text 1: title lines read as headings, prose paragraphs unindented (`plaintext.py`)
# pdf 1: running headers, footers and page numbers dropped, headings found by type size (`pdf.py`);
# 2: paragraphs found by their spacing, monospace lines fenced as code
READER_FORMATS = {"html": 10, "markdown": 3, "myst": 6, "mdx": 1, "notebook": 1, "pdf": 2, "rst": 6, "text": 1}
# A file that reads fine but is no page is skipped (`skip_reason`): an HTML page that asks not to be
# indexed, an mdBook's SUMMARY.md. Such files have a number of their own, which no reading takes,
# so that ingest drops the chunks an earlier reading stored for them
SKIPPED_FORMAT = 1000
# mdBook's SUMMARY.md lists the book's chapters as links for its sidebar and is rendered as no page
# of its own: its chunks match any question's words and answer none, as an HTML page's table of
# contents does (`webpage.py`)
BOOK_SUMMARY_REASON = "mdBook's table of contents (its SUMMARY.md: the book's sidebar, not a page)"
# a line of a book's summary: a chapter's link, "- [Title](chapter.md)", or a draft's, "[Title]()"
_SUMMARY_ENTRY = re.compile(r"[ \t]*(?:[-*+][ \t]+|\d+\.[ \t]+)?\[[^\]]*\]\([^)]*\)[ \t]*")
_SUMMARY_OTHER = re.compile(r"[ \t]*(?:#.*|-{3,}|\*{3,})?[ \t]*")  # part titles, separators, blank lines


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
    expand = {"rst": includes.expand, "text": includes.expand, "asciidoc": includes.expand_asciidoc,
              "markdown": includes.expand_mdbook}.get(file.kind)
    marker = b"{{#" if file.kind == "markdown" else b"include::"
    if expand is not None and marker in data and (text := decode(data)[0]) is not None:
        root = file.path.parents[len(Path(file.source).parts) - 1]  # the folder the walk started in
        expanded = expand(text, file.path, root, lambda path: _small_text(path, max_bytes))
        if expanded != text:
            return expanded.encode()
    return data


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def book_summary(text: str) -> bool:
    """Whether a Markdown text is an mdBook's summary: its lines chapter links (part titles,
    separators and blank lines aside)."""
    lines = [line for line in text.splitlines() if not _SUMMARY_OTHER.fullmatch(line)]
    return bool(lines) and all(_SUMMARY_ENTRY.fullmatch(line) for line in lines)


def skip_reason(file: SourceFile, data: bytes) -> str | None:
    """Why a file that reads fine is no page (it asks not to be indexed; it is an mdBook's
    SUMMARY.md), or None. Every ingest asks this of unchanged files too, so only an HTML page's
    head and a file named SUMMARY.md are decoded."""
    if file.kind == "html" and asks_not_to_be_indexed(decode(page_head(data))[0] or ""):
        return NOINDEX_REASON
    if file.kind == "markdown" and Path(file.source).name == "SUMMARY.md" and book_summary(decode(data)[0] or ""):
        return BOOK_SUMMARY_REASON
    return None


def reader_format(file: SourceFile, data: bytes) -> int:
    """The version of the reading this file gets (READER_FORMATS; 0 for a kind never changed)."""
    if skip_reason(file, data) is not None:
        return SKIPPED_FORMAT
    if file.kind == "text" and looks_like_rst(decode(data)[0] or ""):
        return READER_FORMATS["rst"]
    if file.kind == "markdown" and looks_like_myst(decode(data)[0] or ""):
        return READER_FORMATS["myst"]
    return READER_FORMATS.get(file.kind, 0)


def parse(file: SourceFile, data: bytes) -> Document | Skipped:
    """Turn the bytes of a file into a Document (Markdown-style text for all but plain text)."""
    if file.kind == "pdf":
        return _parse_pdf(file, data)
    if (reason := skip_reason(file, data)) is not None:
        return Skipped(file.source, reason)
    text, problem = decode(data)
    if text is None:
        return Skipped(file.source, problem)
    title, markdown = "", True
    if file.kind == "html":
        text, title = html_to_markdown(text)
    elif file.kind == "rst" or (file.kind == "text" and looks_like_rst(text)):
        text = rst_to_markdown(text)
    elif file.kind == "markdown":  # MyST (Sphinx's Markdown) read as the page shows it
        text = myst_to_markdown(text) if looks_like_myst(text) else text
        text, title = read_front_matter(markdown_prose(text))
    elif file.kind == "mdx":  # the front matter first: its fields are no module statements or tags
        text, title = read_front_matter(text)
        text = markdown_prose(mdx_to_markdown(text))
    elif file.kind == "asciidoc":
        text = asciidoc_to_markdown(text)
    elif file.kind == "text":  # titles found by layout; the file's name stays its title
        text, title = text_to_markdown(text), Path(file.source).stem
    elif file.kind == "notebook":
        try:
            text = markdown_prose(notebook_to_markdown(text))
        except NotANotebook as err:
            return Skipped(file.source, f"notebook {err}")
    else:
        markdown = False
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
        import pypdf  # noqa: F401
    except ImportError:
        return Skipped(file.source, "pypdf not installed (pip install pypdf to read PDFs)")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings lack the file name; the skip says why
    try:
        text, title = pdf_to_markdown(data)
    except Exception as err:  # pypdf raises many types on malformed files
        return Skipped(file.source, f"PDF failed to parse: {type(err).__name__}: {err}"[:200])
    if not text:
        return Skipped(file.source, "PDF has no extractable text (scanned images?)")
    return Document(file.source, text, title or Path(file.source).stem, markdown=True)


# ---------------------------------------------------------------------- Markdown
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)


def strip_markdown_comments(text: str) -> str:
    """The text without its HTML comments (`<!-- ... -->`), except inside code fences.

    A rendered page never shows them; left in, their notes to the authors ("Do not remove or
    links may break", build instructions) became chunks and quoted "evidence".
    """
    # the comment's own line break stays: one blank line at most
    return outside_code(text, lambda segment: re.sub(r"\n{3,}", "\n\n", _COMMENT.sub("", segment)))


# a footnote reference ("tables[^siphash].", "done [^1]") and a definition's label at a line start
_FOOTNOTE_REFERENCE = re.compile(r"[ \t]*\[\^[^\]\s]+\](?!:)")
_FOOTNOTE_LABEL = re.compile(r"^\[\^[^\]\s]+\]:[ \t]*", re.MULTILINE)
_INLINE_CODE = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)+?\1", re.DOTALL)  # within one paragraph


def strip_footnote_marks(text: str) -> str:
    """The text without footnote marks (`[^label]` where a note is cited, and the label before
    its text), except in code: a regular expression's `[^abc]` stays. The notes' text stays.

    Why: rendered, a mark is a superscript number; read as written, it sits in every quote of its
    sentence ("hash tables[^siphash].") and says nothing, as the HTML reader's footnote marks
    (`webpage.py`) did, which read as citations of the answer's own passages.
    """
    def unmarked(words: str) -> str:
        return _FOOTNOTE_REFERENCE.sub("", _FOOTNOTE_LABEL.sub("", words))

    def outside_code_spans(segment: str) -> str:
        out, pos = [], 0
        for code in _INLINE_CODE.finditer(segment):
            out += [unmarked(segment[pos:code.start()]), code.group()]
            pos = code.end()
        return "".join(out + [unmarked(segment[pos:])])

    return outside_code(text, outside_code_spans)


def markdown_prose(text: str) -> str:
    """Markdown as a reader sees it rendered: without comments and footnote marks."""
    return strip_footnote_marks(strip_markdown_comments(text))


# YAML ("---" ... "---" or "...") or TOML ("+++" ... "+++") block at the very start of a file
_FRONT_MATTER = re.compile(r"\A(?:---[ \t]*\n(.*?)\n(?:---|\.\.\.)|\+\+\+[ \t]*\n(.*?)\n\+\+\+)[ \t]*(?:\n|\Z)",
                           re.DOTALL)
_FIELD = re.compile(r"^([A-Za-z_][\w-]*)[ \t]*[:=][ \t]*(.*?)[ \t]*$")
# the fields a rendered page shows at its top: its title, then a one-line summary under it
_LEDE_FIELDS = ("description", "summary", "subtitle")


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """(the block's top-level one-line fields, the text after it), or ({}, text) when the text does
    not open with a front matter block.

    A block counts only when every line is a field ("key: value" or "key = value"), indented
    (a nested value), a list item, a comment or blank: a document that opens with a horizontal
    rule ("---") and prose is not front matter."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return {}, text
    fields, is_block = {}, False
    for line in (match.group(1) if match.group(1) is not None else match.group(2)).split("\n"):
        field = _FIELD.match(line)
        if field:
            value = field.group(2)
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            # a block scalar ("|", ">-"), a flow list or map, or an anchor says nothing on this line
            if value and value[0] not in "|>[{&*!":
                fields[field.group(1).lower()] = value.strip()
            is_block = True
        elif line.strip() and not (line[0] in " \t" or line.startswith(("- ", "#"))):
            return {}, text
    return (fields, text[match.end():]) if is_block else ({}, text)


def read_front_matter(text: str) -> tuple[str, str]:
    """(the text with its front matter as a page shows it, the page's title or "").

    Why: static-site docs (Jekyll, Hugo, Docusaurus, the npm CLI's) keep the page's title, such
    as "npm-ci", and its one-line description only in the front matter, and start the body at
    "### Synopsis". Read as text, the block became a chunk of its own, every such page's title
    read "Synopsis", and no other chunk of it said what it is about (embedded as "Synopsis /
    Description"). The title becomes the page's top heading (unless the body opens with the
    same one) and the description its first paragraph."""
    fields, body = front_matter(text)
    title, lede = fields.get("title", ""), next((fields[k] for k in _LEDE_FIELDS if fields.get(k)), "")
    if not fields:
        return text, ""
    body = body.lstrip("\n")
    opening = HEADING.match(body.split("\n", 1)[0])
    top = f"# {title}\n\n" if title and not (opening and opening.group(2).lower() == title.lower()) else ""
    return top + (f"{lede}\n\n" if lede else "") + body, title


