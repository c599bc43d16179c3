"""Cut a retrieved chunk into evidence units: sentences of prose, lines of code.

An answer is usually one sentence of the passage (or one line of an example), so the evidence
selector scores these units rather than whole chunks. A unit keeps its character offsets in the
chunk, so the text around it can be shown with it and highlighted in place.

Rules: a prose sentence ends at . ! ? followed by white space (not after a few common
abbreviations), at a blank line, or at a line that starts a list item or heading. Inside a code
fence (or an indented block) every non-empty line is a unit of its own, at most `max_words`
words. Headings are never units (they are already in the chunk's label). A unit longer than
`max_words` words is cut at word boundaries, and its pieces say so (`cut_before`, `cut_after`),
so that a quote of one can show where the sentence goes on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .attribution import ABBREVIATION
from .chunking import FENCE as _FENCE

MAX_WORDS = 40
_HEADING = re.compile(r"^ {0,3}#{1,6}\s")
LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)])\s+")
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
    for match in _SENTENCE_END.finditer(text, start, end):
        if ABBREVIATION.search(text[max(begin, match.start() - 6):match.end()]):
            continue
        units.append(Unit(begin, match.end()))
        begin = match.end()
    units.append(Unit(begin, end))
    return [_strip(text, u) for u in units if text[u.start:u.end].strip()]


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
    lines = [(offset, line) for offset, line in _lines(text) if _FENCE.match(line)]
    if not lines:
        return False
    tagged = next((i for i, (_, line) in enumerate(lines) if _FENCE.sub("", line).strip()), None)
    if tagged is not None:
        return tagged % 2 == 1
    first, last = lines[0][0], lines[-1][0]
    before, after = text[:first], text[last:].split("\n", 1)[-1]
    if not before.strip():
        following = text[first:].split("\n", 2)
        return len(following) > 1 and not following[1].strip()
    if len(lines) % 2 == 0:
        return False
    return _punctuation_share(before) > _punctuation_share(after)


def split_units(text: str, max_words: int = MAX_WORDS) -> list[Unit]:
    """The sentence and code-line units of a chunk, in order."""
    units: list[Unit] = []
    block: tuple[int, int] | None = None  # the prose block being collected: (start, end)
    in_fence = _starts_in_fence(text)

    def flush():
        nonlocal block
        if block:
            units.extend(_prose_units(text, *block))
        block = None

    for offset, line in _lines(text):
        stripped = line.strip()
        if _FENCE.match(line):
            flush()
            in_fence = not in_fence
            continue
        if in_fence or (line.startswith("    ") and block is None and stripped):
            flush()
            if stripped:
                units.append(_strip(text, Unit(offset, offset + len(line), code=True)))
            continue
        if not stripped or _HEADING.match(line):
            flush()
            continue
        if LIST_ITEM.match(line):
            flush()
        block = (block[0] if block else offset, offset + len(line))
    flush()
    return [piece for unit in units if unit.end > unit.start for piece in _cap(text, unit, max_words)]


def word_count(text: str) -> int:
    return len(_WORD.findall(text))
