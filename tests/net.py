"""Networking helpers shared by tests that start servers (Chroma, Gradio, torchrun)."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, read from /proc. torchrun starts each worker in a session of its
    own, so killing the launcher's process group leaves the workers running."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process ended while we read
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _launch(args: list[str], timeout: float, module: str = "unirag") -> tuple[subprocess.CompletedProcess | None, str]:
    """One launch: its result, or None and what it printed when it outlived `timeout`.

    Output goes to files, not pipes, so that nothing waits on a worker that outlives its launcher.
    A launch that hangs has its workers print their Python stacks (faulthandler on SIGABRT) before
    everything below the launcher is killed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo", "PYTHONFAULTHANDLER": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), "-m", module, *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        launch = subprocess.Popen(command, stdout=out, stderr=err, text=True, env=env, start_new_session=True)
        try:
            launch.wait(timeout=timeout)
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            workers = descendants(launch.pid)
            _signal_all([*workers, launch.pid], signal.SIGABRT)
            time.sleep(3)  # let faulthandler write the stacks
            _signal_all([launch.pid, *descendants(launch.pid), *workers], signal.SIGKILL)
            launch.wait()
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if hung:
        stacks = stderr.find("Fatal Python error")  # the workers' stacks, before the launcher's report
        return None, f"{stdout[-2000:]}\n{stderr[stacks:stacks + 6000] if stacks >= 0 else stderr[-6000:]}"
    return subprocess.CompletedProcess(command, launch.returncode, stdout, stderr), ""


def torchrun(args: list[str], timeout: float = 180, before_retry=None) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 -m unirag ARGS` on this machine, one thread per process.

    Gloo connects the processes over the address the host name resolves to unless told an
    interface; in a container that can be an address nothing answers on, so both processes use
    loopback. A launch has also hung in CI where the same launch passed here every time; a hung
    launch is killed with its workers and tried once more on a fresh port, with a warning showing
    the workers' stacks. `before_retry` runs first: a launch that hung after writing its output
    (one hung on its way out, the adapter written) would otherwise find it there and refuse to
    overwrite it. A second hang fails the test with what both printed."""
    result, first = _launch(args, timeout)
    if result is not None:
        return result
    warnings.warn(f"torchrun hung for {timeout:g} s and was launched again; its workers printed:\n{first}")
    if before_retry is not None:
        before_retry()
    result, second = _launch(args, timeout)
    if result is None:
        raise AssertionError(f"torchrun hung twice for {timeout:g} s; it printed:\n{first}\n---\n{second}")
    return result
