"""`unirag adapt`: domain post-training on the chunks ingest will embed, within a time budget."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from unirag import UniModel, UniragError
from unirag.cli.commands import app
from unirag.training.adapt import adapt, domain_texts
from unirag.retrieval.chunking import ChunkSettings

SETTINGS = ChunkSettings(chunk_size=32, overlap=4)


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "loops.md").write_text("# Loops\n\n## Break\n\nA loop can return a value with break. " * 3)
    (folder / "own.md").write_text("# Ownership\n\nEach value has one owner at a time.\n")
    (folder / "bad.txt").write_bytes(b"\xff\xfe\x00\x00")  # unreadable files are skipped, as in ingest
    return folder


def test_domain_texts_are_what_ingest_embeds(tiny, docs):
    texts = domain_texts(docs, tiny.tokenizer, SETTINGS)
    assert texts[0].startswith("Loops > Break\n\n") and texts[-1].startswith("Ownership\n\n")
    assert all("\ufffd" not in t for t in texts)


def test_adapt_writes_an_adapter_that_changes_embeddings(tiny_model_dir, docs, tmp_path):
    out = adapt(str(tiny_model_dir), docs, tmp_path / "adapted", minutes=5, adapter="none", recipe="test-tiny",
                settings=SETTINGS, overrides={"steps": 3, "p_mar": 0.0, "alpha": 1.0})
    info = json.loads((out / "unirag.json").read_text())
    assert info["steps_done"] == 3 and info["data"] == str(docs)
    assert info["config"]["max_length"] >= SETTINGS.chunk_size + 64  # a whole chunk fits
    base = UniModel.load(str(tiny_model_dir), adapter="none", precision="fp32").embed(["a loop"])
    tuned = UniModel.load(str(tiny_model_dir), str(out), precision="fp32").embed(["a loop"])
    assert not np.allclose(base, tuned, atol=1e-4)


def test_adapt_errors_are_one_line(tiny_model_dir, docs, tmp_path):
    with pytest.raises(UniragError, match="does not exist"):
        adapt(str(tiny_model_dir), docs, tmp_path / "x", minutes=1, adapter=str(tmp_path / "no-adapter"))
    result = CliRunner().invoke(app, ["adapt", str(tmp_path / "missing"), "--output", str(tmp_path / "o"),
                                      "--model", str(tiny_model_dir), "--adapter", "none"])
    assert isinstance(result.exception, UniragError) and "no such file or folder" in str(result.exception)
