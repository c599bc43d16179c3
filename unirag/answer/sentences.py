"""Cut a retrieved chunk into evidence units: sentences of prose, lines of code.

An answer is usually one sentence of the passage (or one line of an example), so the evidence
selector scores these units rather than whole chunks. A unit keeps its character offsets in the
chunk, so the text around it can be shown with it and highlighted in place.

Rules: a prose sentence ends at . ! ? followed by white space (not after a few common
abbreviations, nor after a list item's number), at a blank line, or at a line that starts a list
item or heading. Inside a code fence (or an indented block) every non-empty line is a unit of its
own, and so is a table row ("| --port | 8000 | The port to listen on. |": a record, whose cells'
sentences mean little apart). All units are at most `max_words` words. Headings are never units
(they are already in the chunk's label), nor are lines that only frame a block (an MkDocs
admonition's '!!! note "Title"', a Docusaurus ":::tip", a GitHub alert's "[!NOTE]").

Lines are read as a Markdown viewer reads them: blockquote markers ("> ") are set aside, so that a
quoted note's headings, blank lines and list items break it as they would outside a quote; and a
list item's or admonition's indented body is prose, not an indented code block, up to the indent
its own content starts at (CommonMark's rule, which MkDocs documentation leans on).

A unit longer than `max_words` words is cut at word boundaries, and its pieces say so
(`cut_before`, `cut_after`), so that a quote of one can show where the sentence goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from unirag.answer.attribution import ABBREVIATION
from unirag.readers.markdown import FENCE as _FENCE

MAX_WORDS = 40
HEADING = re.compile(r"^ {0,3}#{1,6}\s")
LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
# blockquote markers at a line's start ("> ", "> > "), not a ">>> " prompt; indented 4 or more,
# ">" starts a code line, not a quote (CommonMark)
_QUOTE_MARKS = re.compile(r"[ \t]{0,3}(?:>(?!>>)[ \t]?)+")
# a line that heads a body indented below it and says nothing itself: an MkDocs admonition,
# collapsible or content tab ('!!! note "Title"', "??? tip", '=== "pip"')
_CONTAINER = re.compile(r"[ \t]*(?:!!!|\?\?\?\+?|===)[ \t]")
CONTAINER_INDENT = 4  # how far such a body is indented
# a line that frames a block and says nothing itself: a Docusaurus admonition's fences
# (":::note Title", ":::"), a GitHub alert's type ("[!NOTE]")
_FRAME = re.compile(r"[ \t]*(?::::+.*|\[![A-Za-z]+\][ \t]*)$")
_CODE_SPAN = re.compile(r"(`[^`\n]*`)")  # grouped: re.split keeps the spans
_DELIMITER_ROW = re.compile(r"[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")  # "|---|:--:|"
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Unit:
    """A sentence or code line of a chunk: text[start:end] of that chunk."""

    start: int
    end: int
    code: bool = False
    cut_before: bool = False  # a piece of a longer unit, after its first piece
    cut_after: bool = False   # a piece of a longer unit, before its last piece


def _lines(text: str):
    """(start offset, line without its newline) for every line."""
    offset = 0
    for line in text.split("\n"):
        yield offset, line
        offset += len(line) + 1


def _prose_units(text: str, start: int, end: int) -> list[Unit]:
    """Sentences of text[start:end] (a paragraph or list item)."""
    units, begin = [], start
    marker = LIST_ITEM.match(text[start:end])  # "1. " ends no sentence
    for match in _SENTENCE_END.finditer(text, start + marker.end() if marker else start, end):
        if ABBREVIATION.search(text[max(begin, match.start() - 6):match.end()]) or _inside(text, begin, match, end):
            continue
        units.append(Unit(begin, match.end()))
        begin = match.end()
    units.append(Unit(begin, end))
    return [_strip(text, u) for u in units if text[u.start:u.end].strip()]


def _inside(text: str, begin: int, match: re.Match, end: int) -> bool:
    """Whether a sentence-end match is punctuation inside a sentence: a period standing alone
    ("a script executed with . or source") names the `.` command, one in a word that opens a
    bracket closed later in the paragraph ("yank-last-arg (M-. or M-_)") is part of a key or name,
    and so is one inside a bracket the sentence opened, closed later, with a lower-case word after
    it ("(see M-. or M-_)"). A "!" or "?" that ends a word with a lower-case word after it names
    something too: a Rust macro ("the env! macro"), a Ruby method ("empty? returns"); HTML pages
    lose the code marks that keep such names apart in Markdown."""
    if (match.group(0) in ("!", "?") and match.start() > begin and text[match.start() - 1].isalnum()
            and text[match.end():end].lstrip()[:1].islower()):
        return True
    if match.group(0).strip(".") != "" or match.start() == begin:
        return False
    before, after = text[begin:match.start()], text[match.end():end]
    word = before.rsplit(None, 1)[-1] if not text[match.start() - 1].isspace() else ""
    if not word:
        return True
    if ")" not in after:
        return False
    return ("(" in word and ")" not in word
            or before.count("(") > before.count(")") and after.lstrip()[:1].islower())


def _strip(text: str, unit: Unit) -> Unit:
    start, end = unit.start, unit.end
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Unit(start, end, unit.code)


def _cap(text: str, unit: Unit, max_words: int) -> list[Unit]:
    """A unit of more than max_words words, cut into near-equal pieces of at most that many."""
    words = list(_WORD.finditer(text, unit.start, unit.end))
    if len(words) <= max_words:
        return [unit]
    pieces = -(-len(words) // max_words)
    size = -(-len(words) // pieces)
    return [Unit(words[i].start(), words[min(i + size, len(words)) - 1].end(), unit.code,
                 cut_before=i > 0, cut_after=i + size < len(words))
            for i in range(0, len(words), size)]


def _punctuation_share(text: str) -> float:
    """Share of symbols among non-space characters: a few percent in prose, far more in code."""
    chars = [c for c in text if not c.isspace()]
    return sum(c in "{}()[];=<>&|*/\\:_$#@!" for c in chars) / max(len(chars), 1)


def _unquoted(line: str) -> str:
    """The line without its blockquote markers."""
    marks = _QUOTE_MARKS.match(line)
    return line[marks.end():] if marks else line


def _fence(line: str) -> str | None:
    """The fence a line holds ("```", "```rust"), or None: at the line's start, or right after a
    list item's marker ("- ```", "1. ```"), where CommonMark opens the item with a fenced block."""
    if _FENCE.match(line):
        return line
    item = LIST_ITEM.match(line)
    return line[item.end():] if item and _FENCE.match(line[item.end():]) else None


