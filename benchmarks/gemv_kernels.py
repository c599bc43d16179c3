"""How fast PyTorch's one-row matmul kernels stream weights on this CPU, per weight format.

Why: a decode step multiplies one row by every weight matrix, so its speed is the speed at which
these kernels read weights. docs/PERFORMANCE.md compares decode against the memory's copy
bandwidth; this script asks whether any kernel PyTorch offers on the CPU gets near it:

- `F.linear` in bf16 and fp32 (oneDNN / MKL), on the decoder's shapes (SmolLM2-135M: 30 layers
  of q, k, v, o, gate, up, down), with 1 thread and with all of torch's threads;
- the same shapes with q/k/v and gate/up fused (fewer, larger matrices);
- weight-only int8 (`torch._weight_int8pack_mm`) and int4 (`torch._weight_int4pack_mm_for_cpu`,
  groups of 32) kernels, the formats llama.cpp-like engines read (random weights: only speed is
  measured);
- a read-only pass over 512 MiB (`src.sum()`), the memory's own pace.

GB/s counts the weight bytes each kernel reads (scales included). Median of `--repeats` passes.

    python benchmarks/gemv_kernels.py [--repeats 7] [--output runs/bench/gemv_kernels.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, timed_median, write_json  # noqa: E402
from decode import read_bandwidth_gbs  # noqa: E402

LAYER = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)]
FUSED = [(960, 576), (576, 576), (3072, 576), (576, 1536)]
LAYERS = 30


def pass_gbs(weights: list, inputs: list, run, nbytes: int, repeats: int) -> tuple[float, float]:
    """(ms, GB/s) of one pass of `run(w, x)` over every weight."""
    import torch

    def one_pass():
        with torch.inference_mode():
            for w, x in zip(weights, inputs):
                run(w, x)

    seconds, _ = timed_median(one_pass, repeats)
    return seconds * 1e3, nbytes / seconds / 1e9


def dense(shapes, dtype):
    import torch

    weights = [torch.randn(o, i, dtype=dtype) for o, i in shapes]
    return weights, sum(w.numel() * w.element_size() for w in weights)


def int8(shapes):
    import torch

    weights = []
    for o, i in shapes:
        w = torch.randn(o, i)
        scale = w.abs().amax(1) / 127
        weights.append((torch.round(w / scale[:, None]).clamp(-128, 127).to(torch.int8), scale.to(torch.bfloat16)))
    return weights, sum(q.numel() + s.numel() * 2 for q, s in weights)


def int4(shapes, group: int = 32):
    import torch

    weights = []
    for o, i in shapes:
        packed = torch._convert_weight_to_int4pack_for_cpu(torch.randint(0, 16, (o, i), dtype=torch.int32), 1)
        weights.append((packed, torch.randn(i // group, o, 2, dtype=torch.bfloat16)))
    return weights, sum(p.numel() * p.element_size() + s.numel() * 2 for p, s in weights)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--output", default="runs/bench/gemv_kernels.json")
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    threads = torch.get_num_threads()
    read_gbs = read_bandwidth_gbs(512, args.repeats)
    print(f"read bandwidth (sum over 512 MiB): {read_gbs:.1f} GB/s; {threads} threads", flush=True)

    shapes = LAYER * LAYERS
    bf16_x = [torch.randn(1, i, dtype=torch.bfloat16) for _, i in shapes]
    cases = [
        ("bf16 F.linear", lambda: dense(shapes, torch.bfloat16), bf16_x, lambda w, x: F.linear(x, w)),
        ("fp32 F.linear", lambda: dense(shapes, torch.float32), [x.float() for x in bf16_x],
         lambda w, x: F.linear(x, w)),
        ("bf16 F.linear, q/k/v and gate/up fused", lambda: dense(FUSED * LAYERS, torch.bfloat16),
         [torch.randn(1, i, dtype=torch.bfloat16) for _, i in FUSED * LAYERS], lambda w, x: F.linear(x, w)),
        ("int8 weight-only (_weight_int8pack_mm)", lambda: int8(shapes), bf16_x,
         lambda w, x: torch._weight_int8pack_mm(x, w[0], w[1])),
        ("int4 weight-only, groups of 32 (_weight_int4pack_mm_for_cpu)", lambda: int4(shapes), bf16_x,
         lambda w, x: torch._weight_int4pack_mm_for_cpu(x, w[0], 32, w[1])),
    ]
    rows, results = [], []
    for name, make, inputs, run in cases:
        try:
            weights, nbytes = make()
        except (RuntimeError, AttributeError) as err:  # a kernel this torch build lacks
            print(f"{name}: skipped ({str(err).splitlines()[0][:120]})", flush=True)
            results.append({"kernel": name, "skipped": str(err).splitlines()[0]})
            continue
        for n in sorted({1, threads}):
            torch.set_num_threads(n)
            ms, gbs = pass_gbs(weights, inputs, run, nbytes, args.repeats)
            torch.set_num_threads(threads)
            rows.append([name, n, nbytes / 1e6, ms, gbs, f"{gbs / read_gbs:.0%}"])
            results.append({"kernel": name, "threads": n, "bytes": nbytes, "ms": ms, "gbs": gbs,
                            "share_of_read_bandwidth": gbs / read_gbs})
            print(f"{name}, {n} thread(s): {ms:.2f} ms, {gbs:.1f} GB/s", flush=True)
    print()
    print(markdown_table(("kernel", "threads", "MB", "ms per pass", "GB/s", "of read bandwidth"), rows))
    out = write_json(args.output, {"benchmark": "gemv_kernels", "machine": machine_info(), "threads": threads,
                                   "read_bandwidth_gbs": read_gbs, "repeats": args.repeats, "rows": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
