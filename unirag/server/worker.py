"""The one-model queue: every request that runs the model is a job on one worker thread.

The model holds one set of weights and runs one forward pass at a time (`UniModel._lock`), so
requests take turns here, in arrival order, instead of interleaving their passes. At most
`queue_size` jobs wait behind the running one; a job past that is refused at once (`QueueFull`,
answered 503) rather than left waiting without bound. A streamed answer holds the worker until
its last piece, and a client that goes away stops it between pieces (`Job.cancel`).
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any


class QueueFull(Exception):
    """The worker is busy and `queue_size` jobs already wait."""


class Job:
    """One unit of work: `run()` returns a value, or an iterator whose items the worker draws one by
    one (each a stream's piece) and hands to `on_item`; `cancel()` ends such a stream early."""

    def __init__(self, run: Callable[[], Any], on_item: Callable[[Any], None] | None = None):
        self.run = run
        self.on_item = on_item
        self.future: Future = Future()
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def execute(self) -> None:
        if not self.future.set_running_or_notify_cancel():
            return
        try:
            result = self.run()
            if self.on_item is not None:
                items: Iterator = iter(result)
                try:
                    for item in items:
                        if self._cancelled.is_set():
                            break
                        self.on_item(item)
                finally:
                    close = getattr(items, "close", None)
                    if close is not None:
                        close()
                result = None
            self.future.set_result(result)
        except BaseException as err:  # handed to the waiting request, never lost on this thread
            self.future.set_exception(err)


class ModelWorker:
    """One thread that runs jobs in turn; `submit` refuses a job when `queue_size` already wait."""

    def __init__(self, queue_size: int = 16):
        if queue_size < 0:
            raise ValueError("queue_size must be 0 or more")
        self.queue_size = queue_size
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._admitted = 0  # jobs waiting or running
        self._count_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def pending(self) -> int:
        """Jobs waiting or running now."""
        return self._admitted

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="unirag-model-worker", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Fail the jobs still waiting (they would wait forever), let the running one finish, end."""
        self._fail_waiting()
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join(timeout)
            self._thread = None
        self._fail_waiting()  # any submitted meanwhile

    def _fail_waiting(self) -> None:
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None and not job.future.done():
                job.future.set_exception(RuntimeError("the server is shutting down"))

    def submit(self, job: Job) -> Future:
        """Queue `job`; its future gets its result. Raises QueueFull when the queue is full."""
        with self._count_lock:
            if self._admitted > self.queue_size:  # one running, queue_size waiting
                raise QueueFull(f"the server is busy: {self._admitted} requests are running or waiting "
                                f"(the queue holds {self.queue_size}); try again shortly")
            self._admitted += 1
        job.future.add_done_callback(self._release)
        self._jobs.put(job)
        return job.future

    def _release(self, _future: Future) -> None:
        with self._count_lock:
            self._admitted -= 1

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            job.execute()

    # ---------------------------------------------------------------- from the event loop
    async def call(self, run: Callable[[], Any]) -> Any:
        """Run `run()` on the worker and wait for its value without blocking the event loop."""
        return await asyncio.wrap_future(self.submit(Job(run)))

    def stream(self, run: Callable[[], Any]) -> "Stream":
        """Start `run()` (which returns an iterator) on the worker; read its items from the Stream.
        Raises QueueFull at once, before anything is sent to the client."""
        return Stream(self, run)


_END = object()


class Stream:
    """The items a worker job yields, read from the event loop as they come. `get()` raises what
    the job raised (before or between items) and StopAsyncIteration at its end."""

    def __init__(self, worker: ModelWorker, run: Callable[[], Any]):
        self._loop = asyncio.get_running_loop()
        self._items: asyncio.Queue = asyncio.Queue()
        self._job = Job(run, on_item=self._put)
        self._future = worker.submit(self._job)
        self._future.add_done_callback(lambda _f: self._put(_END))

    def _put(self, item: Any) -> None:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the event loop is closed (the server stopped): nobody reads on
            self._job.cancel()

    async def get(self) -> Any:
        item = await self._items.get()
        if item is _END:
            self._items.put_nowait(_END)  # every later get() ends too
            exc = self._future.exception()
            if exc is not None:
                raise exc
            raise StopAsyncIteration
        return item

    def cancel(self) -> None:
        """Stop the job between items (the client went away)."""
        self._job.cancel()

    async def __aiter__(self):
        try:
            while True:
                try:
                    yield await self.get()
                except StopAsyncIteration:
                    return
        finally:
            self.cancel()
