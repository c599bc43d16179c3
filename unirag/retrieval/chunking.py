"""Text -> chunks sized in the model's own tokens, cut at Markdown headings where possible.

A chunk never spans two sections: each carries its heading path ("Title > Section > Sub"), which
is what citations show. A section longer than `chunk_size` tokens is cut into windows that
overlap by `overlap` tokens, each cut moved back to the best nearby break (blank line, line end,
sentence end, a line break inside a wrapped sentence, space) so chunks rarely end mid-word or
mid-sentence. Counting real tokens, not characters, is what guarantees a chunk fits the
embedding length.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from unirag.errors import UniragError
from unirag.readers.markdown import FENCE, CodeBlock, block_at, code_blocks, split_sections

HEADINGS_FORMAT = 2  # bump when what `embed_text` prepends changes (2: titles from `##`-first pages)
# bump when how a section is cut into chunk texts changes (1: a cut inside a code block closes the
# block, and the next chunk reopens it with the same fence line; 2: a line break inside a wrapped
# sentence is a worse cut than a sentence end; 3: sections and code blocks as CommonMark reads them,
# markdown-it-py's parse: setext headings are headings); part of every chunk id
CHUNK_FORMAT = 3


@dataclass(frozen=True)
class ChunkSettings:
    """How documents are cut and what gets embedded; part of every chunk id (changing it re-embeds)."""

    chunk_size: int = 256
    overlap: int = 32
    # embed "title / heading path" + text instead of the text alone: the headings name what a chunk
    # is about, which its text often only implies, and retrieval improved with them (docs/RESULTS.md,
    # "Retrieval on the Rust book"); the stored text stays the chunk's own
    embed_headings: bool = True
    # embed each chunk after the last `context_words` words of the chunk before it in its file, so
    # that the EOS state has read what the chunk continues ("it", "this method"); 0 = the chunk alone
    context_words: int = 0

    def __post_init__(self):
        if self.chunk_size < 16:
            raise UniragError(f"chunk size {self.chunk_size} is too small; use at least 16 tokens")
        if not 0 <= self.overlap <= self.chunk_size // 2:
            raise UniragError(f"chunk overlap {self.overlap} must be between 0 and half the chunk size "
                              f"({self.chunk_size // 2})")
        if self.context_words < 0:
            raise UniragError(f"context words {self.context_words} must be 0 (off) or more")

    def signature(self) -> str:
        headings = HEADINGS_FORMAT if self.embed_headings else 0
        context = f";context={self.context_words}" if self.context_words else ""
        return f"size={self.chunk_size};overlap={self.overlap};headings={headings};format={CHUNK_FORMAT}{context}"


@dataclass(frozen=True)
class Chunk:
    text: str
    heading: str  # "Title > Section > Sub", "" before the first heading
    index: int
    n_tokens: int
    # where its text lies in the document's (start, end; the fences `_fenced` adds aside): what
    # maps a PDF's chunk to its pages (`Document.pages`)
    start: int = 0
    end: int = 0


def chunk_text(text: str, tokenizer, settings: ChunkSettings = ChunkSettings(), markdown: bool = True) -> list[Chunk]:
    """Cut a document into chunks of at most `settings.chunk_size` tokens of its text. In Markdown,
    a cut inside a code block closes the block, and the next chunk reopens it (`_fenced`): those
    fence lines come on top, a few tokens that the embedding's room for the heading path covers.

    Why on top and not within the size: the cuts stay where they were, so the chunks without a
    cut code block keep their text. Each chunk's `start` / `end` say where its own text lies in
    `text`, which maps a PDF's chunk to its pages."""
    sections = split_sections(text) if markdown else [([], text)]
    chunks: list[Chunk] = []
    at = 0  # where the section's body lies in the text: sections are runs of its lines, in order
    for path, body in sections:
        at = text.find(body, at)
        heading = " > ".join(title for _, title in path)
        blocks = code_blocks(body) if markdown else []
        for start, end, n_tokens in _windows(body, tokenizer, settings.chunk_size, settings.overlap, blocks):
            piece, n_tokens = _fenced(body, blocks, start, end, n_tokens, tokenizer)
            chunks.append(Chunk(piece, heading, len(chunks), n_tokens, at + start, at + end))
        at += len(body)
    return chunks


def _fenced(body: str, blocks: list[CodeBlock], start: int, end: int, n_tokens: int,
            tokenizer) -> tuple[str, int]:
    """body[start:end] with its code blocks (`blocks`, body's) whole: a piece that begins inside a
    code block starts with the block's opening fence line, and one that ends inside a block ends
    with a closing fence; the token count includes them.

    Why: a cut inside a listing leaves one chunk with an opening fence and no close, the next with
    a close and no opening; read alone, either one's prose can pass for code and its code for
    prose (what `sentences.split_units` quotes, what a Markdown viewer shows)."""
    before, after = block_at(blocks, start), block_at(blocks, end)
    # (a piece that starts on the block's closing fence holds an empty block)
    head = f"{before.opening}\n" if before is not None else ""
    tail = f"\n{FENCE.match(after.opening).group(1)}" if after is not None else ""
    if head or tail:
        n_tokens += len(_token_offsets(head + tail, tokenizer))
    return head + body[start:end] + tail, n_tokens


