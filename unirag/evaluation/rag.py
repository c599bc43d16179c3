"""Retrieval evaluation for the RAG half: does `retrieve` (what `ask` uses) find the right file?

A question set is a JSONL file, one object per line: ``{"q": "question", "files": ["a.md", ...]}``
(``question`` / ``file`` are accepted too). ``files`` are the documents that answer it, as paths
relative to the indexed folder; a bare file name also matches that name in a sub-folder.

Each question goes through ``unirag.retrieval.search.retrieve`` with ``top_k`` = the deepest depth,
giving a ranked list of chunks. Scores, per question, from that one list (`score_ranking`):

- ``hit@r``: 1 if any of the top ``r`` *chunks* comes from a right file, else 0.
- reciprocal rank: ``1 / rank`` of the first right file among the *distinct files* of the ranking
  (chunks collapsed to their file, first occurrence kept), 0 if no right file is in the top
  ``top_k`` chunks. Counting distinct files, not chunks, means three chunks of one wrong file
  above the right one cost one rank, not three. MRR is its mean over questions.

The aggregate (`aggregate`) is the mean of each score over questions, plus the p50 (median) and
p90 of the wall-clock latency of one ``retrieve`` call (embedding the question + the Chroma
query), timed after one untimed warm-up call.

With ``answers=N`` the first N questions are also answered, by each answer variant, through
``answer.ask.answer_hits`` (the flow ``ask`` runs) from their top ``answer_top_k`` chunks, and scored
by ``evaluation.answers`` (key accuracy against the set's gold ``keys``, the ceiling retrieval
leaves, degenerate answers, grounded sentences, abstentions, time to first text and total) and by
`score_answer`: ``cites`` (at least one valid ``[n]`` marker), ``cites_right`` (a marker points at
a chunk of a right file).

Public API: ``Question``, ``load_questions``, ``score_ranking``, ``score_answer``, ``aggregate``,
``depths_for``, ``answer_variants``, ``run_rag_eval``, ``rag_results_markdown``.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unirag.errors import UniragError

DEPTHS = (1, 3, 5)


@dataclass(frozen=True)
class Question:
    question: str
    files: tuple[str, ...]
    keys: tuple[str, ...] = ()  # strings a correct answer contains (sets with gold answers)


def load_questions(path: str | Path) -> list[Question]:
    """Read a JSONL question set; a malformed line is an error naming its line number."""
    path = Path(path)
    if not path.is_file():
        raise UniragError(f"question file {path} not found")
    questions = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            text = item.get("q", item.get("question"))
            files = item.get("files", item.get("file"))
            files = [files] if isinstance(files, str) else files
            if not isinstance(text, str) or not text.strip() or not files or not all(isinstance(f, str) for f in files):
                raise ValueError
        except (ValueError, AttributeError):
            raise UniragError(f'{path}:{n}: expected {{"q": "question", "files": ["file", ...]}}') from None
        keys = item.get("keys") or ()
        if not isinstance(keys, (list, tuple)) or not all(isinstance(k, str) and k for k in keys):
            raise UniragError(f'{path}:{n}: "keys" must be a list of non-empty strings')
        questions.append(Question(text, tuple(files), tuple(keys)))
    if not questions:
        raise UniragError(f"no questions in {path}")
    return questions


def same_file(source: str, gold: str) -> bool:
    """A retrieved source (path relative to the indexed folder) is the gold file."""
    source, gold = source.replace("\\", "/"), gold.replace("\\", "/").removeprefix("./")
    return source == gold or ("/" not in gold and source.rsplit("/", 1)[-1] == gold)


def depths_for(top_k: int) -> list[int]:
    """The hit@r depths reported for a retrieval depth: 1, 3, 5 up to top_k, and top_k itself."""
    return sorted({d for d in DEPTHS if d <= top_k} | {top_k})


def score_ranking(sources: Sequence[str], gold: Sequence[str], depths: Sequence[int] = DEPTHS) -> dict[str, Any]:
    """Score one question: `sources` are the files of the retrieved chunks, best first.

    Returns ``{"hit@r": 0|1 for r in depths, "rr": reciprocal rank over distinct files,
    "file_rank": that rank or None, "chunk_rank": rank of the first right chunk or None}``.
    A depth beyond ``len(sources)`` scores the whole list.
    """
    right = [any(same_file(s, g) for g in gold) for s in sources]
    chunk_rank = right.index(True) + 1 if any(right) else None
    files = list(dict.fromkeys(sources))
    file_rank = next((i for i, f in enumerate(files, 1) if any(same_file(f, g) for g in gold)), None)
    scores: dict[str, Any] = {f"hit@{r}": int(chunk_rank is not None and chunk_rank <= r) for r in depths}
    scores.update(rr=1.0 / file_rank if file_rank else 0.0, file_rank=file_rank, chunk_rank=chunk_rank)
    return scores


CITATION = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")

def cited_numbers(text: str) -> list[int]:
    """The passage numbers an answer cites, in order, once each: "[2] ... [1, 3]" -> [2, 1, 3]."""
    numbers = [int(n) for group in CITATION.findall(text) for n in group.split(",")]
    return list(dict.fromkeys(numbers))


def score_answer(text: str, sources: Sequence[str], gold: Sequence[str]) -> dict[str, Any]:
    """Score one generated answer; `sources` are the files of the passages [1], [2], ... shown to it.
    "first_source_right": passage [1], the source a reader meets first, is from a right file."""
    cited = [n for n in cited_numbers(text) if 1 <= n <= len(sources)]
    right = [n for n in cited if any(same_file(sources[n - 1], g) for g in gold)]
    first = bool(sources) and any(same_file(sources[0], g) for g in gold)
    return {"cited": cited, "cites": int(bool(cited)), "cites_right": int(bool(right)),
            "first_source_right": int(first)}


def aggregate(per_question: Sequence[Mapping[str, Any]], latencies_s: Sequence[float],
              depths: Sequence[int] = DEPTHS) -> dict[str, Any]:
    """Means over questions (``hit@r``, ``mrr``) and latency percentiles in milliseconds."""
    n = len(per_question)
    if not n:
        raise UniragError("no questions were scored")
    metrics: dict[str, Any] = {f"hit@{r}": sum(q[f"hit@{r}"] for q in per_question) / n for r in depths}
    metrics["mrr"] = sum(q["rr"] for q in per_question) / n
    metrics["n_questions"] = n
    if latencies_s:
        ms = sorted(1000 * t for t in latencies_s)
        metrics["latency_ms_p50"] = statistics.median(ms)
        metrics["latency_ms_p90"] = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return metrics


@dataclass(frozen=True)
class WholeChunks:
    """The "chunks" variant: an answer generated from the whole chunks with the general prompt
    (`generate.SYSTEM_PROMPT`), no evidence selected and no abstention: the baseline the ask
    flow's evidence is measured against."""

    top_k: int = 3
    max_new_tokens: int = 160


