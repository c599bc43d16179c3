"""Stop an answer that has started to repeat itself.

Why: greedy decoding with a small model falls into loops ("The example you provided is a classic
example of a loop [1]." over and over, or "defined by a pattern that is defined by a pattern
..."), and then spends the rest of max_new_tokens on them. An answer never needs the same run of
`n` words twice, so the stream ends at the start of the first repeated run. To drop that run
without having shown it, words are held back only while they repeat words seen earlier (the
longest such trailing run), and an unfinished last word until it ends, at most `max_hold`
characters in all: new text streams at once. Closing the stream early also stops generation,
so a loop costs no more decode time. A loop without spaces (`.to_string().to_string()...`) is
one growing word and is not caught.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

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