def _starts_in_fence(text: str) -> bool:
    """Whether a chunk cut from a longer section begins inside a code fence. Chunks of chunk format 1
    and later (`chunking.CHUNK_FORMAT`) close and reopen a block their cut went through, so this
    only matters for collections built before; for them, in order of trust:
    - a fence line with an info string ("```rust") opens a block (CommonMark allows none on a
      closing fence), so its place in the sequence settles which fences close;
    - a chunk that begins with its fence line: a blank line after it means the fence closes a
      block (code starts on the line after an opening fence; prose is set off by a blank line);
    - else, with an even number of fences, none is open at the start; with an odd number, the side
      (before the first fence or after the last) that looks more like code is the one inside."""
    lines = [(offset, fence) for offset, line in _lines(text) if (fence := _fence(_unquoted(line))) is not None]
    if not lines:
        return False
    tagged = next((i for i, (_, line) in enumerate(lines) if _FENCE.sub("", line).strip()), None)
    if tagged is not None:
        return tagged % 2 == 1
    first, last = lines[0][0], lines[-1][0]
    before, after = text[:first], text[last:].split("\n", 1)[-1]
    if not before.strip():
        following = text[first:].split("\n", 2)
        return len(following) > 1 and not _unquoted(following[1]).strip()
    if len(lines) % 2 == 0:
        return False
    return _punctuation_share(before) > _punctuation_share(after)


def _table_row(line: str) -> bool:
    """Whether a line is a table's row: a Markdown pipe table's ("| a | b |", "|---|---|") or a
    row of three cells or more that the HTML reader wrote ("%a | Weekday as locale's abbreviated
    name. | Sun, Mon"). Pipes inside code spans ("`int | str`") do not count, and one pipe is
    too common in prose about types ("int | str") to tell a two-cell row."""
    bare = _CODE_SPAN.sub("", line).strip()
    return bare.count(" | ") >= 2 or bool(re.match(r"\|[ \t:-]", bare))