def answer_variants(names: str | Sequence[str]) -> dict[str, Any]:
    """Settings per variant name: "default" (what `ask` does), "extractive", "generated" (short,
    from the evidence) and "both" (`AskSettings`), "chunks" (`WholeChunks`), or `AskSettings`
    fields changed from the default, joined by "+" ("rerank=5", "abstain=false+evidence_words=40"):
    the candidates a choice among settings is made from (`evaluation.held_out`)."""
    from dataclasses import fields, replace

    from unirag.answer.ask import AskSettings

    base = AskSettings()
    table = {"default": base, "extractive": replace(base, answer="extractive"),
             "generated": replace(base, answer="generated"), "both": replace(base, answer="both"),
             "chunks": WholeChunks()}
    settable = {f.name for f in fields(AskSettings)} - {"top_k", "sources"}
    names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    out = {}
    for name in filter(None, names):
        if name in table:
            out[name] = table[name]
            continue
        changes = {}
        for change in name.split("+"):
            field, _, value = change.partition("=")
            if field not in settable or not value:
                raise UniragError(f"unknown answer variant {name!r}; choose from {', '.join(table)}, or "
                                  f"FIELD=VALUE joined by '+' over {', '.join(sorted(settable))}")
            changes[field] = _setting_value(getattr(base, field), value)
        out[name] = replace(base, **changes)
    return out


