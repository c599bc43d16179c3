"""`unirag serve` on the tiny model, driven over real HTTP by the official `openai` client (and
httpx for what that client hides): one live server per module, a real Chroma collection."""

from __future__ import annotations

import base64
import json
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import openai
import pytest

from live import live_server

from unirag.answer.ask import AskSettings
from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.server.app import create_app
from unirag.server.worker import Job

QUEUE = 8
MAX_BODY = 64 * 1024
# no rerank, no abstention by similarity: the tiny random model's scores mean nothing, and the
# tests are about the server, not the answer's quality
SETTINGS = AskSettings(rerank=0, max_new_tokens=8)
DOCS = {
    "cats.md": "# Cats\n\nThe cat sat on the mat. A dog ran in the park.\n\n## Food\n\nThe cat eats fish.\n",
    "paris.md": "# Paris\n\nParis is the capital of France. Rust has ownership and borrowing.\n",
}


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    from unirag import UniModel

    return UniModel.load(str(tiny_model_dir), precision="fp32")


@pytest.fixture(scope="module")
def chroma(model, tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-docs")
    for name, text in DOCS.items():
        (root / name).write_text(text)
    client = store.connect(tmp_path_factory.mktemp("serve-db"))
    run_ingest(model, store.open_collection(client, "docs", model, create=True), root,
               settings=ChunkSettings(chunk_size=32, overlap=8))
    return client


@pytest.fixture(scope="module")
def server(model, chroma):
    app = create_app(model, client=chroma, model_id="tiny", queue_size=QUEUE, max_body_bytes=MAX_BODY,
                     ask_settings=SETTINGS)
    with live_server(app) as url:
        yield app, url


@pytest.fixture(scope="module")
def url(server):
    return server[1]


@pytest.fixture(scope="module")
def client(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=60)


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ---------------------------------------------------------------------- embeddings
def test_embeddings_are_the_models_eos_embeddings(client, model):
    texts = ["The cat sat on the mat.", "Paris is the capital of France."]
    expected = model.embed(texts, pooling="eos")
    got = client.embeddings.create(model="tiny", input=texts)  # the client asks for base64 and decodes it
    assert [d.index for d in got.data] == [0, 1]
    for row, want in zip(got.data, expected):
        assert cosine(row.embedding, want) >= 0.999
    assert got.usage.prompt_tokens > 0
    one = client.embeddings.create(model="tiny", input=texts[0], encoding_format="float")
    assert len(one.data) == 1 and cosine(one.data[0].embedding, expected[0]) >= 0.999


def test_a_query_embedding_gets_the_adapters_query_cue(url, model):
    model.query_prefix = "Question: "  # what a `pairs` adapter records; the tiny model has none
    try:
        body = httpx.post(f"{url}/v1/embeddings", json={"input": "Where is Paris?", "input_type": "query"}).json()
        want = model.embed(["Question: Where is Paris?"])[0]
    finally:
        model.query_prefix = ""
    assert cosine(body["data"][0]["embedding"], want) >= 0.999


def test_base64_embeddings_are_little_endian_float32(url, model):
    body = httpx.post(f"{url}/v1/embeddings", json={"input": ["A dog ran."], "encoding_format": "base64"}).json()
    vector = np.frombuffer(base64.b64decode(body["data"][0]["embedding"]), dtype="<f4")
    assert cosine(vector, model.embed(["A dog ran."])[0]) >= 0.999


# ---------------------------------------------------------------------- chat
def test_plain_chat_is_the_models_greedy_answer(client, model):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where is Paris?"}]
    want = model.generate(messages, max_new_tokens=12)
    got = client.chat.completions.create(model="tiny", messages=messages, max_tokens=12)
    assert got.object == "chat.completion"
    assert got.choices[0].message.role == "assistant"
    assert got.choices[0].message.content == want
    assert got.choices[0].finish_reason in ("stop", "length")
    assert got.usage.prompt_tokens == len(model.prompt_ids(messages))
    assert got.usage.completion_tokens <= 12
    assert "sources" not in (got.model_extra or {})


def test_chat_with_a_collection_answers_with_sources(client):
    got = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "What does the cat eat?"}],
                                         extra_body={"collection": "docs"})
    text = got.choices[0].message.content
    sources = got.model_extra["sources"]
    assert text and sources
    assert [s["index"] for s in sources] == list(range(1, len(sources) + 1))
    assert {s["file"] for s in sources} <= set(DOCS)
    for s in sources:
        assert s["label"].startswith(s["file"]) and s["text"] and isinstance(s["quotes"], list)
    cited = {int(n) for n in re.findall(r"\[(\d+)\]", text)}
    assert cited and cited <= {s["index"] for s in sources}
    quotes = [q for s in sources for q in s["quotes"]]
    assert quotes and all(q in text for q in quotes)  # what each source says it gave the answer


