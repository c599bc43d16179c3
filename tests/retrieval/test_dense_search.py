"""Dense search asks Chroma's approximate (HNSW) index for more neighbours than it keeps, so the
chunks it returns are the exact nearest ones (`pipeline.dense_search`)."""

from __future__ import annotations

import numpy as np

from unirag.retrieval import store
from unirag.retrieval.search import dense_search


def test_dense_search_returns_the_exact_nearest_chunks_best_first(tiny, tmp_path):
    # 2,000 random 64-d vectors: asked for just 20, the index returned another list than the
    # exact top 20 for 5 of these 40 queries (as for 1 dev question in 13 on real embeddings)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((2000, 64)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = [f"chunk-{i}" for i in range(len(vectors))]
    collection = store.open_collection(store.connect(tmp_path / "db"), "vectors", tiny, create=True)
    for start in range(0, len(ids), 500):
        part = slice(start, start + 500)
        collection.add(ids=ids[part], embeddings=vectors[part], documents=[f"text of {i}" for i in ids[part]],
                       metadatas=[{"source": f"{i}.md", "heading": "H"} for i in ids[part]])
    for query in rng.standard_normal((40, 64)).astype(np.float32):
        similarity = vectors @ (query / np.linalg.norm(query))
        exact = [ids[i] for i in np.argsort(-similarity)[:20]]
        hits = dense_search(collection, query, 20)
        assert [h.id for h in hits] == exact
        assert [h.text for h in hits] == [f"text of {i}" for i in exact]
        assert [h.source for h in hits] == [f"{i}.md" for i in exact]
        np.testing.assert_allclose([h.score for h in hits], np.sort(similarity)[::-1][:20], atol=1e-5)


def test_dense_search_of_an_empty_collection_or_depth_zero_is_empty(tiny, tmp_path):
    collection = store.open_collection(store.connect(tmp_path / "db"), "empty", tiny, create=True)
    assert dense_search(collection, np.ones(64, dtype=np.float32), 5) == []