def _setting_value(default: Any, value: str) -> Any:
    """A variant's FIELD=VALUE read as the field's type (its default's)."""
    if isinstance(default, bool):
        if value.lower() not in ("true", "false"):
            raise UniragError(f"expected true or false, not {value!r}")
        return value.lower() == "true"
    if value.lower() == "none" and default is None:
        return None
    if isinstance(default, str):
        return value
    try:
        return float(value) if isinstance(default, float) else int(value)
    except ValueError:
        raise UniragError(f"expected a number, not {value!r}") from None


def chunks_answer(model, question: str, hits, settings: WholeChunks):
    """The `WholeChunks` answer to `question` from these hits, as an `ask.Answer` (not yet streamed)."""
    from unirag.answer.ask import NO_ANSWER, Answer
    from unirag.answer.evidence import Evidence
    from unirag.answer.generate import answer, fit

    shown, _ = fit(model, question, list(hits)[: settings.top_k], (), settings.max_new_tokens)
    result = Answer(question, shown, Evidence([], float("-inf")), abstained=False)
    result._pieces = (answer(model, question, shown, max_new_tokens=settings.max_new_tokens, stream=True,
                             on_loop=lambda: setattr(result, "looped", True)) if shown
                      else iter([NO_ANSWER + " (No passages were found: the collection is empty.)"]))
    return result