def test_a_collection_model_id_picks_the_collection(client):
    ids = [m.id for m in client.models.list().data]
    assert ids[0] == "tiny" and "collection:docs" in ids
    got = client.chat.completions.create(model="collection:docs",
                                         messages=[{"role": "user", "content": "Where is Paris?"}])
    assert got.model == "collection:docs" and got.model_extra["sources"]


def test_streaming_sends_openai_chunks_then_done(client, url, model):
    messages = [{"role": "user", "content": "Tell me about cats."}]
    whole = client.chat.completions.create(model="tiny", messages=messages, max_tokens=10).choices[0].message.content
    chunks = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=10, stream=True,
                                                 stream_options={"include_usage": True}))
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == whole
    assert chunks[-2].choices[0].finish_reason in ("stop", "length")
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    # the raw events: every one a JSON chunk, the last `data: [DONE]`
    with httpx.stream("POST", f"{url}/v1/chat/completions", timeout=60,
                      json={"messages": messages, "stream": True, "max_tokens": 4}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line[len("data: "):] for line in response.iter_lines() if line]
    assert events[-1] == "[DONE]"
    assert all(json.loads(e)["object"] == "chat.completion.chunk" for e in events[:-1])


def test_a_streamed_answer_from_a_collection_carries_its_sources_first(client):
    question = [{"role": "user", "content": "What does the cat eat?"}]
    whole = client.chat.completions.create(model="tiny", messages=question, extra_body={"collection": "docs"})
    chunks = list(client.chat.completions.create(model="tiny", messages=question, stream=True,
                                                 extra_body={"collection": "docs"}))
    assert chunks[0].model_extra["sources"] == whole.model_extra["sources"]
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == whole.choices[0].message.content


def test_a_request_picks_its_answer_mode_and_passage_count(client):
    got = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "Where is Paris?"}],
                                         max_tokens=6, extra_body={"collection": "docs", "top_k": 1,
                                                                   "answer": "generated"})
    assert len(got.model_extra["sources"]) == 1 and got.choices[0].message.content


def test_chat_history_reaches_the_ask_flow(client):
    messages = [{"role": "user", "content": "Where is Paris?"}, {"role": "assistant", "content": "In France."},
                {"role": "user", "content": "And what about Rust?"}]
    got = client.chat.completions.create(model="tiny", messages=messages, extra_body={"collection": "docs"})
    assert got.model_extra["sources"]


def test_a_source_gives_its_pages_when_the_reader_recorded_them():
    from unirag.answer.evidence import Span
    from unirag.retrieval.search import Hit
    from unirag.server.chat import source

    hit = Hit("id", 1.0, "Some text. More text.", "book.pdf", "Intro", {"page_start": 3, "page_end": 4})
    out = source(1, hit, [Span(0, 0, 10, "Some text."), Span(1, 0, 4, "Else")])
    assert (out["file"], out["page"], out["page_end"], out["quotes"]) == ("book.pdf", 3, 4, ["Some text."])
    assert "page" not in source(1, Hit("id", 1.0, "x", "a.md"), [])


