"""`/v1/chat/completions`: plain chat with the model, or the ask flow over a collection.

Both run as one worker job that yields a `Head` first (the prompt's size, and for the ask flow the
sources), then the answer's text pieces. Everything that can refuse the request (an unknown
collection, a prompt too long, an empty question) happens before the Head, so the endpoint can
still answer it with an error status; a streamed response only starts once the Head is there.

With a `collection`, the last message is the question and earlier user/assistant pairs are the
history, as `unirag chat` keeps them; the ask flow writes its own system prompt, so system
messages are not passed on. The answer text carries its `[n]` citations and the response a
top-level `sources` list numbered like them (in the first chunk when streamed).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from unirag.answer.ask import AskSettings
from unirag.server.errors import ApiError
from unirag.server.schemas import ChatRequest, Message

DEFAULT_MAX_TOKENS = 256  # plain chat's answer length when the request sets none (as `unirag generate`)


@dataclass
class Tail:
    completion_tokens: int


@dataclass
class Head:
    prompt_tokens: int
    max_tokens: int | None  # None: the answer is never cut at a token count (the ask flow ends its own)
    sources: list[dict] | None = None  # the ask flow's passages, [1] first


def _messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    # "developer" is OpenAI's newer name for the system role; chat templates know only "system"
    return [{"role": "system" if m.role == "developer" else m.role, "content": m.text} for m in messages]


def history_and_question(messages: Sequence[Message]) -> tuple[list[tuple[str, str]], str]:
    """The last user message as the question; earlier user turns each paired with the assistant
    reply that follows them (a user turn left unanswered is dropped)."""
    if messages[-1].role != "user" or not messages[-1].text.strip():
        raise ApiError(400, "with a collection, the last message must be the user's question", "messages")
    history, asked = [], None
    for message in messages[:-1]:
        if message.role == "user":
            asked = message.text
        elif message.role == "assistant" and asked is not None:
            history.append((asked, message.text))
            asked = None
    return history, messages[-1].text.strip()


def source(number: int, hit, spans: Sequence) -> dict:
    """One cited passage: its number, file, heading, page(s) where the reader recorded them, the
    sentences the answer quotes from it (`spans`, numbered by passage), and its whole text."""
    from unirag.answer.sentences import plain

    meta = hit.metadata or {}
    out = {"index": number, "label": hit.label, "file": hit.source, "heading": hit.heading or None}
    if meta.get("page_start") is not None:
        out["page"] = meta["page_start"]
        out["page_end"] = meta.get("page_end", meta["page_start"])
    out["quotes"] = [plain(s.text, s.code) for s in spans if s.hit == number - 1]
    out["text"] = hit.text
    return out


def quoted(result, settings: AskSettings) -> list:
    """The spans the answer quotes, as `ask` streams them: in reading order, only the closest one
    when it abstains; a generated answer quotes none, and its sources list the evidence it was
    written from."""
    from unirag.answer.evidence import reading_order

    if settings.answer == "generated" and not result.abstained:
        return []
    spans = reading_order(result.evidence.spans)
    return spans[:1] if result.abstained else spans


def open_collection(client, name: str, model):
    """The named collection, checked against the model; 404 when there is none."""
    from chromadb.errors import InvalidArgumentError, NotFoundError

    from unirag.errors import UniragError
    from unirag.retrieval.store import check_model

    try:
        collection = client.get_collection(name)
    except NotFoundError:
        raise ApiError(404, f"no collection {name!r}; ingest one with `unirag ingest FOLDER --collection {name}`",
                       "collection", "collection_not_found") from None
    except (ValueError, InvalidArgumentError) as err:
        raise ApiError(400, f"bad collection name {name!r}: {err}", "collection") from None
    try:
        check_model(collection, model)
    except UniragError as err:
        raise ApiError(400, str(err), "collection", "collection_model_mismatch") from None
    return collection


def plain_chat(model, request: ChatRequest) -> Iterator:
    messages = _messages(request.messages)
    ids = model.prompt_ids(messages)
    prompt_tokens = len(ids)
    room = model.context_window - prompt_tokens
    if room < 1:
        raise ApiError(400, f"the messages take {prompt_tokens} tokens, the model's whole context window of "
                       f"{model.context_window}; send fewer or shorter ones", "messages", "context_length_exceeded")
    max_tokens = request.token_limit or min(DEFAULT_MAX_TOKENS, room)
    if max_tokens > room:
        raise ApiError(400, f"the messages take {prompt_tokens} tokens: with max_tokens={max_tokens} they pass the "
                       f"model's context window of {model.context_window}", "max_tokens", "context_length_exceeded")
    generated = [0]

    def counting(token_ids):
        for token_id in token_ids:
            generated[0] += 1
            yield token_id

    # `model.generate` in its parts, to count the tokens it generates (stop tokens are not counted)
    pieces = model.text_pieces(counting(model.generate_ids(ids, max_tokens, request.temperature, request.top_p,
                                                           request.seed)))
    yield Head(prompt_tokens, max_tokens)
    yield from pieces
    yield Tail(generated[0])


def ask_chat(model, client, request: ChatRequest, name: str, defaults: AskSettings) -> Iterator:
    from unirag.answer.ask import ask

    history, question = history_and_question(request.messages)
    collection = open_collection(client, name, model)
    settings = replace(defaults, top_k=request.top_k or defaults.top_k, answer=request.answer or defaults.answer,
                       max_new_tokens=request.token_limit or defaults.max_new_tokens,
                       temperature=request.temperature)
    query = f"{history[-1][0]}\n{question}" if history else question  # follow-ups keep their topic, as `unirag chat`
    result = ask(model, collection, question, settings, history, query)
    sources = [source(i, hit, quoted(result, settings)) for i, hit in enumerate(result.hits, 1)]
    yield Head(len(model.prompt_ids(_messages(request.messages))), None, sources)
    yield from counted(model, result.stream())


def counted(model, pieces: Iterator[str]) -> Iterator:
    """The pieces, then a Tail with their token count (quotes and generated text together, so
    counted again; here, on the worker: a fast tokenizer used from two threads at once can fail)."""
    text = ""
    for piece in pieces:
        text += piece
        yield piece
    yield Tail(len(model.tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0)


# ------------------------------------------------------------------ the response shapes
class Completion:
    """Builds one completion's response objects (whole, or as chunks) under one id."""

    def __init__(self, model_id: str, head: Head, include_usage: bool = False):
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model_id, self.head, self.include_usage = model_id, head, include_usage

    def _base(self, kind: str) -> dict:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model_id,
                "system_fingerprint": None}

    def finish_reason(self, completion_tokens: int) -> str:
        return "length" if self.head.max_tokens and completion_tokens >= self.head.max_tokens else "stop"

    def usage(self, completion_tokens: int) -> dict:
        return {"prompt_tokens": self.head.prompt_tokens, "completion_tokens": completion_tokens,
                "total_tokens": self.head.prompt_tokens + completion_tokens}

    def whole(self, text: str, completion_tokens: int) -> dict:
        out = self._base("chat.completion")
        out["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                           "logprobs": None, "finish_reason": self.finish_reason(completion_tokens)}]
        out["usage"] = self.usage(completion_tokens)
        if self.head.sources is not None:
            out["sources"] = self.head.sources
        return out

    def chunk(self, delta: dict, finish_reason: str | None = None, first: bool = False) -> str:
        out = self._base("chat.completion.chunk")
        out["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        if self.include_usage:
            out["usage"] = None
        if first and self.head.sources is not None:
            out["sources"] = self.head.sources
        return sse(out)

    def usage_chunk(self, completion_tokens: int) -> str:
        out = self._base("chat.completion.chunk")
        out["choices"] = []
        out["usage"] = self.usage(completion_tokens)
        return sse(out)


def sse(data: dict | str) -> str:
    """One server-sent event as OpenAI's API writes them."""
    return f"data: {data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)}\n\n"
