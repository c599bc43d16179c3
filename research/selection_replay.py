"""Answers replayed from cached unit scores: how a change to choosing or quoting evidence moves
key accuracy, in seconds instead of a full `unirag eval rag` run.

Why: answering a question costs its retrieval (the rerank reads 15 chunks) and the scoring of
every unit of the shown chunks (`evidence.score`: one pass per unit), while choosing the quotes
(`evidence.choose`) and writing an extractive answer take milliseconds. A rule about which units
to quote (whole thoughts, turns, signposts) changes only the cheap part. The first run of a set
retrieves and scores as `ask` does and caches, per question, the shown chunks, the names the
collection never mentions, and every unit's scores; later runs replay each variant from the
cache through the code `ask` runs (`ask.chosen_evidence`, then `ask.answer_hits` with that
evidence) and score the answers as `unirag eval rag --answers` does (`evaluation.answers`).

A unit is cached under its place in its chunk and its text, so a change to how chunks are cut
into units (`sentences.py`) or which units are candidates (`evidence.candidates`) finds units
the cache lacks: those questions are scored again, with the model, and the cache grows. The
shown chunks are retrieved once: after re-ingesting a collection, or changing retrieval, run with
--refresh. Times are not replayed (no scoring runs), so none are reported; `unirag eval rag` is
the end-to-end measure, this the quick one between its runs.

    python research/selection_replay.py --db runs/db \\
        --set rust=../shared/data/eval/rag/rust_book_dev_answers.jsonl \\
        --set pydocs-main=../shared/data/eval/rag/python_docs_dev.jsonl \\
        [--variants extractive,both] [--cache runs/bench/units] [--refresh] \\
        [--reference minilm] [--output runs/bench/selection_replay.json]

With --reference minilm, each variant is answered a second time ("VARIANT, minilm") with
all-MiniLM-L6-v2's cosines (a separate encoder trained on question-answer pairs; never part of
`ask`) in the embedding's place in the fusion, as `evidence_recall.py --reference` counts it.
Only the ranking changes: what is off the question and when to abstain still read the model's
own embedding. Whether a far stronger sentence judge would quote the keys more often, on every
set the run replays.

Each --set is COLLECTION=QUESTIONS (a collection already ingested into --db, a question set with
gold keys); all sets and variants in one run. Per set and variant: right (key accuracy), in the
first line, the ceiling (keys shown), of the ceiling, degenerate, grounded, abstained, and how
many answers differ from the first variant's (and how many of those turned right or wrong).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from evidence_recall import cosines, with_reference  # noqa: E402  (the reference judge, as it counts it)

CACHE_VERSION = 1


def cached_scorers() -> tuple[str, ...]:
    """The evidence scorers `ask` fuses, whose scores the cache holds per unit (caches written
    when more scorers existed hold theirs too, unread)."""
    from unirag.answer.evidence import SCORERS

    return SCORERS


def unit_key(cand) -> str:
    """Where a candidate sits (passage, start, end) and what it says: a unit keeps its scores only
    while both stay the same."""
    return f"{cand.hit}:{cand.unit.start}:{cand.unit.end}:{cand.text}"


def lookup(entry: dict, cands) -> dict[str, list[float]] | None:
    """The cached scores of these candidates, per scorer, in their order; None if one is missing."""
    units = entry["units"]
    if not all(unit_key(c) in units for c in cands):
        return None
    return {name: [units[unit_key(c)][name] for c in cands] for name in cached_scorers()}


def remember(entry: dict, cands, scores: dict[str, list[float]], null: float) -> None:
    """Store each candidate's scores (and the question's likelihood after an empty passage)."""
    entry["null"] = null
    for k, cand in enumerate(cands):
        entry["units"][unit_key(cand)] = {name: float(scores[name][k]) for name in cached_scorers()}


REFERENCE = "minilm"  # the reference judge's name, in its scores and its rows' labels


def referenced(variants: dict) -> dict[str, tuple[str, tuple[str, ...]]]:
    """{"VARIANT, minilm": (VARIANT, the scorers with the reference judge in the embedding's
    place)} for each variant."""
    return {f"{label}, {REFERENCE}": (label, with_reference(cached_scorers(), REFERENCE)) for label in variants}


def save(cache: dict, path: Path) -> None:
    """Write the cache whole or not at all (through a temporary file)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(cache))
    tmp.replace(path)


def changes(answers: Sequence[dict], baseline: Sequence[dict]) -> tuple[int, int, int]:
    """(answers that differ from the baseline's, of them turned right, turned wrong)."""
    differ = [(a, b) for a, b in zip(answers, baseline) if a["answer"] != b["answer"]]
    return (len(differ), sum(a["key_correct"] and not b["key_correct"] for a, b in differ),
            sum(b["key_correct"] and not a["key_correct"] for a, b in differ))


def summary_row(label: str, rows: Sequence[dict], baseline: Sequence[dict]) -> list:
    from unirag.evaluation.answers import summarize

    s = summarize(rows)

    def pct(value):
        return "" if value is None else f"{100 * value:.1f}"

    changed, gained, lost = changes(rows, baseline)
    return [label, len(rows), pct(s["key_correct"]), pct(s["first_line"]), pct(s["keys_shown"]),
            pct(s["of_ceiling"]), pct(s["degenerate"]), pct(s["grounded"]), pct(s["abstained"]),
            f"{changed} (+{gained} / -{lost})"]


HEADERS = ("set, variant", "answers", "right %", "in first line %", "ceiling %", "of ceiling %",
           "degenerate %", "grounded %", "abstained %", "changed from the first (+right / -right)")