# ---------------------------------------------------------------------- rerank, models, health
def test_rerank_orders_documents_by_the_models_likelihood(url, model):
    from unirag.model.scoring import question_logprobs

    docs = ["The cat sat on the mat.", "Paris is the capital of France.", "Rust has ownership."]
    body = httpx.post(f"{url}/v1/rerank", json={"model": "tiny", "query": "Where is Paris?", "documents": docs,
                                                "top_n": 2, "return_documents": True}).json()
    want = question_logprobs(model, "Where is Paris?", docs)
    order = sorted(range(3), key=lambda i: -want[i])[:2]
    assert [r["index"] for r in body["results"]] == order
    for r in body["results"]:
        assert r["relevance_score"] == pytest.approx(want[r["index"]], abs=1e-5)
        assert r["document"]["text"] == docs[r["index"]]


def test_health_and_models(url, client):
    assert httpx.get(f"{url}/health").json()["status"] == "ok"
    assert client.models.list().data[0].id == "tiny"


# ---------------------------------------------------------------------- refusals
def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize("path, body, param", [
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2}, "n"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages.0.content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "assistant", "content": "hi"}], "collection": "docs"}, "messages"),
    ("/v1/embeddings", {"input": [[1, 2, 3]]}, "input"),
    ("/v1/embeddings", {"input": ""}, "input"),
    ("/v1/embeddings", {"input": ["x"] * 257}, "input"),
    ("/v1/embeddings", {"input": "x", "dimensions": 7}, "dimensions"),
    ("/v1/rerank", {"query": "q", "documents": []}, "documents"),
])
def test_bad_requests_get_400_in_openais_shape(url, path, body, param):
    response = httpx.post(f"{url}{path}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["type"] == "invalid_request_error" and error["param"] == param and error["message"]


def test_malformed_json_and_unknown_endpoints_get_openai_errors(url):
    response = httpx.post(f"{url}/v1/embeddings", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400 and "JSON" in error_of(response)["message"]
    assert httpx.get(f"{url}/v1/nothing").status_code == 404
    assert error_of(httpx.get(f"{url}/v1/nothing"))["type"] == "not_found_error"


def test_an_unknown_collection_is_404(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                       extra_body={"collection": "nope"})
    assert caught.value.status_code == 404 and caught.value.code == "collection_not_found"
    with pytest.raises(openai.NotFoundError):  # streamed too: refused before the stream starts
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], stream=True,
                                       extra_body={"collection": "nope"})


def test_bodies_over_the_limit_get_413(url):
    big = {"input": ["word " * 2000] * 8}  # about 80 KB, over the module's 64 KB limit
    response = httpx.post(f"{url}/v1/embeddings", json=big)
    assert response.status_code == 413 and error_of(response)["code"] == "body_too_large"

    def chunked():  # no Content-Length: the limit counts what arrives
        for _ in range(80):
            yield b" " * 1024

    response = httpx.post(f"{url}/v1/embeddings", content=chunked(), headers={"content-type": "application/json"})
    assert response.status_code == 413


# ---------------------------------------------------------------------- the queue
def test_a_full_queue_answers_503_and_the_waiting_requests_still_get_their_answers(server, client, model):
    app, _ = server
    worker = app.state.worker
    gate = threading.Event()
    # a real blocking job holds the worker; QUEUE - 1 more wait behind it
    held = [worker.submit(Job(gate.wait)) for _ in range(QUEUE)]
    waiting = ThreadPoolExecutor(1).submit(client.embeddings.create, model="tiny", input="The cat sat.")
    try:
        for _ in range(200):
            if worker.pending == QUEUE + 1:
                break
            threading.Event().wait(0.02)
        assert worker.pending == QUEUE + 1
        with pytest.raises(openai.APIStatusError) as caught:
            client.embeddings.create(model="tiny", input="one too many")
        assert caught.value.status_code == 503 and caught.value.code == "queue_full"
        stream = httpx.post(f"{client.base_url}chat/completions",
                            json={"messages": [{"role": "user", "content": "hi"}], "stream": True})
        assert stream.status_code == 503 and error_of(stream)["type"] == "server_overloaded"
        assert httpx.get(str(client.base_url).replace("/v1/", "/health")).status_code == 200  # never queued
    finally:
        gate.set()
    for job in held:
        job.result(timeout=30)
    got = waiting.result(timeout=60)
    assert cosine(got.data[0].embedding, model.embed(["The cat sat."])[0]) >= 0.999


