"""Answer windows and scorer subsets against the default's scattered units, replayed from
cached unit scores (issue 89, lever 3): which choice of quotes carries over between genres.

Why: the default quotes the best units of the shown chunks one by one, each with what it needs
to stand alone by rule (`whole_thoughts.py`). A contiguous window of one passage keeps what a
unit needs around it without rules: the sentence it points back to, the lines an example goes
on with, the next sentence of a paper's paragraph, which often holds the answer its topic
sentence only announces. Each kind replaces `evidence.choose`'s spans only (relevance and the
scores abstention reads stay) and is scored per set through `selection_replay.replay_set` from
its caches (run selection_replay first to fill them). Kinds (`--kinds`):

- "units": the default;
- "window": the run of consecutive units of one on-topic passage with the highest sum of fused
  scores that fits the budget;
- "grow": the first unit offered, grown by whichever neighbour scores higher while it fits;
- "forward" / "forwardN": the first unit offered and those after it, then before it, while they
  fit (in N words);
- "pair": the first unit offered and the one after it; "para": and those after it in its
  paragraph (prose, no blank line between); "parapair": the one after it in its paragraph;
- any of those + "+units": the budget left filled as the default fills it;
- "fuse=A/B", "leaders=A/B" (joined by "+"): the default with those scorers fused or leading;
- "answertop=K": the default with the "answer" scorer's second pass run on the K units the other
  two scorers' fusion ranks highest only (the rest rank last by it): what scoring fewer units
  as answers (issue 91, lever 2) would cost.

    python research/window_trial.py --db runs/dev/db --set rust=QUESTIONS.jsonl ... \\
        [--kinds units,pair+units,para+units] [--output runs/bench/window_trial.json]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from selection_replay import HEADERS, load_cache, replay_set, summary_row  # noqa: E402

from unirag.answer import evidence as ev  # noqa: E402
from unirag.answer.sentences import word_count  # noqa: E402

DEFAULT_CHOOSE = ev.choose


def _span(hits, cands, fused, scores, i: int, j: int) -> ev.Span:
    """Candidates i..j (one passage, in chunk order) as one span."""
    text = hits[cands[i].hit].text
    start, end = cands[i].unit.start, cands[j].unit.end
    best = max(range(i, j + 1), key=lambda k: fused[k])
    return ev.Span(cands[i].hit, start, end, text[start:end], float(fused[best]), scores["likelihood"][best],
                   cut_before=cands[i].unit.cut_before, cut_after=cands[j].unit.cut_after,
                   code=cands[i].unit.code)


def _words(hits, cands, i: int, j: int) -> int:
    """Words of candidates i..j quoted as one span, its "[n]" included."""
    return word_count(hits[cands[i].hit].text[cands[i].unit.start:cands[j].unit.end]) + 1


def _joins(hits, cands, i: int, j: int, k: int, max_words: int) -> bool:
    """Whether candidate k can join the window i..j: same passage, and the window still fits."""
    return 0 <= k < len(cands) and cands[k].hit == cands[i].hit and _words(hits, cands, min(i, k), max(j, k)) <= max_words


def best_window(hits, cands, fused, allowed, max_words, first):
    best, best_score = None, float("-inf")
    for i, c in enumerate(cands):
        if c.hit not in allowed:
            continue
        total = 0.0
        for j in range(i, len(cands)):
            if cands[j].hit != c.hit or (j > i and _words(hits, cands, i, j) > max_words):
                break
            total += fused[j]
            if total > best_score:
                best, best_score = (i, j), total
    return best


def grown(hits, cands, fused, allowed, max_words, first):
    i = j = first
    while options := [k for k in (i - 1, j + 1) if _joins(hits, cands, i, j, k, max_words)]:
        k = max(options, key=lambda k: fused[k])
        i, j = min(i, k), max(j, k)
    return i, j


def forward(hits, cands, fused, allowed, max_words, first):
    i = j = first
    while _joins(hits, cands, i, j, j + 1, max_words):
        j += 1
    while _joins(hits, cands, i, j, i - 1, max_words):
        i -= 1
    return i, j


def following(hits, cands, fused, allowed, max_words, first, most: int = 1, paragraph: bool = False):
    i = j = first
    text = hits[cands[i].hit].text
    while (j - i < most and _joins(hits, cands, i, j, j + 1, max_words)
           and not (paragraph and (cands[j].unit.code or cands[j + 1].unit.code
                                   or "\n\n" in text[cands[j].unit.end:cands[j + 1].unit.start]))):
        j += 1
    return i, j


SHAPES = {
    "window": best_window, "grow": grown, "forward": forward, "pair": following,
    "para": lambda *a: following(*a, most=10**6, paragraph=True),
    "parapair": lambda *a: following(*a, paragraph=True),
}


def chooser(kind: str):
    """`evidence.choose` as `kind` (module docstring) chooses."""
    if kind == "units":
        return DEFAULT_CHOOSE
    if kind.startswith(("fuse=", "leaders=")):
        changes = dict(part.split("=") for part in kind.split("+"))
        fused_by = tuple(filter(None, changes.get("fuse", "/".join(ev.SCORERS)).split("/")))
        leaders = tuple(filter(None, changes.get("leaders", "/".join(ev.LEADERS)).split("/")))

        def choose_with(hits, cands, scores, null, max_words=ev.MAX_WORDS, scorers=ev.SCORERS):
            saved, ev.LEADERS = ev.LEADERS, leaders
            try:
                return DEFAULT_CHOOSE(hits, cands, scores, null, max_words, fused_by)
            finally:
                ev.LEADERS = saved
        return choose_with
    if kind.startswith("answertop="):
        top = int(kind.partition("=")[2])

        def choose_top(hits, cands, scores, null, max_words=ev.MAX_WORDS, scorers=ev.SCORERS):
            if not cands:
                return DEFAULT_CHOOSE(hits, cands, scores, null, max_words, scorers)
            first = ev.fuse(scores, ("likelihood", "embedding"))
            kept = set(sorted(range(len(first)), key=lambda k: -first[k])[:top])
            floor = min(scores["answer"]) - 1.0
            answer = [value if k in kept else floor for k, value in enumerate(scores["answer"])]
            return DEFAULT_CHOOSE(hits, cands, {**scores, "answer": answer}, null, max_words, scorers)
        return choose_top
    shape, _, rest = kind.partition("+")
    name = shape.rstrip("0123456789")
    cap = int(shape[len(name):] or 10**6)

    def choose(hits, cands, scores, null, max_words=ev.MAX_WORDS, scorers=ev.SCORERS):
        base = DEFAULT_CHOOSE(hits, cands, scores, null, max_words, scorers)
        if not cands:
            return base
        fused = ev.fuse(scores, scorers)
        allowed = ev.on_topic(cands, scores)
        order = [k for k in ev.choice_order(cands, fused, scores, scorers) if cands[k].hit in allowed]
        i, j = SHAPES[name](hits, cands, fused, allowed, min(cap, max_words), order[0])
        spans = [_span(hits, cands, fused, scores, i, j)]
        room = max_words - _words(hits, cands, i, j)
        others = [k for k in order if not (cands[k].hit == cands[i].hit and i <= k <= j)]
        if rest == "units" and room > 1 and others:
            more = ev._taken(hits, cands, scores, fused, others, allowed, room, room)
            spans += [s for s in more if not ev._overlaps(spans, s.hit, s.start, s.end)]
        return ev.Evidence(spans, base.relevance, base.answer_gain, base.passage_likelihood, base.similarity)
    return choose


KINDS = ("units", "window", "forward+units", "pair+units", "para+units")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--cache", default="runs/bench/units")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--output", default="runs/bench/window_trial.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.answer.ask import AskSettings
    from unirag.evaluation.rag import load_questions
    from unirag.retrieval.store import connect, open_collection

    model = UniModel.load()
    client = connect(args.db)
    results, table = {}, []
    for spec in args.set:
        name, _, path = spec.partition("=")
        questions = load_questions(path)
        cache_path = Path(args.cache) / f"{name}.json"
        per_kind = {}
        for kind in args.kinds.split(","):
            ev.choose = chooser(kind)
            per_kind[kind] = replay_set(model, questions, {"default": AskSettings()},
                                        load_cache(cache_path, model.name), cache_path,
                                        lambda name=name: open_collection(client, name, model),
                                        desc=f"{name} {kind}")["default"]
        ev.choose = DEFAULT_CHOOSE
        baseline = per_kind["units"] if "units" in per_kind else next(iter(per_kind.values()))
        results[name] = per_kind
        table += [summary_row(f"{name}, {kind}", rows, baseline) for kind, rows in per_kind.items()]
    print(markdown_table(HEADERS, table))
    print(f"wrote {write_json(args.output, {'machine': machine_info(), 'sets': args.set, 'results': results})}")


if __name__ == "__main__":
    main()
