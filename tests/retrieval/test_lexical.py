"""Hybrid retrieval: BM25 over the collection's own chunks, fused with dense search by reciprocal rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from unirag.errors import UniragError
from unirag.retrieval import lexical
from unirag.retrieval import store
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.retrieval.search import retrieve

SMALL = ChunkSettings(chunk_size=32, overlap=8)


def test_reciprocal_rank_fusion_adds_one_over_k_plus_rank():
    fused = lexical.reciprocal_rank_fusion([["a", "b", "c"], ["b", "d"]], k=60)
    assert [id_ for id_, _ in fused] == ["b", "a", "d", "c"]  # d: 1/62 beats c: 1/63
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1][1] == pytest.approx(1 / 61)
    # equal scores keep first-appearance order, so the result is deterministic
    assert [id_ for id_, _ in lexical.reciprocal_rank_fusion([["x"], ["y"]])] == ["x", "y"]


def test_weighted_reciprocal_rank_fusion_scales_each_list():
    fused = lexical.reciprocal_rank_fusion([["a", "b"], ["b", "a"]], k=60, weights=(3.0, 1.0))
    assert [id_ for id_, _ in fused] == ["a", "b"]  # the heavier list's first wins
    assert fused[0][1] == pytest.approx(3 / 61 + 1 / 62)
    assert fused[1][1] == pytest.approx(3 / 62 + 1 / 61)
    with pytest.raises(ValueError):
        lexical.reciprocal_rank_fusion([["a"], ["b"]], weights=(1.0,))


def test_bm25_index_stems_and_ignores_stopword_only_queries():
    index = lexical.LexicalIndex.build(["loops", "cats"], ["Loops can return values with break.",
                                                           "The cat sat on the mat."])
    assert [id_ for id_, _ in index.search("How does a loop return a value?", 2)] == ["loops"]
    assert index.search("the and of", 2) == []
    assert index.search("zebra", 2) == []
    assert lexical.LexicalIndex.build([], []).search("loops", 3) == []


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def test_index_follows_incremental_ingest(tiny, tmp_path):
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    docs = write(tmp_path / "docs", {"loops.md": "# Loops\n\nLoops can return values with break.\n",
                                     "cats.md": "# Cats\n\nThe cat sat on the mat.\n"})
    run_ingest(tiny, collection, docs, settings=SMALL, progress=False)
    first = retrieve(tiny, collection, "break out of a loop", top_k=1, mode="lexical")
    assert first[0].source == "loops.md" and first[0].score > 0
    assert lexical.index_for(collection) is lexical.index_for(collection)  # unchanged: not rebuilt

    (docs / "cats.md").write_text("# Cats\n\nA zebra is not a cat.\n")  # changed file
    (docs / "loops.md").unlink()  # removed file
    run_ingest(tiny, collection, docs, settings=SMALL, progress=False)
    assert [h.source for h in retrieve(tiny, collection, "zebra", top_k=3, mode="lexical")] == ["cats.md"]
    assert retrieve(tiny, collection, "break out of a loop", top_k=3, mode="lexical") == []


def test_tied_chunks_rank_the_same_however_the_collection_was_built(tiny, tmp_path):
    """Two chunks of equal BM25 score rank the same whichever file was written to the collection
    first (a file ingested again goes last)."""
    texts = {"one.md": "# Zebras\n\nA zebra has stripes.\n", "two.md": "# Zebras\n\nA zebra has stripes!\n"}
    docs = tmp_path / "docs"

    def build(db: str, order: list[str]) -> list[str]:
        for path in docs.glob("*.md"):
            path.unlink()
        collection = store.open_collection(store.connect(tmp_path / db), "docs", tiny, create=True)
        for name in order:  # one more file per ingest: it is written after the ones before it
            write(docs, {name: texts[name]})
            run_ingest(tiny, collection, docs, settings=SMALL, progress=False)
        return [h.id for h in retrieve(tiny, collection, "zebra stripes", top_k=2, mode="lexical")]

    forward, backward = build("a", ["one.md", "two.md"]), build("b", ["two.md", "one.md"])
    assert len(forward) == 2 and forward == backward


def test_hybrid_keeps_the_keyword_match_and_dense_candidates(tiny, tmp_path):
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    docs = write(tmp_path / "docs", {f"note{i}.md": f"# Note {i}\n\nFiller text number {i} about nothing.\n"
                                     for i in range(8)})
    write(docs, {"borrow.md": "# Borrowing\n\nThe borrow checker enforces references rules.\n"})
    run_ingest(tiny, collection, docs, settings=SMALL, progress=False)
    question = "What does the borrow checker enforce?"
    dense = retrieve(tiny, collection, question, top_k=collection.count(), mode="dense")
    hybrid = retrieve(tiny, collection, question, top_k=3)
    assert hybrid[0].source == "borrow.md"  # BM25 rank 1 and somewhere in the dense ranking
    assert len({h.id for h in hybrid}) == 3
    by_id = {h.id: h for h in dense}
    assert all(h.text == by_id[h.id].text and h.source == by_id[h.id].source for h in hybrid)
    assert all(-1.0 <= h.score <= 1.0001 for h in dense)
    with pytest.raises(UniragError, match="unknown retrieval mode"):
        retrieve(tiny, collection, question, mode="sparse")


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_a_passage_repeated_in_another_file_is_retrieved_once(tiny, tmp_path, mode):
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    option = "Retries a failed download."
    # a reference page that repeats an option's description on every command page that takes it
    docs = write(tmp_path / "docs", {f"command{i}.md": f"# Command {i}\n\nRuns step {i}.\n\n## retry\n\n{option}\n"
                                     for i in range(3)})
    run_ingest(tiny, collection, docs, settings=SMALL, progress=False)
    assert collection.get(include=["documents"])["documents"].count(f"## retry\n\n{option}") == 3
    hits = retrieve(tiny, collection, "How often is a failed download retried?", top_k=6, mode=mode, rerank=6)
    texts = [h.text for h in hits]
    assert texts.count(f"## retry\n\n{option}") == 1 and len(texts) == len(set(texts))
