"""Ingest as several processes: `torchrun --nproc_per_node N -m unirag ingest` into one Chroma server.

Why: a large folder is embedded faster by one worker per GPU or machine, all writing to one
server. Here the workers are CPU processes: the script starts `chroma run` on a free port, then
ingests the first `--max-files` files of `--docs` twice into fresh collections of that server:
once as one process (torch's default threads) and once as `--workers` processes launched by
torchrun (OMP_NUM_THREADS = threads / workers each, so both use the same cores). It reports wall
seconds (model loads included: each worker loads the model), the speed-up, and whether both
collections hold the same chunk ids.

    python research/ingest_workers.py [--docs ../shared/data/docs/rust-book/src] [--max-files 24]
        [--workers 2] [--output runs/bench/ingest_workers.json]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import DEFAULT_DOCS, machine_info, markdown_table, write_json  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_chroma(folder: Path) -> tuple[subprocess.Popen, str]:
    chroma = Path(sys.executable).parent / "chroma"
    port = free_port()
    server = subprocess.Popen([str(chroma), "run", "--path", str(folder), "--host", "127.0.0.1", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2).read()
            return server, url
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("the Chroma server did not start")
            time.sleep(0.25)


def run(command: list[str], threads: int) -> dict:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return {"seconds": seconds, "output": done.stdout}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default=str(DEFAULT_DOCS))
    parser.add_argument("--max-files", type=int, default=24)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--output", default="runs/bench/ingest_workers.json")
    args = parser.parse_args()

    import chromadb

    with tempfile.TemporaryDirectory() as folder:
        server, url = start_chroma(Path(folder))
        try:
            common = ["ingest", args.docs, "--chroma-url", url, "--max-files", str(args.max_files), "--no-progress"]
            one = run([sys.executable, "-m", "unirag", *common, "--collection", "one"], args.threads)
            many = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(args.workers),
                        "--master_addr", "127.0.0.1", "--master_port", str(free_port()), "-m", "unirag", *common,
                        "--collection", "many"], max(1, args.threads // args.workers))
            client = chromadb.HttpClient(host="127.0.0.1", port=int(url.rsplit(":", 1)[1]))
            ids = {name: set(client.get_collection(name).get(include=[])["ids"]) for name in ("one", "many")}
        finally:
            server.terminate()
            server.wait(timeout=30)

    same = ids["one"] == ids["many"]
    speedup = one["seconds"] / many["seconds"]
    print(one["output"] + many["output"])
    print(markdown_table(("run", "threads per process", "chunks", "wall s", "speed-up"), [
        ["1 process", args.threads, len(ids["one"]), f"{one['seconds']:.1f}", "1.00x"],
        [f"{args.workers} processes (torchrun)", max(1, args.threads // args.workers), len(ids["many"]),
         f"{many['seconds']:.1f}", f"{speedup:.2f}x"]]))
    print(f"same chunk ids: {same}")
    result = {"benchmark": "ingest_workers", "machine": machine_info(), "docs": args.docs, "max_files": args.max_files,
              "workers": args.workers, "threads": args.threads, "one_process_s": one["seconds"],
              "workers_s": many["seconds"], "speedup": speedup, "chunks": len(ids["one"]), "same_ids": same,
              "outputs": [one["output"], many["output"]]}
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()
