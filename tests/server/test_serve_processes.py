"""Two `unirag serve` processes over one `chroma run` server, as behind a load balancer: both
answer from the same collection, the same way."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from chroma_server import chroma_server
from net import free_port

from unirag.retrieval import store
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest as run_ingest

REPO = Path(__file__).resolve().parents[2]


def start_serve(model_dir: Path, chroma_url: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    env.pop("UNIRAG_API_KEY", None)
    command = [sys.executable, "-m", "unirag", "serve", "--model", str(model_dir), "--precision", "fp32",
               "--chroma-url", chroma_url, "--collection", "docs", "--rerank", "0", "--port", str(port)]
    process = subprocess.Popen(command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    return process, f"http://127.0.0.1:{port}"


def wait_healthy(process: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"unirag serve did not start: {log.read_text()[-2000:]}")
        time.sleep(0.25)


@pytest.mark.slow
def test_two_serve_processes_share_one_chroma_server(tiny_model_dir, tmp_path):
    from unirag import UniModel

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nThe cat sat on the mat. The cat eats fish.\n")
    (docs / "paris.md").write_text("# Paris\n\nParis is the capital of France.\n")
    model = UniModel.load(str(tiny_model_dir), precision="fp32")
    with chroma_server(tmp_path / "chroma") as chroma_url:
        collection = store.open_collection(store.connect(url=chroma_url), "docs", model, create=True)
        run_ingest(model, collection, docs, settings=ChunkSettings(chunk_size=32, overlap=8))
        servers = [start_serve(tiny_model_dir, chroma_url, tmp_path / f"serve{i}.log") for i in range(2)]
        try:
            for (process, url), i in zip(servers, range(2)):
                wait_healthy(process, url, tmp_path / f"serve{i}.log")
            answers = []
            for _, url in servers:
                client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
                got = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "What does the cat eat?"}])
                assert got.model_extra["sources"], "the server's default collection answers"
                assert "collection:docs" in [m.id for m in client.models.list().data]
                answers.append((got.choices[0].message.content, got.model_extra["sources"]))
            assert answers[0] == answers[1]
        finally:
            for process, _ in servers:
                process.send_signal(signal.SIGINT)  # uvicorn's graceful stop
            for process, _ in servers:
                try:
                    assert process.wait(timeout=30) == 0
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                    raise
