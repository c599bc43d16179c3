"""LlamaIndex adapters: UniEmbedding + UniLLM over one UniModel, in VectorStoreIndex with Chroma."""

import asyncio
import uuid

import numpy as np
import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, Settings, VectorStoreIndex  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage, MessageRole  # noqa: E402
from llama_index.core.prompts import PromptTemplate  # noqa: E402

from unirag.integrations.llama_index import UniEmbedding, UniLLM  # noqa: E402

TEXTS = ["The cat sat on the mat.", "Paris is the capital of France.", "Rust has ownership and borrowing."]
N = 8  # new tokens for the tiny (random) model: fast, and greedy so deterministic


@pytest.fixture
def emb(tiny):
    return UniEmbedding(tiny, embed_batch_size=2)


@pytest.fixture
def llm(tiny):
    return UniLLM(tiny, max_new_tokens=N)


def chroma_store(tmp_path=None):
    chromadb = pytest.importorskip("chromadb")
    pytest.importorskip("llama_index.vector_stores.chroma")
    from chromadb.config import Settings as ChromaSettings
    from llama_index.vector_stores.chroma import ChromaVectorStore

    settings = ChromaSettings(anonymized_telemetry=False)
    client = (chromadb.PersistentClient(path=str(tmp_path), settings=settings) if tmp_path
              else chromadb.EphemeralClient(settings=settings))
    collection = client.get_or_create_collection(f"test-{uuid.uuid4().hex[:8]}")
    return ChromaVectorStore(chroma_collection=collection)


def index_over(docs, embed_model, tmp_path=None):
    from llama_index.core import StorageContext

    storage = StorageContext.from_defaults(vector_store=chroma_store(tmp_path))
    return VectorStoreIndex.from_documents(docs, storage_context=storage, embed_model=embed_model)


# ---------------------------------------------------------------------------- construction
def test_both_adapters_hold_the_same_model_object(tiny, emb, llm):
    assert emb._model is tiny and llm._model is tiny and emb._model is llm._model
    assert emb.model is llm.model is tiny
    assert emb.model_name == llm.metadata.model_name == tiny.name
    # serialisable without the model (pydantic never sees it)
    assert "_model" not in emb.to_dict() and emb.to_dict()["class_name"] == "UniEmbedding"
    assert llm.to_dict()["max_new_tokens"] == N


def test_rejects_non_unimodel_and_bad_pooling(tiny):
    with pytest.raises(TypeError):
        UniEmbedding("not a model")
    with pytest.raises(TypeError):
        UniLLM(object())
    with pytest.raises(ValueError, match="pooling"):
        UniEmbedding(tiny, pooling="cls")


# ---------------------------------------------------------------------------- embeddings
def test_text_embedding_batch_equals_model_embed(tiny, emb, monkeypatch):
    calls = []
    embed = tiny.embed

    def spy(texts, **kwargs):
        calls.append((list(texts), kwargs))
        return embed(texts, **kwargs)

    monkeypatch.setattr(tiny, "embed", spy)
    vectors = emb.get_text_embedding_batch(TEXTS)
    assert len(calls) == 2  # embed_batch_size=2: one batched embed call per batch, not one per text
    assert calls[0][0] == TEXTS[:2] and calls[0][1]["batch_size"] == 2
    assert isinstance(vectors, list) and len(vectors) == 3
    assert all(isinstance(v, list) and isinstance(v[0], float) for v in vectors)
    np.testing.assert_allclose(np.array(vectors), embed(TEXTS), atol=1e-5)


def test_query_and_single_text_embedding(tiny, emb):
    np.testing.assert_allclose(emb.get_query_embedding(TEXTS[1]), tiny.embed(TEXTS[1])[0], atol=1e-5)
    np.testing.assert_allclose(emb.get_text_embedding(TEXTS[2]), tiny.embed(TEXTS[2])[0], atol=1e-5)
    assert len(emb.get_query_embedding("x")) == tiny.model.config.hidden_size


def test_async_embeddings(tiny, emb):
    query = asyncio.run(emb.aget_query_embedding(TEXTS[0]))
    text = asyncio.run(emb.aget_text_embedding(TEXTS[1]))
    batch = asyncio.run(emb.aget_text_embedding_batch(TEXTS))
    np.testing.assert_allclose(query, tiny.embed(TEXTS[0])[0], atol=1e-5)
    np.testing.assert_allclose(text, tiny.embed(TEXTS[1])[0], atol=1e-5)
    np.testing.assert_allclose(np.array(batch), tiny.embed(TEXTS), atol=1e-5)