def split_units(text: str, max_words: int = MAX_WORDS) -> list[Unit]:
    """The sentence, code-line and table-row units of a chunk, in order."""
    units: list[Unit] = []
    block: tuple[int, int] | None = None  # the prose block being collected: (start, end)
    in_fence = _starts_in_fence(text)
    # the open fence is inside a blockquote: its lines carry markers too
    fence_quoted = in_fence and any(_QUOTE_MARKS.match(line) and _FENCE.match(_unquoted(line))
                                    for _, line in _lines(text))
    quote_level = 0       # how many blockquotes the last line was in
    indent = 0            # where the body of the list item or admonition being read starts

    def flush():
        nonlocal block
        if block:
            units.extend(_prose_units(text, *block))
        block = None

    lines = list(_lines(text))
    for k, (offset, line) in enumerate(lines):
        marks = None if in_fence and not fence_quoted else _QUOTE_MARKS.match(line)
        body_at = marks.end() if marks else 0
        level = marks.group().count(">") if marks else quote_level if in_fence else 0
        body = line[body_at:]
        stripped = body.strip()
        if level != quote_level:
            # a quoted paragraph goes on over a line without markers, and a chunk whose cut went
            # through a quoted line starts with that line's tail, without them
            lazy = block is not None and stripped and (level < quote_level or "\n" not in text[:block[0]])
            if not lazy:
                flush()
                indent = 0
            quote_level = level
        lead = len(body) - len(body.lstrip(" "))
        if indent and stripped and block is None and lead < indent and not in_fence:
            indent = 0  # the list item or admonition has ended
        at = body_at + min(lead, indent)  # the line as its container's body reads it
        rest = line[at:]
        if _FENCE.match(rest) or (not in_fence and _fence(rest) is not None):
            flush()
            if not _FENCE.match(rest):  # a list item that opens with a fenced block: its body is indented
                indent = at - body_at + LIST_ITEM.match(rest).end()
            in_fence = not in_fence
            fence_quoted = in_fence and quote_level > 0
            continue
        if in_fence or (rest.startswith("    ") and block is None and stripped):
            flush()
            if stripped:
                units.append(_strip(text, Unit(offset + body_at, offset + len(line), code=True)))
            continue
        if not stripped or HEADING.match(rest) or _FRAME.match(rest):
            flush()
            if stripped and not _FRAME.match(rest):
                indent = 0
            continue
        if _CONTAINER.match(rest):
            flush()
            indent = at - body_at + len(rest) - len(rest.lstrip(" ")) + CONTAINER_INDENT
            continue
        # a row longer than a unit is read as prose (a paragraph that happens to hold " | "), and
        # a paragraph's line is a row only if it starts like one
        if (_table_row(rest) and word_count(rest) <= max_words
                and (block is None or rest.lstrip().startswith("|"))):
            flush()
            # a delimiter row, and the header row above one, label the columns as a heading
            # labels a section: no units
            following = _unquoted(lines[k + 1][1]) if k + 1 < len(lines) else ""
            if not (_DELIMITER_ROW.match(rest) or _DELIMITER_ROW.match(following)):
                units.append(_strip(text, Unit(offset + at, offset + len(line))))
            continue
        item = LIST_ITEM.match(rest)
        # a number other than 1 that opens a line inside a paragraph goes on with it ("... on port\n
        # 5000. You can ..."), unless that paragraph is itself a list item (CommonMark)
        if item and block is not None and not LIST_ITEM.match(text[block[0]:block[1]]) \
                and rest.lstrip()[:1].isdigit() and not rest.lstrip().startswith(("1.", "1)")):
            item = None
        if item:
            flush()
            indent = at - body_at + item.end()
        block = (block[0] if block else offset + at, offset + len(line))
    flush()
    return [piece for unit in units if unit.end > unit.start for piece in _cap(text, unit, max_words)]


