"""Files -> text, and a reason for every file that could not be read.

Ingest must never stop on one bad file, so each step returns either a result or a `Skipped`
with a one-line reason that ends up in the summary. Markdown, reStructuredText and HTML all come
out as Markdown-style text (ATX `#` headings), so the chunker has one heading syntax to follow; of
an HTML page only its main content is read, not the navigation and footer it shares with its site;
a Markdown file's front matter gives the page its title and first paragraph.
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
from typing import NamedTuple

from ..errors import UniragError
from .chunking import FENCE, HEADING, markdown_title
from .notebook import NotANotebook, notebook_to_markdown
from .pdf import pdf_to_markdown
from .rst import looks_like_rst, rst_to_markdown

KINDS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".rst": "rst",
         ".html": "html", ".htm": "html", ".pdf": "pdf", ".ipynb": "notebook"}
DEFAULT_MAX_BYTES = 20 * 1024 * 1024
# Bump a kind's number when its reader turns the same file into different text: ingest then
# re-reads and re-embeds those files instead of keeping their old chunks (kinds absent: 0).
# html 1: the main content only (navigation, sidebars, header/footer and permalinks dropped)
# markdown 1: HTML comments dropped (outside code); 2: front matter read (title, description)
# rst 1: directives, literal blocks, roles and links read (`rst.py`), not only section titles;
# a .txt file written in RST (Sphinx's include fragments, older Sphinx sources) is read as one
# pdf 1: running headers, footers and page numbers dropped, headings found by type size (`pdf.py`)
READER_FORMATS = {"html": 1, "markdown": 2, "pdf": 1, "rst": 1}
# html 2: a page that asks not to be indexed is skipped. Only such pages get this number, so
# that ingest drops their old chunks and every other page keeps its ids
NOINDEX_FORMAT = 2


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


def reader_format(file: SourceFile, data: bytes) -> int:
    """The version of the reading this file gets (READER_FORMATS; 0 for a kind never changed)."""
    if file.kind == "text" and looks_like_rst(decode(data)[0] or ""):
        return READER_FORMATS["rst"]
    # every ingest asks this of unchanged files too: only the page's head is decoded and read
    if file.kind == "html" and asks_not_to_be_indexed(decode(_head(data))[0] or ""):
        return NOINDEX_FORMAT
    return READER_FORMATS.get(file.kind, 0)


def parse(file: SourceFile, data: bytes) -> Document | Skipped:
    """Turn the bytes of a file into a Document (Markdown-style text for md/rst/html)."""
    if file.kind == "pdf":
        return _parse_pdf(file, data)
    text, problem = decode(data)
    if text is None:
        return Skipped(file.source, problem)
    title, markdown = "", True
    if file.kind == "html":
        if asks_not_to_be_indexed(text):
            return Skipped(file.source, NOINDEX_REASON)
        text, title = html_to_markdown(text)
    elif file.kind == "rst" or (file.kind == "text" and looks_like_rst(text)):
        text = rst_to_markdown(text)
    elif file.kind == "markdown":
        text, title = read_front_matter(strip_markdown_comments(text))
    elif file.kind == "notebook":
        try:
            text = strip_markdown_comments(notebook_to_markdown(text))
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


# ---------------------------------------------------------------------- HTML
# Only a page's main content is read. Navigation, sidebars, site headers and footers repeat on
# every page of a site, so their chunks would be retrieved for any question and answer none.
# What is main content and what is page furniture is decided by the HTML5 / ARIA landmarks that
# page generators emit (Sphinx, MkDocs, Docusaurus, GitHub, hand-written pages): <main>,
# role="main", <article>; <nav>, <aside>, role="navigation", ... No site-specific rules and no
# scoring heuristics, so what is dropped is predictable. Main-content extractors (trafilatura,
# readability) were measured against this on real documentation: benchmarks/html_reading.py.
_BLOCKS = {"p", "div", "br", "li", "tr", "section", "article", "header", "footer", "main", "pre",
           "table", "ul", "ol", "blockquote", "hr", "dt", "dd", "nav", "aside", "figure"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
         "track", "wbr"}
_NEVER_TEXT = {"script", "style", "noscript", "template", "svg", "head", "button", "select"}
_NAVIGATION_ROLES = {"navigation", "search", "complementary", "banner", "contentinfo"}
# <header> and <aside> are the page's banner and sidebar only outside sectioning content, as ARIA
# maps them; inside an article or section they are its own: its title block, an abstract, footnotes
# (Sphinx writes topics and footnotes as <aside>). A <footer> anywhere holds links and metadata
# ("Edit this page", tags, copyright), not text to answer from.
_LANDMARK_AT_PAGE_LEVEL = {"header", "aside"}
_SECTIONING = {"main", "article", "section"}
# a start tag that closes the open element before it, as HTML does (`<p>a<p>b`, `<li>a<li>b`)
_IMPLIED_END = {"p": {"p"}, "li": {"li"}, "dt": {"dt", "dd"}, "dd": {"dt", "dd"}, "tr": {"tr", "td", "th"},
                "td": {"td", "th"}, "th": {"td", "th"}, "option": {"option"}}
# the whole text of a permalink next to a heading or definition (Sphinx, MkDocs: "¶"; Docusaurus: a
# zero-width space; others "#", "§" or an icon): a same-page link saying only this is no content
_PERMALINK_TEXT = {"", "¶", "#", "§", "🔗", "⚓", "\u200b"}

# flags an element passes on to everything inside it
_HIDDEN, _NAV, _MAIN, _ARTICLE, _SECTION = 1, 2, 4, 8, 16


class _Event(NamedTuple):  # a tuple: pages make tens of thousands of these
    kind: str  # "start", "end" or "text"
    tag: str  # "" for text
    data: str | dict  # the text, or a start tag's attributes
    flags: int  # of the element (start/end) or of the element holding the text


class _Events(HTMLParser):
    """The page as a flat list of events, each flagged with what its ancestors are.

    Kept flat so that no recursion depth limits what pages can be read; end tags close the
    matching open element (and any left open inside it), stray end tags are ignored.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.events: list[_Event] = []
        self.title = ""
        self._tags: list[str] = []  # the open elements, outermost first
        self._flags: list[int] = []  # their flags, each including its ancestors'

    def handle_starttag(self, tag, attrs):
        if self._tags and self._tags[-1] in _IMPLIED_END.get(tag, ()):
            self._close_top()
        attrs = {k: v or "" for k, v in attrs}
        parent = self._flags[-1] if self._flags else 0
        flags = parent | _own_flags(tag, attrs, parent)
        self.events.append(_Event("start", tag, attrs, flags))
        if tag not in _VOID:
            self._tags.append(tag)
            self._flags.append(flags)

    def handle_endtag(self, tag):
        if tag in self._tags:
            while self._close_top() != tag:
                pass

    def handle_data(self, data):
        tag, flags = (self._tags[-1], self._flags[-1]) if self._tags else ("", 0)
        if tag == "title" and not self.title and "svg" not in self._tags:
            self.title = data.strip()
        self.events.append(_Event("text", "", data, flags))

    def close(self):
        super().close()
        while self._tags:
            self._close_top()

    def _close_top(self) -> str:
        tag, flags = self._tags.pop(), self._flags.pop()
        self.events.append(_Event("end", tag, {}, flags))
        return tag


