"""The Chroma store (unirag.retrieval.store): a collection keeps to the model that wrote it, bad
names are user errors, and a real Chroma server on loopback serves the same commands."""

from __future__ import annotations

import pytest
from chroma_server import chroma_server
from rag_docs import SMALL, invoke, open_db, write_docs

from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.retrieval.search import retrieve as run_retrieve


def test_other_model_is_refused(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, docs, settings=SMALL)
    tiny.name = "some-other-model+adapter"
    with pytest.raises(UniragError, match="holds vectors from model .* but the loaded model is 'some-other-model"):
        run_retrieve(tiny, collection, "cat")
    with pytest.raises(UniragError, match="holds vectors from model"):
        run_ingest(tiny, collection, docs, settings=SMALL)
    with pytest.raises(UniragError, match="holds vectors from model"):
        store.open_collection(store.connect(tmp_path / "db"), "docs", tiny)


def test_a_collection_keeps_to_its_layer(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, docs, settings=SMALL)
    assert collection.metadata[store.LAYER_KEY] == 2
    tiny.embedding_layer = 1
    for attempt in (lambda: run_retrieve(tiny, collection, "cat"),
                    lambda: run_ingest(tiny, collection, docs, settings=SMALL)):
        with pytest.raises(UniragError, match="read at layer 2 .* embeds at layer 1"):
            attempt()


def test_a_collection_without_a_layer_was_embedded_at_the_last(tiny, tmp_path):
    collection = open_db(tiny, tmp_path / "db")
    collection.modify(metadata={k: v for k, v in collection.metadata.items() if k != store.LAYER_KEY})
    store.check_model(collection, tiny)
    tiny.embedding_layer = 1
    with pytest.raises(UniragError, match="read at layer 2"):
        store.check_model(collection, tiny)


def test_bad_collection_name_is_a_user_error(tiny, tmp_path):
    client = store.connect(tmp_path / "db")
    for name in ("t", "no spaces!"):  # chromadb's InvalidArgumentError, not a traceback
        with pytest.raises(UniragError, match="bad collection name"):
            store.open_collection(client, name, tiny, create=True)


@pytest.mark.slow  # a Chroma server process
def test_chroma_server_over_http(tiny_model_dir, tmp_path):
    with chroma_server(tmp_path / "server") as url:
        common = ["--model", str(tiny_model_dir), "--chroma-url", url, "--precision", "fp32"]
        docs = write_docs(tmp_path / "docs")
        result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
        assert result.exit_code == 0, result.output
        assert "4 added" in result.output and url in result.output
        result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
        assert "4 unchanged" in result.output, result.output
        result = invoke("retrieve", "capital of France", "-k", "3", *common)
        assert result.exit_code == 0 and result.stdout.startswith("[1] "), result.output
        # the server filters by source, lists its collections, forgets a file
        result = invoke("retrieve", "capital of France", "-k", "3", "--source", "sub/*", "--rerank", "0", *common)
        assert result.exit_code == 0, result.output
        assert "sub/" in result.stdout and "guide.md" not in result.stdout and "notes.txt" not in result.stdout
        result = invoke("collections", "--chroma-url", url)
        assert result.exit_code == 0 and f"1 collection in {url}" in result.stdout and "on disk" not in result.stdout
        assert "4 files" in result.stdout
        assert invoke("forget", "sub/intro.rst", "--chroma-url", url).exit_code == 0
        result = invoke("retrieve", "loops", "-k", "3", "--source", "sub/intro.rst", *common)
        assert isinstance(result.exception, UniragError) and "matches --source sub/intro.rst" in str(result.exception)
        assert not (tmp_path / ".unirag").exists()
