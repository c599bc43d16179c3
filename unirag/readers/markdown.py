"""Markdown, the text every reader writes: headings, code fences and sections; and the reader of
Markdown files (.md: comments, footnote marks and front matter read as a rendered page shows them).

Each reader turns its format into Markdown; chunking cuts that Markdown at its headings. The
syntax both sides need lives here, below them.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from unirag.readers import includes
from unirag.readers.base import Document, Reader, SourceFile, Skipped, Unreadable, decode, register

_ATX_OPENING = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")  # a heading line, "#" alone (empty) too
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")  # turns the line above it into a heading
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # a code fence line
_LINE_END = re.compile(r"\r\n?|\n")

# CommonMark, as the Markdown a page is written in and every reader's output are parsed; with the
# plugins for what Markdown files add to it (front matter, footnotes)
_PARSER = MarkdownIt("commonmark").use(front_matter_plugin).use(footnote_plugin)


def parse(text: str) -> tuple[list[Token], dict]:
    """markdown-it's block tokens of `text` (each with `map`: its first line and the line after
    its last) and its environment (the footnotes it defines)."""
    env: dict = {}
    return _PARSER.parse(text, env), env


def escaped(line: str) -> str:
    """A line of plain or extracted text that Markdown would read as a heading (a `#` line) or as
    a heading's underline (a line of `=` or `-`), escaped, so that only the headings a reader
    finds are headings."""
    return "\\" + line.lstrip() if _ATX_OPENING.match(line) or SETEXT_UNDERLINE.match(line) else line


def _line_starts(text: str) -> list[int]:
    """Where each line of `text` starts, as markdown-it counts lines (a line ends at "\\n", "\\r"
    or "\\r\\n"), and one past the text's end."""
    return [0] + [match.end() for match in _LINE_END.finditer(text)] + [len(text) + 1]


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block of a text, by character offsets."""

    start: int    # where its opening fence line starts
    close: int    # where its closing fence line starts (the text's length for a block left open)
    end: int      # where its closing fence line ends, before the line break
    opening: str  # its opening fence and info string ("```rust"), what reopens it after a cut


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of `text` (top level, in lists or quotes), in order, as CommonMark
    reads them: a block left open runs to the end of its container."""
    if "```" not in text and "~~~" not in text:  # (most sections: no parse needed)
        return []
    starts = _line_starts(text)
    blocks = []
    for token in parse(text)[0]:
        if token.type != "fence" or not token.map:
            continue
        first, after = token.map
        last = text[starts[after - 1]:starts[after] - 1].rstrip("\r") if after - 1 > first else ""
        closed = re.fullmatch(rf"[\s>]*{re.escape(token.markup[0])}{{{len(token.markup)},}}[ \t]*", last)
        if closed:
            close, end = starts[after - 1], starts[after - 1] + len(last)
        else:
            close = end = min(starts[after] - 1, len(text))
        blocks.append(CodeBlock(starts[first], close, end, f"{token.markup}{token.info}".strip()))
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


def headings(text: str) -> list[tuple[int, int, int, str]]:
    """The document's own headings, as CommonMark reads them: [(first line, the line after the
    heading, level, title)]. ATX (`## Title`) and setext (a title underlined with `===` or `---`)
    alike; a `#` line in a code block, a quote or a list item is none, and so is one without a
    title."""
    tokens = parse(text)[0] if "#" in text or "=" in text or "-" in text else []
    found = [(token.map[0], token.map[1], int(token.tag[1]), " ".join(tokens[i + 1].content.split()))
             for i, token in enumerate(tokens) if token.type == "heading_open" and token.level == 0]
    return [heading for heading in found if heading[3]]  # ("#" alone is an empty heading: no title)


def _without_line_end(lines: str) -> str:
    return lines[:-2] if lines.endswith("\r\n") else lines[:-1] if lines.endswith(("\n", "\r")) else lines


