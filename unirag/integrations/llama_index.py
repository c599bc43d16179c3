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
and LlamaIndex does not re-template them. Requires `llama-index-core` (>= 0.12).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
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
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "unirag.integrations.llama_index needs llama-index-core: pip install llama-index-core"
    ) from e

from unirag.retrieval.search import query_text
from unirag.model.unimodel import POOLINGS, UniModel

__all__ = ["UniEmbedding", "UniEvidence", "UniLLM", "UniRerank"]

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
def _as_hits(nodes: Sequence[NodeWithScore]) -> list:
    from unirag.retrieval.search import Hit

    return [Hit(n.node.node_id, float(n.score or 0.0), n.node.get_content(), str(n.node.metadata.get("source", "")),
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
    """Reorder the first `top_n` nodes by the same model's query likelihood, fused with their
    retrieval order: `unirag.retrieval.rerank.rerank`, what `unirag ask` runs."""

    top_n: int = Field(default=5, description="How many leading nodes to rerank.")

    @classmethod
    def class_name(cls) -> str:
        return "UniRerank"

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
                           ) -> list[NodeWithScore]:
        from unirag.retrieval.rerank import rerank

        by_id = {n.node.node_id: n for n in nodes}
        ranked = rerank(self._model, _query(query_bundle), _as_hits(nodes), self.top_n)
        return [NodeWithScore(node=by_id[hit.id].node, score=hit.score) for hit in ranked]


class UniEvidence(_OnModel):
    """Cut each node down to the sentences that answer the query (with one sentence of context on
    each side), chosen as `unirag ask` chooses its evidence (`unirag.answer.ask.select_evidence`, the
    one implementation); nodes with no chosen sentence are dropped, and the rest come in the order
    `unirag ask` shows its passages. A query engine then generates from a short, focused context."""

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
        focused = focused_hits(hits, evidence.spans)
        out = []
        for i, hit in enumerate(focused):  # each hit carries its node's id and metadata (`_as_hits`)
            if i in best:
                node = TextNode(text=hit.text, metadata=_with_pages(hit.metadata), id_=hit.id)
                out.append(NodeWithScore(node=node, score=best[i]))
        return out
