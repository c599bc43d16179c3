"""Where embedding time goes: torch.profiler tables for UniModel.embed and the plain bf16 forward.

A diagnostic beside benchmarks/embedding.py (same texts, same plain loop): it explains the ratio
that script measures rather than measuring it again (the profiler itself slows both runs).
Prints one unprofiled timing and the top ops by self CPU time for each, then the ceiling the
linear layers set: the machine's bf16 GEMM rate on the decoder's own layer shapes (a batch of
`UniModel.embed_batch_tokens` rows), and the tokens/s that rate allows if everything but the
linear layers cost nothing.

    python research/profile_embedding.py [--n-texts 64] [--batch-size 16] [--rows 18]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import DEFAULT_DOCS, prose_chunks  # noqa: E402
from embedding import plain_forward  # noqa: E402


def gemm_gflops(rows: int, shapes: list[tuple[int, int]], dtype: str = "bf16", repeats: int = 10) -> float:
    """GFLOP/s (GOP/s for int8) of `rows` x in @ in x out products over the given (in, out) shapes
    in turn: bf16 matmuls, or int8 ones through torch._int_mm (int32 sums)."""
    import torch

    if dtype == "int8":
        def operand(*shape):
            return torch.randint(-127, 128, shape, dtype=torch.int8)
        product = torch._int_mm
    else:
        def operand(*shape):
            return torch.randn(*shape).bfloat16()
        product = torch.matmul
    pairs = [(operand(rows, i), operand(i, o)) for i, o in shapes]
    for a, b in pairs:
        product(a, b)
    start = time.perf_counter()
    for _ in range(repeats):
        for a, b in pairs:
            product(a, b)
    flops = repeats * sum(2 * rows * a.shape[1] * b.shape[1] for a, b in pairs)
    return flops / (time.perf_counter() - start) / 1e9


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
    seconds = {}
    for name, run in runs.items():
        run()  # warm-up
        start = time.perf_counter()
        run()
        seconds[name] = time.perf_counter() - start
        print(f"{name}: {seconds[name]:.2f} s unprofiled", flush=True)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run()
        print(f"==== {name}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows), flush=True)

    # the linear layers' arithmetic against the machine's GEMM rate on the same shapes
    linears = [m for m in uni.decoder.modules() if isinstance(m, torch.nn.Linear)]
    per_token = 2 * sum(m.in_features * m.out_features for m in linears)  # FLOPs per embedded token
    tokens = sum(len(uni.tokenizer(t)["input_ids"]) + 1 for t in texts)  # + the appended EOS
    rate = tokens / seconds["unirag UniModel.embed"]
    shapes = sorted({(m.in_features, m.out_features) for m in linears})
    gemm = gemm_gflops(uni.embed_batch_tokens, shapes)
    print(f"linear layers: {per_token / 1e6:.0f} MFLOP per token; UniModel.embed {rate:,.0f} tokens/s = "
          f"{rate * per_token / 1e9:.0f} GFLOP/s in them; bf16 GEMM on their shapes ({uni.embed_batch_tokens} rows) "
          f"{gemm:.0f} GFLOP/s -> at most {gemm * 1e9 / per_token:,.0f} tokens/s "
          f"({gemm * 1e9 / per_token / rate:.2f}x today's) if nothing else cost time", flush=True)
    int8 = gemm_gflops(uni.embed_batch_tokens, shapes, "int8")
    print(f"int8 products (torch._int_mm) on the same shapes: {int8:.0f} GOP/s = {int8 / gemm:.2f}x bf16's", flush=True)


if __name__ == "__main__":
    main()