def split_sections(text: str) -> list[tuple[list[tuple[int, str]], str]]:
    """[(heading stack [(level, title), ...], section text incl. its heading lines)]: runs of the
    text's lines, in order.

    A heading with no body of its own (e.g. "# Chapter" right before "## Part") is folded into
    the next section, so no chunk is a bare heading.
    """
    starts = _line_starts(text)
    # [heading stack, first line, the line after its headings (where its body starts)]
    sections: list[list] = [[[], 0, 0]]
    stack: list[tuple[int, str]] = []
    for first, after, level, title in headings(text):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        section = sections[-1]
        if not text[starts[section[2]]:starts[first]].strip():  # fold a body-less heading
            sections[-1] = [list(stack), section[1], after]
        else:
            sections.append([list(stack), first, after])
    bounds = [start for _, start, _ in sections[1:]] + [len(starts) - 1]
    pieces = [(path, _without_line_end(text[starts[start]:starts[end]])) for (path, start, _), end in zip(sections, bounds)]
    return [(path, piece) for path, piece in pieces if piece.strip()]


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
def markdown_prose(text: str) -> str:
    """Markdown as a reader sees it rendered: without HTML comments (`<!-- ... -->`) and without
    footnote marks (`[^label]` where a note is cited, and the label before the note's text, which
    stays), as CommonMark and its footnote extension read them: in code, both are text.

    Why: a rendered page never shows comments; left in, their notes to the authors ("Do not
    remove or links may break", build instructions) became chunks and quoted "evidence". A
    footnote mark renders as a superscript number; read as written, it sat in every quote of its
    sentence ("hash tables[^siphash].") and said nothing.
    """
    if "<!--" not in text and "[^" not in text:
        return text
    starts = _line_starts(text)
    cuts: list[tuple[int, int]] = []  # character ranges to drop

    def cut_next(span: list[int], what: str, spaces_before: bool = False) -> None:
        """Drop the next `what` of the paragraph (the one after the last dropped from it)."""
        # (cuts are made in the text's order: the last one ends where this search may start)
        at = text.find(what, max(starts[span[0]], cuts[-1][1] if cuts else 0), starts[span[1]] - 1)
        start = at
        while spaces_before and start > 0 and text[start - 1] in " \t":
            start -= 1
        if at >= 0:
            cuts.append((start, at + len(what)))

    tokens, _ = parse(text)
    for i, token in enumerate(tokens):
        if token.type == "html_block" and token.content.lstrip().startswith("<!--"):
            cuts.append((starts[token.map[0]], starts[token.map[1]]))
        elif token.type == "footnote_open":  # the definition's label, on its first line
            line = starts[next(t.map[0] for t in tokens[i:] if t.map)]
            label = re.compile(r"[ \t]*\[\^[^\]]+\]:[ \t]*").match(text, line)
            if label:
                cuts.append((label.start(), label.end()))
        elif token.type == "inline" and token.map and token.children:
            for child in token.children:
                if child.type == "html_inline" and child.content.startswith("<!--"):
                    cut_next(token.map, child.content)
                elif child.type == "footnote_ref":
                    cut_next(token.map, f"[^{child.meta['label']}]", spaces_before=True)
    out, pos = [], 0
    for start, end in sorted(cuts):
        out.append(text[pos:max(pos, start)])
        pos = max(pos, end)
    out.append(text[pos:])
    # the blank lines around what was dropped: one, as Markdown renders any run of them
    return outside_code("".join(out), lambda segment: re.sub(r"\n{3,}", "\n\n", segment))


# the fields a rendered page shows at its top: its title, then a one-line summary under it
_LEDE_FIELDS = ("description", "summary", "subtitle")


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """(the block's one-line top-level fields, the text after it), or ({}, text) when the text does
    not open with a front matter block: YAML between `---` lines (markdown-it's front matter
    plugin) or TOML between `+++` lines (Hugo's), that parses as a table of fields. A document
    that opens with a horizontal rule ("---") and prose is not front matter."""
    tokens = parse(text)[0] if text.startswith("---") else []
    if tokens and tokens[0].type == "front_matter":
        block, after = tokens[0].content, tokens[0].map[1]
        try:
            fields = yaml.safe_load(block)
        except yaml.YAMLError:
            fields = None
    elif text.startswith("+++"):
        lines = text.split("\n")
        after = next((n + 1 for n in range(1, len(lines)) if lines[n].rstrip() == "+++"), 0)
        try:
            fields = tomllib.loads("\n".join(lines[1:after - 1])) if after else None
        except tomllib.TOMLDecodeError:
            fields = None
    else:
        return {}, text
    if not isinstance(fields, dict) or not fields:
        return {}, text
    scalars = {str(key).lower(): str(value).strip() for key, value in fields.items()
               if isinstance(value, (str, int, float)) and not isinstance(value, bool) and "\n" not in str(value).strip()}
    return scalars, "\n".join(text.split("\n")[after:])


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
    opening = next((heading for first, _, _, heading in headings(body) if first == 0), "")
    top = f"# {title}\n\n" if title and opening.lower() != title.lower() else ""
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
# 3: footnote marks dropped; 4: comments, footnotes and front matter as markdown-it-py and PyYAML read
# them (`markdown_prose`, `front_matter`). (mdBook's includes need no number: read in place, they
# change the bytes a page's hash is taken of, `registry.read_bytes`.)
READER = register(Reader("markdown", (".md", ".markdown"), 4,
                         text_reader(lambda text, file: read_front_matter(markdown_prose(text))),
                         skip=_not_a_page, expand=includes.expand_mdbook, include_marker=b"{{#"))
