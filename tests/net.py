"""Networking helpers shared by tests that start servers (Chroma, Gradio, torchrun)."""

import os
import signal
import socket
import subprocess
import sys


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """`torchrun --nproc_per_node 2 -m unirag ARGS` on this machine, one thread per process.

    Gloo connects the processes over the address the host name resolves to unless told an
    interface; in a container that can be an address nothing answers on, and the launch hangs
    (it did once in CI), so both processes use loopback. A launch that still outlives `timeout`
    is killed with its workers, and the failure shows what it had printed."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), "-m", "unirag", *args]
    launch = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                              start_new_session=True)
    try:
        stdout, stderr = launch.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(launch.pid, signal.SIGKILL)
        stdout, stderr = launch.communicate()
        printed = f"{stdout[-2000:]}\n{stderr[-3000:]}"
        raise AssertionError(f"torchrun hung for {timeout:g} s; it printed:\n{printed}") from None
    return subprocess.CompletedProcess(command, launch.returncode, stdout, stderr)