def _own_flags(tag: str, attrs: dict, parent: int) -> int:
    """What an element is, from its tag and ARIA role; `parent`: the flags of the element holding it."""
    role = attrs.get("role", "").strip().lower()
    in_section = bool(parent & (_MAIN | _ARTICLE | _SECTION))
    flags = 0
    if tag in _NEVER_TEXT or attrs.get("hidden", "until-found").lower() != "until-found":
        flags |= _HIDDEN  # hidden="until-found" is collapsed text the browser's search opens: content
    if tag in ("nav", "footer") or role in _NAVIGATION_ROLES or (tag in _LANDMARK_AT_PAGE_LEVEL and not in_section):
        flags |= _NAV
    if tag == "main" or role == "main":
        flags |= _MAIN
    if tag == "article" or role == "article":
        flags |= _ARTICLE
    if tag in _SECTIONING:
        flags |= _SECTION
    return flags


def _main_content(events: list[_Event]) -> list[_Event]:
    """The visible events of the page's main content, widening until some text is found.

    In order: inside <main> / role="main" (minus navigation inside it); else inside <article>s;
    else the whole page minus navigation, banner and footer; else everything visible.
    """
    for inside, outside in ((_MAIN, _HIDDEN | _NAV), (_ARTICLE, _HIDDEN | _NAV), (0, _HIDDEN | _NAV),
                            (0, _HIDDEN)):
        kept = [e for e in events if e.flags & inside == inside and not e.flags & outside]
        if any(e.kind == "text" and e.data.strip() for e in kept):
            return kept
    return []


