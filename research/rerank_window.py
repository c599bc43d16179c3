"""The rerank on a shorter window of each candidate: file hit@k and rerank seconds (issue 91, lever 1).

Why: the rerank reads each of 15 candidates whole (up to 256 tokens) before the question, one
pass each: more than half of an answer's time. The question's likelihood depends most on the
part of a passage that answers it; reading a window of the candidate around its best lexical
match (the sentence sharing most of the question's stemmed words, and what follows it) costs a
fraction. Each variant reranks the same hybrid candidates, retrieved once per question:

- "full": the chunk's first 256 tokens (what `rerank` reads today);
- "headN": the chunk's first N tokens;
- "matchN": N tokens from the sentence that shares most question words (ties: the earliest).

    python research/rerank_window.py --db runs/dev/db --set rust=QUESTIONS.jsonl ... \\
        [--variants full,head128,match128,match64] [--output runs/bench/rerank_window.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import machine_info, markdown_table, write_json  # noqa: E402


def window(model, question: str, text: str, variant: str) -> str:
    from unirag.answer.sentences import split_units
    from unirag.retrieval.lexical import tokenize

    if variant == "full":
        return text
    n = int(variant.removeprefix("head").removeprefix("match"))
    start = 0
    if variant.startswith("match"):
        units = split_units(text)
        if units:
            asked = set(tokenize([question]).vocab)
            shared = []
            for u in units:
                shared.append(len(asked & set(tokenize([text[u.start:u.end]]).vocab)))
            start = units[max(range(len(units)), key=lambda k: (shared[k], -k))].start
    ids = model.tokenizer(text[start:], add_special_tokens=False)["input_ids"][:n]
    return model.tokenizer.decode(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--variants", default="full,head128,match128,match64")
    parser.add_argument("--depth", type=int, default=15)
    parser.add_argument("--output", default="runs/bench/rerank_window.json")
    args = parser.parse_args()

    from tqdm.auto import tqdm

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions, score_ranking
    from unirag.retrieval.rerank import rerank
    from unirag.retrieval.search import retrieve
    from unirag.retrieval.store import connect, open_collection

    model = UniModel.load()
    client = connect(args.db)
    variants = args.variants.split(",")
    table, results = [], {}
    for spec in args.set:
        name, _, path = spec.partition("=")
        collection = open_collection(client, name, model)
        rows = {v: [] for v in variants}
        seconds = {v: 0.0 for v in variants}
        for q in tqdm(load_questions(path), desc=name, unit="question"):
            hits = retrieve(model, collection, q.question, args.depth, "hybrid", 0)
            by_id = {h.id: h for h in hits}
            for v in variants:
                shown = [replace(h, text=window(model, q.question, h.text, v)) for h in hits]
                started = time.perf_counter()
                order = rerank(model, q.question, shown, args.depth)
                seconds[v] += time.perf_counter() - started
                ranked = [by_id[h.id].source for h in order]
                rows[v].append(score_ranking(ranked, q.files))
        results[name] = {}
        for v in variants:
            mean = {k: 100 * sum(r[k] for r in rows[v]) / len(rows[v]) for k in ("hit@1", "hit@3")}
            results[name][v] = {**mean, "rerank_s": seconds[v] / len(rows[v])}
            table.append([name, v, f"{mean['hit@1']:.1f}", f"{mean['hit@3']:.1f}", f"{seconds[v] / len(rows[v]):.2f}"])
    print(markdown_table(("set", "variant", "hit@1", "hit@3", "rerank s / question"), table))
    print(f"wrote {write_json(args.output, {'machine': machine_info(), 'sets': args.set, 'results': results})}")


if __name__ == "__main__":
    main()
