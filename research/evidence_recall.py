"""How often the evidence selector's ranking puts the sentence that holds the answer first.

Why: the extractive answer is only as right as the units it quotes (`answer/evidence.py`). Key
accuracy mixes retrieval, selection and quoting; this measures the selection alone. For each
question of a set with gold keys, it retrieves the chunks `ask` shows (same retrieval, rerank and
context fit), cuts them into the selector's candidate units, scores them with each scorer
(`evidence.SCORERS`), and counts questions:

- keys shown: a chunk shown holds every key (the ceiling retrieval leaves);
- page, not passage: a right file is among the chunks shown but no chunk shown holds the keys
  (retrieval found the page and missed the passage); in brackets, how many of those had a chunk
  holding them among the rerank's candidates;
- one unit: a single candidate unit holds every key; over these, recall@k per scorer, for the
  default fusion and for the order `ask` offers units to the word budget in ("offered": the
  fusion and its leading scorers in turns, `evidence.offer_order`): the first unit holding every
  key is among the k best by that ranking;
- the oracle: any one or two units that fit the word budget together hold every key (the most
  that choosing among these units could give);
- selected: the default selection (what `ask` quotes) holds every key;
- led by the top k: some unit among the first k that `ask` offers, quoted first with the rest
  of the selection filled as `ask` fills it, makes the selection hold every key (k = 1 is the
  selection itself). How far a second stage that only reorders the first few units could go.

With --reference minilm, all-MiniLM-L6-v2 (a separate 22M-parameter encoder trained on
question-answer pairs; never part of `ask`) ranks the same units by cosine to the question, as a
sixth ranking ("minilm"), and "selected, minilm" counts the selection with it in the embedding's
place in the fusion: whether a far stronger sentence judge than the model's own embedding would
quote the keys more often, or the loss lies in what no single judge's ranking fixes.

With --scoring-adapter, a second copy of the model (`none`: the base weights without the UniMAE
adapter) scores the same shown chunks' units, and its rows stand beside the default's: whether
the adapter costs the selection (the model that quotes is the one that embeds).

    python research/evidence_recall.py --db runs/db \
        --set rust=../shared/data/eval/rag/rust_book_dev_answers.jsonl \
        --set pydocs-main=../shared/data/eval/rag/python_docs_dev.jsonl [--output runs/bench/evidence_recall.json] \
        [--scoring-adapter none] [--reference minilm]

Each --set is COLLECTION=QUESTIONS (a collection already ingested into --db); all sets in one run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

from unirag.answer.evidence import SCORERS  # noqa: E402
from unirag.evaluation.answers import has_keys as holds  # noqa: E402

DEPTHS = (1, 2, 3)
LEADS = (1, 3, 5, 8)


def first_holding_rank(scores: Sequence[float], holding: Sequence[bool]) -> int | None:
    """0-based rank, by descending score (ties in order), of the first unit that holds the keys."""
    for rank, i in enumerate(sorted(range(len(scores)), key=lambda i: -scores[i])):
        if holding[i]:
            return rank
    return None


def oracle(texts: Sequence[str], words: Sequence[int], keys: Sequence[str], budget: int) -> bool:
    """Whether one unit, or two within `budget` words, together hold every key."""
    singles = [i for i, n in enumerate(words) if n <= budget]
    if any(holds(texts[i], keys) for i in singles):
        return True
    return any(holds(texts[i] + "\n" + texts[j], keys) for i, j in combinations(singles, 2)
               if words[i] + words[j] <= budget)


def led_by(order: Sequence[int], holds_keys, depth: int = max(LEADS)) -> int | None:
    """1-based rank, among the first `depth` of `order`, of the first unit whose leading the
    selection makes `holds_keys(lead)` true; None if none does. `holds_keys(j)` selects with unit
    j first (the others after it in `order`) and tests the selection."""
    for k, j in enumerate(order[:depth], 1):
        if holds_keys(j):
            return k
    return None


def with_reference(scorers: Sequence[str], reference: str = "minilm") -> tuple[str, ...]:
    """The default's scorers with the reference judge in the embedding's place (the one scorer
    that is a cosine of sentence embeddings)."""
    return tuple(reference if name == "embedding" else name for name in scorers)


def cosines(encoder, question: str, texts: Sequence[str]) -> list[float]:
    """Cosine of each text's embedding to the question's, by a sentence-transformers encoder."""
    vectors = encoder.encode([question, *texts], normalize_embeddings=True, convert_to_numpy=True)
    return [float(v) for v in vectors[1:] @ vectors[0]]


def summarise(rows: Sequence[dict], names: Sequence[str]) -> dict:
    """Counts over questions: shown, page not passage (and in the rerank pool), one unit, oracle,
    selected (and, where measured, selected with the reference judge), led by the top k, and per
    ranking recall@k."""
    single = [r for r in rows if r["one_unit"]]
    out = {"questions": len(rows), "shown": sum(r["shown"] for r in rows), "one_unit": len(single),
           "page_not_passage": sum(r["page"] and not r["shown"] for r in rows),
           "in_rerank_pool": sum(r["page"] and not r["shown"] and r["in_pool"] for r in rows),
           "oracle": sum(r["oracle"] for r in rows), "selected": sum(r["selected"] for r in rows),
           "led": {f"@{k}": sum(r["led"] is not None and r["led"] <= k for r in rows) for k in LEADS}}
    if rows and "selected_reference" in rows[0]:
        out["selected_reference"] = sum(r["selected_reference"] for r in rows)
    for name in names:
        ranks = [r["ranks"][name] for r in single]
        out[name] = {f"@{k}": sum(rank is not None and rank < k for rank in ranks) for k in DEPTHS}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--output", default="runs/bench/evidence_recall.json")
    parser.add_argument("--scoring-adapter", help="also score the units with this adapter's weights ('none': the base "
                        "model) and report its selection beside the default's")
    parser.add_argument("--reference", choices=["minilm"], help="also rank the units with all-MiniLM-L6-v2 and "
                        "count the selection with it in the embedding's place")
    args = parser.parse_args()

    from tqdm.auto import tqdm

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions, same_file
    from unirag.answer import evidence
    from unirag.answer.ask import ANSWER_SYSTEM, AskSettings
    from unirag.retrieval.search import retrieve
    from unirag.answer.generate import fit
    from unirag.retrieval.rerank import rerank
    from unirag.answer.sentences import word_count
    from unirag.retrieval.store import connect, open_collection

    model = UniModel.load()
    scorer_models = {"": model}
    if args.scoring_adapter:
        scorer_models[f"scored with adapter {args.scoring_adapter}"] = UniModel.load(adapter=args.scoring_adapter)
    client = connect(args.db)
    settings = AskSettings()
    encoder = None
    if args.reference:
        from unirag.evaluation.reference import minilm_encoder

        encoder = minilm_encoder()
    names = (*SCORERS, *(("minilm",) if encoder else ()), "default", "offered")

    def measured(scorer, q, hits) -> dict:
        """What one model's scoring of the shown chunks' units gives: ranks, selection, leads."""
        cands, scores, null = evidence.score(scorer, q.question, hits)
        chosen = evidence.choose(hits, cands, scores, null, settings.words)
        scores["default"] = list(evidence.fuse(scores, SCORERS)) if cands else []
        offered = evidence.choice_order(cands, scores["default"], scores, SCORERS) if cands else []
        position = {i: r for r, i in enumerate(offered)}
        # higher is offered sooner; a signpost whose turn went to the unit after it, never
        scores["offered"] = [-float(position.get(i, len(cands))) for i in range(len(cands))]
        texts = [c.text for c in cands]
        holding = [holds(t, q.keys) for t in texts]

        reference = {}
        if encoder is not None:
            scores["minilm"] = cosines(encoder, q.question, texts) if cands else []
            spans = evidence.choose(hits, cands, scores, null, settings.words,
                                    with_reference(SCORERS)).spans
            reference["selected_reference"] = holds("\n".join(s.text for s in spans), q.keys)

        def led(j: int) -> bool:
            lead = list(scores["offered"])
            lead[j] = 1.0
            spans = evidence.choose(hits, cands, {**scores, "lead": lead}, null, settings.words, ("lead",)).spans
            return holds("\n".join(s.text for s in spans), q.keys)

        return {"one_unit": any(holding),
                "oracle": oracle(texts, [word_count(t) + 1 for t in texts], q.keys, settings.words),
                "selected": holds("\n".join(s.text for s in chosen.spans), q.keys),
                "led": led_by(offered, led),
                "ranks": {n: first_holding_rank(scores[n], holding) for n in names}, **reference}

    results, table = {}, []
    for spec in args.set:
        name, _, path = spec.partition("=")
        collection = open_collection(client, name, model)
        rows = {label: [] for label in scorer_models}
        for q in tqdm(load_questions(path), desc=name, unit="question"):
            # the rerank's candidates, then what `retrieve` with the rerank returns from them
            pool = retrieve(model, collection, q.question, settings.rerank, settings.retrieval, 0)
            hits = rerank(model, q.question, pool, settings.rerank)[:settings.top_k]
            hits, _ = fit(model, q.question, hits, (), settings.max_new_tokens, ANSWER_SYSTEM)
            shared = {"q": q.question, "keys": list(q.keys),
                      "shown": holds("\n".join(h.text for h in hits), q.keys),
                      "page": any(same_file(h.source, f) for h in hits for f in q.files),
                      "in_pool": any(holds(h.text, q.keys) for h in pool)}
            for label, scorer in scorer_models.items():
                rows[label].append({**shared, **measured(scorer, q, hits)})
        for label, labelled in rows.items():
            key = f"{name}, {label}" if label else name
            results[key] = {"summary": summarise(labelled, names), "per_question": labelled}
            s = results[key]["summary"]
            table.append([key, s["questions"], s["shown"], f'{s["page_not_passage"]} ({s["in_rerank_pool"]})',
                          s["one_unit"], s["oracle"], s["selected"], s.get("selected_reference", "-"),
                          " / ".join(str(v) for v in s["led"].values())]
                         + [" / ".join(str(s[n][f"@{k}"]) for k in DEPTHS) for n in names])
    print(markdown_table(("set", "questions", "keys shown", "page, not passage (in rerank pool)",
                          "one unit holds them", "oracle (<= 2 units)", "selected holds them",
                          "selected, minilm in the embedding's place",
                          "led by the top " + "/".join(map(str, LEADS)),
                          *(f"{n} @1/@2/@3" for n in names)), table))
    out = write_json(args.output, {"machine": machine_info(), "model": model.name, "sets": args.set,
                                   "settings": {"top_k": settings.top_k, "rerank": settings.rerank,
                                                "words": settings.words, "scorers": list(SCORERS)},
                                   "scoring_adapter": args.scoring_adapter, "reference": args.reference,
                                   "results": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
