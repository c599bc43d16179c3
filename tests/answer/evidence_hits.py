"""Shared by the answer tests: a chunk of every kind of unit, two hits, and `choose` over a
made-up ranking."""

from __future__ import annotations

from unirag.answer.evidence import choose
from unirag.retrieval.search import Hit


CHUNK = ("Loops can return values with break. The cat sat on the mat, e.g. on the red one.\n\n"
         "- A list item here.\n- Another item.\n\n```rust\nlet x = loop { break 5; };\n```\n\n"
         "## A heading\n\nParis is the capital of France.")


def ranked(chunks, first, budget):
    """`choose` over the chunks' candidates ranked by a made-up likelihood: the units whose text
    starts with each of `first` in that order, then the rest."""
    from unirag.answer.evidence import candidates

    cands = candidates(chunks)
    likelihood = [0.0] * len(cands)
    for rank, start in enumerate(first):
        for i, c in enumerate(cands):
            if c.text.startswith(start) and not likelihood[i]:
                likelihood[i] = float(len(first) - rank)
    return choose(chunks, cands, {"likelihood": likelihood}, 0.0, budget, ("likelihood",))


def hits():
    return [Hit("a", 0.9, CHUNK, "loops.md", "Loops"), Hit("b", 0.5, "The quick brown fox jumps over the lazy dog.",
                                                               "fox.md", "")]
