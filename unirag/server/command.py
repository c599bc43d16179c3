"""`unirag serve`: the HTTP API (OpenAI-compatible) over one model loaded once.

Registered on the main app in `unirag/cli/commands.py`. The bind check and the database run before
the slow model load, so a refused start says so at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from unirag.cli.options import (COLLECTION_ENV, DEFAULT_ANSWER, DEFAULT_RERANK, AdapterOpt, AnswerOpt, DecodeCopyOpt,
                                DeviceOpt, ModelOpt, PrecisionOpt, RerankOpt, load_model)
from unirag.cli.rag_commands import DEFAULT_DB, DbOpt, TopKOpt, UrlOpt
from unirag.errors import UniragError


def serve_command(
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    precision: PrecisionOpt = "auto",
    decode_copy: DecodeCopyOpt = "int4",
    device: DeviceOpt = "auto",
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: Annotated[Optional[str], typer.Option(
        "--collection", "-c", envvar=COLLECTION_ENV, help="Answer chat requests that name no collection from this one (default: plain "
        "chat; a request picks one with `collection` in its body or model `collection:NAME`).")] = None,
    host: Annotated[str, typer.Option(help="Address to listen on. Anything but loopback needs --api-key.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    api_key: Annotated[Optional[str], typer.Option(
        "--api-key", envvar="UNIRAG_API_KEY", show_default=False,
        help="Bearer token every endpoint but /health requires (also from UNIRAG_API_KEY).")] = None,
    queue_size: Annotated[int, typer.Option(
        min=0, help="Requests that may wait while the model answers another; more get 503.")] = 16,
    max_body_mb: Annotated[float, typer.Option(help="Larger request bodies get 413.")] = 1.0,
    top_k: TopKOpt = 3,
    rerank: RerankOpt = DEFAULT_RERANK,
    answer: AnswerOpt = DEFAULT_ANSWER,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Longest answer of the ask flow, in tokens, when a "
                                                "request sets no max_tokens.")] = 64,
):
    """Serve the model over HTTP: OpenAI's /v1/embeddings and /v1/chat/completions (with `collection`:
    answers from your documents, with sources), /v1/rerank, /v1/models, /health."""
    import uvicorn

    from unirag.answer.ask import AskSettings
    from unirag.retrieval.store import connect, open_collection
    from unirag.server.app import create_app
    from unirag.server.security import check_bind

    api_key = api_key or None  # an empty UNIRAG_API_KEY is no key
    check_bind(host, api_key)
    if max_body_mb <= 0:
        raise UniragError("--max-body-mb must be above 0")
    settings = AskSettings(top_k=top_k, rerank=rerank, answer=answer, max_new_tokens=max_new_tokens)
    # no database yet is fine for embeddings and plain chat; a named collection needs one
    has_db = bool(chroma_url) or Path(db).exists()
    client = connect(db, chroma_url, must_exist=collection is not None) if has_db or collection else None
    uni = load_model(model, adapter, precision, decode_copy=decode_copy, device=device)
    if collection is not None:
        open_collection(client, collection, uni)  # a missing or foreign collection fails now, not per request
    app = create_app(uni, client=client, collection=collection, model_id=model, api_key=api_key,
                     queue_size=queue_size, max_body_bytes=int(max_body_mb * 2**20), ask_settings=settings)
    where = f"http://{host if ':' not in host else f'[{host}]'}:{port}/v1"
    typer.echo(f"unirag serve: {uni.name} on {where} ({'API key required' if api_key else 'no API key'}; "
               f"{'collection ' + repr(collection) if collection else 'plain chat unless a request names a collection'}"
               f"{'' if client else '; no database at ' + str(db)}). Ctrl-C stops it.")
    uvicorn.run(app, host=host, port=port, log_level="info", server_header=False)
