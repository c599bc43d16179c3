"""Which same-model judgement should rerank: query likelihood (today's) or "does it answer?" yes/no.

Why: the rerank reorders hybrid retrieval's top 5 with the one model (`unirag/retrieval/rerank.py`). Its
scorer is query likelihood (UPR: how likely the question is after the passage). An instruction
model can also be asked outright, "does the passage answer the question?", and scored by
log p("Yes") - log p("No") after its chat template. For each dev set this retrieves the hybrid top
`--depth` once per question and ranks it by:

- retrieval: hybrid's own order (no rerank);
- upr fused: query likelihood fused with the retrieval order by reciprocal rank (the default);
- yes/no, alone and fused with the retrieval order;
- upr + yes/no + retrieval, and upr + yes/no: the three-way and the judges-only fusions.

File-level hit@1/3/5 and MRR per set (`unirag.evaluation.rag.score_ranking`), from collections
already ingested (benchmarks/retrieval.py or `unirag eval rag` build them).

    python research/rerank_scorers.py [--db runs/db] [--sets rust,pydocs] [--depth 5]
        [--output runs/bench/rerank_scorers.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from retrieval import SETS  # noqa: E402

ASK = "Passage: {passage}\n\nQuestion: {question}\n\nDoes the passage answer the question? Answer Yes or No."
METRICS = ("hit@1", "hit@3", "hit@5", "rr")


def yes_no_logodds(model, question: str, passages: list[str], max_passage_tokens: int = 256) -> list[float]:
    """log p("Yes") - log p("No") as the assistant's first word, for each passage."""
    from unirag.model.scoring import loglikelihoods

    tokenizer = model.tokenizer
    yes, no = (tokenizer(word, add_special_tokens=False)["input_ids"] for word in ("Yes", "No"))
    pairs = []
    for passage in passages:
        cut = tokenizer.decode(tokenizer(passage, add_special_tokens=False)["input_ids"][:max_passage_tokens]).strip()
        prompt = model.prompt_ids([{"role": "user", "content": ASK.format(passage=cut, question=question)}])
        pairs += [(prompt, yes), (prompt, no)]
    scores = loglikelihoods(model, pairs, batch_size=8)
    return [scores[2 * i][0] - scores[2 * i + 1][0] for i in range(len(passages))]


def best_first(scores: list[float]) -> list[int]:
    return sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep retrieval order


def fused(*orders: list[int]) -> list[int]:
    from unirag.retrieval.lexical import reciprocal_rank_fusion

    return [int(i) for i, _ in reciprocal_rank_fusion([[str(i) for i in order] for order in orders])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="runs/db")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--depth", type=int, default=5)
    parser.add_argument("--output", default="runs/bench/rerank_scorers.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions, score_ranking
    from unirag.retrieval.search import retrieve
    from unirag.retrieval.store import connect
    from unirag.model.scoring import question_logprobs

    model = UniModel.load()
    client = connect(args.db)
    results, rows = {}, []
    for name in args.sets.split(","):
        collection = client.get_collection(SETS[name][2])
        questions = load_questions(SETS[name][1])
        totals: dict[str, dict[str, float]] = {}
        for q in questions:
            hits = retrieve(model, collection, q.question, args.depth, "hybrid", 0)
            texts = [hit.text for hit in hits]
            upr, judge = best_first(question_logprobs(model, q.question, texts)), best_first(
                yes_no_logodds(model, q.question, texts))
            order = list(range(len(hits)))
            for variant, ranking in {"retrieval": order, "upr fused (default)": fused(upr, order), "yes/no": judge,
                                     "yes/no fused": fused(judge, order), "upr + yes/no + retrieval":
                                     fused(upr, judge, order), "upr + yes/no": fused(upr, judge)}.items():
                scores = score_ranking([hits[i].source for i in ranking], q.files)
                total = totals.setdefault(variant, dict.fromkeys(METRICS, 0.0))
                for metric in METRICS:
                    total[metric] += scores[metric] / len(questions)
        results[name] = totals
        for variant, total in totals.items():
            rows.append([name, variant, *(f"{100 * total[m]:.1f}" for m in METRICS)])
        print(f"{name}: {len(questions)} questions", flush=True)
    print(markdown_table(("set", "rerank of the hybrid top 5", "hit@1", "hit@3", "hit@5", "MRR"), rows))
    print(f"wrote {write_json(args.output, {'benchmark': 'rerank_scorers', 'model': model.name, 'depth': args.depth, 'machine': machine_info(), 'sets': results})}")


if __name__ == "__main__":
    main()
