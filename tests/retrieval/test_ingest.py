"""Incremental ingest (unirag.retrieval.ingest): what is added, changed, removed or reused, user
errors, progress, and crash safety (a SIGKILLed ingest, run again, equals one clean run)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from rag_docs import SENTENCES, SMALL, collection_state, invoke, open_db, write_docs

from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.retrieval.chunking import ChunkSettings, chunk_text, embed_texts
from unirag.retrieval.ingest import PAUSE_ENV
from unirag.retrieval.ingest import ingest as run_ingest


def test_ingest_with_context_words_embeds_each_chunk_after_its_predecessor(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, docs, settings=SMALL)
    plain = collection_state(collection)
    context = ChunkSettings(32, 8, context_words=5)
    summary = run_ingest(tiny, collection, docs, settings=context)
    assert sorted(summary.changed) == ["guide.md", "notes.txt", "sub/intro.rst", "sub/page.html"]
    state = collection_state(collection)
    assert not state.keys() & plain.keys() and len(state) == len(plain)  # new ids, the old ones gone
    guide = sorted((m["chunk_index"], d, e) for d, m, e in state.values() if m["source"] == "guide.md")
    chunks = chunk_text((docs / "guide.md").read_text(), tiny.tokenizer, context)
    assert [d for _, d, _ in guide] == [c.text for c in chunks]  # the stored text is the chunk alone
    expected = tiny.embed(embed_texts(chunks, "Guide", context))
    np.testing.assert_allclose(np.stack([e for _, _, e in guide]), expected, atol=1e-5)


def test_a_new_reader_format_gives_its_files_new_chunk_ids():
    from unirag.retrieval.ingest import doc_version
    from unirag.readers.registry import READER_FORMATS

    # ids of kinds read as before stay as they were (nothing re-embedded); html's changed once
    assert doc_version("h", SMALL, 0) == doc_version("h", SMALL)
    assert doc_version("h", SMALL, READER_FORMATS["html"]) != doc_version("h", SMALL)
    assert doc_version("h", SMALL, READER_FORMATS["markdown"]) != doc_version("h", SMALL, 1)  # front matter read


def test_missing_path_and_empty_folder_are_user_errors(tiny, tmp_path):
    collection = open_db(tiny, tmp_path / "db")
    with pytest.raises(UniragError, match="no such file or folder"):
        run_ingest(tiny, collection, tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.bin").write_bytes(b"1")
    with pytest.raises(UniragError, match="no .* files under"):
        run_ingest(tiny, collection, tmp_path / "empty")
    result = invoke("ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "db"))
    assert isinstance(result.exception, UniragError)


def test_ingest_is_incremental_and_idempotent(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    (docs / "empty.md").write_text("")
    collection = open_db(tiny, tmp_path / "db")
    assert collection.configuration["hnsw"]["space"] == "cosine"
    assert collection.metadata[store.MODEL_KEY] == tiny.name

    first = run_ingest(tiny, collection, docs, settings=SMALL)
    assert sorted(first.added) == ["guide.md", "notes.txt", "sub/intro.rst", "sub/page.html"]
    assert [(s.source, s.reason) for s in first.skipped] == [("empty.md", "empty file")]
    assert first.ignored == 1 and "skipped empty.md: empty file" in first.report()
    state = collection_state(collection)
    assert len(state) == first.chunks_written == collection.count()
    metas = [m for _, m, _ in state.values()]
    assert {m["source"] for m in metas} == set(first.added)
    assert all(m["model"] == tiny.name and len(m["content_hash"]) == 64 for m in metas)
    assert {m["heading"] for m in metas if m["source"] == "guide.md"} == {"Guide", "Guide > Install", "Guide > Use"}
    assert {m["heading"] for m in metas if m["source"] == "sub/page.html"} == {"Embeddings"}

    second = run_ingest(tiny, collection, docs, settings=SMALL)
    assert (second.added, second.changed, second.removed, second.chunks_written, second.unchanged) == ([], [], [], 0, 4)
    assert collection_state(collection).keys() == state.keys()

    (docs / "notes.txt").write_text("Completely new notes about Paris.")
    (docs / "sub" / "page.html").unlink()
    third = run_ingest(tiny, collection, docs, settings=SMALL)
    assert (third.changed, third.removed, third.unchanged) == (["notes.txt"], ["sub/page.html"], 2)
    after = collection_state(collection)
    assert {m["source"] for _, m, _ in after.values()} == {"guide.md", "notes.txt", "sub/intro.rst"}
    kept = {i for i, (_, m, _) in state.items() if m["source"] in ("guide.md", "sub/intro.rst")}
    assert kept <= after.keys()  # untouched files keep their ids and vectors
    assert [d for d, m, _ in after.values() if m["source"] == "notes.txt"] == ["Completely new notes about Paris."]

    (docs / "notes.txt").write_text("")  # now empty: skipped, and its old chunks go
    fourth = run_ingest(tiny, collection, docs, settings=SMALL)
    assert any(s.source == "notes.txt" and "old chunks were removed" in s.reason for s in fourth.skipped)
    assert "notes.txt" not in {m["source"] for m in collection.get()["metadatas"]}


def test_a_changed_file_embeds_only_its_new_chunks(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    first = run_ingest(tiny, collection, docs, settings=SMALL)
    assert first.chunks_reused == 0
    guide = docs / "guide.md"
    guide.write_text(guide.read_text().replace("## Use\n\nParis is the capital", "## Use\n\nLyon is not the capital"))
    second = run_ingest(tiny, collection, docs, settings=SMALL)
    assert second.changed == ["guide.md"]
    # the Install section's chunks are the same text: they keep their vectors; the Use section is new
    assert second.chunks_written - second.chunks_reused == 1 and second.chunks_reused >= 2
    assert "with their stored vectors" in second.line()
    # the same collection as one clean run over the edited folder
    clean = open_db(tiny, tmp_path / "db2")
    run_ingest(tiny, clean, docs, settings=SMALL)
    after, fresh = collection_state(collection), collection_state(clean)
    assert after.keys() == fresh.keys()
    for id_, (text, meta, vector) in fresh.items():
        assert after[id_][:2] == (text, meta)
        np.testing.assert_allclose(after[id_][2], vector, atol=1e-4)


def test_ingest_progress_counts_bytes_and_files(tiny, tmp_path, capsys):
    docs = write_docs(tmp_path / "docs")
    total = sum(p.stat().st_size for p in docs.rglob("*") if p.is_file() and p.suffix != ".png")
    run_ingest(tiny, open_db(tiny, tmp_path / "db"), docs, settings=SMALL, progress=True)
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    # a large file moves the bar as its chunks are embedded: the bar counts bytes, not files
    assert f"{total}/{total}" in bar.replace("B", "") and "files=4/4" in bar


REPO = Path(__file__).resolve().parents[2]
KILLABLE = "import typer; from unirag.cli.rag_commands import ingest, retrieve; app = typer.Typer(); " \
           "app.command()(ingest); app.command()(retrieve); app()"


def _wait_for_lines(proc, marker: str, count: int, deadline: float) -> list[str]:
    """Read proc.stderr until `count` lines contain marker (bounded by deadline)."""
    seen, buffer = [], b""
    selector = selectors.DefaultSelector()
    selector.register(proc.stderr, selectors.EVENT_READ)
    while len(seen) < count:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"ingest ended or stalled before {count} upserts: {buffer.decode()[-2000:]}")
        if selector.select(timeout=0.5):
            chunk = os.read(proc.stderr.fileno(), 65536)
            buffer += chunk
            seen = [ln for ln in buffer.decode(errors="replace").splitlines() if marker in ln]
    return seen


@pytest.mark.slow  # a child process, killed
def test_sigkill_mid_ingest_then_rerun_equals_one_clean_run(tiny, tiny_model_dir, tmp_path):
    from chromadb.api.client import SharedSystemClient

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(10):
        (docs / f"f{i:02d}.md").write_text(f"# File {i}\n\n" + " ".join(SENTENCES[i % 5:] + SENTENCES) + "\n")
    db, clean_db = tmp_path / "db", tmp_path / "clean"
    args = ["--model", str(tiny_model_dir), "--precision", "fp32", "--chunk-size", "32", "--chunk-overlap", "8",
            "--batch-size", "4", "--no-progress"]
    assert invoke("ingest", str(docs), "--db", str(db), *args).exit_code == 0  # version A
    SharedSystemClient.clear_system_cache()  # the subprocess writes this db next

    for i in range(7):  # version B: 7 changed, one removed, one added
        (docs / f"f{i:02d}.md").write_text(f"# File {i} v2\n\n" + " ".join(SENTENCES[::-1]) + f" Number {i}.\n")
    (docs / "f09.md").unlink()
    (docs / "new.md").write_text("# New\n\nA new file about the park.\n")

    env = {**os.environ, PAUSE_ENV: "3", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE, "ingest", str(docs), "--db", str(db), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:  # kill it while it sleeps between upserting a file's new chunks and deleting its old ones
        upserted = _wait_for_lines(proc, "unirag-test: upserted", 2, time.monotonic() + 120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    killed_at = upserted[-1].split("upserted ", 1)[1].strip()

    result = invoke("ingest", str(docs), "--db", str(db), *args)
    assert result.exit_code == 0, result.output
    assert "1 repaired" in result.output and "1 removed" in result.output, result.output
    assert killed_at in [f"f{i:02d}.md" for i in range(7)]
    assert invoke("ingest", str(docs), "--db", str(clean_db), *args).exit_code == 0

    model = tiny
    recovered = collection_state(store.open_collection(store.connect(db), "docs", model))
    clean = collection_state(store.open_collection(store.connect(clean_db), "docs", model))
    assert recovered.keys() == clean.keys()
    for id_ in clean:
        assert recovered[id_][:2] == clean[id_][:2]
        np.testing.assert_allclose(recovered[id_][2], clean[id_][2], atol=1e-5)
    again = invoke("ingest", str(docs), "--db", str(db), *args)
    assert "0 added, 0 changed, 0 removed, 10 unchanged" in again.output