def answer_row(model, q, entry: dict, settings, hits, chosen) -> dict:
    """The answer `settings` give from these hits and this evidence, scored against q's keys."""
    from unirag.errors import UniragError
    from unirag.evaluation import answers as answer_scores
    from unirag.answer.ask import answer_hits

    try:
        result = answer_hits(model, q.question, hits, settings, evidence=chosen, unmentioned=entry["unmentioned"])
        text = result.read()
    except UniragError as error:
        raise SystemExit(f"selection_replay: {error}") from None
    passages = [f"{h.label}\n{h.text}" for h in result.hits]
    return {"q": q.question, "answer": text, **answer_scores.score(text, q.keys, passages, result.looped)}


def load_cache(path: Path, model_name: str, refresh: bool = False) -> dict:
    """The set's cache, or an empty one where there is none, it is for another model or cache
    version, or `refresh` asks to start over."""
    cache = json.loads(path.read_text()) if path.exists() and not refresh else {}
    if cache.get("version") != CACHE_VERSION or cache.get("model") != model_name:
        cache = {"version": CACHE_VERSION, "model": model_name, "entries": {}}
    return cache


def replay_set(model, questions, variants: dict, cache: dict, cache_path: Path, open_set=None,
               desc: str = "", reference=None) -> dict[str, list[dict]]:
    """Each variant's answer to each question, scored, from `cache` (filled where it lacks a
    question or a unit, and saved after each such question). `open_set()` gives the set's
    collection, opened only if a question must be retrieved. `reference`: a sentence-transformers
    encoder whose cosines rank the units in the embedding's place, for each variant that ranks by
    the embedding, under "VARIANT, REFERENCE_NAME" (`referenced`)."""
    from tqdm.auto import tqdm

    from unirag.answer import evidence
    from unirag.answer.ask import ANSWER_SYSTEM, chosen_evidence, never_mentioned
    from unirag.retrieval.search import Hit, retrieve
    from unirag.answer.generate import fit

    collection = None
    first = next(iter(variants.values()))
    twins = referenced(variants) if reference is not None else {}
    per_variant: dict[str, list[dict]] = {label: [] for label in [*variants, *twins]}
    for q in tqdm(questions, desc=desc, unit="question"):
        entry = cache["entries"].get(q.question)
        changed = entry is None
        if entry is None:
            collection = collection or open_set()
            hits = retrieve(model, collection, q.question, first.top_k, first.retrieval, first.rerank)
            entry = {"hits": [asdict(h) for h in hits],
                     "unmentioned": list(never_mentioned(collection, q.question)), "units": {}, "null": 0.0}
            cache["entries"][q.question] = entry
        for label, settings in variants.items():
            fitted, _ = fit(model, q.question, [Hit(**h) for h in entry["hits"]][: settings.top_k], (),
                            settings.max_new_tokens, ANSWER_SYSTEM)
            hits, chosen, judged = fitted, None, None
            if fitted:
                cands = evidence.candidates(fitted)
                judged = lookup(entry, cands)
                if judged is None:
                    cands, judged, null = evidence.score(model, q.question, fitted)
                    remember(entry, cands, judged, null)
                    changed = True
                hits, chosen = chosen_evidence(fitted, cands, judged, entry["null"], settings)
            per_variant[label].append(answer_row(model, q, entry, settings, hits, chosen))
            for twin, (of, scorers) in twins.items():
                if of != label:
                    continue
                if judged is not None:  # the same units, ranked with the reference judge's cosines
                    by_reference = {**judged, REFERENCE: cosines(reference, q.question, [c.text for c in cands])
                                    if cands else []}
                    hits, chosen = chosen_evidence(fitted, cands, by_reference, entry["null"], settings, scorers)
                per_variant[twin].append(answer_row(model, q, entry, settings, hits, chosen))
        if changed:
            save(cache, cache_path)  # after each question scored: a run cut short resumes there
    return per_variant


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--variants", default="extractive",
                        help="answer variants as `unirag eval rag --variants` names them (not chunks)")
    parser.add_argument("--cache", default="runs/bench/units", help="folder of the per-set score caches")
    parser.add_argument("--refresh", action="store_true", help="retrieve and score every question again")
    parser.add_argument("--reference", choices=[REFERENCE], help="also answer each variant that ranks by the "
                        "embedding with all-MiniLM-L6-v2's cosines in its place (a comparison; needs .[reference])")
    parser.add_argument("--output", default="runs/bench/selection_replay.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.evaluation.rag import answer_variants, load_questions
    from unirag.retrieval.store import connect, open_collection

    variants = answer_variants(args.variants)
    if "chunks" in variants:
        raise SystemExit("selection_replay: the chunks variant selects no evidence; nothing to replay")
    model = UniModel.load()
    encoder = None
    if args.reference:
        from unirag.evaluation.reference import minilm_encoder

        encoder = minilm_encoder()
    client = connect(args.db)
    cache_dir = Path(args.cache)
    cache_dir.mkdir(parents=True, exist_ok=True)
    results, table = {}, []
    for spec in args.set:
        name, _, path = spec.partition("=")
        questions = load_questions(path)
        if not all(q.keys for q in questions):
            raise SystemExit(f"selection_replay: {path} has questions without gold keys")
        cache_path = cache_dir / f"{name}.json"
        per_variant = replay_set(model, questions, variants, load_cache(cache_path, model.name, args.refresh),
                                 cache_path, lambda: open_collection(client, name, model), desc=name,
                                 reference=encoder)
        baseline = next(iter(per_variant.values()))
        results[name] = per_variant
        table += [summary_row(f"{name}, {label}", rows, baseline) for label, rows in per_variant.items()]
    print(markdown_table(HEADERS, table))
    out = write_json(args.output, {"machine": machine_info(), "model": model.name, "sets": args.set,
                                   "variants": list(variants), "results": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
