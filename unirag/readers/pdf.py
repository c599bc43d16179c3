"""PDF -> Markdown-style text: pypdf's text with the page furniture taken out and the section
headings found by their type size.

Why: pypdf gives a PDF's text line by line as it is laid out on the page, with no structure. Read
as it comes:
- every page's running header and page number land in the text, often mid-sentence where a
  paragraph runs on to the next page ("... Information found in a 2 Shared MIME-info Database
  directory is added ..."), and get quoted as part of it;
- words hyphenated at a line's end stay cut ("structures man- agement");
- there are no headings, so a chunk's citation names only the file and its heading path says
  nothing of what the chunk is about.

So:
- a line at a page's top or bottom (its first or last EDGE_LINES lines) that recurs there on
  many pages (digits ignored: "Page 3" and "Page 4" are the same line) is furniture, as is a
  page number alone at an edge, and a first or last line opening or ending with a page number
  that recurs on a page up to two away (a chapter's running header); all are dropped;
- a paragraph cut by the page break is joined again (the page ends without closing punctuation
  and the next begins in lower case), as is a listing (code, below) the page break cut;
- a word hyphenated at a line's end between two lower-case letters is joined, unless the
  document's own words say it is a hyphenated compound (`_unbroken`);
- a ligature (U+FB00-FB06: "ﬁ") is read as its letters ("fi"), and so are the ligatures, quotes
  and dashes a TeX font without a map to Unicode leaves as control characters (`_tex_codes`);
- a line set in type larger than the body text's (the size most of the characters are set in) is
  a heading, at a level given by its size among the headings' sizes. Sentences set large (ending
  in punctuation) are not headings, nor are three or more lines in a row set in one larger size
  (a paragraph in larger type, or the prose of a page mostly of small-type code);
- table-of-contents and index entries (dot leaders, then a page number) are dropped;
- paragraphs are found by their spacing: a line further below the one before than the
  document's usual line spacing (by PARAGRAPH_GAP) starts a paragraph, unless it goes on with a
  sentence that the line before left open (no closing punctuation, then a lower-case letter); so
  a definition's first sentence is not one run with the lines around it;
- lines set wholly in a monospace font (Courier, TeX's typewriter type, any "Mono") are code,
  fenced as a Markdown code block: a listing is then quoted line by line, not glued to the
  sentence that introduces it.
The text records where each page starts (`Document.pages`), so that a chunk can name its pages.
Only what pypdf reports is used (its text, and each piece's position, font and size): no column
detection, no OCR (a scanned PDF has no text to read).
"""

from __future__ import annotations

import io
import logging
import math
import re
import unicodedata
from collections import Counter
from pathlib import Path

from unirag.readers.base import Document, Reader, Skipped, SourceFile, register
from unirag.readers.markdown import escaped, fence_for

EDGE_LINES = 2  # lines at each end of a page where running headers, footers and page numbers sit
MIN_REPEATS = 3  # a line at the page edges on at least this many pages ...
REPEAT_SHARE = 0.4  # ... and this share of the pages is furniture
HEADING_RATIO = 1.15  # type this much larger than the body's is a heading
MAX_HEADING_LINES = 2  # a heading may wrap onto a second line; more lines in a row are a paragraph
MAX_HEADING_WORDS = 15
MAX_LEVEL = 6
PARAGRAPH_GAP = 1.12  # a line this many times the usual line spacing below the one before starts a paragraph
# monospace fonts by name (a PDF's own fixed-pitch flag is often unset: TeX's fonts leave it out)
_MONOSPACE = re.compile(r"mono|nimbusmon|courier|consol|typewriter|fixed|^(?:cm|ec|tc|sf|lm)s?l?tt|menlo|inconsolata|"
                        r"source ?code|fira ?code", re.IGNORECASE)

