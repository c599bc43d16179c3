"""The BM25 index saved beside the embedded database, keyed by the chunks stamp an ingest writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from unirag.retrieval import lexical, lexical_files, store
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest as run_ingest

SMALL = ChunkSettings(chunk_size=32, overlap=8)
DOCS = {
    "loops.md": "# Loops\n\nLoops can return values with break. A `while` loop runs while a condition holds.\n",
    "cats.md": "# Cats\n\nThe cat sat on the mat. Cats like the GNU Lesser General Public License.\n",
    "ownership.md": "# Ownership\n\nEach value has an owner. When the owner goes out of scope, the value is "
                    "dropped. References borrow a value without taking ownership of it.\n",
}
QUERIES = ["break out of a loop", "cat on a mat", "who owns a value", "borrow references", "the and of",
           "zebra", "while condition", "LGPL licence", "value value value"]


def write(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def ingested(tiny, tmp_path, name="docs"):
    collection = store.open_collection(store.connect(tmp_path / "db"), name, tiny, create=True)
    run_ingest(tiny, collection, write(tmp_path / "docs", DOCS), settings=SMALL, progress=False)
    return collection


def fresh_process():
    """What a new process finds: nothing in memory."""
    lexical._CACHE.clear()


def built_in_memory(collection) -> lexical.LexicalIndex:
    """The index as it was built before stamps: from every chunk, in memory."""
    texts, ids, _ = lexical._all_texts(collection)
    return lexical.LexicalIndex.build(ids, texts)


def test_ingest_saves_the_index_and_a_new_process_maps_it_with_the_same_results(tiny, tmp_path):
    collection = ingested(tiny, tmp_path)
    stamp = store.chunks_stamp(collection)
    assert stamp
    saved = tmp_path / "db" / "bm25" / "docs" / stamp
    assert (saved / lexical_files.RECORD).is_file()
    fresh_process()
    index = lexical.index_for(collection)
    assert isinstance(index.retriever.scores["data"], np.memmap)  # loaded, not rebuilt
    reference = built_in_memory(collection)
    assert index.ids == reference.ids and index.acronyms == reference.acronyms
    for query in QUERIES:  # the same ids, the same scores, in the same order
        assert index.search(query, 10) == reference.search(query, 10), query
    for word in ("loops", "Makefile", "LGPL", "cat", "the"):
        assert index.mentions(word) == reference.mentions(word)


def test_a_changing_ingest_renews_the_stamp_and_an_unchanged_one_keeps_it(tiny, tmp_path):
    collection = ingested(tiny, tmp_path)
    first = store.chunks_stamp(collection)
    run_ingest(tiny, collection, tmp_path / "docs", settings=SMALL, progress=False)  # nothing changed
    assert store.chunks_stamp(collection) == first
    (tmp_path / "docs" / "cats.md").write_text("# Cats\n\nA zebra is not a cat.\n")
    run_ingest(tiny, collection, tmp_path / "docs", settings=SMALL, progress=False)
    second = store.chunks_stamp(collection)
    assert second != first
    assert [p.name for p in (tmp_path / "db" / "bm25" / "docs").iterdir()] == [second]  # the old one dropped
    fresh_process()
    assert [id_ for id_, _ in lexical.index_for(collection).search("zebra", 3)]
    # the collection's other metadata survives the stamp
    assert store.check_model(collection, tiny) is None


def test_another_process_ingest_is_seen_through_the_stamp(tiny, tmp_path):
    """An index held in memory follows an ingest made through another client (another process)."""
    collection = ingested(tiny, tmp_path)
    held = lexical.index_for(collection)
    other = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny)
    (tmp_path / "docs" / "zebra.md").write_text("# Zebras\n\nA zebra has stripes.\n")
    lexical._CACHE.pop(f"{other.id}")  # the other process's memory is its own
    run_ingest(tiny, other, tmp_path / "docs", settings=SMALL, progress=False)
    lexical._CACHE[f"{collection.id}"] = held  # back in the first process, which still holds the old one
    now = lexical.index_for(collection)
    assert now is not held and now.search("zebra stripes", 3)


def test_a_save_cut_short_leaves_nothing_that_loads(tiny, tmp_path, monkeypatch):
    collection = ingested(tiny, tmp_path)
    stamp = store.chunks_stamp(collection)
    parent = tmp_path / "db" / "bm25" / "docs"
    for path in parent.iterdir():
        import shutil

        shutil.rmtree(path)
    index = built_in_memory(collection)

    def dies_half_way(self, save_dir, **kwargs):
        Path(save_dir).mkdir(parents=True)
        np.save(Path(save_dir) / "data.csc.index.npy", np.zeros(3))
        raise OSError(28, "No space left on device")

    import bm25s

    monkeypatch.setattr(bm25s.BM25, "save", dies_half_way)
    assert lexical_files.save(index, tmp_path / "db", "docs", f"{collection.id}", stamp) is None
    assert not (parent / stamp).exists() and not list(parent.iterdir())  # the temporary folder is gone too
    monkeypatch.undo()
    # a temporary folder a killed process left behind is never loaded
    (parent / f".tmp-{stamp}-dead").mkdir()
    assert lexical_files.load(tmp_path / "db", "docs", f"{collection.id}", stamp) is None
    fresh_process()
    assert lexical.index_for(collection).search("cat on a mat", 3) == index.search("cat on a mat", 3)
    assert (parent / stamp / lexical_files.RECORD).is_file()  # rebuilt and saved by the query


def test_a_damaged_saved_index_is_rebuilt(tiny, tmp_path):
    collection = ingested(tiny, tmp_path)
    saved = tmp_path / "db" / "bm25" / "docs" / store.chunks_stamp(collection)
    (saved / "params.index.json").write_text("{not json")
    fresh_process()
    assert lexical.index_for(collection).search("cat on a mat", 3) == built_in_memory(collection).search("cat on a mat", 3)


def test_a_new_collection_of_the_same_name_does_not_load_the_old_index(tiny, tmp_path):
    collection = ingested(tiny, tmp_path)
    stamp = store.chunks_stamp(collection)
    other = tmp_path / "db" / "bm25" / "docs" / stamp
    assert lexical_files.load(tmp_path / "db", "docs", "another-collection-id", stamp) is None
    assert lexical_files.load(tmp_path / "db", "docs", f"{collection.id}", stamp) is not None
    store.delete_collection(store.connect(tmp_path / "db"), "docs")  # `ingest --reset`
    assert not other.exists()


def test_an_unstamped_collection_keeps_the_in_memory_index(tiny, tmp_path):
    """A collection written before stamps (or by other code) is keyed by its ids, and nothing is saved."""
    collection = store.open_collection(store.connect(tmp_path / "db"), "old", tiny, create=True)
    vectors = np.eye(2, tiny.model.config.hidden_size, dtype=np.float32)
    store.upsert(collection, ["a", "b"], vectors, ["Loops can break.", "The cat sat."],
                 [{"source": "a.md"}, {"source": "b.md"}])
    assert store.chunks_stamp(collection) is None
    index = lexical.index_for(collection)
    assert [id_ for id_, _ in index.search("loop", 2)] == ["a"]
    assert lexical.index_for(collection) is index
    store.upsert(collection, ["c"], vectors[:1], ["A zebra."], [{"source": "c.md"}])
    assert [id_ for id_, _ in lexical.index_for(collection).search("zebra", 2)] == ["c"]
    assert not (tmp_path / "db" / "bm25").exists()


@pytest.mark.slow  # a Chroma server
def test_a_chroma_server_keeps_the_index_in_memory_keyed_by_the_stamp(tiny, tmp_path):
    from chroma_server import chroma_server

    with chroma_server(tmp_path / "server") as url:
        collection = store.open_collection(store.connect(url=url), "docs", tiny, create=True)
        assert store.persist_folder(collection) is None
        run_ingest(tiny, collection, write(tmp_path / "docs", DOCS), settings=SMALL, progress=False)
        stamp = store.chunks_stamp(collection)
        assert stamp
        fresh_process()
        index = lexical.index_for(collection)
        assert index.digest == stamp and lexical.index_for(collection) is index
        for query in QUERIES:
            assert index.search(query, 10) == built_in_memory(collection).search(query, 10)
    assert not (tmp_path / "server" / "bm25").exists()


def test_a_forgotten_file_leaves_the_saved_index_of_a_new_process(tiny, tmp_path):
    collection = ingested(tiny, tmp_path)
    before = store.chunks_stamp(collection)
    assert lexical.index_for(collection).search("cat mat", 5)
    assert store.forget(collection, "cats.md")
    assert store.chunks_stamp(collection) != before  # the saved index no longer passes for the chunks
    fresh_process()
    index = lexical.index_for(collection)
    assert "cats.md" not in index.sources and not index.mentions("mat")
    assert index.ids == built_in_memory(collection).ids


def test_a_saved_index_whose_arrays_miss_its_record_is_rebuilt(tiny, tmp_path):
    import json

    collection = ingested(tiny, tmp_path)
    saved = tmp_path / "db" / "bm25" / "docs" / store.chunks_stamp(collection)
    record = json.loads((saved / lexical_files.RECORD).read_text())
    record["ids"], record["sources"] = record["ids"][:-1], record["sources"][:-1]  # one chunk short
    (saved / lexical_files.RECORD).write_text(json.dumps(record))
    assert lexical_files.load(tmp_path / "db", "docs", f"{collection.id}", store.chunks_stamp(collection)) is None
    fresh_process()
    assert lexical.index_for(collection).ids == built_in_memory(collection).ids
