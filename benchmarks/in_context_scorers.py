"""Evidence units judged in their passage: does reading a unit where it stands find the answer?

Why: every evidence scorer of `answer/evidence.py` reads a unit alone (the question's likelihood
after the unit, the unit's embedding, the unit as an answer after the question), and none ranks
the answering unit first for more than about a third of the dev questions (docs/RESULTS.md,
"Where the answers are lost"). A unit alone loses what its passage gives it ("It is evaluated
only once" says nothing without the sentence before it). This measures two judges that read
each unit in its passage, both from the same model's query likelihood (UPR, the rerank's prompt):

- "in_context": how much the question's likelihood rises over the unit, read where it stands:
  log p(q | passage through the unit) - log p(q | passage up to it), per question token;
- "leave_out": how much it falls when the unit is left out of the passage:
  log p(q | passage) - log p(q | passage without the unit).

Both are exact and share work: one pass over each shown passage fills a KV cache, and each
unit's row runs on a copy of it with the keys past its cut masked out and rotary positions
starting at the cut (causal attention makes that the same computation as the row laid out
alone). Each is reported as a ranking (how often the first unit holding every key comes first,
in the first two, in the first three) and in the selection, over the units `ask` scored, replayed
from `benchmarks/selection_replay.py`'s cache (run it first for the same sets): as a fourth list
in the fusion, as a third leader of the turns, and in the likelihood's place. The default row
is the replayed `ask`.

    python benchmarks/in_context_scorers.py \\
        --set rust=../shared/data/eval/rag/rust_book_dev_answers.jsonl \\
        --set pydocs-main=../shared/data/eval/rag/python_docs_dev.jsonl \\
        [--cache runs/bench/units] [--output runs/bench/in_context_scorers.json]

The new scores are cached beside the replay's (`<set>.in_context.json`); a run cut short resumes.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from evidence_recall import first_holding_rank  # noqa: E402
from selection_replay import load_cache, lookup, save  # noqa: E402

from unirag.evaluation.answers import has_keys as holds  # noqa: E402
from unirag.model.scoring import _token_logprobs  # noqa: E402

HEAD = "Passage: "
TAIL = "\nPlease write a question based on this passage.\nQuestion:"  # the rerank's (scoring.PROMPT)
JUDGES = ("in_context", "leave_out")
DEPTHS = (1, 2, 3)


def _passage_cache(model, context: Sequence[int]):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.model.config)
    with model.forward_context(), torch.inference_mode():
        model.decoder(input_ids=torch.tensor([list(context)]),
                      attention_mask=torch.ones(1, len(context), dtype=torch.long),
                      **{model._cache_keyword: cache}, use_cache=True)
    return cache


def _rows_after_cuts(model, context: Sequence[int], cache, rows: Sequence[tuple[int, list[int]]],
                     n_targets: int) -> list[float]:
    """For each (cut, tokens): mean log-probability of the last `n_targets` tokens of
    context[:cut] + tokens, run on `cache` (the pass over `context`) in one batch."""
    length, width = len(context), max(len(tokens) for _, tokens in rows)
    batch_cache = copy.deepcopy(cache)
    batch_cache.batch_repeat_interleave(len(rows))
    ids = torch.full((len(rows), width), model.pad_id, dtype=torch.long)
    attention = torch.zeros(len(rows), length + width, dtype=torch.long)
    positions = torch.zeros(len(rows), width, dtype=torch.long)
    for r, (cut, tokens) in enumerate(rows):
        ids[r, :len(tokens)] = torch.tensor(tokens)
        attention[r, :cut] = 1  # the cached keys before the cut, none after it
        attention[r, length:length + len(tokens)] = 1
        positions[r] = torch.arange(cut, cut + width)
    with model.forward_context(), torch.inference_mode():
        states = model.decoder(input_ids=ids, attention_mask=attention, position_ids=positions,
                               **{model._cache_keyword: batch_cache}, use_cache=True).last_hidden_state
        head = model.model.get_output_embeddings()
        out = []
        for r, (_, tokens) in enumerate(rows):
            logits = head(states[r, len(tokens) - n_targets - 1:len(tokens) - 1]).float()
            out.append(float(_token_logprobs(logits, tokens[len(tokens) - n_targets:]).mean()))
    return out


def after_cuts(model, context: Sequence[int], cuts: Sequence[int], follow: list[int], n_targets: int,
               skip: Sequence[int] | None = None, batch_size: int = 8) -> list[float]:
    """Mean log-probability of the last `n_targets` tokens of `follow` after context[:cut] (and,
    with `skip`, context[skip:] before `follow`), for each cut, sharing one pass over `context`."""
    cache = _passage_cache(model, context)
    rows = [(cut, (list(context[skip[i]:]) if skip is not None else []) + follow) for i, cut in enumerate(cuts)]
    out: list[float] = []
    for b in range(0, len(rows), batch_size):
        out += _rows_after_cuts(model, context, cache, rows[b:b + batch_size], n_targets)
    return out


def judge(model, question: str, hits, cands) -> dict[str, list[float]]:
    """Each candidate's in-context and leave-out scores (`JUDGES`), per question token."""
    encode = lambda text: model.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    question_ids = encode(" " + question.strip())[:128]
    follow = encode(TAIL) + question_ids
    scores = {name: [0.0] * len(cands) for name in JUDGES}
    for h, hit in enumerate(hits):
        mine = [k for k, c in enumerate(cands) if c.hit == h]
        if not mine:
            continue
        tokens = model.tokenizer(HEAD + hit.text, add_special_tokens=False, return_offsets_mapping=True)
        ids, ends = tokens["input_ids"], [end for _, end in tokens["offset_mapping"]]

        def cut(char: int) -> int:  # tokens that end at or before this character of the chunk
            return max(1, sum(end <= char + len(HEAD) for end in ends))

        starts, stops = [cut(cands[k].unit.start) for k in mine], [cut(cands[k].unit.end) for k in mine]
        points = sorted(set(starts) | set(stops) | {len(ids)})
        upto = dict(zip(points, after_cuts(model, ids, points, follow, len(question_ids))))
        without = after_cuts(model, ids, starts, follow, len(question_ids), skip=stops)
        for k, a, b, w in zip(mine, starts, stops, without):
            scores["in_context"][k] = upto[b] - upto[a]
            scores["leave_out"][k] = upto[len(ids)] - w
    return scores


