"""Shared by the RAG tests (tests/retrieval, tests/answer, tests/cli): a small folder of documents in
every format, small chunk settings, a Chroma collection on disk and the RAG commands as one typer app."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import typer
from typer.testing import CliRunner

from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.retrieval.chunking import ChunkSettings
from unirag.cli.collection_commands import collections, forget
from unirag.cli.rag_commands import ask, chat, ingest, retrieve

SMALL = ChunkSettings(chunk_size=32, overlap=8)
SENTENCES = ["The cat sat on the mat.", "A dog ran in the park.", "Paris is the capital of France.",
             "Rust has ownership and borrowing.", "Loops can return values with break."]

app = typer.Typer()
for command in (ingest, retrieve, ask, chat, collections, forget):
    app.command()(command)
runner = CliRunner()


def write_docs(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nIntro about the cat.\n\n## Install\n\n" + " ".join(SENTENCES * 3)
                                   + "\n\n## Use\n\nParis is the capital of France.\n")
    (root / "notes.txt").write_text("Rust has ownership and borrowing. " * 4)
    (root / "sub" / "page.html").write_text(
        "<html><head><title>Page</title><style>p{}</style></head><body><h1>Embeddings</h1>"
        "<p>Embeddings map text to vectors.</p><script>alert(1)</script></body></html>")
    (root / "sub" / "intro.rst").write_text("Loops\n=====\n\nLoops can return values with break.\n")
    (root / "image.png").write_bytes(b"\x89PNG")  # other extension: ignored, not skipped
    return root


def collection_state(collection) -> dict:
    got = collection.get(include=["documents", "metadatas", "embeddings"])
    return {i: (d, m, np.asarray(e)) for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"])}


def open_db(model, path: Path, name: str = "docs"):
    return store.open_collection(store.connect(path), name, model, create=True)


def invoke(*args: str):
    result = runner.invoke(app, list(args), catch_exceptions=True)
    if result.exception and not isinstance(result.exception, (SystemExit, UniragError)):
        raise result.exception
    return result
