"""`--source GLOB`: retrieval restricted to some files, by dense search and BM25 alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from unirag.errors import UniragError
from unirag.retrieval import lexical, search, store
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.retrieval.search import matching_sources, retrieve

SMALL = ChunkSettings(chunk_size=32, overlap=8)


def write_tree(root: Path) -> Path:
    """Many zebra pages under other/, two under guide/: the guide's rank far down unfiltered."""
    for i in range(12):
        path = root / "other" / f"z{i:02d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Zebra {i}\n\nZebra zebra zebra stripes number {i}.\n\nZebra herds graze.\n")
    (root / "guide").mkdir(parents=True, exist_ok=True)
    (root / "guide" / "intro.md").write_text("# Intro\n\nA zebra once visited the guide.\n\n## More\n\nPlain words.\n")
    (root / "guide" / "setup.md").write_text("# Setup\n\nInstall the package, then configure it.\n")
    return root


@pytest.fixture
def collection(tiny, tmp_path):
    coll = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    run_ingest(tiny, coll, write_tree(tmp_path / "docs"), settings=SMALL, progress=False)
    return coll


def test_globs_match_sources_fnmatch_style():
    counts = {"guide/intro.md": 2, "guide/setup.md": 1, "other/z01.md": 1, "README.md": 1}
    assert matching_sources(counts, ["guide/*"]) == {"guide/intro.md", "guide/setup.md"}
    assert matching_sources(counts, ["*.md"]) == set(counts)  # `*` crosses folders, as fnmatch's does
    assert matching_sources(counts, ["README.md", "other/z0[0-1].md"]) == {"README.md", "other/z01.md"}
    assert matching_sources(counts, ["readme.md"]) == set()  # case matters


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_every_mode_returns_top_k_chunks_of_the_matching_files(tiny, collection, mode, monkeypatch):
    # a vector index asked for only as many neighbours as kept: a filter applied after the
    # search would find none of the guide's chunks among them
    monkeypatch.setattr(search, "SEARCH_DEPTH", 1)
    counts = store.source_counts(collection)
    guide = sum(n for source, n in counts.items() if source.startswith("guide/"))
    assert guide >= 3 and sum(counts.values()) > 4 * guide
    if mode == "lexical":  # unfiltered, the many zebra pages fill the top
        everything = retrieve(tiny, collection, "zebra stripes", top_k=guide, mode=mode)
        assert not any(h.source.startswith("guide/") for h in everything)
    hits = retrieve(tiny, collection, "zebra stripes", top_k=guide, mode=mode, sources=["guide/*"])
    assert {h.source for h in hits} <= {"guide/intro.md", "guide/setup.md"}
    if mode == "lexical":  # BM25 finds only the chunk that says "zebra"
        assert [h.source for h in hits] == ["guide/intro.md"] and "zebra" in hits[0].text
    else:
        assert len(hits) == guide


def test_filtered_dense_search_is_the_exact_nearest_among_the_matching_chunks(tiny, collection):
    question = "how do I install it"
    got = retrieve(tiny, collection, question, top_k=2, mode="dense", sources=("guide/*",))
    rows = collection.get(where={"source": {"$in": ["guide/intro.md", "guide/setup.md"]}},
                          include=["embeddings"])
    vector = tiny.embed([search.query_text(tiny, question)], pooling=store.collection_pooling(collection))[0]
    matrix = np.asarray(rows["embeddings"], dtype=np.float32)
    cosine = matrix @ vector / np.linalg.norm(matrix, axis=1) / np.linalg.norm(vector)
    expected = [rows["ids"][i] for i in np.argsort(-cosine)[:2]]
    assert [h.id for h in got] == expected


def test_bm25_masks_other_sources_before_ranking():
    index = lexical.LexicalIndex.build(["a", "b", "c"], ["zebra zebra zebra", "zebra zebra", "a zebra here"],
                                       sources=["x.md", "x.md", "y.md"])
    assert [id_ for id_, _ in index.search("zebra", 1)] == ["a"]
    assert [id_ for id_, _ in index.search("zebra", 1, {"y.md"})] == ["c"]
    assert index.search("zebra", 3, set()) == []


def test_no_matching_file_is_a_clear_error(tiny, collection):
    with pytest.raises(UniragError, match="no file in collection 'docs' matches --source nothing/\\*"):
        retrieve(tiny, collection, "zebra", sources=["nothing/*"])


def test_ask_settings_carry_the_filter(tiny, collection):
    from unirag.answer.ask import AskSettings, ask

    result = ask(tiny, collection, "zebra stripes", AskSettings(top_k=2, rerank=0, sources=("guide/setup.md",)))
    assert [h.source for h in result.hits] == ["guide/setup.md"]


def test_a_name_only_other_files_hold_is_never_mentioned_within_the_sources(collection):
    from unirag.answer.ask import AskSettings, never_mentioned

    assert never_mentioned(collection, "What grows in Kenya?") == ("Kenya",)
    everywhere = never_mentioned(collection, "What does Zebra mean?", AskSettings())
    within = never_mentioned(collection, "What does Zebra mean?", AskSettings(sources=("guide/setup.md",)))
    assert everywhere == () and within == ("Zebra",)
    assert never_mentioned(collection, "What does Zebra mean?", AskSettings(sources=("guide/*",))) == ()
