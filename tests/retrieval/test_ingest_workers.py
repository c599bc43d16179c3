"""`unirag ingest` as several processes (torchrun / accelerate launch) writing to one Chroma server:
each worker takes its share of the files, together they write what one process writes."""

from __future__ import annotations

import numpy as np
import pytest
from chroma_server import chroma_server
from net import torchrun
from rag_docs import SMALL, collection_state, invoke, open_db, write_docs

from unirag.retrieval.ingest import ingest, share_of
from unirag.readers.registry import walk


def test_every_file_goes_to_exactly_one_worker_and_bytes_are_balanced(tmp_path):
    for i, size in enumerate([900, 800, 100, 100, 100, 50, 40, 30, 20, 10]):
        (tmp_path / f"f{i}.txt").write_text("x" * size)
    files = walk(tmp_path)[0]
    for workers in (1, 2, 3):
        shares = [share_of(files, w, workers) for w in range(workers)]
        names = [f.source for share in shares for f in share]
        assert sorted(names) == sorted(f.source for f in files)
        assert len(names) == len(set(names))
        assert all(share == sorted(share, key=files.index) for share in shares)  # walk order kept
    two = [sum(f.path.stat().st_size for f in share_of(files, w, 2)) for w in range(2)]
    assert abs(two[0] - two[1]) <= 150


def test_two_workers_write_what_one_writes_and_only_the_first_removes(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    one = open_db(tiny, tmp_path / "one")
    ingest(tiny, one, docs, settings=SMALL)
    two = open_db(tiny, tmp_path / "two")
    summaries = [ingest(tiny, two, docs, settings=SMALL, worker=w, workers=2) for w in (0, 1)]
    assert sum(len(s.added) for s in summaries) == 4 and all(s.added for s in summaries)
    state_one, state_two = collection_state(one), collection_state(two)
    assert state_one.keys() == state_two.keys()
    for id_ in state_one:
        assert state_one[id_][:2] == state_two[id_][:2]
        np.testing.assert_allclose(state_one[id_][2], state_two[id_][2], atol=1e-5)
    assert (summaries[0].ignored, summaries[1].ignored) == (1, 0)  # what the scan left out is reported once

    (docs / "notes.txt").unlink()  # a removed file: the first worker drops its chunks
    assert ingest(tiny, two, docs, settings=SMALL, worker=1, workers=2).removed == []
    assert ingest(tiny, two, docs, settings=SMALL, worker=0, workers=2).removed == ["notes.txt"]


def test_several_workers_need_a_chroma_server(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    result = invoke("ingest", str(write_docs(tmp_path / "docs")), "--model", str(tiny_model_dir),
                    "--db", str(tmp_path / "db"), "--no-progress")
    assert result.exit_code == 1 and "--chroma-url" in str(result.exception)
    assert not (tmp_path / "db").exists()


@pytest.mark.slow  # a Chroma server and two worker processes
def test_torchrun_ingest_into_one_server(tiny_model_dir, tmp_path):
    docs = write_docs(tmp_path / "docs")
    args = ["--model", str(tiny_model_dir), "--precision", "fp32", "--chunk-size", "32", "--chunk-overlap", "8",
            "--no-progress", "--collection", "docs"]
    with chroma_server(tmp_path / "server") as url:
        result = torchrun(["ingest", str(docs), "--chroma-url", url, *args])
        assert result.returncode == 0, result.stderr[-3000:]
        assert "worker 1 of 2" in result.stdout and "worker 2 of 2" in result.stdout
        again = invoke("ingest", str(docs), "--chroma-url", url, *args)  # one process: nothing left to do
        assert "0 added, 0 changed, 0 removed, 4 unchanged" in again.output, again.output
