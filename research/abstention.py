"""Where to abstain: evidence relevance on a question's own passages vs where the documents do
not answer it.

Why: the ask flow answers "The documents don't say." when the best evidence explains the question
too weakly (`ask.ABSTAIN_BELOW`; relevance as `answer/evidence.py` defines it), when no unit
reads as an answer to it (`ABSTAIN_ANSWER_BELOW`), or when no unit is about what it asks
(`ABSTAIN_SIMILARITY_BELOW`). A threshold trades false abstentions (answerable questions refused)
against true ones. For each question this retrieves its top `--top-k` chunks as `ask` does, and
scores the evidence on those chunks; on the chunks retrieved for another question of the same set
(`--shift` further on); for every other set given, that set's questions asked of this collection
as `ask` would (retrieval and rerank included), questions about another manual that these
documents do not answer; and with `--unrelated`, questions about something else altogether
(every `--unrelated-step`-th row of a question file, `--unrelated-n` of them: ARC-Easy's and
PIQA's, in the lm-eval files of `../shared/data/eval/lm`), asked of every collection. It prints,
per threshold, how many of each fall under it, over all the question sets together: relevance
alone, the rule of relevance and the best unit's answer score (`Evidence.answer_gain`) per pair of
thresholds, then the ask flow's rule with the best unit's similarity to the question
(`Evidence.similarity`) under each threshold, and the test on names the question gives that the
collection never mentions (`answer/mentions.py`) alone, beside the evidence tests and with them.
Each rule is a `Rule`: the ask flow's tests with other thresholds, or some of them left out.

    python research/abstention.py --db runs/db \
        --set rust=../shared/data/eval/rag/rust_book_dev_answers.jsonl \
        --set pydocs=../shared/data/eval/rag/python_docs_dev.jsonl \
        [--unrelated ../shared/data/eval/lm/arc_easy.jsonl --unrelated ../shared/data/eval/lm/piqa.jsonl] \
        [--output runs/bench/abstention.json]
    python research/abstention.py --tables-from runs/bench/abstention.json  # the tables again
    python research/abstention.py --db runs/db --set ... --names-only  # the names test alone, no model

Each --set is COLLECTION=QUESTIONS (a collection already ingested into --db).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

THRESHOLDS = [round(0.1 * i, 1) for i in range(0, 16)]
GAIN_THRESHOLDS = [round(0.1 * i, 1) for i in range(0, 9)]
RULE_RELEVANCE = (0.1, 0.2, 0.3)  # relevance thresholds the combined rule is tabled with
SIMILARITY_THRESHOLDS = (0.0, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65)
KINDS = ("own", "other", "foreign", "unrelated")
HEADS = ("own passages: abstained", "another question's: abstained", "another manual's question: abstained",
         "unrelated question: abstained")


def signals(model, question: str, hits, collection) -> tuple[float, float | None, float | None, int]:
    """(relevance, answer gain, similarity) of the evidence `ask` would select from these chunks,
    and 1 if the question gives names that `collection` never mentions (else 0)."""
    from unirag.answer.ask import never_mentioned
    from unirag.answer.evidence import select

    evidence = select(model, question, hits)
    return (evidence.relevance, evidence.answer_gain, evidence.similarity,
            int(bool(never_mentioned(collection, question))))


def unrelated_questions(path: str, n: int, step: int) -> list[str]:
    """Every `step`-th question of a JSON-lines file, `n` of them: rows with a "question", or
    lm-eval rows whose "context" is "Question: ...\nAnswer:"."""
    rows = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [row.get("question") or row["context"].removeprefix("Question:").removesuffix("Answer:").strip()
             for row in rows[::step]]
    return texts[:n]


@dataclass(frozen=True)
class Rule:
    """The ask flow's abstention tests (`AskSettings.abstains`, then the names test) with these
    thresholds; None (False for the names) leaves a test out."""

    below: float | None
    answer_below: float | None
    similarity_below: float | None
    unmentioned: bool = True

    @classmethod
    def ask_flow(cls) -> "Rule":
        from unirag.answer.ask import ABSTAIN_ANSWER_BELOW, ABSTAIN_BELOW, ABSTAIN_SIMILARITY_BELOW

        return cls(ABSTAIN_BELOW, ABSTAIN_ANSWER_BELOW, ABSTAIN_SIMILARITY_BELOW)

    def refuses(self, values) -> bool:
        # files written before the similarity or the names test lack them
        relevance, gain, similarity, unmentioned = (list(values) + [None, None, 0])[:4]
        return ((self.below is not None and relevance < self.below)
                or (self.answer_below is not None and gain is not None and gain < self.answer_below)
                or (self.similarity_below is not None and similarity is not None
                    and similarity < self.similarity_below)
                or bool(self.unmentioned and unmentioned))


def _refused(rule: Rule, column: list) -> str:
    """"k/n": how many of a column's signals (relevance, gain[, similarity[, unmentioned]]) `rule` refuses."""
    return f"{sum(rule.refuses(v) for v in column)}/{len(column)}"


