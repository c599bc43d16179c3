"""The FastAPI app: OpenAI's endpoints over one loaded UniModel (and, for the ask flow, Chroma).

    GET  /health               liveness and queue depth (no key needed: a load balancer's probe)
    GET  /v1/models            the model, and one `collection:NAME` entry per collection it made
    POST /v1/embeddings        OpenAI's embeddings
    POST /v1/chat/completions  plain chat; with `collection` (or model `collection:NAME`), the ask flow
    POST /v1/rerank            query + documents -> relevance scores (llama.cpp / Cohere / Jina shape)

Every model call runs on the one worker (`worker.py`); the event loop only parses, waits and
writes, so a slow answer never stops /health or a refusal from being answered. The app holds no
per-request state: several processes can serve the same Chroma server behind a load balancer.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from fastapi import FastAPI
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from unirag.answer.ask import AskSettings
from unirag.server import chat as chat_mod
from unirag.server.embeddings import embeddings as embed_texts
from unirag.server.errors import ApiError, api_error, error_body, install
from unirag.server.rerank import rerank as rerank_documents
from unirag.server.schemas import ChatRequest, EmbeddingRequest, RerankRequest
from unirag.server.security import Guard
from unirag.server.worker import ModelWorker

COLLECTION_MODEL = "collection:"  # a model id that names a collection: how Open WebUI picks one
MAX_BODY_BYTES = 1 << 20  # the default body limit: 1 MiB holds long chats and hundreds of inputs
QUEUE_SIZE = 16


def create_app(model, *, client=None, collection: str | None = None, model_id: str | None = None,
               api_key: str | None = None, queue_size: int = QUEUE_SIZE, max_body_bytes: int = MAX_BODY_BYTES,
               ask_settings: AskSettings = AskSettings()) -> FastAPI:
    """The app over `model` (a UniModel). `client`: a Chroma client for the ask flow (None: plain
    chat only); `collection`: the one a chat request that names none answers from (None: plain
    chat); `api_key`: required as a bearer token on every endpoint but /health."""
    model_id = model_id or model.name
    worker = ModelWorker(queue_size)

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        worker.start()
        yield
        worker.stop()

    app = FastAPI(title="unirag", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.worker = worker  # tests occupy it to see the queue refuse
    app.state.model = model
    install(app)
    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes)

    async def on_worker(run):
        try:
            return await worker.call(run)
        except Exception as err:
            raise api_error(err) from None

    @app.get("/health")
    async def health():
        return {"status": "ok", "pending": worker.pending, "queue_size": worker.queue_size}

    def _collections() -> list[str]:
        from unirag.retrieval.store import MODEL_KEY

        if client is None:
            return []
        return sorted(c.name for c in client.list_collections() if (c.metadata or {}).get(MODEL_KEY) == model.name)

    @app.get("/v1/models")
    async def models():
        try:
            names = await run_in_threadpool(_collections)
        except Exception as err:
            raise api_error(err) from None
        created = int(time.time())
        ids = [model_id] + [COLLECTION_MODEL + name for name in names]
        return {"object": "list", "data": [{"id": i, "object": "model", "created": created, "owned_by": "unirag"}
                                           for i in ids]}

    @app.post("/v1/embeddings")
    async def embeddings(request: EmbeddingRequest):
        return await on_worker(lambda: embed_texts(model, request, model_id))

    @app.post("/v1/rerank")
    @app.post("/rerank", include_in_schema=False)
    async def rerank(request: RerankRequest):
        return await on_worker(lambda: rerank_documents(model, request, model_id))

    def _collection_of(request: ChatRequest) -> str | None:
        if "collection" in request.model_fields_set:
            return request.collection  # null: plain chat, even where the server has a default
        if request.model and request.model.startswith(COLLECTION_MODEL):
            return request.model[len(COLLECTION_MODEL):]
        return collection

    def _job(request: ChatRequest) -> Iterator:
        name = _collection_of(request)
        if name is None:
            return chat_mod.plain_chat(model, request)
        if client is None:
            raise ApiError(400, "this server has no Chroma database to answer from", "collection")
        return chat_mod.ask_chat(model, client, request, name, ask_settings)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: ChatRequest):
        answering_id = request.model if request.model and request.model.startswith(COLLECTION_MODEL) else model_id
        if not request.stream:
            def whole():
                items = list(_job(request))
                return items[0], "".join(i for i in items if isinstance(i, str)), items[-1]

            head, text, tail = await on_worker(whole)
            return chat_mod.Completion(answering_id, head).whole(text, tail.completion_tokens)
        try:
            stream = worker.stream(lambda: _job(request))
            head = await stream.get()
        except Exception as err:  # QueueFull (503), or the request refused before its first piece
            raise api_error(err) from None
        include_usage = bool(request.stream_options and request.stream_options.include_usage)
        completion = chat_mod.Completion(answering_id, head, include_usage)

        async def events():
            try:
                yield completion.chunk({"role": "assistant", "content": ""}, first=True)
                tokens = 0
                async for item in stream:
                    if isinstance(item, chat_mod.Tail):
                        tokens = item.completion_tokens
                    elif item:
                        yield completion.chunk({"content": item})
            except Exception as err:  # after the status line: the error goes in the stream, as OpenAI's does
                failed = api_error(err)
                yield chat_mod.sse(error_body(failed.status, failed.message, failed.param, failed.code))
                return
            finally:
                stream.cancel()  # a client gone mid-answer frees the worker at the next piece
            yield completion.chunk({}, completion.finish_reason(tokens))
            if include_usage:
                yield completion.usage_chunk(tokens)
            yield chat_mod.sse("[DONE]")

        return StreamingResponse(events(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    return app
