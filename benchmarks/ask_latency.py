"""`ask` latency on a real collection: the default flow beside a naive one, stage by stage.

Why: the latency a user feels is retrieval plus the answer's first visible words, and what the
default flow's extra work (the rerank, the evidence selection) costs is only worth it if it
answers more questions. For each of a fixed list of questions (the first `--n` of a dev set)
this runs `unirag.answer.ask.ask`, what `unirag ask` runs, for every variant, and records:

- first text: when the first piece of the answer reaches the caller (what `ask` prints first);
- total: the whole answer;
- the seconds of each stage (`Answer.seconds`: embed question, dense search, bm25, rerank,
  evidence, answer text);
- whether the answer holds the question's keys (`unirag.evaluation.answers.score`, as
  `unirag eval rag --answers` counts them), where the set has keys.

Variants: "default" (`AskSettings()`), "naive" (hybrid top 3, no rerank, no evidence selection,
64 tokens generated from the three whole chunks, no abstention) and any name `unirag eval rag
--variants` takes (unirag/evaluation/rag.py). Every question is asked of each variant in turn, the
order reversed from one question to the next, so that a machine whose speed drifts during the
run slows every variant alike. The very first ask of the process (the first variant, first
question: the BM25 index loaded, first calls) is reported on its own as "first in process" and
asked again for the warm figures. Run it once per dev set (one collection each).

    python benchmarks/ask_latency.py --db runs/db --collection rust-book \
        --questions ../shared/data/eval/rag/rust_book_dev_answers.jsonl [--n 20] [--device auto]
        [--variants default,naive] [--output runs/bench/ask_latency.json]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

STAGES = ("embed question", "dense search", "bm25", "rerank", "evidence", "answer text")
HEADERS = ("variant", "questions", "p50 first text s", "p95 first text s", "p50 total s", "p95 total s",
           "p50 total / first variant's", *[f"p50 {s} s" for s in STAGES], "keys right")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def naive_settings():
    """The flow without the default's extra passes: hybrid top 3, no rerank, no evidence
    selection, 64 tokens generated from the whole chunks, never abstaining."""
    from dataclasses import make_dataclass

    from unirag.evaluation.rag import WholeChunks

    naive = make_dataclass("NaiveFlow", [("rerank", int, 0)], bases=(WholeChunks,), frozen=True)
    return naive(top_k=3, max_new_tokens=64)


def variants_for(names: str) -> dict:
    from unirag.evaluation.rag import answer_variants

    out = {}
    for name in filter(None, (n.strip() for n in names.split(","))):
        out[name] = naive_settings() if name == "naive" else answer_variants(name)[name]
    return out


def one_ask(model, collection, question, settings) -> dict:
    """Ask one question (a `evaluation.rag.Question`, or a plain string); time it and score its keys."""
    from unirag.answer.ask import AskSettings, ask
    from unirag.evaluation.answers import score
    from unirag.evaluation.rag import WholeChunks, chunks_answer
    from unirag.retrieval.search import Trace, retrieve

    text = getattr(question, "question", question)
    start = time.perf_counter()
    if isinstance(settings, WholeChunks):  # the naive flow: hybrid search, then the whole chunks
        trace = Trace()
        # "chunks" retrieves as the default does (its rerank), "naive" without a rerank
        rerank = getattr(settings, "rerank", AskSettings().rerank)
        hits = retrieve(model, collection, text, settings.top_k, rerank=rerank, trace=trace)
        result = chunks_answer(model, text, hits, settings)
        result.seconds.update(trace.seconds)
    else:
        result = ask(model, collection, text, settings)
    first = None
    for piece in result.stream():
        if first is None and piece.strip():
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    keys = tuple(getattr(question, "keys", ()) or ())
    right = score(result.text, keys, [h.text for h in result.hits], result.looped)["key_correct"] if keys else None
    return {"first_text_s": first if first is not None else total, "total_s": total, "answer": result.text,
            "stages": {s: result.seconds.get(s, 0.0) for s in STAGES}, "key_correct": right}


def summarise(variant: str, runs: list[dict], reference: list[dict] | None) -> dict:
    first = [r["first_text_s"] for r in runs]
    total = [r["total_s"] for r in runs]
    ratio = statistics.median(total) / statistics.median(r["total_s"] for r in reference) if reference else 1.0
    scored = [r["key_correct"] for r in runs if r.get("key_correct") is not None]
    return {"variant": variant, "questions": len(runs),
            "p50_first_text_s": statistics.median(first), "p95_first_text_s": percentile(first, 95),
            "p50_total_s": statistics.median(total), "p95_total_s": percentile(total, 95), "ratio": ratio,
            "p50_stage_s": {s: statistics.median(r.get("stages", {}).get(s, 0.0) for r in runs) for s in STAGES},
            "keys_right": sum(scored) if scored else None, "keys_asked": len(scored)}


def table_row(row: dict) -> list:
    keys = "" if row["keys_right"] is None else f"{row['keys_right']}/{row['keys_asked']}"
    return [row["variant"], row["questions"], row["p50_first_text_s"], row["p95_first_text_s"], row["p50_total_s"],
            row["p95_total_s"], row["ratio"], *[row["p50_stage_s"][s] for s in STAGES], keys]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="embedded Chroma folder holding the collection")
    parser.add_argument("--chroma-url", help="a Chroma server instead of --db")
    parser.add_argument("--collection", default="rust-book")
    parser.add_argument("--questions", default="../shared/data/eval/rag/rust_book_dev_answers.jsonl")
    parser.add_argument("--n", type=int, default=20, help="the first N questions")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    parser.add_argument("--variants", default="default,naive")
    parser.add_argument("--output", default="runs/bench/ask_latency.json")
    args = parser.parse_args()
    if not args.db and not args.chroma_url:
        parser.error("give --db or --chroma-url")

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions
    from unirag.retrieval.store import connect, open_collection

    load_before = os.getloadavg()
    started = time.perf_counter()
    model = UniModel.load(args.model, args.adapter, device=args.device)
    load_s = time.perf_counter() - started
    collection = open_collection(connect(args.db, args.chroma_url, must_exist=True), args.collection, model)
    questions = load_questions(args.questions)[:args.n]
    variants = variants_for(args.variants)
    labels = list(variants)
    # the first ask of this process, timed alone; then every question warm, variants in turns
    cold = dict(one_ask(model, collection, questions[0], variants[labels[0]]), variant=labels[0])
    runs: dict[str, list[dict]] = {label: [] for label in labels}
    for i, question in enumerate(questions):
        for label in (labels if i % 2 == 0 else labels[::-1]):
            runs[label].append(one_ask(model, collection, question, variants[label]))
    first = runs[labels[0]]
    rows = [summarise(label, r, first) for label, r in runs.items()]
    load_after = os.getloadavg()
    print(f"model {model.name} on {model.device} ({_device_name(model)}), loaded in {load_s:.1f} s; "
          f"{len(questions)} questions of {args.questions}; load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after (timings under other load are not trustworthy)")
    print(markdown_table(HEADERS, [table_row(r) for r in rows]))
    print(f"first in process ({cold['variant']}): first text {cold['first_text_s']:.2f} s, total "
          f"{cold['total_s']:.2f} s; stages " + ", ".join(f"{s} {v:.2f}" for s, v in cold["stages"].items()))
    settings = {k: getattr(args, k) for k in ("db", "chroma_url", "collection", "questions", "n", "variants", "device")}
    path = write_json(args.output, {"machine": machine_info(), "device": _device_name(model), "model": model.name,
                                    "model_load_s": load_s, "load_average": [load_before, load_after],
                                    "settings": settings, "rows": rows, "first_in_process": cold, "runs": runs})
    print(f"wrote {path}")


def _device_name(model) -> str:
    import torch

    if model.device.type == "cuda":
        return torch.cuda.get_device_name(model.device)
    return f"CPU, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    main()