def table_rows(*columns: list[float]) -> list[list]:
    return [[t] + [f"{sum(r < t for r in values)}/{len(values)}" for values in columns] for t in THRESHOLDS]


def rule_rows(*columns: list) -> list[list]:
    """Per (relevance threshold, answer-gain threshold): how many signals (relevance, gain[,
    similarity]) the rule of those two tests (similarity and names left out) refuses."""
    return [[below, t] + [_refused(Rule(below, t, None, False), values) for values in columns]
            for below in RULE_RELEVANCE for t in GAIN_THRESHOLDS]


def similarity_rows(*columns: list) -> list[list]:
    """Per similarity threshold: how many signals the ask flow's evidence tests refuse with it (its
    own relevance and answer-gain thresholds; not the names test)."""
    flow = Rule.ask_flow()
    return [[t] + [_refused(replace(flow, similarity_below=t, unmentioned=False), values) for values in columns]
            for t in SIMILARITY_THRESHOLDS]


def names_rows(*columns: list) -> list[list]:
    """How many signals the names test refuses alone, the evidence tests alone, and both (the ask
    flow's rule)."""
    flow = Rule.ask_flow()
    rules = (("names never mentioned", Rule(None, None, None, True)),
             ("evidence tests", replace(flow, unmentioned=False)),
             ("either (the ask flow)", flow))
    return [[label] + [_refused(rule, values) for values in columns] for label, rule in rules]


def report(per_set: dict) -> None:
    """The tables, from the signals per set ({kind: [(relevance, gain, similarity)]}, KINDS)."""
    kinds = [k for k in KINDS if any(k in v for v in per_set.values())]
    heads = tuple(HEADS[KINDS.index(k)] for k in kinds)
    columns = [[x for v in per_set.values() for x in v.get(k, [])] for k in kinds]
    relevance = [[x[0] for x in values] for values in columns]
    print(markdown_table(("abstain below",) + heads, table_rows(*relevance)))
    print("\nrelevance under the first threshold, or answer gain under the second:")
    print(markdown_table(("relevance below", "answer gain below") + heads, rule_rows(*columns)))
    print("\nthe ask flow's evidence tests, the best unit's similarity to the question under the threshold:")
    print(markdown_table(("similarity below",) + heads, similarity_rows(*columns)))
    print("\nnames the question gives that the collection never mentions, the evidence tests, and either:")
    print(markdown_table(("rule",) + heads, names_rows(*columns)))

    # pooled counts hide that relevance is on another scale in each collection
    def median(values: list) -> str:
        values = [x for x in values if x is not None]
        return f"{statistics.median(values):.2f}" if values else ""

    names = ("median relevance", "median answer gain", "median similarity")
    medians = [[name] + [median([(list(x) + [None])[i] for x in v.get(k, [])]) for i in (0, 1, 2) for k in kinds]
               for name, v in per_set.items()]
    print("\n" + markdown_table(("collection",) + tuple(f"{n}: {k}" for n in names for k in kinds), medians))


