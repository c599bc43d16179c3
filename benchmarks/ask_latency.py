"""`ask` latency on a real collection: no reuse vs query-prefix reuse vs document-side reuse.

Why: the latency a user feels is retrieval plus the answer's first visible words, not a
micro-benchmark. For each of a fixed list of questions (the first `--n` of the Rust-book dev set)
this runs exactly what `unirag ask` runs (hybrid retrieval with the default rerank, `fit`, the
streamed `answer` with its loop stop and attribution) and times, from the question:

- retrieve: the search (question embedding, Chroma, BM25, rerank);
- first text: when the first piece of the answer reaches the caller (what `ask` prints first);
- total: the whole answer.

Modes, each over the same questions:
- none: `search()` then `answer()`, no cache;
- prefix: `search(keep_cache=True)` and `answer(prefix=...)`: the embedding pass's KV cache is
  reused where the prompt starts with the embedded tokens (the reused token count is reported:
  with a chat template that opens with a system turn it is 0, see `rag/pipeline.py`);
- doc cold / doc warm: `answer(chunk_cache=...)` with an empty `ChunkKVCache`, then the same
  questions again with the cache the first pass filled (APPROXIMATE reuse: outputs can differ;
  the number of answers token-identical to "none" is reported).
- compiled (with `--compile`): as none, on a second UniModel over the same module with
  `compile_decode=True`; its compile happens in an untimed warm-up question.

    python benchmarks/ask_latency.py --db runs/rust-db-v2 --collection rust-book [--n 20]
        [--max-new-tokens 64] [--rerank 5] [--compile] [--output runs/bench/ask_latency.json]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

HEADERS = ("mode", "questions", "p50 retrieve s", "p50 first text s", "p95 first text s", "p50 total s",
           "p95 total s", "reused prompt tokens", "same answer as none")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def one_ask(model, collection, question: str, args, mode: str, chunk_cache=None) -> dict:
    from unirag.rag.pipeline import answer, fit, search

    start = time.perf_counter()
    found = search(model, collection, question, args.top_k, keep_cache=(mode == "prefix"), rerank=args.rerank)
    retrieved = time.perf_counter() - start
    hits, _ = fit(model, question, found.hits, max_new_tokens=args.max_new_tokens)
    reused = 0
    if found.prefix is not None:
        from unirag.rag.pipeline import build_prompt

        reused = model.reusable_prefix(found.prefix, model.prompt_ids(build_prompt(question, hits)))
    first, pieces = None, []
    for piece in answer(model, question, hits, max_new_tokens=args.max_new_tokens, stream=True,
                        prefix=found.prefix, chunk_cache=chunk_cache):
        if first is None:
            first = time.perf_counter() - start
        pieces.append(piece)
    total = time.perf_counter() - start
    return {"retrieve_s": retrieved, "first_text_s": first if first is not None else total, "total_s": total,
            "reused_tokens": reused, "answer": "".join(pieces)}


def summarise(mode: str, runs: list[dict], reference: list[dict] | None) -> dict:
    first = [r["first_text_s"] for r in runs]
    total = [r["total_s"] for r in runs]
    same = sum(r["answer"] == ref["answer"] for r, ref in zip(runs, reference)) if reference else len(runs)
    return {"mode": mode, "questions": len(runs),
            "p50_retrieve_s": statistics.median(r["retrieve_s"] for r in runs),
            "p50_first_text_s": statistics.median(first), "p95_first_text_s": percentile(first, 95),
            "p50_total_s": statistics.median(total), "p95_total_s": percentile(total, 95),
            "reused_tokens": statistics.median(r["reused_tokens"] for r in runs), "same_as_none": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="embedded Chroma folder holding the collection")
    parser.add_argument("--collection", default="rust-book")
    parser.add_argument("--questions", default="../shared/data/eval/rag/rust_book_dev.jsonl")
    parser.add_argument("--n", type=int, default=20, help="the first N questions")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--rerank", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--doc-cache-mb", type=float, default=512)
    parser.add_argument("--compile", action="store_true", help="add the compiled-decode mode")
    parser.add_argument("--output", default="runs/bench/ask_latency.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.doc_cache import ChunkKVCache
    from unirag.evaluation.rag import load_questions
    from unirag.rag.store import connect, open_collection

    model = UniModel.load(args.model, args.adapter)
    collection = open_collection(connect(args.db), args.collection, model)
    questions = [q.question for q in load_questions(args.questions)[:args.n]]
    one_ask(model, collection, questions[0], args, "none")  # warm-up: BM25 index, first-call costs
    runs: dict[str, list[dict]] = {}
    cache = ChunkKVCache(args.doc_cache_mb)
    models = {mode: model for mode in ("none", "prefix", "doc cold", "doc warm")}
    if args.compile:
        models["compiled"] = UniModel(model.model, model.tokenizer, model.name, info=model.info, compile_decode=True)
        one_ask(models["compiled"], collection, questions[0], args, "none")  # compiles
    for mode, runner in models.items():
        chunk_cache = cache if mode.startswith("doc") else None
        runs[mode] = [one_ask(runner, collection, q, args, mode, chunk_cache) for q in questions]
        print(f"{mode}: done", flush=True)
    rows = [summarise(mode, r, runs["none"] if mode != "none" else None) for mode, r in runs.items()]
    print(markdown_table(HEADERS, [[r["mode"], r["questions"], r["p50_retrieve_s"], r["p50_first_text_s"],
                                    r["p95_first_text_s"], r["p50_total_s"], r["p95_total_s"], r["reused_tokens"],
                                    f"{r['same_as_none']}/{r['questions']}"] for r in rows]))
    settings = {k: getattr(args, k) for k in ("db", "collection", "questions", "n", "top_k", "rerank",
                                               "max_new_tokens", "doc_cache_mb", "compile")}
    path = write_json(args.output, {"machine": machine_info(), "model": model.name, "settings": settings,
                                    "rows": rows, "runs": runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
