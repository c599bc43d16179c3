"""What this CPU is fast at: fp32 vs bf16 matmul, and the malloc tuning's effect on a training step.

Two facts behind unirag's defaults (docs/PERFORMANCE.md):
1. bf16 autocast is only used where the CPU has native bf16 instructions: elsewhere it is
   emulated and much slower (this script measures both).
2. `unirag.model.hardware.tune_allocator` keeps freed activation memory in the process; this script
   times one UniMAE training micro-batch (forward + backward) with and without it, each in a
   fresh subprocess (glibc settings are per process).

    python benchmarks/cpu_basics.py [--model smollm2-135m] [--batch 8] [--length 128] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time


def matmul_gflops(dtype_name: str, n: int = 2048, repeats: int = 3) -> float:
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e9


def step_seconds(model: str, batch: int, length: int, repeats: int) -> list[float]:
    """Forward+backward of the UniMAE loss on random tokens; run inside a subprocess."""
    import torch

    from unirag.model.hardware import tune_allocator

    tune_allocator()  # as unirag's trainer does, unless UNIRAG_NO_MALLOC_TUNING is set
    from unirag.model.registry import load_base
    from unirag.training.config import load_config
    from unirag.training.trainer import UniMAEModule, build_llm

    config = load_config("cpu-quick", {"max_length": str(length)})
    base, _ = load_base(model)
    module = UniMAEModule(build_llm(base, config), config, mask_token_id=0).train()
    ids = torch.randint(100, base.config.vocab_size - 100, (batch, length))
    mask = torch.ones_like(ids)
    times = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        module(ids, mask, seed=i)["loss"].backward()
        times.append(time.perf_counter() - start)
    return times[1:]  # the first includes one-off warm-up


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", default=None)
    parser.add_argument("--_step", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._step:
        print(json.dumps(step_seconds(args.model, args.batch, args.length, args.repeats)))
        return

    from unirag.model.hardware import cpu_has_fast_bf16

    results = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "cpu_has_fast_bf16": cpu_has_fast_bf16(),
        "matmul_gflops": {d: round(matmul_gflops(d), 2) for d in ("float32", "bfloat16")},
        "date": time.strftime("%Y-%m-%d"),
    }
    cmd = [sys.executable, __file__, "--_step", "--model", args.model, "--batch", str(args.batch),
           "--length", str(args.length), "--repeats", str(args.repeats)]
    for label, extra in (("malloc tuned", {}), ("glibc default", {"UNIRAG_NO_MALLOC_TUNING": "1"})):
        out = subprocess.run(cmd, env={**os.environ, **extra}, capture_output=True, text=True, check=True)
        results[f"step_seconds ({label})"] = json.loads(out.stdout.strip().splitlines()[-1])
    print("| measure | value |\n|---|---|")
    for key, value in results.items():
        print(f"| {key} | {value} |")
    tuned = sum(results["step_seconds (malloc tuned)"]) / args.repeats
    default = sum(results["step_seconds (glibc default)"]) / args.repeats
    print(f"\nmicro-batch {args.batch}x{args.length} fwd+bwd: {default:.1f} s default -> {tuned:.1f} s tuned "
          f"({default / tuned:.1f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
