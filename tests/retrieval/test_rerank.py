"""Query-likelihood reranking (retrieval/rerank.py) on the tiny model: the score is what the LM says."""

from dataclasses import dataclass

import pytest
import torch

from unirag.retrieval.rerank import LIKELIHOOD_WEIGHT, PROMPT, question_logprobs, rerank


@dataclass(frozen=True)
class FakeHit:  # the fields rerank reads and replaces
    id: str
    score: float
    text: str


def manual_score(uni, question: str, passage: str) -> float:
    """Mean log P(question tokens | prompt) from a plain full forward with the LM head."""
    tok = uni.tokenizer
    prompt = tok(PROMPT.format(passage=passage))["input_ids"]
    q = tok(" " + question, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([prompt + q])
    with torch.inference_mode():
        logits = uni.model(input_ids=ids).logits[0].float()
    logprobs = torch.log_softmax(logits[len(prompt) - 1:-1], dim=-1)
    return logprobs.gather(-1, torch.tensor(q)[:, None]).mean().item()


def test_scores_match_a_plain_forward_alone_and_batched(tiny):
    passages = ["The cat sat on the mat.", "Rust has ownership and borrowing. Loops can return values with break.",
                "Paris"]
    question = "Can loops return values?"
    batched = question_logprobs(tiny, question, passages)
    alone = [question_logprobs(tiny, question, [p])[0] for p in passages]
    expected = [manual_score(tiny, question, p) for p in passages]
    assert batched == pytest.approx(expected, abs=1e-4)
    assert alone == pytest.approx(expected, abs=1e-4)


def test_rerank_orders_the_first_depth_hits_and_keeps_the_rest(tiny):
    hits = [FakeHit(str(i), 0.0, text) for i, text in enumerate(
        ["The cat sat on the mat.", "A dog ran in the park.", "Paris is the capital of France.", "Embeddings map text."])]
    question = "Where did the dog run?"
    scores = question_logprobs(tiny, question, [h.text for h in hits[:3]])
    by_likelihood = sorted(range(3), key=lambda i: -scores[i])

    alone = rerank(tiny, question, hits, depth=3, fuse=False)
    assert [h.id for h in alone[:3]] == [hits[i].id for i in by_likelihood]
    assert [h.score for h in alone[:3]] == pytest.approx(sorted(scores, reverse=True))

    tie_break = by_likelihood.index  # equal fused scores: the likelihood order decides
    for w in (1.0, LIKELIHOOD_WEIGHT):  # RRF of likelihood rank (weight w) and retrieval rank
        fused = rerank(tiny, question, hits, depth=3, weight=w)
        rrf = {i: 1 / (60 + i + 1) + w / (60 + by_likelihood.index(i) + 1) for i in range(3)}
        assert [h.id for h in fused[:3]] == [hits[i].id for i in sorted(range(3), key=lambda i: (-rrf[i], tie_break(i)))]
        assert [h.score for h in fused[:3]] == pytest.approx(sorted(rrf.values(), reverse=True))
    fused = rerank(tiny, question, hits, depth=3)

    assert alone[3] == fused[3] == hits[3]
    assert rerank(tiny, question, hits[:1], depth=3) == hits[:1]