def test_pooling_and_instructions_are_passed(tiny):
    emb = UniEmbedding(tiny, pooling="mean", query_instruction="Query: ", text_instruction="Passage: ")
    np.testing.assert_allclose(emb.get_query_embedding(TEXTS[0]),
                               tiny.embed(TEXTS[0], pooling="mean", instruction="Query: ")[0], atol=1e-5)
    np.testing.assert_allclose(emb.get_text_embedding_batch(TEXTS),
                               tiny.embed(TEXTS, pooling="mean", instruction="Passage: "), atol=1e-5)
    assert not np.allclose(emb.get_query_embedding(TEXTS[0]), tiny.embed(TEXTS[0])[0], atol=1e-3)


# ---------------------------------------------------------------------------- LLM
def test_metadata(tiny, llm):
    meta = llm.metadata
    assert meta.context_window == tiny.context_window == 256
    assert meta.num_output == N
    assert meta.model_name == tiny.name
    assert meta.is_chat_model is True
    assert UniLLM(tiny, model_name="custom").metadata.model_name == "custom"


def test_complete_and_stream_complete(tiny, llm):
    text = llm.complete("The cat").text
    assert text == tiny.generate("The cat", max_new_tokens=N)
    chunks = list(llm.stream_complete("The cat"))
    assert chunks and chunks[-1].text == text
    assert "".join(c.delta for c in chunks) == text
    assert all(a.text + b.delta == b.text for a, b in zip(chunks, chunks[1:]))  # cumulative text


def test_per_call_kwargs_and_system_prompt(tiny):
    llm = UniLLM(tiny, max_new_tokens=N, system_prompt="Be brief.")
    assert llm.complete("The cat", max_new_tokens=3).text == tiny.generate("The cat", max_new_tokens=3,
                                                                             system="Be brief.")
    assert llm.complete("The cat").text == tiny.generate("The cat", max_new_tokens=N, system="Be brief.")


def test_chat_uses_the_models_chat_template(tiny, llm):
    messages = [ChatMessage(role=MessageRole.SYSTEM, content="You answer."),
                ChatMessage(role=MessageRole.USER, content="Where is Paris?")]
    expected = tiny.generate([{"role": "system", "content": "You answer."},
                              {"role": "user", "content": "Where is Paris?"}], max_new_tokens=N)
    response = llm.chat(messages)
    assert response.message.role == MessageRole.ASSISTANT and response.message.content == expected
    chunks = list(llm.stream_chat(messages))
    assert chunks[-1].message.content == expected and "".join(c.delta for c in chunks) == expected
    # prompt templates go through chat (is_chat_model), not through llama-index's own templating
    assert llm.predict(PromptTemplate("Where is {city}?"), city="Paris") == tiny.generate(
        [{"role": "user", "content": "Where is Paris?"}], max_new_tokens=N)


def test_async_llm(tiny, llm):
    async def run():
        completion = await llm.acomplete("The cat")
        stream = [c async for c in await llm.astream_complete("The cat")]
        chat = await llm.achat([ChatMessage(role="user", content="The cat")])
        chat_stream = [c async for c in await llm.astream_chat([ChatMessage(role="user", content="The cat")])]
        return completion, stream, chat, chat_stream

    completion, stream, chat, chat_stream = asyncio.run(run())
    expected = tiny.generate("The cat", max_new_tokens=N)
    assert completion.text == expected and stream[-1].text == expected
    assert chat.message.content == expected and chat_stream[-1].message.content == expected


# ---------------------------------------------------------------------------- index
def test_vector_store_index_with_chroma(tiny, monkeypatch, tmp_path):
    # the drop-in usage: both adapters over one model in the global Settings
    monkeypatch.setattr(Settings, "_embed_model", None)  # restored after the test
    monkeypatch.setattr(Settings, "_llm", None)
    Settings.embed_model = UniEmbedding(tiny)
    Settings.llm = UniLLM(tiny, max_new_tokens=N)
    assert Settings.embed_model._model is Settings.llm._model

    docs = [Document(text=t, doc_id=f"d{i}") for i, t in enumerate(TEXTS)]
    for store_path in (None, tmp_path / "chroma"):  # EphemeralClient and PersistentClient
        index = index_over(docs, Settings.embed_model, store_path)
        nodes = index.as_retriever(similarity_top_k=2).retrieve(TEXTS[1])
        assert len(nodes) == 2
        assert nodes[0].node.ref_doc_id == "d1"  # the query is a stored text: itself is nearest
        assert nodes[0].score >= nodes[1].score


# ---------------------------------------------------------------------------- real model
DOCS = {
    "eiffel": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
              "It was completed in 1889 for the World's Fair.",
    "photosynthesis": "Photosynthesis is the process by which green plants use sunlight, water and carbon "
                      "dioxide to make glucose and release oxygen.",
    "rust": "The Rust borrow checker enforces ownership rules at compile time: a value can have either one "
            "mutable reference or any number of immutable references.",
}