def variants() -> dict[str, tuple]:
    """(AskSettings, leaders) per row: the default, then each judge fused, leading and replacing."""
    from unirag.answer.ask import AskSettings
    from unirag.answer.evidence import LEADERS

    base = AskSettings()
    out = {"default": (base, LEADERS)}
    for name in JUDGES:
        out[f"+{name} fused"] = (replace(base, scorers=base.scorers + (name,)), LEADERS)
        out[f"+{name} fused and leading"] = (replace(base, scorers=base.scorers + (name,)), LEADERS + (name,))
        out[f"{name} for likelihood"] = (replace(base, scorers=tuple(name if s == "likelihood" else s
                                                                      for s in base.scorers)),
                                         tuple(name if s == "likelihood" else s for s in LEADERS))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--cache", default="runs/bench/units", help="selection_replay.py's cache folder")
    parser.add_argument("--output", default="runs/bench/in_context_scorers.json")
    args = parser.parse_args()

    from tqdm.auto import tqdm

    from unirag import UniModel
    from unirag.evaluation import answers as answer_scores
    from unirag.evaluation.rag import load_questions
    from unirag.answer import evidence
    from unirag.answer.ask import ANSWER_SYSTEM, AskSettings, answer_hits, chosen_evidence
    from unirag.retrieval.search import Hit
    from unirag.answer.generate import fit

    model = UniModel.load()
    replayed = evidence.SCORERS
    evidence.SCORERS = replayed + JUDGES  # selectable by the rows' settings, not cached by the replay
    rows_out = variants()
    evidence.SCORERS = replayed
    leaders, table, results = evidence.LEADERS, [], {}
    for spec in args.set:
        name, _, path = spec.partition("=")
        cache_path = Path(args.cache) / f"{name}.json"
        cache = load_cache(cache_path, model.name)
        judged_path = Path(args.cache) / f"{name}.in_context.json"
        judged = json.loads(judged_path.read_text()) if judged_path.exists() else {}
        right = {label: 0 for label in rows_out}
        at = {scorer: [0] * len(DEPTHS) for scorer in ("likelihood", "embedding", "answer", *JUDGES)}
        one_unit = 0
        questions = load_questions(path)
        for q in tqdm(questions, desc=name, unit="question"):
            entry = cache["entries"].get(q.question)
            if entry is None:
                raise SystemExit(f"in_context_scorers: {q.question!r} is not in {cache_path}; run "
                                 "benchmarks/selection_replay.py for this set first")
            settings = AskSettings()
            hits, _ = fit(model, q.question, [Hit(**h) for h in entry["hits"]][:settings.top_k], (),
                          settings.max_new_tokens, ANSWER_SYSTEM)
            cands = evidence.candidates(hits, settings.whole_thoughts)
            scores = lookup(entry, cands)
            if scores is None:
                raise SystemExit(f"in_context_scorers: {cache_path} lacks units of {q.question!r}; run "
                                 "benchmarks/selection_replay.py for this set first")
            if q.question not in judged:
                judged[q.question] = judge(model, q.question, hits, cands)
                save(judged, judged_path)
            scores.update(judged[q.question])
            holding = [holds(c.text, q.keys) for c in cands]
            if any(holding):
                one_unit += 1
                for scorer, counts in at.items():
                    rank = first_holding_rank(scores[scorer], holding)
                    for d, depth in enumerate(DEPTHS):
                        counts[d] += rank is not None and rank < depth
            for label, (variant, leading) in rows_out.items():
                evidence.LEADERS = leading
                shown, chosen = chosen_evidence(hits, cands, scores, entry["null"], variant)
                answer = answer_hits(model, q.question, shown, variant, evidence=chosen,
                                     unmentioned=entry["unmentioned"])
                text = answer.read()
                passages = [f"{h.label}\n{h.text}" for h in answer.hits]
                right[label] += answer_scores.score(text, q.keys, passages)["key_correct"]
            evidence.LEADERS = leaders
        results[name] = {"questions": len(questions), "one_unit": one_unit,
                         "ranks": {s: dict(zip((f"@{d}" for d in DEPTHS), c)) for s, c in at.items()},
                         "right": right}
        table += [[f"{name}, {label}", f"{100 * n / len(questions):.1f}"] for label, n in right.items()]
        ranks = ", ".join(f"{s} {'/'.join(map(str, c))}" for s, c in at.items())
        print(f"{name}: {one_unit} questions where one unit holds the keys; first unit holding them "
              f"@1/@2/@3: {ranks}")
    print(markdown_table(("set, variant", "right %"), table))
    out = write_json(args.output, {"machine": machine_info(), "model": model.name, "sets": args.set,
                                   "results": results})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
