"""Rerank retrieved chunks with the same model: how likely is the question, given the passage?

Query likelihood (UPR, Sachan et al. 2022, "Improving Passage Retrieval with Zero-Shot Question
Generation"): the LLM reads a candidate passage followed by an instruction to write a question
about it, and the candidate's score is the mean log-probability of the user's actual question
tokens. It needs no second model and no training, only the LLM that unirag already holds; it
costs one forward pass per candidate (batched), so it reorders only the first `depth` hits.

By default the likelihood ranking is fused with the retrieval ranking by reciprocal rank (the same
fusion hybrid search uses), the likelihood counted LIKELIHOOD_WEIGHT times the retrieval order.
The judge that read each passage with the question leads, and the retrieval order still settles
candidates it ranks a few places apart: the likelihood alone lost first places where questions
use the documents' words. Equal weights let the retrieval order overrule the judge where users ask
in their own words, which is where BM25, half of that order, matches nothing. Both dev sets'
answers, with the evidence selection's default scorers, chose 3 (docs/RESULTS.md, "Why the
retrieval defaults are what they are").

The likelihood a candidate is ranked by adds, weighted LABEL_WEIGHT, the question's likelihood after
the candidate's place alone: its page title and heading path (`chunking.place_label`, what ingest
embeds before the chunk). A chunk from the middle of a section rarely names what the section is
about, and its heading often says it in the few words a question asks with; read on their own,
the label's words are not drowned by the chunk's. Read before the chunk instead, in one passage,
the label cost the Rust book first places (docs/RESULTS.md, "Other variants"). Labels are short and
shared by a section's chunks, so this adds a few short passes to the 15 long ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..errors import UniragError
from ..scoring import PROMPT, question_logprobs  # noqa: F401  (PROMPT: part of this module's API)
from .chunking import place_label

LIKELIHOOD_WEIGHT = 3.0  # the likelihood ranking's weight in the fusion; the retrieval order's is 1
# the weight of the question's likelihood after a candidate's label, added to its likelihood after
# the candidate's text. Chosen on the two dev sets (docs/RESULTS.md, "Why the retrieval defaults are
# what they are"): 0.2-0.5 each raised both sets' first places; 0.3 ranked the Python docs, the set
# asked in users' own words, best
LABEL_WEIGHT = 0.3


def place(hit) -> str:
    """What a hit's label score reads: its page title and heading path, or its source where it has
    neither."""
    metadata = getattr(hit, "metadata", None) or {}
    return place_label(str(metadata.get("title", "")), getattr(hit, "heading", "")) or getattr(hit, "source", "")


def likelihoods(model, question: str, hits: Sequence, label_weight: float = LABEL_WEIGHT) -> list[float]:
    """Per hit, the question's mean log-probability after its text, plus `label_weight` times that
    after its `place` alone (each distinct place read once; an empty one as an empty passage)."""
    scores = question_logprobs(model, question, [hit.text for hit in hits])
    if not label_weight:
        return scores
    places = [place(hit) for hit in hits]
    distinct = sorted(set(places))
    by_place = dict(zip(distinct, question_logprobs(model, question, distinct)))
    return [score + label_weight * by_place[p] for score, p in zip(scores, places)]


def rerank(model, question: str, hits: Sequence, depth: int, fuse: bool = True,
           weight: float = LIKELIHOOD_WEIGHT, label_weight: float = LABEL_WEIGHT) -> list:
    """The first `depth` hits reordered, followed by the rest in their original order.

    fuse=True: by reciprocal-rank fusion of their `likelihoods` order (weighted `weight`)
    and their retrieval order (weighted 1), ties to the likelihood (score = the fused score);
    fuse=False: by `likelihoods` alone (score = it).
    """
    from .lexical import reciprocal_rank_fusion

    hits = list(hits)
    head, tail = hits[:depth], hits[depth:]
    if len(head) < 2:
        return hits
    scores = likelihoods(model, question, head, label_weight)
    by_likelihood = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep retrieval order
    if not fuse:
        return [replace(head[i], score=scores[i]) for i in by_likelihood] + tail
    # two lists make exact ties common (ranks 1+2 vs 2+1); listed first, the likelihood order breaks
    # them: it is the judge that read each passage with the question
    fused = reciprocal_rank_fusion([[str(i) for i in by_likelihood], [str(i) for i in range(len(head))]],
                                   weights=(weight, 1.0))
    return [replace(head[int(i)], score=score) for i, score in fused] + tail
