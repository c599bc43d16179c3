"""Generation (unirag.answer.generate): the prompt, citations, fitting hits into the context
window and a streamed answer."""

from __future__ import annotations

import types

from rag_docs import SMALL, open_db, write_docs

from unirag.answer.generate import answer, build_prompt, citations, fit
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.retrieval.search import retrieve as run_retrieve


def test_retrieve_prompt_and_streamed_answer(tiny, tmp_path):
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, write_docs(tmp_path / "docs"), settings=SMALL)
    hits = run_retrieve(tiny, collection, "What is the capital of France?", top_k=3)
    assert len(hits) == 3 and hits[0].score >= hits[1].score >= hits[2].score
    assert all(h.source and h.text and -1.0 <= h.score <= 1.0001 for h in hits)
    messages = build_prompt("Where?", hits[:2])
    assert "does not contain" in messages[0]["content"]
    assert messages[-1]["content"].startswith(f"Context:\n[1] {hits[0].label}\n{hits[0].text}\n\n[2] {hits[1].label}")
    assert citations(hits[:2]) == [f"[1] {hits[0].label}", f"[2] {hits[1].label}"]
    shown, _ = fit(tiny, "Where?", hits * 20, max_new_tokens=16)  # the tiny model has 256 positions
    assert 0 < len(shown) < 60 and len(tiny.prompt_ids(build_prompt("Where?", shown))) <= 240
    pieces = answer(tiny, "Where?", shown, max_new_tokens=6, stream=True)
    assert isinstance(pieces, types.GeneratorType)
    assert all(isinstance(p, str) for p in pieces)