def embed_text(chunk: Chunk, title: str, settings: ChunkSettings) -> str:
    """What gets embedded for a chunk: "title / heading path", a blank line, its text (or the text alone).

    The title is left out when the heading path already starts with it.
    """
    if not settings.embed_headings:
        return chunk.text
    heading = chunk.heading
    label = heading if title and heading.startswith(title) else " / ".join(p for p in (title, heading) if p)
    return f"{label}\n\n{chunk.text}" if label else chunk.text


def embed_texts(chunks: list[Chunk], title: str, settings: ChunkSettings) -> list[str]:
    """What gets embedded for each chunk of one document, in order: `embed_text`, after the last
    `settings.context_words` words of the chunk before it (none for the first)."""
    own = [embed_text(chunk, title, settings) for chunk in chunks]
    if not settings.context_words:
        return own
    before = [""] + [" ".join(chunk.text.split()[-settings.context_words:]) for chunk in chunks[:-1]]
    return [f"{tail}\n\n{text}" if tail else text for tail, text in zip(before, own)]


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    """(start, end) moved inwards past the whitespace at either end of text[start:end]."""
    piece = text[start:end]
    return start + len(piece) - len(piece.lstrip()), end - len(piece) + len(piece.rstrip())


def _windows(text: str, tokenizer, size: int, overlap: int,
             blocks: Sequence[CodeBlock] = ()) -> list[tuple[int, int, int]]:
    """Token windows over text, as (start, end, token count) with text[start:end] free of leading
    and trailing whitespace; consecutive ones share `overlap` tokens. `blocks`: the text's code
    blocks (`code_blocks`), where a line break is a better cut than in wrapped prose."""
    offsets = _token_offsets(text, tokenizer)
    n = len(offsets)
    if n <= size:
        return [(*_stripped(text, 0, len(text)), n)] if text.strip() else []
    pieces, start = [], 0
    while True:
        end = min(start + size, n)
        if end < n:  # move the cut back to the best break in the window's second half
            end = max(range(start + size // 2 + 1, end + 1),
                      key=lambda k: (_break_score(text, offsets[k][0], blocks), k))
        lo, hi = _stripped(text, offsets[start][0], offsets[end - 1][1])
        if hi > lo:
            pieces.append((lo, hi, end - start))
        if end >= n:
            return pieces
        nxt = max(end - overlap, start + 1)
        # start the overlap at a word start: a little earlier if one is near, else a little later
        nearby = [*range(nxt, max(start, nxt - overlap // 2), -1), *range(nxt + 1, end)]
        nxt = next((k for k in nearby if _at_word_start(text, offsets[k][0])), nxt)
        start = nxt


# a line break inside a sentence of hard-wrapped prose ("... if it's\ncalled using ..."): a word,
# comma or closing mark before it, a lower-case word, code span or bracket after it
_SOFT_WRAP = re.compile(r"[A-Za-z0-9,’'`)\]]\n[a-z`(\[]")


def _break_score(text: str, pos: int, blocks: Sequence[CodeBlock] = ()) -> float:
    """How good a cut at character `pos` is: paragraph > line > sentence > line break inside a
    wrapped sentence > word > inside a word.

    Never right after a heading line: a chunk should not end with the title of what follows.
    Why wrapped lines rank below sentence ends: Markdown and reStructuredText sources are often
    wrapped at 80 columns, so the last line break of a window mostly falls inside a sentence; a
    cut there leaves a fragment at the chunk's end ("When your code"), which evidence selection
    may quote as if it said something, and the sentence's tail at the next chunk's start, which
    it never quotes. Code blocks keep their line breaks.
    """
    last_line = text[max(0, pos - 200):pos].rstrip().rsplit("\n", 1)[-1]
    if last_line.lstrip().startswith("#"):
        return 0
    around = text[max(0, pos - 2):pos + 2]
    if "\n\n" in around:
        return 4
    if "\n" in text[max(0, pos - 1):pos + 1]:
        newline = text.rfind("\n", max(0, pos - 1), pos + 1)
        if _SOFT_WRAP.match(text, newline - 1) and block_at(blocks, newline) is None:
            return 1.5
        return 3
    before, at = text[max(0, pos - 2):pos], text[pos:pos + 1]
    if (before[-1:] in ".?!" and at.isspace()) or (before[:1] in ".?!" and before[-1:].isspace()):
        return 2
    if at.isspace() or before[-1:].isspace():
        return 1
    return 0


def _at_word_start(text: str, pos: int) -> bool:
    return pos == 0 or text[pos - 1:pos + 1][:1].isspace() or text[pos:pos + 1].isspace()


def _token_offsets(text: str, tokenizer) -> list[tuple[int, int]]:
    """Character span of each token; whitespace-separated words if the tokenizer is not a fast one."""
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        return [tuple(span) for span in enc["offset_mapping"]]
    return [m.span() for m in re.finditer(r"\S+", text)]
