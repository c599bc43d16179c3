"""A real Chroma server process (`chroma run`) for the tests that need one."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from net import free_port



@contextlib.contextmanager
def chroma_server(folder: Path):
    """Start `chroma run` on a free port with its data in `folder`; yield its URL; stop it."""
    chroma = Path(sys.executable).parent / "chroma"
    if not chroma.exists():
        chroma = shutil.which("chroma")
        if chroma is None:
            pytest.skip("the `chroma` CLI (chromadb's server) is not installed")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder.parent / f"{folder.name}.log"
    log = open(log_path, "wb")
    server = subprocess.Popen([str(chroma), "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"chroma server did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.25)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()
