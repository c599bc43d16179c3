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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from unirag.model.scoring import PROMPT, question_logprobs  # noqa: F401  (PROMPT: part of this module's API)

LIKELIHOOD_WEIGHT = 3.0  # the likelihood ranking's weight in the fusion; the retrieval order's is 1


def rerank(model, question: str, hits: Sequence, depth: int, fuse: bool = True,
           weight: float = LIKELIHOOD_WEIGHT) -> list:
    """The first `depth` hits reordered, followed by the rest in their original order.

    fuse=True: by reciprocal-rank fusion of their `question_logprobs` order (weighted `weight`)
    and their retrieval order (weighted 1), ties to the likelihood (score = the fused score);
    fuse=False: by the log-probability alone (score = it).
    """
    from unirag.retrieval.lexical import reciprocal_rank_fusion

    hits = list(hits)
    head, tail = hits[:depth], hits[depth:]
    if len(head) < 2:
        return hits
    scores = question_logprobs(model, question, [hit.text for hit in head])
    by_likelihood = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep retrieval order
    if not fuse:
        return [replace(head[i], score=scores[i]) for i in by_likelihood] + tail
    # two lists make exact ties common (ranks 1+2 vs 2+1); listed first, the likelihood order breaks
    # them: it is the judge that read each passage with the question
    fused = reciprocal_rank_fusion([[str(i) for i in by_likelihood], [str(i) for i in range(len(head))]],
                                   weights=(weight, 1.0))
    return [replace(head[int(i)], score=score) for i, score in fused] + tail
