"""The one-model queue on its own: order, refusal when full, errors handed back, streams that
stop when their reader goes away."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from unirag.server.worker import Job, ModelWorker, QueueFull


@pytest.fixture
def worker():
    worker = ModelWorker(queue_size=1)
    worker.start()
    yield worker
    worker.stop()


def test_jobs_run_one_at_a_time_in_order_and_a_full_queue_refuses(worker):
    gate, order = threading.Event(), []
    first = worker.submit(Job(lambda: (gate.wait(), order.append(1))))
    second = worker.submit(Job(lambda: order.append(2) or "second"))
    with pytest.raises(QueueFull):
        worker.submit(Job(lambda: None))
    gate.set()
    assert second.result(timeout=10) == "second" and first.result(timeout=10)
    assert order == [1, 2] and worker.pending == 0
    assert worker.submit(Job(lambda: 3)).result(timeout=10) == 3  # room again


def test_a_jobs_error_reaches_its_caller_and_the_worker_goes_on(worker):
    def fails():
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        worker.submit(Job(fails)).result(timeout=10)
    assert worker.submit(Job(lambda: "ok")).result(timeout=10) == "ok"


def test_a_stream_yields_its_items_and_its_error(worker):
    def pieces():
        yield "a"
        yield "b"
        raise ValueError("mid-stream")

    async def read():
        got = []
        with pytest.raises(ValueError, match="mid-stream"):
            async for item in worker.stream(pieces):
                got.append(item)
        return got

    assert asyncio.run(read()) == ["a", "b"]


def test_a_stream_its_reader_leaves_frees_the_worker():
    worker = ModelWorker(queue_size=0)
    worker.start()
    drawn = []

    def endless():
        while True:
            drawn.append(len(drawn))
            yield drawn[-1]

    async def leave_early():
        stream = worker.stream(endless)
        assert await stream.get() == 0
        stream.cancel()
        deadline = time.monotonic() + 10
        while worker.pending and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return await worker.call(lambda: "next")  # queue size 0: refused if the stream still ran

    try:
        assert asyncio.run(leave_early()) == "next"
    finally:
        worker.stop()


def test_stop_fails_the_jobs_still_waiting():
    worker = ModelWorker(queue_size=2)
    worker.start()
    gate = threading.Event()
    running = worker.submit(Job(lambda: gate.wait(10) and "ran"))
    time.sleep(0.1)  # the first job holds the worker
    waiting = worker.submit(Job(lambda: "never"))
    stopper = threading.Thread(target=worker.stop)
    stopper.start()
    time.sleep(0.1)
    gate.set()
    stopper.join(10)
    assert running.result(timeout=10) == "ran"
    with pytest.raises(RuntimeError, match="shutting down"):
        waiting.result(timeout=10)
