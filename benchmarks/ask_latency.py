"""`ask` latency on a real collection, per answer mode, end to end through the one ask flow.

Why: the latency a user feels is retrieval plus the answer's first visible words. For each of a
fixed list of questions (the first `--n` of a question set) this runs `unirag.answer.ask.ask`, what
`unirag ask` runs, and times from the question:

- first text: when the first piece of the answer reaches the caller (what `ask` prints first);
- total: the whole answer.

Variants (`--variants`, the names `unirag eval rag --variants` takes; unirag/evaluation/rag.py):
"chunks" generates from the three whole chunks, as the flow did before evidence selection; the
others quote evidence and/or generate from it. Each variant runs over the same questions in one
process, interleaved: every question is asked of each variant in turn, the order reversed from
one question to the next, so that a machine whose speed drifts during the run slows every
variant alike.

    python benchmarks/ask_latency.py --db runs/db --collection rust [--n 20]
        [--variants chunks,default] [--output runs/bench/ask_latency.json]
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

HEADERS = ("variant", "questions", "p50 first text s", "p95 first text s", "p50 total s", "p95 total s",
           "p50 total / first variant's")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def one_ask(model, collection, question: str, settings) -> dict:
    from unirag.answer.ask import ask

    start = time.perf_counter()
    result = ask(model, collection, question, settings)
    first = None
    for piece in result.stream():
        if first is None and piece.strip():
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    return {"first_text_s": first if first is not None else total, "total_s": total, "answer": result.text}


def summarise(variant: str, runs: list[dict], reference: list[dict] | None) -> dict:
    first = [r["first_text_s"] for r in runs]
    total = [r["total_s"] for r in runs]
    ratio = statistics.median(total) / statistics.median(r["total_s"] for r in reference) if reference else 1.0
    return {"variant": variant, "questions": len(runs),
            "p50_first_text_s": statistics.median(first), "p95_first_text_s": percentile(first, 95),
            "p50_total_s": statistics.median(total), "p95_total_s": percentile(total, 95), "ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="embedded Chroma folder holding the collection")
    parser.add_argument("--collection", default="rust-book")
    parser.add_argument("--questions", default="../shared/data/eval/rag/rust_book_dev.jsonl")
    parser.add_argument("--n", type=int, default=20, help="the first N questions")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--variants", default="chunks,default")
    parser.add_argument("--output", default="runs/bench/ask_latency.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.evaluation.rag import answer_variants, load_questions
    from unirag.retrieval.store import connect, open_collection

    model = UniModel.load(args.model, args.adapter)
    collection = open_collection(connect(args.db), args.collection, model)
    questions = [q.question for q in load_questions(args.questions)[:args.n]]
    variants = answer_variants(args.variants)
    one_ask(model, collection, questions[0], next(iter(variants.values())))  # warm-up: BM25 index, first calls
    runs: dict[str, list[dict]] = {label: [] for label in variants}
    for i, question in enumerate(questions):
        for label in (list(variants) if i % 2 == 0 else list(variants)[::-1]):
            runs[label].append(one_ask(model, collection, question, variants[label]))
    first = next(iter(runs.values()))
    rows = [summarise(label, r, first) for label, r in runs.items()]
    print(markdown_table(HEADERS, [[r["variant"], r["questions"], r["p50_first_text_s"], r["p95_first_text_s"],
                                    r["p50_total_s"], r["p95_total_s"], r["ratio"]] for r in rows]))
    settings = {k: getattr(args, k) for k in ("db", "collection", "questions", "n", "variants")}
    path = write_json(args.output, {"machine": machine_info(), "model": model.name, "settings": settings,
                                    "rows": rows, "runs": runs})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