_NUMBER = r"(?:\d+|[ivxlc]{1,6})"  # a page number, arabic or roman
_PAGE_NUMBER = re.compile(rf"^(?:page\s+)?{_NUMBER}(?:\s*(?:of|/)\s*\d+)?$", re.IGNORECASE)
_DOT_LEADER = re.compile(r"(?:\.\s?){4,}")
_EDGE_NUMBER = re.compile(r"^\d+\s|\s\d+$")
_TOC_ENTRY = re.compile(rf"{_DOT_LEADER.pattern}\s*{_NUMBER}\s*$", re.IGNORECASE)
_ENDS_SENTENCE = re.compile(r"[.!:;,]$")  # a heading may ask ("What is this spec?")
# a word hyphenated at a line's end: its first part (ending in a lower-case letter) and its second
_HYPHEN_BREAK = re.compile(r"([A-Za-z]*[a-z])-\n([a-z]+)")
_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
MIN_COMPOUND_PART = 4  # letters in each part of a hyphenated compound told by its parts (`_unbroken`)
# the typographic ligatures (ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) that TeX's fonts set as one glyph and pypdf returns as
# one character: "ﬁle" is no "file" to BM25, nor to the tokenizer
_LIGATURES = {code: unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}
# TeX's 8-bit text fonts set ligatures, quotes and dashes at the codes of control characters: T1
# (`\usepackage[T1]{fontenc}`) and OT1 (TeX's default). A font embedded without a map from its
# codes to Unicode (dvips' bitmap Type 3 fonts, a Type 1 font's built-in encoding) leaves pypdf
# those codes, so "first" reads "\x1crst" and a search for "first" misses it.
_T1 = {0x10: "\u201c", 0x11: "\u201d", 0x12: "\u201e", 0x13: "\u00ab", 0x14: "\u00bb", 0x15: "\u2013",
       0x16: "\u2014", 0x17: "", 0x19: "i", 0x1A: "j", 0x1B: "ff", 0x1C: "fi", 0x1D: "fl", 0x1E: "ffi", 0x1F: "ffl"}
_OT1 = {0x0B: "ff", 0x0C: "fi", 0x0D: "fl", 0x0E: "ffi", 0x0F: "ffl", 0x10: "i", 0x11: "j", 0x19: "\u00df",
        0x1A: "\u00e6", 0x1B: "\u0153", 0x1C: "\u00f8", 0x1D: "\u00c6", 0x1E: "\u0152", 0x1F: "\u00d8"}
# a document title that names no subject: the file it was made from ("Microsoft Word - notes.docx")
_NO_TITLE = re.compile(r"^(?:microsoft \w+ - |untitled$)|\.(?:docx?|odt|rtf|tex|dvi|ps|pdf|indd|txt)$", re.IGNORECASE)


def _tex_codes(text: str) -> dict[int, str]:
    """The code table of TeX's fonts to read `text`'s control characters with: T1's where the text
    has more of its ligature codes (0x1B-0x1F) than of OT1's (0x0B-0x0F), OT1's where it has fewer,
    none where it has neither (no text has control characters, so these are a TeX font's glyphs;
    a document of one encoding has its ligatures on almost every page)."""
    t1 = sum(text.count(chr(code)) for code in range(0x1B, 0x20))
    ot1 = sum(text.count(chr(code)) for code in range(0x0B, 0x10))
    return _T1 if t1 > ot1 else _OT1 if ot1 else {}


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _furniture_key(line: str) -> str:
    return re.sub(r"\d+", "#", _collapse(line)).lower()


def _monospace(font) -> bool:
    try:
        name = str(font.get("/BaseFont", "")) if font else ""
    except Exception:  # pypdf raises many types on malformed objects
        return False
    return bool(_MONOSPACE.search(re.sub(r"^/?(?:[A-Z]{6}\+)?", "", name)))


def _page(page) -> tuple[list[str], list[tuple[float, str]], list[tuple[float | None, bool]]]:
    """(the page's text lines, its text pieces with the size they are set in, and per line: the
    height of its first piece of text on the page and whether all its text is set in a monospace
    font; (None, False) for each line where the pieces do not add up to the page's text)."""
    placed: list[tuple[float, str, float, bool]] = []  # (size, text, height on the page, monospace)

    def visit(text, cm, tm, font, size):
        # the size on the page: the font size scaled by the text and current matrices
        scale = math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        placed.append((round(float(size or 0) * scale, 1), text,
                       float(tm[4] * cm[1] + tm[5] * cm[3] + cm[5]), _monospace(font)))

    text = page.extract_text(visitor_text=visit) or ""
    lines = text.split("\n")  # right-stripped once read (`read_pdf_pages`): "\x1c" is whitespace to Python
    pieces = [(size, piece) for size, piece, _, _ in placed]
    if "".join(piece for _, piece in pieces) != text:
        return lines, pieces, [(None, False)] * len(lines)
    layout: list[tuple[float | None, bool]] = []
    y, fonts = None, []
    for _, piece, height, mono in placed:
        for k, segment in enumerate(piece.split("\n")):
            if k:
                layout.append((y, bool(fonts) and all(fonts)))
                y, fonts = None, []
            if segment.strip():
                y = height if y is None else y
                fonts.append(mono)
    layout.append((y, bool(fonts) and all(fonts)))
    return lines, pieces, layout


