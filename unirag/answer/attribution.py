"""Inline citations for answers: each sentence gets the `[n]` of the passage it draws on.

Why: the prompt asks the model to cite passages as `[1]`, but a 135M-parameter model rarely does
(docs/RESULTS.md). So, as the answer streams, every finished sentence that carries no `[n]` of
its own gets one added, before its final punctuation: the passage that shares the most content
words with the sentence (stemmed, stopwords dropped), if it shares at least `min_overlap` of
them; ties go to the higher-ranked passage. A sentence that shares too little with every
passage gets no marker, which is itself a signal that it is not grounded. Text inside Markdown
code fences is passed through untouched.

These markers are unirag's attribution, not the model's own statement; `answer(...,
attribute=False)` turns it off.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Sequence

MARKER = re.compile(r"\[\d+(?:\s*,\s*\d+)*\]")
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']+")
# a sentence ends at . ! ? before white space, at a blank line, or before a list item or heading;
# a single line break alone does not end one (models often hard-wrap their lines)
SENTENCE_END = re.compile(r"[.!?]+(?=\s)|\n[ \t]*\n|\n(?=[ \t]*(?:[-*+] |\d+[.)] |#))")
# text ending in an abbreviation's period ("e.g.", "etc.", a paper's "et al.", "Fig.") or an
# ellipsis: no sentence ends there
ABBREVIATION = re.compile(r"(?:\b(?:e\.g|i\.e|eg|ie|etc|vs|cf|Mr|Dr|No|approx|al|Figs?|Eqs?|Sec|Ch|pp|Vol)|\.\.)\.?$",
                          re.IGNORECASE)
HOLD = "`.!? \t\n"  # trailing characters whose meaning the next piece decides
LINE_START = re.compile(r"\n[ \t]*(?:[-*+]|\d+[.)]?|#+)?$")  # a new line that may yet be a list item
FENCE = "```"


def sentence_ends(text: str, start: int = 0, before: str = "") -> Iterator[re.Match]:
    """`SENTENCE_END`'s matches in `text` from `start`, less the periods that end an abbreviation
    ("e.g.", "etc.") or an ellipsis. `before`: what came before `text[start:]` in the same
    sentence (a stream's earlier pieces), which may hold the abbreviation's first letters."""
    for match in SENTENCE_END.finditer(text, start):
        if match.group(0)[0] in ".!?" and ABBREVIATION.search((before + text[start:match.end()])[-12:]):
            continue
        yield match


_local = threading.local()


def _stemmer():
    """This thread's English stemmer: evidence calls `content_words` per unit, and a stemmer is
    not safe to share between threads (the app answers in several)."""
    if not hasattr(_local, "stemmer"):
        import Stemmer

        _local.stemmer = Stemmer.Stemmer("english")
    return _local.stemmer


def content_words(text: str) -> set[str]:
    """Lower-cased, stemmed words of 3+ letters that are not English stopwords."""
    from bm25s.stopwords import STOPWORDS_EN

    words = [w.lower() for w in WORD.findall(text)]
    words = [w for w in words if len(w) >= 3 and w not in STOPWORDS_EN]
    return set(_stemmer().stemWords(words))


def best_passage(sentence: str, passages: Sequence[set[str]], min_overlap: int = 2) -> int | None:
    """1-based number of the passage sharing the most content words with `sentence`, or None."""
    words = content_words(sentence)
    best, best_n = 0, None
    for n, passage in enumerate(passages, 1):
        shared = len(words & passage)
        if shared > best:
            best, best_n = shared, n
    return best_n if best >= min_overlap else None


def cite_stream(pieces: Iterable[str], passages: Sequence[str], min_overlap: int = 2) -> Iterator[str]:
    """Pass streamed answer text through, adding ` [n]` before the end of each uncited sentence.

    Only trailing sentence marks, white space and backticks (which may start a code fence) are
    held back until the next piece shows whether the sentence ended there, so the stream stays a
    stream.
    """
    words = [content_words(p) for p in passages]
    sentence = ""  # the current sentence, as far as it was emitted
    held = ""      # received, not yet emitted
    in_code = False

    def finish(body: str, end: str) -> str:
        """Close the current sentence: `body` is its last text, `end` what follows the marker."""
        nonlocal sentence
        text, sentence = sentence + body, ""
        n = None if MARKER.search(text) else best_passage(text, words, min_overlap)
        return body + (f" [{n}]" if n else "") + end

    def split_space(body: str) -> tuple[str, str]:
        stripped = body.rstrip()
        return stripped, body[len(stripped):]

    for piece in pieces:
        held += piece
        while True:
            fence = held.find(FENCE)
            if in_code:  # pass code through untouched, up to the closing fence
                if fence < 0:
                    break
                yield held[:fence + len(FENCE)]
                held, in_code = held[fence + len(FENCE):], False
                continue
            match = next(sentence_ends(held, before=sentence), None)
            if fence >= 0 and (match is None or fence < match.start()):
                yield finish(*split_space(held[:fence]))  # text before a code block ends a sentence
                yield FENCE
                held, in_code = held[fence + len(FENCE):], True
                continue
            if match is None:
                break
            body, end, held = held[:match.start()], match.group(0), held[match.end():]
            yield finish(body, end)
        stripped = held.rstrip("`" if in_code else HOLD)
        line_start = None if in_code else LINE_START.search(held)
        if line_start and line_start.start() < len(stripped):
            stripped = held[:line_start.start()]
        emit, held = stripped, held[len(stripped):]
        if emit:
            if not in_code:
                sentence += emit
            yield emit
    if in_code:
        if held:
            yield held
        return
    body = held.rstrip(HOLD)
    if (sentence + body).strip():
        yield finish(body, held[len(body):])
    elif held:
        yield held