_FENCE_LINE = re.compile(r"^\s*(?:`{3,}|~{3,})\S*\s*$", re.MULTILINE)
# Markdown links read as their text: "[Chapter 2][storing-values]" (a reference whose text has a
# space, so that code such as x[i][j] is left alone) and "[the guide](https://...)" (a URL or path)
_REFERENCE_LINK = re.compile(r"\[([^\[\]]*\s[^\[\]]*)\]\[[\w-]*\]")
_INLINE_LINK = re.compile(r"\[([^\[\]]+)\]\((?:https?://|\.{0,2}/|#)[^)\s]*\)")
# a line that ends in no punctuation (a code span aside): before a paragraph break, a term whose
# definition's body follows
_ENDS_TERM = re.compile(r"[\w)\]`][ \t]*$")
# blockquote markers at any line's start of a unit: inside a list item's body a quote is indented
# further than `_QUOTE_MARKS` reads, and a quoted unit holds no code lines
_LINE_QUOTE_MARKS = re.compile(r"^[ \t]*(?:>(?!>>)[ \t]?)+", re.MULTILINE)
# a list item's bullet or number, or a table cell's separator, before the text: markup, not words
# of the passage ("- Run it.", "2. Run it." and "| Run it." read "Run it.")
_BULLET = re.compile(r"^(?:[-*+•|]|\d+[.)])[ \t]+")
_TRAILING_PIPE = re.compile(r"[ \t]+\|$")  # a table row's closing pipe
_ESCAPED_HASH = re.compile(r"^\\(?=#)")  # "\# of retries": a "#" that opens a line of text, not a heading
# inline HTML that Markdown passes through to the page, where it is markup, not words: a caption's
# or filename's <span>, <kbd>, <sup>, an anchor's <a name="...">, a comment. Only the inline
# elements Markdown authors use, so that prose about tags ("the '<' in '<html>'") keeps them
_INLINE_HTML = re.compile(r"<!--.*?-->|</?(?:a|abbr|b|br|cite|code|del|em|font|i|img|ins|kbd|mark|q|s|"
                          r"small|span|strong|sub|sup|u|wbr)(?:\s[^<>]*)?/?>", re.IGNORECASE)
# mdBook's listing tag (the Rust book's `<Listing number="20-33" file-name="src/main.rs"
# caption="...">` on a line of its own, `</Listing>` after the code): the page shows it as its
# caption, "Listing 20-33: ...", and so does a quote that runs across it (alone it is never quoted:
# `whole_thoughts.quotable`). Its attributes may hold ">" ("Vec<T>"), so it is matched whole
_LISTING_TAG = re.compile(r"^\s*<(/?)Listing\b((?:\s+[\w-]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)\s*/?>\s*$")
_ATTRIBUTE = re.compile(r"([\w-]+)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')")


def listing_caption(line: str) -> str | None:
    """The text a reader sees for a line that is an mdBook listing tag: "Listing N: caption" (the
    caption alone without a number, "" without a caption or for the closing tag); None for any
    other line."""
    match = _LISTING_TAG.match(line)
    if not match:
        return None
    attributes = {name: double or single for name, double, single in _ATTRIBUTE.findall(match.group(2))}
    caption = attributes.get("caption", "").strip()
    if match.group(1) or not caption:
        return ""
    return f"Listing {attributes['number']}: {caption}" if attributes.get("number") else caption


def plain(text: str, code: bool = False) -> str:
    """A unit's (or a span of units') text as a reader reads it, on one line: without code-fence
    lines (a sentence quoted with the code it introduces carries them), without blockquote
    markers (joined into one line, they read as stray ">" mid-sentence), without a list item's
    leading bullet or number (or a table row's outer pipes), with Markdown links as their text, a
    term set off from the definition it heads by a dash, without inline HTML tags in its prose,
    and an mdBook listing tag as its caption (`listing_caption`). `code`: the text opens with a
    code line; code lines (those after a fence line too) keep their tags, and a blank line
    between them is no term's break."""
    lines: list[tuple[str, bool, bool]] = []  # (line, a blank line before it, code)
    in_code, blank = code, False
    for line in text.split("\n"):
        line = _LINE_QUOTE_MARKS.sub("", line)
        if _FENCE_LINE.match(line):
            in_code = not in_code
            continue
        if not line.strip():
            blank = True
            continue
        if not in_code:
            caption = listing_caption(line)
            if caption == "":
                continue
            line = _ESCAPED_HASH.sub("", caption or line)
            parts = _CODE_SPAN.split(line)  # code spans sit at odd places
            line = "".join(p if i % 2 else _INLINE_HTML.sub("", p) for i, p in enumerate(parts))
        lines.append((line, blank, in_code))
        blank = False

    def ends_term(k: int) -> bool:  # lines[k] is prose set off by a blank line from the prose after it
        return (k + 1 < len(lines) and lines[k + 1][1] and not lines[k][2] and not lines[k + 1][2]
                and bool(_ENDS_TERM.search(lines[k][0])))

    pieces: list[str] = []
    for k, (line, _, _) in enumerate(lines):
        if k:
            # a term's other names before it ("-d", then "--delete") are set apart by commas
            pieces.append((", " if ends_term(k) else " — ") if ends_term(k - 1) else " ")
        pieces.append(line)
    text = " ".join(_INLINE_LINK.sub(r"\1", _REFERENCE_LINK.sub(r"\1", "".join(pieces))).split())
    return _TRAILING_PIPE.sub("", _BULLET.sub("", text))


def word_count(text: str) -> int:
    return len(_WORD.findall(text))
