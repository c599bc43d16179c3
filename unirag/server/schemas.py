"""Request bodies, as OpenAI's (and llama.cpp's rerank) clients send them, with unirag's extras.

Fields a client may send that unirag does not act on (user, stop, logprobs, tools,
response_format, presence_penalty, ...) are accepted and ignored, as other OpenAI-compatible
servers do, so stock clients work unchanged; n > 1, token-id input and non-text content parts are
refused with a 400.
Sizes are bounded here (how many inputs, messages, documents; how long each is), on top of the
server's limit on the whole body.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_ITEMS = 256          # inputs to embed, messages, documents to rerank, per request
MAX_TEXT_CHARS = 100_000  # one input, message or document; the model reads far fewer tokens anyway
MAX_TOP_K = 20           # passages one answer may retrieve and cite


class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown fields: ignored, as OpenAI's own API does

    model: str | None = None  # one model is served; any name is answered by it


def _text(value: str, what: str) -> str:
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"{what} is longer than {MAX_TEXT_CHARS} characters")
    return value


class EmbeddingRequest(_Body):
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    # unirag's extra: "query" embeds the text after the adapter's query cue, as its searches do
    # (`retrieval.search.query_text`); "document" (default) embeds it as given, as `unirag embed` does
    input_type: Literal["query", "document"] = "document"

    @field_validator("input")
    @classmethod
    def _texts(cls, value):
        texts = [value] if isinstance(value, str) else value
        if not texts:
            raise ValueError("input is empty; send a string or a list of strings")
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("token-id input is not supported; send text")
        if len(texts) > MAX_ITEMS:
            raise ValueError(f"at most {MAX_ITEMS} inputs per request")
        for text in texts:
            if not text:
                raise ValueError("an input is an empty string")
            _text(text, "an input")
        return value

    @property
    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[dict[str, Any]] | None = None

    @property
    def text(self) -> str:
        """The content as one text: a list of parts must hold text parts only."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part["text"] for part in self.content)

    @field_validator("content")
    @classmethod
    def _bounded(cls, value):
        if isinstance(value, str):
            _text(value, "a message")
        elif isinstance(value, list):
            for part in value:
                if part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ValueError(f"only text content is supported, not {part.get('type')!r} parts")
            _text("".join(p["text"] for p in value), "a message")
        return value


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(_Body):
    messages: list[Message] = Field(min_length=1, max_length=MAX_ITEMS)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    # OpenAI's default is 1; unirag answers greedily unless asked to sample, like its CLI
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    seed: int | None = None
    n: int = Field(default=1, ge=1, le=1)
    # unirag's extras (OpenAI clients send them through extra_body): answer from this collection
    collection: str | None = Field(default=None, min_length=1, max_length=512)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K)
    answer: Literal["extractive", "generated", "both"] | None = None

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens


class RerankDocument(BaseModel):
    model_config = ConfigDict(extra="allow")

    text: str


class RerankRequest(_Body):
    query: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    documents: list[str | RerankDocument] = Field(min_length=1, max_length=MAX_ITEMS)
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool = False

    @field_validator("documents")
    @classmethod
    def _bounded(cls, value):
        for doc in value:
            _text(doc if isinstance(doc, str) else doc.text, "a document")
        return value

    @property
    def texts(self) -> list[str]:
        return [d if isinstance(d, str) else d.text for d in self.documents]
