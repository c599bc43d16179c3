"""Retrieval evaluation for the RAG half: does `retrieve` (what `ask` uses) find the right file?

A question set is a JSONL file, one object per line: ``{"q": "question", "files": ["a.md", ...]}``
(``question`` / ``file`` are accepted too). ``files`` are the documents that answer it, as paths
relative to the indexed folder; a bare file name also matches that name in a sub-folder.

Each question goes through ``unirag.rag.pipeline.retrieve`` with ``top_k`` = the deepest depth,
giving a ranked list of chunks. Scores, per question, from that one list (`score_ranking`):

- ``hit@r``: 1 if any of the top ``r`` *chunks* comes from a right file, else 0.
- reciprocal rank: ``1 / rank`` of the first right file among the *distinct files* of the ranking
  (chunks collapsed to their file, first occurrence kept), 0 if no right file is in the top
  ``top_k`` chunks. Counting distinct files, not chunks, means three chunks of one wrong file
  above the right one cost one rank, not three. MRR is its mean over questions.

The aggregate (`aggregate`) is the mean of each score over questions, plus the p50 (median) and
p90 of the wall-clock latency of one ``retrieve`` call (embedding the question + the Chroma
query), timed after one untimed warm-up call.

With ``answers=N`` the first N questions also get an answer through ``pipeline.answer`` (greedy,
the prompt `ask` builds), scored by `score_answer`: ``cites`` (the answer has at least one valid
``[n]`` marker), ``cites_right`` (one of its markers points at a chunk of a right file) and
``says_unknown`` (it says the context lacks the answer). They are scored on the answer as `ask`
prints it (with unirag's sentence attribution, `rag/attribution.py`) and, as ``model_cites`` /
``model_cites_right``, on the model's own text before attribution. These measure citing, not
whether the answer is true; read the answers (kept per question) for that.

Public API: ``Question``, ``load_questions``, ``score_ranking``, ``score_answer``, ``aggregate``,
``depths_for``, ``run_rag_eval``, ``rag_results_markdown``.
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

from ..errors import UniragError

DEPTHS = (1, 3, 5)


@dataclass(frozen=True)
class Question:
    question: str
    files: tuple[str, ...]


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
        questions.append(Question(text, tuple(files)))
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
UNKNOWN = re.compile(r"(does not|doesn't|do not|don't) (contain|say|mention|provide|include)|not (mentioned|provided|"
                     r"in the context)|no (information|passage)|cannot (answer|find)", re.IGNORECASE)


def cited_numbers(text: str) -> list[int]:
    """The passage numbers an answer cites, in order, once each: "[2] ... [1, 3]" -> [2, 1, 3]."""
    numbers = [int(n) for group in CITATION.findall(text) for n in group.split(",")]
    return list(dict.fromkeys(numbers))


def score_answer(text: str, sources: Sequence[str], gold: Sequence[str]) -> dict[str, Any]:
    """Score one generated answer; `sources` are the files of the passages [1], [2], ... shown to it."""
    cited = [n for n in cited_numbers(text) if 1 <= n <= len(sources)]
    right = [n for n in cited if any(same_file(sources[n - 1], g) for g in gold)]
    return {"cited": cited, "cites": int(bool(cited)), "cites_right": int(bool(right)),
            "says_unknown": int(bool(UNKNOWN.search(text)))}


def aggregate(per_question: Sequence[Mapping[str, Any]], latencies_s: Sequence[float],
              depths: Sequence[int] = DEPTHS) -> dict[str, Any]:
    """Means over questions (``hit@r``, ``mrr``) and latency percentiles in milliseconds."""
    n = len(per_question)
    if not n:
        raise UniragError("no questions were scored")
    metrics: dict[str, Any] = {f"hit@{r}": sum(q[f"hit@{r}"] for q in per_question) / n for r in depths}
    metrics["mrr"] = sum(q["rr"] for q in per_question) / n
    metrics["n_questions"] = n
    answered = [q["answer_scores"] for q in per_question if "answer_scores" in q]
    if answered:
        metrics["n_answers"] = len(answered)
        for key in ("cites", "cites_right", "says_unknown"):
            metrics[key] = sum(a[key] for a in answered) / len(answered)
        own = [q["model_scores"] for q in per_question if "model_scores" in q]
        for key in ("cites", "cites_right") if own else ():
            metrics[f"model_{key}"] = sum(a[key] for a in own) / len(own)
    if latencies_s:
        ms = sorted(1000 * t for t in latencies_s)
        metrics["latency_ms_p50"] = statistics.median(ms)
        metrics["latency_ms_p90"] = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return metrics


def run_rag_eval(model, collection, questions: Sequence[Question], top_k: int = 5,
                 show_progress: bool = False, answers: int = 0, answer_top_k: int = 3,
                 max_new_tokens: int = 160, mode: str = "hybrid", retriever=None,
                 chunk_cache=None, rerank: int = 0, rerank_fusion: bool = True,
                 expand: str = "none") -> dict[str, Any]:
    """Retrieve for every question with `pipeline.retrieve`; per-question rankings and the aggregate.

    The first `answers` questions are also answered from their top `answer_top_k` chunks, as `ask` does.
    `retriever(question, top_k) -> hits`, if given, replaces `pipeline.retrieve` (a reference encoder).
    """
    from tqdm.auto import tqdm

    from ..rag.pipeline import answer, cite, fit, retrieve

    def ranked(question: str, k: int):
        return retriever(question, k) if retriever else retrieve(model, collection, question, k, mode, rerank, rerank_fusion,
                                                                      expand)

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
    for q, row, hits in zip(tqdm(questions[:answers], desc="answer", unit="question", disable=not show_progress),
                            rows, rankings):
        top = hits[:answer_top_k] if answer_top_k <= top_k else ranked(q.question, answer_top_k)
        shown, _ = fit(model, q.question, top, max_new_tokens=max_new_tokens)
        t0 = time.perf_counter()
        raw = answer(model, q.question, shown, max_new_tokens=max_new_tokens, stream=False, chunk_cache=chunk_cache,
                     attribute=False)
        seconds = time.perf_counter() - t0
        text = "".join(cite(raw, shown))  # what `ask` prints
        sources = [h.source for h in shown]
        row.update(answer=text, model_answer=raw, answer_s=round(seconds, 2),
                   answer_scores=score_answer(text, sources, q.files),
                   model_scores=score_answer(raw, sources, q.files))
    return {"metrics": aggregate(rows, latencies, depths), "per_question": rows}


def rag_results_markdown(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per run label (``{label: metrics}``): hit@r and MRR in %, p50 latency in ms."""
    depths = sorted({int(k[4:]) for m in runs.values() for k in m if k.startswith("hit@")})
    answers = any("n_answers" in m for m in runs.values())
    header = "| Run | Questions | " + " | ".join(f"hit@{r}" for r in depths) + " | MRR | p50 ms |"
    keys = ("cites", "cites_right", "model_cites", "model_cites_right", "says_unknown")
    header += (" Answers | cites % | cites right % | model cites % | model cites right % | says unknown % |"
               if answers else "")
    lines = [header, "|---|---:|" + "---:|" * (len(depths) + 2 + 6 * answers)]
    for label, m in runs.items():
        cells = [f"{100 * m[f'hit@{r}']:.1f}" if f"hit@{r}" in m else "" for r in depths]
        latency = f"{m['latency_ms_p50']:.0f}" if "latency_ms_p50" in m else ""
        line = f"| {label} | {m['n_questions']} | " + " | ".join(cells) + f" | {100 * m['mrr']:.1f} | {latency} |"
        if answers:
            line += (f" {m['n_answers']} | " + " | ".join(f"{100 * m[k]:.1f}" if k in m else "" for k in keys) + " |"
                     if "n_answers" in m else " |" * 6)
        lines.append(line)
    return "\n".join(lines) + "\n"
