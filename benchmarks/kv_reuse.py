"""Time to first token with and without reusing the embedding pass's KV cache.

In `unirag ask` the question is embedded anyway (for retrieval); with reuse, that pass's KV
cache also serves as the start of the answer's prompt, so generation prefills only the rest.
This script builds, for each prefix length, a prompt whose first ~N tokens are exactly what
was embedded (the chat head, a passage, then the EOS is dropped), and times greedy generation
from that prompt with `prefix=` and without. The embedding pass itself is timed separately: it
is paid in both cases. Greedy outputs are compared token by token.

    python benchmarks/kv_reuse.py [--lengths 100,500,1000,2000] [--repeats 3] [--new-tokens 32]
                                  [--output runs/bench/kv_reuse.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

SYSTEM = "Answer the question about the passage."
QUESTION = "\n\nQuestion: What is the passage about? Answer in one sentence."
ROOT = Path(__file__).resolve().parents[1]


def passage_ids(model, n_tokens: int) -> list[int]:
    """`n_tokens` token ids of English prose (this repository's docs, repeated as needed)."""
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))
    ids = model.tokenizer(text or "The quick brown fox jumps over the lazy dog. ", add_special_tokens=False)["input_ids"]
    while len(ids) < n_tokens:
        ids = ids + ids
    return ids[:n_tokens]


def timed_generation(model, prompt_ids, prefix, new_tokens: int) -> tuple[float, float, list[int]]:
    """(seconds to the first token, seconds to the last, the token ids) of one greedy run."""
    start = time.perf_counter()
    first = None
    out = []
    for token in model.generate_ids(prompt_ids, max_new_tokens=new_tokens, prefix=prefix):
        if first is None:
            first = time.perf_counter() - start
        out.append(token)
    total = time.perf_counter() - start
    return (first if first is not None else total), total, out


def bench_length(model, length: int, repeats: int, new_tokens: int) -> dict:
    head = model.prompt_head(SYSTEM)
    head_len = len(model.tokenizer(head, add_special_tokens=False)["input_ids"]) + len(model._prefix_ids)
    passage = model.tokenizer.decode(passage_ids(model, max(length - head_len, 1)))
    prompt_ids = model.prompt_ids([{"role": "user", "content": passage + QUESTION}], system=SYSTEM)
    embed_s, runs = [], {"reuse": [], "no_reuse": []}
    outputs = {}
    timed_generation(model, prompt_ids, None, 2)  # warm-up
    for _ in range(repeats):
        start = time.perf_counter()
        _, prefix = model.embed_with_cache(passage, instruction=head)
        embed_s.append(time.perf_counter() - start)
        for name, p in (("reuse", prefix), ("no_reuse", None)):
            ttft, total, ids = timed_generation(model, prompt_ids, p, new_tokens)
            runs[name].append((ttft, total))
            outputs.setdefault(name, ids)
    med = {name: (statistics.median(t for t, _ in r), statistics.median(s for _, s in r)) for name, r in runs.items()}
    return {
        "prefix_tokens_target": length, "embedded_tokens": len(prefix), "prompt_tokens": len(prompt_ids),
        "reused_tokens": model.reusable_prefix(prefix, prompt_ids), "new_tokens": len(outputs["reuse"]),
        "embed_s": statistics.median(embed_s),
        "ttft_reuse_s": med["reuse"][0], "ttft_no_reuse_s": med["no_reuse"][0],
        "total_reuse_s": med["reuse"][1], "total_no_reuse_s": med["no_reuse"][1],
        "ttft_saving": 1 - med["reuse"][0] / med["no_reuse"][0],
        "identical": outputs["reuse"] == outputs["no_reuse"], "repeats": repeats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--device", default=None, help="auto (default: CUDA where torch sees a GPU), cpu or cuda")
    parser.add_argument("--lengths", default="100,500,1000,2000", help="reused prefix lengths, in tokens")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--output", default="runs/bench/kv_reuse.json")
    args = parser.parse_args()

    import torch

    from unirag import UniModel
    lengths = [int(x) for x in args.lengths.split(",") if x.strip()]
    model = UniModel.load(args.model, args.adapter, precision=args.precision, device=args.device,
                          max_length=max(lengths) + 64)
    rows = []
    header = f"{'prefix':>7} {'reused':>7} {'prompt':>7} {'embed s':>8} {'TTFT no':>8} {'TTFT re':>8} " \
             f"{'saving':>7} {'total no':>9} {'total re':>9} identical"
    print(header)
    for length in lengths:
        r = bench_length(model, length, args.repeats, args.new_tokens)
        rows.append(r)
        print(f"{length:>7} {r['reused_tokens']:>7} {r['prompt_tokens']:>7} {r['embed_s']:>8.3f} "
              f"{r['ttft_no_reuse_s']:>8.3f} {r['ttft_reuse_s']:>8.3f} {r['ttft_saving']:>7.1%} "
              f"{r['total_no_reuse_s']:>9.3f} {r['total_reuse_s']:>9.3f} {r['identical']}", flush=True)
    result = {"model": model.name, "device": str(model.device), "precision": str(model.autocast_dtype or "fp32"),
              "torch_threads": torch.get_num_threads(), "machine": platform.processor() or platform.machine(),
              "new_tokens": args.new_tokens, "rows": rows}
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
