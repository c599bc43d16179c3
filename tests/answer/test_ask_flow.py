"""The ask flow's stage timing and early output change no value: the answer is the one the plain
steps (retrieve, then answer_hits) give."""

from __future__ import annotations

import pytest

from unirag.answer.ask import AskSettings, answer_hits, ask
from unirag.retrieval import store
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest
from unirag.retrieval.search import Trace, retrieve

DOCS = {
    "loops.md": "# Loops\n\nLoops can return values with break. A `loop` runs until you stop it. "
                "The value after break is what the loop returns.\n",
    "cats.md": "# Cats\n\nThe cat sat on the mat. Cats sleep most of the day. A cat is not a dog.\n",
    "rust.md": "# Ownership\n\nRust has ownership and borrowing. Each value has one owner. "
               "When the owner goes out of scope, the value is dropped.\n",
}
QUESTIONS = ["How does a loop return a value?", "Who owns a value in Rust?", "Where did the cat sit?"]


@pytest.fixture
def collection(tiny, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    coll = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    ingest(tiny, coll, docs, settings=ChunkSettings(chunk_size=32, overlap=8))
    return coll


def test_the_retrieval_trace_times_each_stage(tiny, collection):
    trace = Trace()
    retrieve(tiny, collection, QUESTIONS[0], top_k=3, rerank=4, trace=trace)
    assert set(trace.seconds) == {"embed question", "dense search", "bm25", "rerank"}


@pytest.mark.parametrize("mode", ["extractive", "both"])
def test_ask_gives_the_answer_of_the_plain_steps(tiny, collection, mode):
    settings = AskSettings(answer=mode, max_new_tokens=8, rerank=4)
    for question in QUESTIONS:
        fast = ask(tiny, collection, question, settings)
        plain = answer_hits(tiny, question, retrieve(tiny, collection, question, settings.top_k,
                                                     settings.retrieval, settings.rerank), settings)
        assert fast.read() == plain.read()
        assert [h.id for h in fast.hits] == [h.id for h in plain.hits]
        assert fast.evidence == plain.evidence and fast.abstained == plain.abstained
        assert {"embed question", "dense search", "bm25", "rerank", "evidence", "answer text"} <= set(fast.seconds)


def test_on_retrieved_sees_the_chunks_before_the_answer(tiny, collection):
    seen = []
    settings = AskSettings(rerank=4)
    result = ask(tiny, collection, QUESTIONS[0], settings, on_retrieved=seen.append)
    assert len(seen) == 1
    retrieved = retrieve(tiny, collection, QUESTIONS[0], settings.top_k, settings.retrieval, settings.rerank)
    assert [h.id for h in seen[0]] == [h.id for h in retrieved]
    # the shown chunks are among them (reordered, and fewer where the prompt has no room: `fit`)
    assert {h.id for h in result.hits} <= {h.id for h in seen[0]}
