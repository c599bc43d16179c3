"""Where a generated answer ends: where it starts repeating itself (`until_repeat`), or, when
one short sentence was asked for, after its first sentence (`first_sentence`).

Why `until_repeat`: greedy decoding with a small model falls into loops ("The example you
provided is a classic example of a loop [1]." over and over, or "defined by a pattern that is
defined by a pattern ..."), and then spends the rest of max_new_tokens on them. An answer never
needs the same run of `n` words twice, so the stream ends at the start of the first repeated
run. To drop that run without having shown it, words are held back only while they repeat words
seen earlier (the longest such trailing run), and an unfinished last word until it ends, at most
`max_hold` characters in all: new text streams at once. Closing the stream early also stops
generation, so a loop costs no more decode time. A loop without spaces
(`.to_string().to_string()...`) is one growing word and is not caught.

Why `first_sentence`: asked for one short sentence, the 135M model opens with "The answer is:"
on a line of its own, writes its sentence, then goes on: more sentences that drift from the
evidence, often into a loop (docs/RESULTS.md, "Answers"). What it was asked for is the first
sentence after such a line; the stream ends there, which also stops generation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from itertools import chain

from unirag.answer.attribution import FENCE, HOLD, sentence_ends

WORD = re.compile(r"\S+")
REPEAT_WORDS = 10
MAX_HOLD = 120


def until_repeat(pieces: Iterable[str], n: int = REPEAT_WORDS, max_hold: int = MAX_HOLD,
                 on_stop: Callable[[], None] | None = None) -> Iterator[str]:
    """Pass `pieces` through until some run of `n` whitespace-separated words occurs a second
    time; then end, without the repeated run (calling `on_stop`, if given, when that happens)."""
    text = ""
    shown = 0                             # characters of `text` already yielded
    words: list[str] = []                 # complete words (a white-space character followed them)
    starts: list[int] = []                # their start offsets
    earlier: set[tuple[str, ...]] = set()  # every run of 1..n words seen so far
    hold = 0                              # trailing complete words that repeat an earlier run
    for piece in pieces:
        text += piece
        scan_from = starts[-1] + len(words[-1]) if words else 0
        for match in WORD.finditer(text, scan_from):
            if match.end() == len(text):
                break  # the last word may continue in the next piece
            words.append(match.group())
            starts.append(match.start())
            if len(words) >= n and tuple(words[-n:]) in earlier:
                if on_stop:
                    on_stop()
                if starts[-n] > shown:
                    yield text[shown:starts[-n]]
                return
            runs = [tuple(words[-k:]) for k in range(1, min(n, len(words)) + 1)]
            hold = max((k for k, run in enumerate(runs, 1) if k < n and run in earlier), default=0)
            earlier.update(runs)
        unfinished = WORD.search(text, starts[-1] + len(words[-1]) if words else 0)
        safe = starts[-hold] if hold else unfinished.start() if unfinished else len(text)
        safe = max(safe, len(text) - max_hold)
        if safe > shown:
            yield text[shown:safe]
            shown = safe
    if len(text) > shown:
        yield text[shown:]


# a first line that only announces what follows ("The answer is:", "Here is the answer to your
# question:"): a few words ending in ":", with no sentence end before it
_ANNOUNCING_LINE = re.compile(r"^\s*[^\n.!?:]{0,60}:[ \t]*\n")
_DECIDED = re.compile(r"[.!?]\s|:[ \t]*[^\s]")  # a first line with these announces nothing
DECIDE_CHARS = 80  # a first line longer than this announces nothing


def first_sentence(pieces: Iterable[str]) -> Iterator[str]:
    """Pass `pieces` through up to the end of the first sentence (`attribution.sentence_ends`: an
    abbreviation's period ends none), without a first line that only announces the answer ("The
    answer is:") or the white space after it; then end. Text before a code block ends the
    sentence there; an answer that opens with a code block ends after the block. Held back: the
    first line until it shows whether it announces, then only trailing sentence marks, white
    space and backticks (`attribution.HOLD`), whose meaning the next piece decides."""
    text, shown, start = "", 0, None
    for piece in chain(pieces, [None]):  # None: the stream has ended
        final = piece is None
        text += piece or ""
        if start is None:
            announcing = _ANNOUNCING_LINE.match(text)
            if announcing is None and not final and _may_announce(text):
                continue
            start = announcing.end() if announcing else 0
        lead = len(text) - len(text[start:].lstrip())
        stop, done = _first_end(text, lead, final)
        if stop > max(shown, lead):
            yield text[max(shown, lead):stop]
            shown = stop
        if done:
            return


def _may_announce(text: str) -> bool:
    """Whether text that is no announcing line yet may still become one: its first line has not
    ended, is short, and holds no sentence end or ":" followed by more on the line."""
    line = text.lstrip()
    return "\n" not in line and len(text) < DECIDE_CHARS and not _DECIDED.search(line)


def _first_end(text: str, lead: int, final: bool) -> tuple[int, bool]:
    """(how far `text` is decided, whether the first sentence ends there) for an answer whose
    text begins at `lead`; `final`: nothing more will come."""
    if lead == len(text):
        return lead, final
    fence = text.find(FENCE, lead)
    if fence == lead:  # a code block first: it is the answer
        close = text.find(FENCE, lead + len(FENCE))
        return (close + len(FENCE), True) if close >= 0 else (len(text) if final else lead, final)
    for match in sentence_ends(text, lead):
        if 0 <= fence < match.start():
            break
        marks = match.group(0)[0] in ".!?"
        return (match.end() if marks else match.start()), True
    if fence >= 0:
        return len(text[:fence].rstrip()), True
    if final:
        return len(text.rstrip()), True
    return max(len(text.rstrip(HOLD)), lead), False
