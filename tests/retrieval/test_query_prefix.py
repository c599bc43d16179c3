"""The dense search's question cue (`UniModel.query_prefix`, from the adapter's unirag.json):
embedded before the question by dense retrieval and by the LlamaIndex query embedding alike,
never seen by BM25."""

import numpy as np
from rag_docs import SMALL, open_db, write_docs

from unirag.retrieval import search as pipeline
from unirag.retrieval.ingest import ingest

QUESTION = "What is the capital of France?"


def test_dense_search_embeds_the_cue_before_the_question(tiny, tmp_path, monkeypatch):
    collection = open_db(tiny, tmp_path / "db")
    ingest(tiny, collection, write_docs(tmp_path / "docs"), settings=SMALL)
    got = collection.get(include=["embeddings"])
    chunk_vectors = dict(zip(got["ids"], np.asarray(got["embeddings"])))
    lexical = {}
    for cue in ("", "Question: "):
        monkeypatch.setattr(tiny, "query_prefix", cue)
        query = tiny.embed([cue + QUESTION])[0]
        hits = pipeline.retrieve(tiny, collection, QUESTION, top_k=3, mode="dense")
        for hit in hits:
            assert abs(hit.score - float(chunk_vectors[hit.id] @ query)) < 1e-4
        lexical[cue] = [(h.id, h.score) for h in pipeline.retrieve(tiny, collection, QUESTION, 3, mode="lexical")]
    assert lexical[""] == lexical["Question: "]  # BM25 reads the question alone


def test_llama_index_queries_carry_the_same_cue(tiny, monkeypatch):
    from unirag.integrations.llama_index import UniEmbedding

    monkeypatch.setattr(tiny, "query_prefix", "Question: ")
    embedding = UniEmbedding(tiny)
    np.testing.assert_allclose(embedding.get_query_embedding(QUESTION), tiny.embed(["Question: " + QUESTION])[0],
                               atol=1e-5)
    np.testing.assert_allclose(embedding.get_text_embedding(QUESTION), tiny.embed([QUESTION])[0], atol=1e-5)
