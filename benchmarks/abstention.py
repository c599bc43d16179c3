"""Where to abstain: evidence relevance on a question's own passages vs where the documents do
not answer it.

Why: the ask flow answers "The documents don't say." when the best evidence explains the question
too weakly (`AskSettings.abstain_below`; relevance as `rag/evidence.py` defines it). A threshold
trades false abstentions (answerable questions refused) against true ones. For each question this
retrieves its top `--top-k` chunks as `ask` does, and scores relevance three times: on those
chunks; on the chunks retrieved for another question of the same set (`--shift` further on); and,
for every other set given, that set's questions asked of this collection as `ask` would (retrieval
and rerank included), questions about another manual that these documents do not answer. It
prints, per threshold, how many of each fall under it, over all the question sets together: first
for relevance alone, then for the ask flow's rule (relevance under `abstain_below`, or the best
unit's answer score, `Evidence.answer_gain`, under each threshold).

    python benchmarks/abstention.py --db runs/db \
        --set rust=../shared/data/eval/rag/rust_book_dev_answers.jsonl \
        --set pydocs=../shared/data/eval/rag/python_docs_dev.jsonl [--output runs/bench/abstention.json]

Each --set is COLLECTION=QUESTIONS (a collection already ingested into --db).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

THRESHOLDS = [round(0.1 * i, 1) for i in range(0, 16)]
GAIN_THRESHOLDS = [round(0.1 * i, 1) for i in range(0, 9)]


def signals(model, question: str, hits) -> tuple[float, float | None]:
    """(relevance, answer gain) of the evidence `ask` would select from these chunks."""
    from unirag.rag.evidence import select

    evidence = select(model, question, hits, scorers=("likelihood", "answer"))
    return evidence.relevance, evidence.answer_gain


def table_rows(*columns: list[float]) -> list[list]:
    return [[t] + [f"{sum(r < t for r in values)}/{len(values)}" for values in columns] for t in THRESHOLDS]


def rule_rows(settings, *columns: list[tuple[float, float | None]]) -> list[list]:
    """Per answer-gain threshold: how many (relevance, gain) pairs the ask flow's rule
    (`AskSettings.abstains`, with `settings.abstain_below`) refuses."""
    from dataclasses import replace

    from unirag.rag.evidence import Evidence

    rows = []
    for t in GAIN_THRESHOLDS:
        rule = replace(settings, abstain_answer_below=t)
        rows.append([t] + [f"{sum(rule.abstains(Evidence([], r, g)) for r, g in values)}/{len(values)}"
                           for values in columns])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--shift", type=int, default=7, help="the other question is this many rows further")
    parser.add_argument("--output", default="runs/bench/abstention.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions
    from unirag.rag.ask import AskSettings
    from unirag.rag.pipeline import retrieve
    from unirag.rag.store import connect, open_collection

    model = UniModel.load()
    client = connect(args.db)
    settings = AskSettings()
    own, other, foreign, per_set = [], [], [], {}
    questions_of, collections = {}, {}
    for spec in args.set:
        name, _, path = spec.partition("=")
        collection = open_collection(client, name, model)
        questions = [q.question for q in load_questions(path)]
        hits = [retrieve(model, collection, q, args.top_k, settings.retrieval, settings.rerank) for q in questions]
        mine = [signals(model, q, h) for q, h in zip(questions, hits)]
        theirs = [signals(model, q, hits[(i + args.shift) % len(hits)]) for i, q in enumerate(questions)]
        per_set[name] = {"own": mine, "other": theirs}
        questions_of[name] = questions
        collections[name] = collection
        own += mine
        other += theirs
    for name, collection in collections.items():  # every other set's questions, asked of this collection
        asked = [q for other_name, qs in questions_of.items() if other_name != name for q in qs]
        per_set[name]["foreign"] = [signals(model, q, retrieve(model, collection, q, args.top_k, settings.retrieval,
                                                                settings.rerank)) for q in asked]
        foreign += per_set[name]["foreign"]
    heads = ("own passages: abstained", "another question's: abstained", "another manual's question: abstained")
    relevance = [[r for r, _ in values] for values in (own, other, foreign)]
    print(markdown_table(("abstain below",) + heads, table_rows(*relevance)))
    print(f"\nrelevance under {settings.abstain_below}, or answer gain under:")
    print(markdown_table(("answer gain below",) + heads, rule_rows(settings, own, other, foreign)))
    # pooled counts hide that relevance is on another scale in each collection
    kinds = ("own", "other", "foreign")
    medians = [[name] + [f"{statistics.median(x[i] for x in v[k] if x[i] is not None):.2f}" if v.get(k) else ""
                         for i in (0, 1) for k in kinds]
               for name, v in per_set.items()]
    print(markdown_table(("collection", "median relevance: own", "another question's", "another manual's question",
                          "median answer gain: own", "another question's", "another manual's question"), medians))
    path = write_json(args.output, {"machine": machine_info(), "model": model.name, "sets": args.set,
                                    "top_k": args.top_k, "shift": args.shift,
                                    "abstain_below": settings.abstain_below,
                                    "signals": per_set})  # (relevance, answer gain) per question
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