def body_size(pages: list[list[tuple[float, str]]]) -> float:
    """The size most characters are set in."""
    sizes: Counter = Counter()
    for pieces in pages:
        for size, text in pieces:
            sizes[size] += len(text.strip())
    return sizes.most_common(1)[0][0] if sizes else 0.0


def heading_sizes(pieces: list[tuple[float, str]], body: float) -> dict[str, float]:
    """{heading text (whitespace collapsed): size} for the lines of a page set larger than the body.

    A line's text can come as several pieces (a heading's number and its words). Three or more
    lines in a row set in one larger size are a paragraph in larger type, not headings: so
    where the most common size is not the prose's (a page mostly of small-type code), the prose
    is not read as headings."""
    lines: list[tuple[float, str]] = []
    parts: list[str] = []
    size_of = 0.0
    for size, text in pieces:
        if parts and (size != size_of or parts[-1].endswith("\n")):
            lines.append((size_of, _collapse("".join(parts))))
            parts = []
        if not parts and not text.strip():
            continue
        parts.append(text)
        size_of = size
    if parts:
        lines.append((size_of, _collapse("".join(parts))))
    found: dict[str, float] = {}
    start = 0
    while start < len(lines):
        end = start + 1
        while end < len(lines) and lines[end][0] == lines[start][0]:
            end += 1
        if end - start <= MAX_HEADING_LINES and lines[start][0] >= body * HEADING_RATIO:
            for size, text in lines[start:end]:
                if (re.search(r"[^\W\d_]", text) and len(text.split()) <= MAX_HEADING_WORDS
                        and not _DOT_LEADER.search(text) and not _ENDS_SENTENCE.search(text)):
                    found.setdefault(text, size)
        start = end
    return found


def _furniture(pages: list[list[str]]) -> set[str]:
    """The keys of lines that recur at the page edges on many pages (a document's running header
    or footer)."""
    counts: Counter = Counter()
    for lines in pages:
        edges = lines[:EDGE_LINES] + lines[-EDGE_LINES:]
        counts.update({_furniture_key(line) for line in edges})
    needed = max(MIN_REPEATS, math.ceil(REPEAT_SHARE * len(pages)))
    return {key for key, n in counts.items() if n >= needed}


def _running_line(lines: list[str], neighbours: list[list[str]], end: int) -> bool:
    """Whether the page's first (end=0) or last (end=-1) line is a running header or footer that
    changes with the chapter ("Chapter 4: Function reference 9"): it starts or ends with a page
    number, and the same line, digits aside, is at that end of a page near it (`neighbours`)."""
    if not lines or not _EDGE_NUMBER.search(lines[end].strip()):
        return False
    key = _furniture_key(lines[end])
    return any(other and _furniture_key(other[end]) == key for other in neighbours)


def _strip_edges(pages: list[list[str]]) -> list[tuple[int, int]]:
    """Per page, the range of its lines that holds no furniture at its top and bottom."""
    furniture = _furniture(pages)
    out = []
    for i, lines in enumerate(pages):
        # two pages either side: a book set two-sided alternates its headers ("28 CHAPTER 3. THE
        # PAGE" on the left pages, "3.2. THE SPREAD 29" on the right ones)
        neighbours = pages[max(i - 2, 0):i] + pages[i + 1:i + 3]

        def is_furniture(line: str) -> bool:
            return _furniture_key(line) in furniture or bool(_PAGE_NUMBER.match(line.strip()))

        top, bottom = 0, len(lines)
        if _running_line(lines, neighbours, 0):
            top = 1
        while top < min(EDGE_LINES, bottom) and is_furniture(lines[top]):
            top += 1
        if bottom > top and _running_line(lines, neighbours, -1):
            bottom -= 1
        while bottom > max(top, len(lines) - EDGE_LINES) and is_furniture(lines[bottom - 1]):
            bottom -= 1
        out.append((top, bottom))
    return out


def line_spacing(layouts: list[list[tuple[float | None, bool]]]) -> float:
    """The usual distance between a line and the next (the most common one), 0 when unknown."""
    gaps: Counter = Counter()
    for layout in layouts:
        heights = [y for y, _ in layout if y is not None]
        gaps.update(round(a - b, 1) for a, b in zip(heights, heights[1:]) if a > b)
    return gaps.most_common(1)[0][0] if gaps else 0.0


def _spaced(gap: float | None, spacing: float) -> bool:
    """Whether a line sits further below the line before than the usual spacing (or above it:
    another column)."""
    return gap is not None and bool(spacing) and not 0 <= gap <= spacing * PARAGRAPH_GAP


