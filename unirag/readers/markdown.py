"""Markdown, the text every reader writes: headings, code fences and sections; and the reader of
Markdown files (.md: comments, footnote marks and front matter read as a rendered page shows them).

Each reader turns its format into Markdown; chunking cuts that Markdown at its headings. The
syntax both sides need lives here, below them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from unirag.readers import includes
from unirag.readers.base import Document, Reader, SourceFile, Skipped, Unreadable, decode, register

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")  # an ATX heading line
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # a code fence line


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block of a text, by character offsets."""

    start: int    # where its opening fence line starts
    close: int    # where its closing fence line starts (the text's length for a block left open)
    end: int      # where its closing fence line ends, before the line break
    opening: str  # the opening fence line, stripped ("```rust")


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of `text`, in order; a block ends at a fence line of its opening
    character at least as long (CommonMark), or at the text's end."""
    blocks: list[CodeBlock] = []
    start, fence, opening = 0, None, ""
    for match in re.finditer(FENCE.pattern, text, re.MULTILINE):
        line_end = text.find("\n", match.end())
        line_end = len(text) if line_end < 0 else line_end
        if fence is None:
            start, fence, opening = match.start(), match.group(1), text[match.start():line_end].strip()
        elif match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            blocks.append(CodeBlock(start, match.start(), line_end, opening))
            fence = None
    if fence is not None:
        blocks.append(CodeBlock(start, len(text), len(text), opening))
    return blocks


def block_at(blocks: Sequence[CodeBlock], pos: int) -> CodeBlock | None:
    """The block (of `code_blocks`) that character `pos` lies in: its opening fence line starts
    before `pos`, its closing one does not."""
    return next((block for block in blocks if block.start < pos <= block.close), None)


def outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """The text with `rewrite` applied to what lies outside fenced code blocks (`code_blocks`)."""
    out, pos = [], 0
    for block in code_blocks(text):
        out += [rewrite(text[pos:block.start]), text[block.start:block.end]]
        pos = block.end
    out.append(rewrite(text[pos:]))
    return "".join(out)


def fence_for(code: str) -> str:
    """The fence to put around `code` read from a page or notebook: ~~~ if the code itself holds ```
    (Markdown shown as code), so that it cannot close the block early."""
    return "~~~" if "```" in code else "```"


def markdown_title(text: str) -> str:
    """The first heading of the document's top level outside code fences (`#`, else `##`, ...), or "".

    Many books (mdBook chapters such as the Rust book's) start each page at `##`: its first `##`
    is then the page's title, rather than none.
    """
    tops = [path[0] for path, _ in split_sections(text) if path]
    if not tops:
        return ""
    top = min(level for level, _ in tops)
    return next(title for level, title in tops if level == top)


def split_sections(text: str) -> list[tuple[list[tuple[int, str]], str]]:
    """[(heading stack [(level, title), ...], section text incl. its heading line)].

    `#` lines inside ``` / ~~~ fences are code, not headings. A heading with no body of its own
    (e.g. "# Chapter" right before "## Part") is folded into the next section, so no chunk is a
    bare heading.
    """
    sections: list[tuple[list[tuple[int, str]], list[str]]] = [([], [])]
    stack: list[tuple[int, str]] = []
    fence = None
    for line in text.split("\n"):
        match = None
        if fence:
            if line.strip().startswith(fence):
                fence = None
        elif (f := FENCE.match(line)):
            fence = f.group(1)[0] * 3
        else:
            match = HEADING.match(line)
        if match:
            level, title = len(match.group(1)), match.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            previous_path, previous_lines = sections[-1]
            if previous_lines and not "".join(previous_lines[1 if previous_path else 0:]).strip():
                sections[-1] = (list(stack), previous_lines + [line])  # fold a body-less heading
            else:
                sections.append((list(stack), [line]))
        else:
            sections[-1][1].append(line)
    return [(path, "\n".join(lines)) for path, lines in sections if "\n".join(lines).strip()]


# ---------------------------------------------------------------------- reading text formats
def text_reader(convert: Callable[[str, SourceFile], tuple[str, str]]
                ) -> Callable[[SourceFile, bytes], Document | Skipped]:
    """A `Reader.read` for a text format: the bytes decoded (`decode`), turned into Markdown by
    `convert(text, file) -> (markdown, title or "")` (which may raise `Unreadable`), and the title,
    when it gives none, the text's first top-level heading, else the file's name."""
    def read(file: SourceFile, data: bytes) -> Document | Skipped:
        text, problem = decode(data)
        if text is None:
            return Skipped(file.source, problem)
        try:
            text, title = convert(text, file)
        except Unreadable as err:
            return Skipped(file.source, str(err))
        if not text.strip():
            return Skipped(file.source, "no text (only whitespace or markup)")
        return Document(file.source, text, title or markdown_title(text) or Path(file.source).stem, True)

    return read


# ---------------------------------------------------------------------- Markdown files
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
    (`html.py`) did, which read as citations of the answer's own passages.
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


# mdBook's SUMMARY.md lists the book's chapters as links for its sidebar and is rendered as no page
# of its own: its chunks match any question's words and answer none, as an HTML page's table of
# contents does (`html.py`)
BOOK_SUMMARY_REASON = "mdBook's table of contents (its SUMMARY.md: the book's sidebar, not a page)"
# a line of a book's summary: a chapter's link, "- [Title](chapter.md)", or a draft's, "[Title]()"
_SUMMARY_ENTRY = re.compile(r"[ \t]*(?:[-*+][ \t]+|\d+\.[ \t]+)?\[[^\]]*\]\([^)]*\)[ \t]*")
_SUMMARY_OTHER = re.compile(r"[ \t]*(?:#.*|-{3,}|\*{3,})?[ \t]*")  # part titles, separators, blank lines


def book_summary(text: str) -> bool:
    """Whether a Markdown text is an mdBook's summary: its lines chapter links (part titles,
    separators and blank lines aside)."""
    lines = [line for line in text.splitlines() if not _SUMMARY_OTHER.fullmatch(line)]
    return bool(lines) and all(_SUMMARY_ENTRY.fullmatch(line) for line in lines)


def _not_a_page(file: SourceFile, data: bytes) -> str | None:
    """An mdBook's SUMMARY.md (only a file of that name is decoded: this is asked of every file)."""
    if Path(file.source).name == "SUMMARY.md" and book_summary(decode(data)[0] or ""):
        return BOOK_SUMMARY_REASON
    return None


# markdown 1: HTML comments dropped (outside code); 2: front matter read (title, description);
# 3: footnote marks dropped (`strip_footnote_marks`). (mdBook's includes need no number: read in
# place, they change the bytes a page's hash is taken of, `registry.read_bytes`.)
READER = register(Reader("markdown", (".md", ".markdown"), 3,
                         text_reader(lambda text, file: read_front_matter(markdown_prose(text))),
                         skip=_not_a_page, expand=includes.expand_mdbook, include_marker=b"{{#"))
