"""`/v1/rerank`: documents ordered by the same model's likelihood, in the shape llama.cpp's server
(and Cohere's and Jina's rerank APIs) answer with: {"results": [{"index", "relevance_score"}]}.

A document's score is the mean log-probability of the query after it (query likelihood, as
`retrieval/rerank.py` reorders retrieved chunks): higher is more relevant; the scores are
log-probabilities, not 0..1.
"""

from __future__ import annotations

from unirag.server.schemas import RerankRequest


def rerank(model, request: RerankRequest, model_id: str) -> dict:
    from unirag.model.scoring import question_logprobs

    texts = request.texts
    scores = question_logprobs(model, request.query, texts)
    order = sorted(range(len(texts)), key=lambda i: -scores[i])[: request.top_n or len(texts)]
    results = []
    for i in order:
        result = {"index": i, "relevance_score": float(scores[i])}
        if request.return_documents:
            result["document"] = {"text": texts[i]}
        results.append(result)
    tokens = sum(len(ids) for ids in model.tokenizer([request.query, *texts], add_special_tokens=False)["input_ids"])
    return {"object": "list", "model": model_id, "results": results,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
