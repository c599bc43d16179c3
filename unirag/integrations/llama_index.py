"""LlamaIndex adapters over one in-memory `UniModel`: an embedding model and an LLM, same weights.

    from llama_index.core import Settings
    from unirag import UniModel
    from unirag.integrations.llama_index import UniEmbedding, UniLLM

    model = UniModel.load()
    Settings.embed_model = UniEmbedding(model)
    Settings.llm = UniLLM(model)

Both adapters hold the model object itself (a pydantic private attribute, never validated or
copied), so an app embeds and generates with one copy of the weights in memory, which
`llama-index-embeddings-huggingface` / `llama-index-llms-huggingface` cannot do: they load
their own model from a name.

UniLLM reports `is_chat_model=True` and implements the chat methods itself, passing the
messages as role/content dicts to `UniModel.generate`, so the model's own chat template is used
and LlamaIndex does not re-template them.

Over a unirag collection (`unirag ingest`), `UniRetriever` is a LlamaIndex retriever that runs
unirag's own hybrid search (`unirag.retrieval.search.retrieve`); `UniRerank` and `UniEvidence`
are node postprocessors running the ask flow's rerank and evidence selection on any nodes.
Requires `llama-index-core` (>= 0.12).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
    from llama_index.core.base.llms.types import (
        ChatMessage,
        ChatResponse,
        ChatResponseAsyncGen,
        ChatResponseGen,
        CompletionResponse,
        CompletionResponseAsyncGen,
        CompletionResponseGen,
        LLMMetadata,
        MessageRole,
    )
    from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
    from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
    from llama_index.core.llms.custom import CustomLLM
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.callbacks import CallbackManager
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo, TextNode
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "unirag.integrations.llama_index needs llama-index-core: pip install llama-index-core"
    ) from e

from unirag.retrieval.search import query_text
from unirag.model.unimodel import POOLINGS, UniModel

__all__ = ["UniEmbedding", "UniEvidence", "UniLLM", "UniRerank", "UniRetriever"]

# LlamaIndex roles -> the roles chat templates know
_ROLE_MAP = {
    MessageRole.SYSTEM.value: "system",
    MessageRole.DEVELOPER.value: "system",
    MessageRole.USER.value: "user",
    MessageRole.ASSISTANT.value: "assistant",
    MessageRole.CHATBOT.value: "assistant",
    MessageRole.MODEL.value: "assistant",
    MessageRole.TOOL.value: "tool",
    MessageRole.FUNCTION.value: "tool",
}
_GENERATE_KWARGS = ("max_new_tokens", "temperature", "top_p", "seed")
_DONE = object()


def _check_model(model: Any) -> None:
    if not isinstance(model, UniModel):
        raise TypeError(f"expected a unirag.UniModel, got {type(model).__name__}")


async def _aiterate(iterator: Iterator[Any]):
    """Drive a blocking iterator from a worker thread, one item at a time.

    UniModel.generate_ids holds no lock or grad mode across a yield, so each step may run on
    a different thread; the event loop stays free while a token is being computed.
    """
    while True:
        item = await asyncio.to_thread(next, iterator, _DONE)
        if item is _DONE:
            return
        yield item


# ---------------------------------------------------------------------------- embeddings
class UniEmbedding(BaseEmbedding):
    """A LlamaIndex embedding model over an already loaded `UniModel`.

    `pooling` (default None: the model's own, "eos" for UniMAE) picks how hidden states become a
    vector; `query_instruction` / `text_instruction` are prepended (as `instruction=`) to
    queries / documents. Batches of `embed_batch_size` texts go to one `UniModel.embed` call.
    Vectors are L2-normalised, so cosine and dot-product similarity agree.
    """

    pooling: Optional[str] = Field(
        default=None, description="Pooling: eos, mean, last or echo; None means the model's default.")
    query_instruction: Optional[str] = Field(
        default=None, description="Instruction prepended to queries before embedding.")
    text_instruction: Optional[str] = Field(
        default=None, description="Instruction prepended to documents before embedding.")

    _model: UniModel = PrivateAttr()

    def __init__(self, model: UniModel, **kwargs: Any) -> None:
        _check_model(model)
        kwargs.setdefault("model_name", model.name)
        super().__init__(**kwargs)
        self._model = model

    @field_validator("pooling")
    @classmethod
    def _valid_pooling(cls, pooling: Optional[str]) -> Optional[str]:
        if pooling is not None and pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        return pooling

    @classmethod
    def class_name(cls) -> str:
        return "UniEmbedding"

    @property
    def model(self) -> UniModel:
        """The wrapped UniModel (the same object that was passed in)."""
        return self._model

    def _embed(self, texts: list[str], instruction: Optional[str]) -> list[Embedding]:
        vectors = self._model.embed(list(texts), pooling=self.pooling, batch_size=self.embed_batch_size,
                                    instruction=instruction)
        return vectors.tolist()

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embed([query_text(self._model, query)], self.query_instruction)[0]  # as unirag's own search

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._embed([text], self.text_instruction)[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._embed(texts, self.text_instruction)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


# ---------------------------------------------------------------------------- LLM
class UniLLM(CustomLLM):
    """A LlamaIndex LLM over an already loaded `UniModel` (greedy by default).

    `max_new_tokens`, `temperature`, `top_p` and `seed` are fields and may also be given per
    call as keyword arguments to `complete` / `chat` and their stream and async versions.
    """

    max_new_tokens: int = Field(default=256, gt=0, description="Most tokens to generate per answer.")
    temperature: float = Field(default=0.0, ge=0.0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling threshold.")
    seed: Optional[int] = Field(default=None, description="Seed for sampling (temperature > 0).")
    model_name: str = Field(default="", description="Name reported in metadata; defaults to the model's.")

    _model: UniModel = PrivateAttr()

    def __init__(self, model: UniModel, **kwargs: Any) -> None:
        _check_model(model)
        kwargs.setdefault("model_name", model.name)
        super().__init__(**kwargs)
        self._model = model

    @classmethod
    def class_name(cls) -> str:
        return "UniLLM"

    @property
    def model(self) -> UniModel:
        """The wrapped UniModel (the same object that was passed in)."""
        return self._model

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(
            context_window=self._model.context_window,
            num_output=self.max_new_tokens,
            is_chat_model=True,
            is_function_calling_model=False,
            model_name=self.model_name or self._model.name,
        )

    # -- helpers
    def _generate_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """Field values, overridden by per-call keyword arguments; other keywords are ignored."""
        out = {name: getattr(self, name) for name in _GENERATE_KWARGS}
        out.update({k: v for k, v in kwargs.items() if k in _GENERATE_KWARGS and v is not None})
        return out

    def _prompt(self, prompt: str, formatted: bool) -> tuple[str, Optional[str]]:
        """(prompt, system) for UniModel.generate; the system prompt is added when not formatted."""
        if formatted:
            return prompt, None
        return self.completion_to_prompt(prompt), self.system_prompt or None

    @staticmethod
    def _messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
        out = []
        for m in messages:
            role = m.role.value if isinstance(m.role, MessageRole) else str(m.role)
            out.append({"role": _ROLE_MAP.get(role, role), "content": m.content or ""})
        return out

    def _stream_completion(self, pieces: Iterator[str]) -> CompletionResponseGen:
        text = ""
        for piece in pieces:
            text += piece
            yield CompletionResponse(text=text, delta=piece)

    def _stream_chat(self, pieces: Iterator[str]) -> ChatResponseGen:
        text = ""
        for piece in pieces:
            text += piece
            yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=piece)

    # -- completion
    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        prompt, system = self._prompt(prompt, formatted)
        text = self._model.generate(prompt, system=system, **self._generate_kwargs(kwargs))
        return CompletionResponse(text=text)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        prompt, system = self._prompt(prompt, formatted)
        pieces = self._model.generate(prompt, system=system, stream=True, **self._generate_kwargs(kwargs))
        return self._stream_completion(pieces)

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        prompt, system = self._prompt(prompt, formatted)
        text = await asyncio.to_thread(self._model.generate, prompt, system=system,
                                       **self._generate_kwargs(kwargs))
        return CompletionResponse(text=text)

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False,
                               **kwargs: Any) -> CompletionResponseAsyncGen:
        prompt, system = self._prompt(prompt, formatted)
        pieces = self._model.generate(prompt, system=system, stream=True, **self._generate_kwargs(kwargs))

        async def gen() -> CompletionResponseAsyncGen:
            text = ""
            async for piece in _aiterate(pieces):
                text += piece
                yield CompletionResponse(text=text, delta=piece)

        return gen()

    # -- chat: messages go to the model's own chat template
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = self._model.generate(self._messages(messages), **self._generate_kwargs(kwargs))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        pieces = self._model.generate(self._messages(messages), stream=True, **self._generate_kwargs(kwargs))
        return self._stream_chat(pieces)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = await asyncio.to_thread(self._model.generate, self._messages(messages),
                                       **self._generate_kwargs(kwargs))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        pieces = self._model.generate(self._messages(messages), stream=True, **self._generate_kwargs(kwargs))

        async def gen() -> ChatResponseAsyncGen:
            text = ""
            async for piece in _aiterate(pieces):
                text += piece
                yield ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text), delta=piece)

        return gen()


# -- node postprocessors: the ask flow's rerank and evidence selection, in LlamaIndex's terms
def _source(metadata: dict) -> str:
    """A node's file for unirag's labels and citations: `source`, else what LlamaIndex readers set."""
    return str(metadata.get("source") or metadata.get("file_path") or metadata.get("file_name") or "")


def _as_hits(nodes: Sequence[NodeWithScore]) -> list:
    from unirag.retrieval.search import Hit

    return [Hit(n.node.node_id, float(n.score or 0.0), n.node.get_content(), _source(n.node.metadata),
                str(n.node.metadata.get("heading", "")), dict(n.node.metadata)) for n in nodes]


def _with_pages(metadata: dict) -> dict:
    """A node's metadata, with a PDF chunk's pages as a citation reads them ("pages": "pp. 12-13",
    from its `page_start` / `page_end`), which LlamaIndex shows the LLM and the user with its text."""
    from unirag.retrieval.search import pages_label

    pages = pages_label(metadata)
    return {**metadata, "pages": pages} if pages else dict(metadata)


def _query(query_bundle: Optional[QueryBundle]) -> str:
    if query_bundle is None or not query_bundle.query_str.strip():
        raise ValueError("this postprocessor needs the query: call it with query_bundle or query_str")
    return query_bundle.query_str


class _OnModel(BaseNodePostprocessor):
    """A node postprocessor that holds the one UniModel (never copied or validated)."""

    _model: UniModel = PrivateAttr()

    def __init__(self, model: UniModel, **kwargs: Any) -> None:
        _check_model(model)
        super().__init__(**kwargs)
        self._model = model


class UniRerank(_OnModel):
    """The `top_n` best nodes, best first (as LlamaIndex's rerankers return them): the first
    `depth` nodes (default: all) reordered by the same model's query likelihood, fused with their
    retrieval order (`unirag.retrieval.rerank.rerank`, what `unirag ask` runs); score: the fused
    score. Nodes past `depth` keep their retrieval order after the reranked ones."""

    top_n: int = Field(default=5, gt=0, description="How many nodes to return, best first.")
    depth: Optional[int] = Field(default=None, gt=0, description="How many leading nodes the model reads "
                                 "(one forward pass each); None: every node.")

    @classmethod
    def class_name(cls) -> str:
        return "UniRerank"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> list[NodeWithScore]:
        from unirag.retrieval.rerank import rerank

        question = _query(query_bundle)
        if not nodes:
            return []
        ranked = rerank(self._model, question, _as_hits(nodes), self.depth or len(nodes))
        by_id = {n.node.node_id: n for n in nodes}
        return [NodeWithScore(node=by_id[hit.id].node, score=hit.score) for hit in ranked[: self.top_n]]


class UniEvidence(_OnModel):
    """Cut each node down to the sentences that answer the query (with one sentence of context on
    each side), chosen as `unirag ask` chooses its evidence (`unirag.answer.ask.select_evidence`, the
    one implementation); nodes with no chosen sentence are dropped, and the rest come in the order
    `unirag ask` shows its passages. A query engine then generates from a short, focused context.
    Each kept node is a copy of its input node with the shorter text: id, metadata and
    relationships (its source document, neighbours) stay as they were."""

    max_words: int = Field(default=54, description="Words of evidence kept over all nodes.")

    @classmethod
    def class_name(cls) -> str:
        return "UniEvidence"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> list[NodeWithScore]:
        from unirag.answer.ask import AskSettings, focused_hits, select_evidence

        question = _query(query_bundle)
        if not nodes:
            return []
        hits, evidence = select_evidence(self._model, question, _as_hits(nodes),
                                         AskSettings(evidence_words=self.max_words))
        best = {}
        for span in evidence.spans:
            best.setdefault(span.hit, span.score)
        by_id = {n.node.node_id: n.node for n in nodes}
        out = []
        for i, hit in enumerate(focused_hits(hits, evidence.spans)):  # each hit carries its node's id
            if i in best:
                node = by_id[hit.id]
                # a copy with the chosen text; its stored embedding was of the whole text
                cut = node.model_copy(update={"text": hit.text, "embedding": None,
                                              "metadata": _with_pages(dict(node.metadata)),
                                              "relationships": dict(node.relationships)})
                out.append(NodeWithScore(node=cut, score=best[i]))
        return out


# -- a retriever over a unirag collection
def hit_node(hit) -> TextNode:
    """A LlamaIndex node for a retrieved chunk: its id, text and metadata, with `file_name` and
    `file_path` (as LlamaIndex readers set them) filled from `source` where the chunk lacks them
    (collections ingested before they were stored), and its file as the SOURCE relationship."""
    metadata = _with_pages(hit.metadata)
    source = hit.source or str(metadata.get("source", ""))
    if source:
        root = str(metadata.get("root", ""))
        metadata.setdefault("file_path", str(Path(root) / source) if root else source)
        metadata.setdefault("file_name", Path(source).name)
    node = TextNode(id_=hit.id, text=hit.text, metadata=metadata)
    if metadata.get("file_path"):
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=str(metadata["file_path"]))
    # ingest's bookkeeping, of no use to an LLM: kept in the metadata, never in prompts or embeddings
    private = [k for k in metadata if k in _BOOKKEEPING]
    node.excluded_llm_metadata_keys = private
    node.excluded_embed_metadata_keys = private
    return node


_BOOKKEEPING = ("root", "content_hash", "version", "model", "embed_key", "chunk_index", "n_chunks", "n_tokens")


class UniRetriever(BaseRetriever):
    """A LlamaIndex retriever over a unirag collection: `unirag.retrieval.search.retrieve`, the
    search `unirag retrieve` and `ask` run (hybrid dense + BM25 by default), one node per chunk.

        retriever = UniRetriever(model, collection, top_k=5, rerank=15, sources=["guide/*"])
        query_engine = RetrieverQueryEngine.from_args(retriever, llm=UniLLM(model))

    `collection`: a Chroma collection `unirag ingest` made with this model
    (`unirag.retrieval.store.open_collection`). `rerank`: candidates the same model reorders (0:
    none); `sources`: fnmatch-style globs over the chunks' file paths (default: every file);
    `mode`: hybrid, dense or lexical. A node's score is the hit's (`Hit.score`)."""

    def __init__(self, model: UniModel, collection: Any, top_k: int = 5, rerank: int = 0,
                 sources: Sequence[str] = (), mode: str = "hybrid",
                 callback_manager: Optional[CallbackManager] = None, verbose: bool = False) -> None:
        from unirag.retrieval import store
        from unirag.retrieval.search import RETRIEVAL_MODES

        _check_model(model)
        if top_k < 1 or rerank < 0 or mode not in RETRIEVAL_MODES:
            raise ValueError(f"top_k must be at least 1, rerank 0 or more, and mode one of "
                             f"{', '.join(RETRIEVAL_MODES)}")
        store.check_model(collection, model)  # a collection another model made fails here, not per query
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self._model, self._collection = model, collection
        self.top_k, self.rerank, self.mode = top_k, rerank, mode
        self.sources = tuple([sources] if isinstance(sources, str) else sources)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        from unirag.retrieval.search import retrieve

        hits = retrieve(self._model, self._collection, query_bundle.query_str, self.top_k, self.mode, self.rerank,
                        sources=self.sources)
        return [NodeWithScore(node=hit_node(hit), score=hit.score) for hit in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