def test_eight_concurrent_clients_each_get_their_own_answer(url, model):
    texts = [f"{word} sat on the mat." for word in ("cat", "dog", "fox", "Paris", "Rust", "loop", "text", "park")]
    want_vectors = model.embed(texts)
    want_answers = [model.generate([{"role": "user", "content": t}], max_new_tokens=6) for t in texts]

    def one(i: int):
        own = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        vector = own.embeddings.create(model="tiny", input=texts[i]).data[0].embedding
        answer = own.chat.completions.create(model="tiny", max_tokens=6, messages=[{"role": "user", "content": texts[i]}])
        streamed = own.chat.completions.create(model="tiny", max_tokens=6, stream=True,
                                               messages=[{"role": "user", "content": texts[i]}])
        return vector, answer.choices[0].message.content, "".join(c.choices[0].delta.content or "" for c in streamed)

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(one, range(8)))
    for i, (vector, answer, streamed) in enumerate(results):
        assert cosine(vector, want_vectors[i]) >= 0.999
        assert answer == want_answers[i] and streamed == want_answers[i]


# ---------------------------------------------------------------------- the API key
@pytest.fixture(scope="module")
def keyed(model):
    app = create_app(model, model_id="tiny", api_key="s3cret-key")
    with live_server(app) as url:
        yield url


def test_with_a_key_every_endpoint_but_health_needs_it(keyed):
    with pytest.raises(openai.AuthenticationError) as caught:
        openai.OpenAI(base_url=f"{keyed}/v1", api_key="wrong", max_retries=0).models.list()
    assert caught.value.status_code == 401 and caught.value.code == "invalid_api_key"
    for path in ("/v1/models", "/v1/embeddings"):
        response = httpx.request("GET" if path.endswith("models") else "POST", f"{keyed}{path}", json={"input": "x"})
        assert response.status_code == 401 and error_of(response)["type"] == "authentication_error"
    good = openai.OpenAI(base_url=f"{keyed}/v1", api_key="s3cret-key", max_retries=0)
    assert good.models.list().data[0].id == "tiny"
    assert good.embeddings.create(model="tiny", input="hi").data
    assert httpx.get(f"{keyed}/health").status_code == 200


def test_a_keyed_server_without_a_collection_database_chats_plainly_only(keyed):
    good = openai.OpenAI(base_url=f"{keyed}/v1", api_key="s3cret-key", max_retries=0)
    with pytest.raises(openai.BadRequestError):
        good.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                     extra_body={"collection": "docs"})


def test_binding_beyond_loopback_needs_a_key(monkeypatch):
    from typer.testing import CliRunner

    from unirag.cli.commands import app
    from unirag.server.security import check_bind

    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "key")
    for host in ("0.0.0.0", "192.168.1.5", "::"):
        with pytest.raises(UniragError, match="API key"):
            check_bind(host, None)
    monkeypatch.delenv("UNIRAG_API_KEY", raising=False)
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])  # refused before any model loads
    assert isinstance(result.exception, UniragError) and "--api-key" in str(result.exception)
    monkeypatch.setenv("UNIRAG_API_KEY", "")  # an empty key is no key
    result = CliRunner().invoke(app, ["serve", "--host", "0.0.0.0"])
    assert isinstance(result.exception, UniragError)


def test_serve_refuses_a_missing_default_collection_at_start(tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from unirag.cli.commands import app

    (tmp_path / "db").mkdir()
    result = CliRunner().invoke(app, ["serve", "--model", str(tiny_model_dir), "--precision", "fp32",
                                      "--db", str(tmp_path / "db"), "--collection", "nope"])
    assert isinstance(result.exception, UniragError) and "no collection 'nope'" in str(result.exception)


def test_key_comparison():
    from unirag.server.security import key_matches

    assert key_matches("Bearer abc", "abc") and key_matches("bearer abc", "abc")
    assert not key_matches("Bearer abd", "abc") and not key_matches("abc", "abc") and not key_matches(None, "abc")
    assert not key_matches("Bearer é", "abc")
