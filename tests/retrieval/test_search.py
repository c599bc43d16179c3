"""Retrieval (unirag.retrieval.search): the hybrid ranking, reordered by the reranker."""

from __future__ import annotations

import pytest
from rag_docs import SMALL, open_db, write_docs

from unirag.errors import UniragError
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.retrieval.search import retrieve as run_retrieve


def test_retrieve_with_rerank_reorders_the_candidates(tiny, tmp_path):
    """rerank=N: the first N of the hybrid ranking, reordered by query likelihood (fused with
    their retrieval order), then cut to top_k."""
    from unirag.retrieval.rerank import rerank

    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, write_docs(tmp_path / "docs"), settings=SMALL)
    question = "What is the capital of France?"
    plain = run_retrieve(tiny, collection, question, top_k=4)
    reranked = run_retrieve(tiny, collection, question, top_k=2, rerank=4)
    best = rerank(tiny, question, plain, 4)[:2]
    assert [h.id for h in reranked] == [h.id for h in best]
    assert [h.score for h in reranked] == pytest.approx([h.score for h in best], abs=1e-5)
    with pytest.raises(UniragError, match="--rerank"):
        run_retrieve(tiny, collection, question, top_k=2, rerank=-1)