def _starts_paragraph(before: str, line: str, gap: float | None, spacing: float) -> bool:
    """Whether `line` starts a paragraph: it is spaced off the line before (`_spaced`) and does
    not go on with a sentence that line left open."""
    return _spaced(gap, spacing) and (bool(re.search(r"[.!?:;]\W*$", before)) or not line.lstrip()[:1].islower())


def _as_markdown(lines: list[str], headings: dict[str, float], levels: dict[float, int],
                 layout: list[tuple[float | None, bool]], spacing: float) -> list[str]:
    """The lines with headings written as Markdown headings (a heading wrapped onto a second line
    is joined), a blank line where a paragraph starts, and runs of monospace lines fenced as code
    (`layout`: per line, its height on the page and whether it is monospace); a body line that
    would read as a Markdown heading is escaped."""
    out, i, code, last_y = [], 0, [], None

    def close_code():
        if code:
            fence = fence_for("\n".join(code))
            out.extend(["", fence, *code, fence, ""])
            code.clear()

    while i < len(lines):
        line = _collapse(lines[i])
        y, mono = layout[i]
        two = _collapse(lines[i] + " " + lines[i + 1]) if i + 1 < len(lines) else ""
        if two and two in headings and line not in headings:
            line, i = two, i + 1
        gap = last_y - y if last_y is not None and y is not None else None
        last_y = layout[i][0] if layout[i][0] is not None else y
        if line in headings:
            close_code()
            out += ["", "#" * levels[headings[line]] + " " + line, ""]
        elif mono and line:
            if code and _spaced(gap, spacing):  # an empty line in the listing
                code.append("")
            code.append(lines[i])
        else:
            close_code()
            if out and out[-1] and _starts_paragraph(out[-1], lines[i], gap, spacing):
                out.append("")
            out.append(escaped(lines[i]))
        i += 1
    close_code()
    return out


def _own_title(reader) -> str:
    """The document's title from its metadata, "" when it has none, only names a file, or cannot
    be read (a malformed metadata entry must not cost the document its text)."""
    try:
        title = _collapse(str((reader.metadata.title if reader.metadata else None) or ""))
    except Exception:  # pypdf raises many types on malformed objects
        return ""
    return "" if _NO_TITLE.search(title) else title


def pdf_to_markdown(data: bytes) -> tuple[str, str]:
    """(the PDF's text as Markdown, its title): `read_pdf_pages` without the pages."""
    text, title, _ = read_pdf_pages(data)
    return text, title