@pytest.mark.integration
@pytest.mark.slow
def test_query_engine_answers_from_the_right_document(real_model, tmp_path):
    # The model's own pooling: eos with the shipped UniMAE adapter (the base model's eos state
    # ranked the Rust document first for the Eiffel and photosynthesis questions).
    embed_model = UniEmbedding(real_model)
    llm = UniLLM(real_model, max_new_tokens=32)
    assert embed_model._model is llm._model

    docs = [Document(text=text, doc_id=key) for key, text in DOCS.items()]
    index = index_over(docs, embed_model, tmp_path / "chroma")

    retriever = index.as_retriever(similarity_top_k=1)
    for question, key in [("In which city is the Eiffel Tower?", "eiffel"),
                          ("What gas do plants release during photosynthesis?", "photosynthesis"),
                          ("What does the Rust borrow checker enforce?", "rust")]:
        assert retriever.retrieve(question)[0].node.ref_doc_id == key, question

    response = index.as_query_engine(llm=llm, similarity_top_k=1).query("In which city is the Eiffel Tower?")
    assert [n.node.ref_doc_id for n in response.source_nodes] == ["eiffel"]
    assert "Paris" in str(response)


def test_postprocessors_run_the_ask_flows_rerank_and_evidence(tiny, monkeypatch):
    """UniRerank and UniEvidence are thin: they call unirag.retrieval.rerank.rerank and the ask flow's
    own evidence choice, `ask.select_evidence`."""
    from llama_index.core.schema import NodeWithScore, TextNode

    from unirag.integrations.llama_index import UniEvidence, UniRerank, _as_hits
    from unirag.answer import ask
    from unirag.retrieval import rerank
    nodes = [NodeWithScore(node=TextNode(text=t, metadata={"source": f"{i}.md"}, id_=str(i)), score=1.0 - i / 10)
             for i, t in enumerate(["The cat sat on the mat. It was red.", "Loops can return values with break.",
                                    "Paris is the capital of France."])]
    calls = []
    real_rerank, real_select = rerank.rerank, ask.select_evidence
    monkeypatch.setattr(rerank, "rerank", lambda *a, **k: calls.append("rerank") or real_rerank(*a, **k))
    monkeypatch.setattr(ask, "select_evidence", lambda *a, **k: calls.append("select") or real_select(*a, **k))
    ranked = UniRerank(tiny, top_n=3).postprocess_nodes(nodes, query_str="Where did the cat sit?")
    assert sorted(n.node.node_id for n in ranked) == ["0", "1", "2"]
    kept = UniEvidence(tiny, max_words=6).postprocess_nodes(ranked, query_str="Where did the cat sit?")
    assert calls == ["rerank", "select"]
    assert 1 <= len(kept) <= 3 and all(n.node.get_content() for n in kept)
    texts = {n.node.node_id: n.node.get_content() for n in nodes}
    assert all(piece.strip() in texts[n.node.node_id] for n in kept for piece in n.node.get_content().split(" … "))
    # the kept nodes are the passages `unirag ask` quotes, in the order it shows them
    shown, ev = real_select(tiny, "Where did the cat sit?", _as_hits(ranked), ask.AskSettings(evidence_words=6))
    quoted = {s.hit for s in ev.spans}
    assert [n.node.node_id for n in kept] == [hit.id for i, hit in enumerate(shown) if i in quoted]
    assert UniEvidence(tiny).postprocess_nodes([], query_str="Where did the cat sit?") == []
    with pytest.raises(ValueError, match="needs the query"):
        UniEvidence(tiny).postprocess_nodes(nodes)


def test_evidence_nodes_of_a_pdf_name_their_pages(tiny):
    """A node from a PDF chunk (its `page_start` / `page_end` in the metadata, as unirag's
    collections store them) keeps them, and gains "pages" as a citation reads them."""
    from llama_index.core.schema import NodeWithScore, TextNode

    from unirag.integrations.llama_index import UniEvidence

    meta = {"source": "guide.pdf", "page_start": 12, "page_end": 13}
    nodes = [NodeWithScore(node=TextNode(text="The cat sat on the mat. It was red.", metadata=meta, id_="0"),
                           score=1.0)]
    kept = UniEvidence(tiny, max_words=8).postprocess_nodes(nodes, query_str="Where did the cat sit?")
    assert [n.node.metadata for n in kept] == [{**meta, "pages": "pp. 12-13"}]
# ---------------------------------------------------------------------------- LlamaIndex conventions
def cat_nodes():
    from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

    out = []
    for i, text in enumerate(["The cat sat on the mat. It was red.", "Loops can return values with break.",
                              "Paris is the capital of France."]):
        node = TextNode(text=text, id_=f"n{i}", metadata={"file_name": f"{i}.md", "file_path": f"/docs/{i}.md"})
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=f"doc-{i}")
        out.append(NodeWithScore(node=node, score=1.0 - i / 10))
    return out