def names_only(args) -> None:
    """Per collection, how many questions the names test alone refuses: its own set's, every other
    set's (asked of it) and the unrelated ones. It reads no passage, so no model is loaded."""
    from unirag.evaluation.rag import load_questions
    from unirag.answer.ask import never_mentioned
    from unirag.retrieval.store import connect, open_collection

    client = connect(args.db)
    sets = [spec.partition("=")[::2] for spec in args.set]
    questions = {name: [q.question for q in load_questions(path)] for name, path in sets}
    unrelated = [q for path in args.unrelated for q in unrelated_questions(path, args.unrelated_n, args.unrelated_step)]
    rows = []
    for name, _ in sets:
        collection = open_collection(client, name)

        def refused(qs: list[str]) -> str:
            return f"{sum(bool(never_mentioned(collection, q)) for q in qs)}/{len(qs)}"

        rows.append([name, refused(questions[name]),
                     refused([q for other, qs in questions.items() if other != name for q in qs]),
                     refused(unrelated) if unrelated else ""])
    print(markdown_table(("collection", "own questions", "other sets' questions", "unrelated questions"), rows))
    path = write_json(args.output, {"machine": machine_info(), "sets": args.set, "unrelated": args.unrelated,
                                    "unrelated_n": args.unrelated_n, "unrelated_step": args.unrelated_step,
                                    "names_refused": rows})
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db")
    parser.add_argument("--set", action="append", help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--shift", type=int, default=7, help="the other question is this many rows further")
    parser.add_argument("--unrelated", action="append", default=[], metavar="QUESTIONS.jsonl",
                        help="questions about something else, asked of every collection")
    parser.add_argument("--unrelated-n", type=int, default=20, help="questions taken from each --unrelated file")
    parser.add_argument("--unrelated-step", type=int, default=50, help="every this many rows of it")
    parser.add_argument("--output", default="runs/bench/abstention.json")
    parser.add_argument("--tables-from", metavar="JSON",
                        help="print the tables from the signals an earlier run wrote, scoring nothing")
    parser.add_argument("--names-only", action="store_true",
                        help="count only what the names test refuses (no model: seconds, any number of sets)")
    args = parser.parse_args()
    if args.tables_from:
        report(json.loads(Path(args.tables_from).read_text(encoding="utf-8"))["signals"])
        return
    if not (args.db and args.set):
        parser.error("--db and --set are required (or --tables-from)")
    if args.names_only:
        names_only(args)
        return

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions
    from unirag.answer.ask import AskSettings
    from unirag.retrieval.search import retrieve
    from unirag.retrieval.store import connect, open_collection

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
        mine = [signals(model, q, h, collection) for q, h in zip(questions, hits)]
        theirs = [signals(model, q, hits[(i + args.shift) % len(hits)], collection) for i, q in enumerate(questions)]
        per_set[name] = {"own": mine, "other": theirs}
        questions_of[name] = questions
        collections[name] = collection
    def asked_of(collection, questions: list[str]) -> list:  # retrieved and scored as `ask` would
        return [signals(model, q, retrieve(model, collection, q, args.top_k, settings.retrieval, settings.rerank),
                        collection) for q in questions]

    unrelated = [q for path in args.unrelated for q in unrelated_questions(path, args.unrelated_n, args.unrelated_step)]
    for name, collection in collections.items():  # every other set's questions, asked of this collection
        per_set[name]["foreign"] = asked_of(collection, [q for other, qs in questions_of.items() if other != name
                                                         for q in qs])
        if unrelated:
            per_set[name]["unrelated"] = asked_of(collection, unrelated)
    report(per_set)
    path = write_json(args.output, {"machine": machine_info(), "model": model.name, "sets": args.set,
                                    "top_k": args.top_k, "shift": args.shift,
                                    "unrelated": args.unrelated, "unrelated_n": args.unrelated_n,
                                    "unrelated_step": args.unrelated_step,
                                    "abstain_below": Rule.ask_flow().below,
                                    "abstain_answer_below": Rule.ask_flow().answer_below,
                                    "abstain_similarity_below": Rule.ask_flow().similarity_below,
                                    # (relevance, answer gain, similarity, names never mentioned) per question
                                    "signals": per_set})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