def read_pdf_pages(data: bytes) -> tuple[str, str, tuple[int, ...]]:
    """(the PDF's text as Markdown, its title: the document's own unless that only names a file,
    else its largest heading on the first page, else "", and where each page starts in the text:
    `Document.pages`). Raises what pypdf raises on a malformed file."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(data))
    read = [_page(page) for page in reader.pages]
    letters = {**_LIGATURES, **_tex_codes("".join(line for lines, _, _ in read for line in lines))}
    read = [([line.translate(letters).rstrip() for line in lines],
             [(size, piece.translate(letters)) for size, piece in pieces], layout) for lines, pieces, layout in read]
    body = body_size([pieces for _, pieces, _ in read])
    page_headings = [heading_sizes(pieces, body) for _, pieces, _ in read]
    sizes = sorted({size for found in page_headings for size in found.values()}, reverse=True)
    levels = {size: min(rank + 1, MAX_LEVEL) for rank, size in enumerate(sizes)}
    # table-of-contents and index entries (a title, dot leaders, a page number) hold nothing to answer from
    kept = [[k for k, line in enumerate(lines) if line.strip() and not _TOC_ENTRY.search(line)]
            for lines, _, _ in read]
    pages = [[lines[k] for k in keep] for keep, (lines, _, _) in zip(kept, read)]
    layouts = [[layout[k] for k in keep] for keep, (_, _, layout) in zip(kept, read)]
    if len(pages) > 1:
        edges = _strip_edges(pages)
        pages = [lines[top:bottom] for lines, (top, bottom) in zip(pages, edges)]
        layouts = [layout[top:bottom] for layout, (top, bottom) in zip(layouts, edges)]
    spacing = line_spacing(layouts)
    text, starts, empty = "", [], 0
    for lines, layout, headings in zip(pages, layouts, page_headings):
        page = "\n".join(_as_markdown(lines, headings, levels, layout, spacing)).strip()
        if not page:
            empty += 1  # a page without text starts where the next one does
            continue
        # a listing the page break cut goes on in the same code block (a page's text never ends
        # in an opening fence nor starts with a closing one)
        fence = text[-3:]
        if fence in ("```", "~~~") and page.startswith(fence + "\n"):
            text = text[:-3].rstrip("\n") + "\n"
            starts += [len(text)] * (empty + 1)
            text, empty = text + page[4:], 0
            continue
        # a paragraph the page break cut goes on in the same paragraph
        runs_on = text and not re.search(r"[.!?:]\W*$", text) and page[0].islower()
        text += ("\n" if runs_on else "\n\n") * bool(text)
        starts += [len(text)] * (empty + 1)
        text, empty = text + page, 0
    starts += [len(text)] * empty
    text, starts = _rewrite(text, starts, _HYPHEN_BREAK, _unbroken(text))
    text, starts = _rewrite(text, starts, re.compile(r"\n{3,}"), lambda match: "\n\n")
    title = _own_title(reader)
    if not title and page_headings and page_headings[0]:
        title = max(page_headings[0], key=lambda heading: page_headings[0][heading])
    stripped = text.strip()
    lead = len(text) - len(text.lstrip())
    return stripped, title, tuple(min(max(start - lead, 0), len(stripped)) for start in starts)


def _unbroken(text: str):
    """The rule for a word hyphenated at a line's end (`_HYPHEN_BREAK`), from the document's own
    words: joined ("docu-\nment" -> "document") when the document has the joined word elsewhere;
    kept a compound ("sans-\nserif" -> "sans-serif") when it has the hyphenated one elsewhere, or
    both parts as words of their own of MIN_COMPOUND_PART letters or more ("space-\nseparated");
    joined otherwise (most such breaks are the typesetter's, at a syllable: "configura-\ntion").

    On the 16 PDF guides of the dev set: 640 breaks had their joined word elsewhere, 21 only their
    hyphenated one (all compounds: "sans-serif", "platform-specific"), 173 neither; of those, 6
    had both parts as words of four letters or more, compounds all ("tabular-environment",
    "counter-example"), where three-letter parts let in joins ("who-ever", "gentle-man")."""
    words = Counter(word.lower() for word in _WORD.findall(_HYPHEN_BREAK.sub(" ", text)))

    def unbroken(match: re.Match) -> str:
        first, second = match.group(1), match.group(2)
        joined, compound = (first + second).lower(), f"{first}-{second}".lower()
        if words[joined]:
            return first + second
        parts = (first.lower(), second.lower())
        if words[compound] or all(len(part) >= MIN_COMPOUND_PART and words[part] for part in parts):
            return f"{first}-{second}"
        return first + second

    return unbroken


def _rewrite(text: str, offsets: list[int], pattern: re.Pattern, replace) -> tuple[str, list[int]]:
    """`pattern.sub(replace, text)`, and the offsets (into text) moved to where the same places are
    in the new text; an offset inside a replaced match moves to the replacement's end."""
    out, pos, shift, moved, k = [], 0, 0, [], 0
    for match in pattern.finditer(text):
        new = replace(match)
        while k < len(offsets) and offsets[k] <= match.start():
            moved.append(offsets[k] + shift)
            k += 1
        while k < len(offsets) and offsets[k] < match.end():
            moved.append(match.start() + shift + len(new))
            k += 1
        out += [text[pos:match.start()], new]
        pos = match.end()
        shift += len(new) - (match.end() - match.start())
    moved += [offset + shift for offset in offsets[k:]]
    return "".join(out + [text[pos:]]), moved


def read_pdf(file: SourceFile, data: bytes) -> Document | Skipped:
    """A `Reader.read` for PDF: `pdf_to_markdown`, or why the file cannot be read."""
    try:
        import pypdf  # noqa: F401
    except ImportError:
        return Skipped(file.source, "pypdf not installed (pip install pypdf to read PDFs)")
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings lack the file name; the skip says why
    try:
        text, title, pages = read_pdf_pages(data)
    except Exception as err:  # pypdf raises many types on malformed files
        return Skipped(file.source, f"PDF failed to parse: {type(err).__name__}: {err}"[:200])
    if not text:
        return Skipped(file.source, "PDF has no extractable text (scanned images?)")
    return Document(file.source, text, title or Path(file.source).stem, markdown=True, pages=pages)


# 1: running headers, footers and page numbers dropped, headings found by type size; 2: paragraphs
# found by their spacing, monospace lines fenced as code; 3: ligatures read as their letters, a
# hyphenated compound broken at a line's end kept whole (`_unbroken`), and each chunk's pages
# recorded (so chunks stored before pages were are read again); 4: a line of "=" or "-" escaped, which
# CommonMark would read as the underline of a heading; 5: TeX fonts' control-character codes read
READER = register(Reader("pdf", (".pdf",), 5, read_pdf))