class _Markdown:
    """Renders events as text: h1-h6 become `#` headings, <pre> a fenced block, block tags line breaks."""

    def __init__(self):
        self.out: list[str] = []
        self._fences: list[int] = []  # where each open <pre>'s opening fence is in `out`
        self._links: list[int | None] = []  # where each open <a> began in `out` if it is a same-page link
        self._cells = 0  # open table cells

    def start(self, tag: str, attrs: dict) -> None:
        if tag in ("td", "th"):  # a row on one line, cells apart: "-v | verbose", not "-vverbose"
            if not self._at_line_start():
                self.out.append("| " if self.out[-1].endswith(" ") else " | ")
            self._cells += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "pre":  # fenced, so `#` lines in code never look like headings
            self._fences.append(len(self.out))
            self.out.append("\n```\n")
        elif tag == "a":
            self._links.append(len(self.out) if attrs.get("href", "").startswith("#") else None)
        elif tag in _BLOCKS:
            self._break("\n- " if tag == "li" else "\n")

    def end(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._cells = max(0, self._cells - 1)
        elif tag == "pre" and self._fences:
            self._close_fence(self._fences.pop())
        elif tag == "a":
            begun = self._links.pop() if self._links else None
            if begun is not None and "".join(self.out[begun:]).strip() in _PERMALINK_TEXT:
                del self.out[begun:]
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n")
        elif tag == "p":
            self._break("\n\n")
        elif tag in _BLOCKS:
            self._break("\n")

    def _break(self, text: str) -> None:
        """A line break between blocks; a space inside a table cell (paragraphs, lists), so rows stay whole."""
        if not self._cells:
            self.out.append(text)
        elif self.out and not self.out[-1].endswith((" ", "\n")):
            self.out.append(" ")

    def _close_fence(self, at: int) -> None:
        """End a code block; its fence is ~~~ if the code itself has ``` lines (Markdown shown as code)."""
        code = "".join(self.out[at + 1:])
        fence = "~~~" if re.search(r"^\s*```", code, re.MULTILINE) else "```"
        self.out[at] = f"\n{fence}\n"
        self.out.append(f"{fence}\n\n" if code.endswith("\n") else f"\n{fence}\n\n")

    def text(self, data: str) -> None:
        if self._fences:
            if len(self.out) == self._fences[-1] + 1:  # HTML ignores a newline right after <pre>
                data = data.removeprefix("\n")
            self.out.append(data)
            return
        data = re.sub(r"\s+", " ", data)
        if self.out and self.out[-1].endswith(" ") or self._at_line_start():
            data = data.lstrip()
        if data:
            self.out.append(data)

    def _at_line_start(self) -> bool:
        """Whether the current line holds nothing yet but a heading or list mark."""
        tail = "".join(self.out[-4:])
        if "\n" not in tail and len(self.out) > 4:
            return False
        return re.fullmatch(r"(#{1,6} |- )?\s*", tail.rsplit("\n", 1)[-1]) is not None

    def result(self) -> str:
        """The text without spaces around lines nor repeated blank lines; code keeps its indentation and blanks."""
        lines: list[str] = []
        fence = None
        for line in "".join(self.out).split("\n"):
            line = line.rstrip() if fence else line.strip()
            if fence is None and line in ("```", "~~~"):
                fence = line
            elif line == fence:
                fence = None
            elif fence is None and not line and (not lines or not lines[-1]):
                continue
            lines.append(line)
        return "\n".join(lines).strip()


_META = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_HEAD_END = re.compile(r"</head", re.IGNORECASE)
_ROBOTS = re.compile(r"""\bname\s*=\s*["']?robots\b""", re.IGNORECASE)
_NOINDEX = re.compile(r"""\bcontent\s*=\s*["']?[^"'>]*\b(?:noindex|none)\b""", re.IGNORECASE)
NOINDEX_REASON = ('the page asks not to be indexed (<meta name="robots" content="noindex">: '
                  "a print, contents or redirect page)")


def asks_not_to_be_indexed(html: str) -> bool:
    """Whether the page's head says `<meta name="robots" content="noindex">` (or "none").

    Why: documentation generators mark the pages a search engine should skip. mdBook marks
    print.html (the whole book again on one page) and toc.html (every chapter's title as a
    link), and redirect stubs carry it too. Indexed, the first doubles every passage and the
    second matches any question's words. This is the site's own word, not a guess."""
    end = _HEAD_END.search(html)
    return any(_ROBOTS.search(tag) and _NOINDEX.search(tag)
               for tag in _META.findall(html if end is None else html[:end.start()]))


def _head(data: bytes) -> bytes:
    """The bytes before `</head>` (all of them when there is none). An ASCII "<" never sits
    inside a UTF-8 character, so the cut leaves whole characters."""
    end = re.search(rb"</head", data, re.IGNORECASE)
    return data if end is None else data[:end.start()]


def html_to_markdown(html: str) -> tuple[str, str]:
    """(main content as text with `#` headings, <title>) using only the standard library."""
    parser = _Events()
    parser.feed(html)
    parser.close()
    out = _Markdown()
    for event in _main_content(parser.events):
        if event.kind == "start":
            out.start(event.tag, event.data)
        elif event.kind == "end":
            out.end(event.tag)
        else:
            out.text(event.data)
    return out.result(), parser.title


# ---------------------------------------------------------------------- Markdown
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_CODE_FENCE = re.compile(FENCE.pattern, re.MULTILINE)  # chunking's fence line, anywhere in a text


def strip_markdown_comments(text: str) -> str:
    """The text without its HTML comments (`<!-- ... -->`), except inside code fences.

    A rendered page never shows them; left in, their notes to the authors ("Do not remove or
    links may break", build instructions) became chunks and quoted "evidence".
    """
    def prose(segment: str) -> str:  # the comment's own line break stays: one blank line at most
        return re.sub(r"\n{3,}", "\n\n", _COMMENT.sub("", segment))

    out, pos, fence = [], 0, None
    for match in _CODE_FENCE.finditer(text):
        if fence is None:
            out.append(prose(text[pos:match.start()]))
            pos, fence = match.start(), match.group(1)[0]
        elif match.group(1)[0] == fence:
            line_end = text.find("\n", match.end())
            end = len(text) if line_end < 0 else line_end
            out.append(text[pos:end])
            pos, fence = end, None
    out.append(text[pos:] if fence else prose(text[pos:]))
    return "".join(out)


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