def test_rerank_returns_the_top_n_nodes_as_llama_index_rerankers_do(tiny):
    from unirag.integrations.llama_index import UniRerank, _as_hits
    from unirag.retrieval.rerank import rerank

    nodes, question = cat_nodes(), "Where did the cat sit?"
    expected = [hit.id for hit in rerank(tiny, question, _as_hits(nodes), len(nodes))]
    top = UniRerank(tiny, top_n=2).postprocess_nodes(nodes, query_str=question)
    assert [n.node.node_id for n in top] == expected[:2]
    assert top[0].node is nodes[[n.node.node_id for n in nodes].index(expected[0])].node
    assert len(UniRerank(tiny, top_n=5).postprocess_nodes(nodes, query_str=question)) == 3
    # depth 1: nothing to reorder, the first node stays first
    assert [n.node.node_id for n in UniRerank(tiny, top_n=2, depth=1).postprocess_nodes(nodes, query_str=question)] \
        == ["n0", "n1"]
    assert _as_hits(nodes)[2].source == "/docs/2.md"  # LlamaIndex readers' file_path labels the chunk


def test_evidence_nodes_keep_ids_metadata_and_relationships(tiny):
    from unirag.integrations.llama_index import UniEvidence

    nodes = cat_nodes()
    kept = UniEvidence(tiny, max_words=6).postprocess_nodes(nodes, query_str="Where did the cat sit?")
    assert kept
    originals = {n.node.node_id: n.node for n in nodes}
    for n in kept:
        before = originals[n.node.node_id]
        assert n.node.ref_doc_id == before.ref_doc_id == f"doc-{n.node.node_id[1:]}"
        assert n.node.metadata == before.metadata and n.node.metadata is not before.metadata
        assert n.node.get_content() in before.get_content() or " … " in n.node.get_content()
    assert [n.node.get_content() for n in nodes][0] == "The cat sat on the mat. It was red."  # inputs untouched


def test_retriever_over_a_unirag_collection(tiny, tmp_path, monkeypatch):
    from llama_index.core.query_engine import RetrieverQueryEngine

    from unirag.integrations.llama_index import UniEvidence, UniRetriever, hit_node
    from unirag.retrieval import store
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest
    from unirag.retrieval.search import Hit, retrieve

    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "guide" / "cats.md").write_text("# Cats\n\nThe cat sat on the mat.\n")
    (docs / "paris.md").write_text("# Paris\n\nParis is the capital of France.\n")
    (docs / "loops.md").write_text("# Loops\n\nLoops can return values with break.\n")
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    ingest(tiny, collection, docs, settings=ChunkSettings(chunk_size=32, overlap=8))

    retriever = UniRetriever(tiny, collection, top_k=2)
    nodes = retriever.retrieve("capital of France")
    assert [n.node.node_id for n in nodes] == [h.id for h in retrieve(tiny, collection, "capital of France", 2)]
    paris = next(n.node for n in retriever.retrieve("Paris capital France") if n.node.metadata["source"] == "paris.md")
    assert paris.metadata["file_name"] == "paris.md"
    assert paris.metadata["file_path"] == str((docs / "paris.md").resolve()) == paris.ref_doc_id
    assert "embed_key" not in paris.get_content(metadata_mode="llm") and "paris.md" in paris.get_content("llm")
    only = UniRetriever(tiny, collection, top_k=3, sources=["guide/*"]).retrieve("capital of France")
    assert [n.node.metadata["source"] for n in only] == ["guide/cats.md"]
    assert asyncio.run(retriever.aretrieve("capital of France"))[0].node.node_id == nodes[0].node.node_id

    # a chunk ingested before file_name/file_path were stored gets them from its source
    old = hit_node(Hit("x", 0.5, "text", "a/b.md", "", {"root": "/r", "source": "a/b.md"}))
    assert (old.metadata["file_name"], old.metadata["file_path"], old.ref_doc_id) == ("b.md", "/r/a/b.md", "/r/a/b.md")

    # the pipeline a query engine runs (no_text: the tiny model's 256 positions hold no LlamaIndex prompt)
    # (llama-index-core 0.14's no_text synthesizer reads Settings.llm whatever it is given)
    monkeypatch.setattr(Settings, "_llm", UniLLM(tiny, max_new_tokens=4))  # restored after the test
    engine = RetrieverQueryEngine.from_args(retriever, response_mode="no_text", node_postprocessors=[UniEvidence(tiny)])
    response = engine.query("capital of France")
    assert response.source_nodes and all(n.node.ref_doc_id for n in response.source_nodes)
    with pytest.raises(ValueError):
        UniRetriever(tiny, collection, top_k=0)
