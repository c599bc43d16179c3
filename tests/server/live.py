"""A live `unirag serve` app on 127.0.0.1: uvicorn in a thread of the test process, so a test can
reach the app's worker (to hold it busy) while real HTTP clients talk to it."""

from __future__ import annotations

import contextlib
import threading
import time

import uvicorn
from net import free_port


@contextlib.contextmanager
def live_server(app):
    """Serve `app` on a free loopback port; yield its base URL (http://127.0.0.1:PORT)."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