def run_rag_eval(model, collection, questions: Sequence[Question], top_k: int = 5,
                 show_progress: bool = False, answers: int = 0, answer_top_k: int = 3,
                 mode: str = "hybrid", retriever=None, rerank: int = 0,
                 variants: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Retrieve for every question with `retrieval.search.retrieve`; per-question rankings and the aggregate.

    The first `answers` questions are also answered from their top `answer_top_k` chunks by each
    of `variants` ({label: AskSettings or WholeChunks}, default: `ask`'s own settings) through
    `ask.answer_hits`, the flow `ask` runs (`chunks_answer` for WholeChunks), and scored by
    `evaluation.answers` (keys, when the set has them) and `score_answer` (citations). A variant
    whose retrieval or rerank depth differs from `AskSettings()`'s is answered from its own
    ranking; the others share the run's (`mode`, `rerank`). `retriever(question, top_k) -> hits`,
    if given, replaces `retrieval.search.retrieve` (a reference encoder).
    """
    from dataclasses import replace

    from tqdm.auto import tqdm

    from unirag.answer.ask import AskSettings, answer_hits, never_mentioned
    from unirag.retrieval.search import retrieve
    from unirag.evaluation import answers as answer_scores

    def ranked(question: str, k: int):
        return retriever(question, k) if retriever else retrieve(model, collection, question, k, mode, rerank)

    depths = depths_for(top_k)
    ranked(questions[0].question, top_k)  # warm-up (and BM25 build), not timed
    rows, latencies, rankings = [], [], []
    for q in tqdm(questions, desc="retrieve", unit="question", disable=not show_progress):
        t0 = time.perf_counter()
        hits = ranked(q.question, top_k)
        latencies.append(time.perf_counter() - t0)
        rankings.append(hits)
        score = score_ranking([h.source for h in hits], q.files, depths)
        rows.append({"q": q.question, "files": list(q.files), **score, "latency_ms": round(1000 * latencies[-1], 2),
                     "retrieved": [{"source": h.source, "heading": h.heading, "score": round(h.score, 4)}
                                   for h in hits]})
    metrics = aggregate(rows, latencies, depths)
    base = AskSettings()
    variants = dict(variants or {"default": base})
    per_variant: dict[str, list[dict[str, Any]]] = {label: [] for label in variants}
    for q, row, hits in zip(tqdm(questions[:answers], desc="answer", unit="question", disable=not show_progress),
                            rows, rankings):
        top = hits[:answer_top_k] if answer_top_k <= top_k else ranked(q.question, answer_top_k)
        own_rankings = {}  # (retrieval, rerank) -> the top chunks, for variants that retrieve their own way
        unmentioned = never_mentioned(collection, q.question)  # each variant's settings say if it abstains on them
        selected: dict[tuple, tuple[Any, float]] = {}  # (evidence, seconds) shared by variants that select alike
        row["answers"] = {}
        for label, settings in variants.items():
            settings = replace(settings, top_k=answer_top_k)
            shown = top
            if isinstance(settings, AskSettings) and (settings.retrieval, settings.rerank) != (base.retrieval, base.rerank):
                way = (settings.retrieval, settings.rerank)
                if way not in own_rankings:
                    own_rankings[way] = retrieve(model, collection, q.question, answer_top_k, *way)
                shown = own_rankings[way]
            if isinstance(settings, WholeChunks):
                t0 = time.perf_counter()
                result = chunks_answer(model, q.question, shown, settings)
            else:
                key = (settings.words, settings.max_new_tokens, tuple(h.id for h in shown))
                shown, evidence, reused_s = selected.get(key, (shown, None, 0.0))
                t0 = time.perf_counter() - reused_s  # a variant that reuses the selection is timed with it
                result = answer_hits(model, q.question, shown, settings, evidence=evidence, unmentioned=unmentioned)
                selected.setdefault(key, (result.hits, result.evidence, result.evidence_s))
            first = None
            for piece in result.stream():
                if first is None and piece.strip():
                    first = time.perf_counter() - t0
            total = time.perf_counter() - t0
            passages = [f"{h.label}\n{h.text}" for h in result.hits]
            scored = {**answer_scores.score(result.text, q.keys, passages, result.looped),
                      **score_answer(result.text, [h.source for h in result.hits], q.files),
                      "first_text_s": round(first if first is not None else total, 3), "total_s": round(total, 3)}
            row["answers"][label] = {"answer": result.text, **scored}
            per_variant[label].append(scored)
    if answers:
        metrics["answers"] = {}
        for label, scored in per_variant.items():
            summary = answer_scores.summarize(scored)
            summary["cites"] = sum(a["cites"] for a in scored) / len(scored)
            summary["cites_right"] = sum(a["cites_right"] for a in scored) / len(scored)
            summary["first_source_right"] = sum(a["first_source_right"] for a in scored) / len(scored)
            metrics["answers"][label] = summary
    return {"metrics": metrics, "per_question": rows}


def rag_results_markdown(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per run label (``{label: metrics}``): hit@r and MRR in %, p50 latency in ms; then,
    for runs that answered, one table of answer quality per variant (`evaluation.answers`)."""
    from unirag.evaluation.answers import answers_markdown

    depths = sorted({int(k[4:]) for m in runs.values() for k in m if k.startswith("hit@")})
    header = "| Run | Questions | " + " | ".join(f"hit@{r}" for r in depths) + " | MRR | p50 ms |"
    lines = [header, "|---|---:|" + "---:|" * (len(depths) + 2)]
    for label, m in runs.items():
        cells = [f"{100 * m[f'hit@{r}']:.1f}" if f"hit@{r}" in m else "" for r in depths]
        latency = f"{m['latency_ms_p50']:.0f}" if "latency_ms_p50" in m else ""
        lines.append(f"| {label} | {m['n_questions']} | " + " | ".join(cells) + f" | {100 * m['mrr']:.1f} | {latency} |")
    table = "\n".join(lines) + "\n"
    for label, m in runs.items():
        if m.get("answers"):
            table += f"\nAnswers ({label}):\n\n" + answers_markdown(m["answers"])
    return table
