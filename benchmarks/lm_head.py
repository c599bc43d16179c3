"""The LM head in a decode step: one fp32 matrix-vector product vs the same split into row blocks.

Why: on the 2-core test machine the fp32 head's one-row kernel ran on one thread, a third of
each decode step's bytes at 15.8 GB/s. `unirag.model.fast_decode.split_head` runs it as a `bmm` over row blocks
(bit-identical logits). This script shows both halves of that claim in one process:

1. the head alone: `head(vector)` vs `head_logits` vs a bf16 copy of the head (for scale; unirag
   holds none), each timed right after a few bf16 decoder matmuls, as inside a decode step
   (torch's worker threads are then awake), median of `--repeats`;
2. whole decodes: `UniModel.generate_ids` greedy with the split head and with `head(vector)`,
   interleaved run by run so that the machine's drift hits both alike; the tokens are compared.

    python benchmarks/lm_head.py [--new-tokens 64] [--runs 10] [--output runs/bench/lm_head.json]
    python benchmarks/lm_head.py --quick   # a smoke run: 8 tokens, 2 runs
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from decode import PROMPT, decode_rate  # noqa: E402


def head_kernel_ms(head, repeats: int) -> dict[str, float]:
    """Median ms of the head on one random vector: whole fp32, split fp32, and a bf16 copy."""
    import torch
    import torch.nn.functional as F

    from unirag.model.fast_decode.split_head import head_logits

    vector = torch.randn(head.in_features)
    bf16 = head.weight.detach().to(torch.bfloat16)
    busy = [torch.randn(1536, head.in_features, dtype=torch.bfloat16) for _ in range(4)]
    probe = torch.randn(1, head.in_features, dtype=torch.bfloat16)
    variants = {"fp32 head(vector)": lambda: head(vector),
                "fp32 split_head.head_logits": lambda: head_logits(head, vector),
                "bf16 copy (not used by unirag)": lambda: F.linear(vector.to(torch.bfloat16), bf16)}
    out = {}
    with torch.inference_mode():
        for name, fn in variants.items():
            times = []
            for _ in range(repeats + 1):
                for w in busy:  # as in a decode step: bf16 matmuls just ran on every thread
                    F.linear(probe, w)
                start = time.perf_counter()
                fn()
                times.append(time.perf_counter() - start)
            out[name] = statistics.median(times[1:]) * 1e3
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=10, help="decodes per variant, interleaved")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", default="runs/bench/lm_head.json")
    args = parser.parse_args()
    if args.quick:
        args.new_tokens, args.runs = 8, 2

    import torch

    import unirag.model.unimodel as unimodel
    from unirag import UniModel
    from unirag.model.fast_decode.split_head import head_logits

    uni = UniModel.load(args.model, args.adapter)
    uni._stop_ids = lambda: set()  # exactly --new-tokens tokens each
    head = uni.model.get_output_embeddings()
    print(f"head {tuple(head.weight.shape)} {head.weight.dtype}, {torch.get_num_threads()} threads", flush=True)
    kernels = head_kernel_ms(head, repeats=max(5, args.runs * 3))
    for name, ms in kernels.items():
        print(f"{name}: {ms:.2f} ms", flush=True)

    prompt_ids = uni.prompt_ids(PROMPT)
    variants = {"split head (unirag)": head_logits, "whole head": lambda h, v, parts=None: h(v)}
    rates = {name: [] for name in variants}
    tokens = {}
    try:
        for run in range(args.runs + 1):  # run 0 is the warm-up
            for name, fn in variants.items():
                unimodel.head_logits = fn
                times, ids = [], []
                for token in uni.generate_ids(prompt_ids, max_new_tokens=args.new_tokens):
                    times.append(time.perf_counter())
                    ids.append(token)
                tokens.setdefault(name, ids)
                if run:
                    rates[name].append(decode_rate(times))
    finally:
        unimodel.head_logits = head_logits
    rows = [[name, statistics.median(r), max(r), min(r)] for name, r in rates.items()]
    print()
    print(markdown_table(("decode", "median tokens/s", "best", "worst"), rows))
    split, whole = (statistics.median(r) for r in rates.values())
    same = tokens["split head (unirag)"] == tokens["whole head"]
    print(f"\nsplit / whole: {split / whole:.2f}x median decode tokens/s; same greedy tokens: {same}")
    result = {"benchmark": "lm_head", "model": uni.name, "quick": args.quick, "machine": machine_info(),
              "settings": {"new_tokens": args.new_tokens, "runs": args.runs, "threads": torch.get_num_threads()},
              "head_ms": kernels, "decode_tokens_per_s": rates, "same_tokens": same}
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()
