"""Where embedding time goes: torch.profiler tables for UniModel.embed and the plain bf16 forward.

A diagnostic beside benchmarks/embedding.py (same texts, same plain loop): it explains the ratio
that script measures rather than measuring it again (the profiler itself slows both runs).
Prints one unprofiled timing and the top ops by self CPU time for each.

    python benchmarks/profile_embedding.py [--n-texts 64] [--batch-size 16] [--rows 18]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import DEFAULT_DOCS, prose_chunks  # noqa: E402
from embedding import plain_forward  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-texts", type=int, default=64)
    parser.add_argument("--chunk-tokens", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rows", type=int, default=18)
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from unirag import UniModel

    uni = UniModel.load("smollm2-135m", "default")
    texts = prose_chunks(str(DEFAULT_DOCS), uni.tokenizer, args.n_texts, args.chunk_tokens)
    model = UniModel.load("smollm2-135m", "default", precision="fp32").model
    runs = {"unirag UniModel.embed": lambda: uni.embed(texts, pooling="eos", batch_size=args.batch_size),
            "plain forward, bf16 autocast": lambda: plain_forward(model, uni.tokenizer, texts, args.batch_size,
                                                                  uni.max_length, torch.bfloat16)}
    for name, run in runs.items():
        run()  # warm-up
        start = time.perf_counter()
        run()
        print(f"{name}: {time.perf_counter() - start:.2f} s unprofiled", flush=True)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run()
        print(f"==== {name}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows), flush=True)


if __name__ == "__main__":
    main()
