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
for relevance alone, then for the ask flow's rule (relevance under one threshold, or the best
unit's answer score, `Evidence.answer_gain`, under another) per pair of thresholds.

    python benchmarks/abstention.py --db runs/db \
        --set rust=../shared/data/eval/rag/rust_book_dev_answers.jsonl \
        --set pydocs=../shared/data/eval/rag/python_docs_dev.jsonl [--output runs/bench/abstention.json]
    python benchmarks/abstention.py --tables-from runs/bench/abstention.json  # the tables again

Each --set is COLLECTION=QUESTIONS (a collection already ingested into --db).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

THRESHOLDS = [round(0.1 * i, 1) for i in range(0, 16)]
GAIN_THRESHOLDS = [round(0.1 * i, 1) for i in range(0, 9)]
RULE_RELEVANCE = (0.1, 0.2, 0.3)  # relevance thresholds the combined rule is tabled with


def signals(model, question: str, hits) -> tuple[float, float | None]:
    """(relevance, answer gain) of the evidence `ask` would select from these chunks."""
    from unirag.rag.evidence import select

    evidence = select(model, question, hits, scorers=("likelihood", "answer"))
    return evidence.relevance, evidence.answer_gain


def table_rows(*columns: list[float]) -> list[list]:
    return [[t] + [f"{sum(r < t for r in values)}/{len(values)}" for values in columns] for t in THRESHOLDS]


def rule_rows(settings, *columns: list[tuple[float, float | None]]) -> list[list]:
    """Per (relevance threshold, answer-gain threshold): how many (relevance, gain) pairs the ask
    flow's rule (`AskSettings.abstains`) refuses."""
    from dataclasses import replace

    from unirag.rag.evidence import Evidence

    rows = []
    for below in RULE_RELEVANCE:
        for t in GAIN_THRESHOLDS:
            rule = replace(settings, abstain_below=below, abstain_answer_below=t)
            rows.append([below, t] + [f"{sum(rule.abstains(Evidence([], r, g)) for r, g in values)}/{len(values)}"
                                      for values in columns])
    return rows


def report(per_set: dict) -> None:
    """The tables, from the signals per set ({"own"|"other"|"foreign": [(relevance, gain)]})."""
    from unirag.rag.ask import AskSettings

    own, other, foreign = ([x for v in per_set.values() for x in v.get(k, [])] for k in ("own", "other", "foreign"))
    heads = ("own passages: abstained", "another question's: abstained", "another manual's question: abstained")
    relevance = [[r for r, _ in values] for values in (own, other, foreign)]
    print(markdown_table(("abstain below",) + heads, table_rows(*relevance)))
    print("\nrelevance under the first threshold, or answer gain under the second:")
    print(markdown_table(("relevance below", "answer gain below") + heads,
                         rule_rows(AskSettings(), own, other, foreign)))
    # pooled counts hide that relevance is on another scale in each collection
    kinds = ("own", "other", "foreign")

    def median(values: list) -> str:
        values = [x for x in values if x is not None]
        return f"{statistics.median(values):.2f}" if values else ""

    medians = [[name] + [median([x[i] for x in v.get(k, [])]) for i in (0, 1) for k in kinds]
               for name, v in per_set.items()]
    print(markdown_table(("collection", "median relevance: own", "another question's", "another manual's question",
                          "median answer gain: own", "another question's", "another manual's question"), medians))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db")
    parser.add_argument("--set", action="append", help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--shift", type=int, default=7, help="the other question is this many rows further")
    parser.add_argument("--output", default="runs/bench/abstention.json")
    parser.add_argument("--tables-from", metavar="JSON",
                        help="print the tables from the signals an earlier run wrote, scoring nothing")
    args = parser.parse_args()
    if args.tables_from:
        report(json.loads(Path(args.tables_from).read_text(encoding="utf-8"))["signals"])
        return
    if not (args.db and args.set):
        parser.error("--db and --set are required (or --tables-from)")

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions
    from unirag.rag.ask import AskSettings
    from unirag.rag.pipeline import retrieve
    from unirag.rag.store import connect, open_collection

    model = UniModel.load()
    client = connect(args.db)
    settings = AskSettings()
    per_set = {}
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
    for name, collection in collections.items():  # every other set's questions, asked of this collection
        asked = [q for other_name, qs in questions_of.items() if other_name != name for q in qs]
        per_set[name]["foreign"] = [signals(model, q, retrieve(model, collection, q, args.top_k, settings.retrieval,
                                                                settings.rerank)) for q in asked]
    report(per_set)
    path = write_json(args.output, {"machine": machine_info(), "model": model.name, "sets": args.set,
                                    "top_k": args.top_k, "shift": args.shift,
                                    "abstain_below": settings.abstain_below,
                                    "signals": per_set})  # (relevance, answer gain) per question
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
