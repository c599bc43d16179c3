"""Synthetic questions written by the model itself, for question -> passage training (`pairs`).

doc2query / InPars style: the model reads a passage and writes one question it answers; a
question that is not a question, or that talks about "the text" instead of its subject, is
dropped; then a round trip keeps only pairs whose passage the current embedding ranks within
`depth` of all passages for that question (a question the passage does not answer finds other
passages first). Each kept pair gets a hard negative: a passage drawn from those the embedding
ranks just below the best other one for the question (close to it, but rarely another answer).
The output is the .jsonl `load_pairs` reads: {"query", "passage", "negative"} per line.

Written line by line and resumable: a passage already asked (in OUTPUT's `.unfiltered.jsonl`) is
not asked again.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

ASK = "{passage}\n\nWrite one question that the text above answers."
MAX_QUESTION_TOKENS = 32
PASSAGE_CHARS = 700  # a lead's first sentences: what one short question can be about
MIN_CHARS = 300      # shorter texts say too little to ask about
ROUND_TRIP_DEPTH = 10
NEGATIVE_RANKS = (1, 10)  # hard negatives come from the other passages ranked here (0 = the closest)
# questions about the passage itself ("What is the text about?"), not about its subject
_META = re.compile(r"\b(?:text|passage|article|above|answer to this)\b", re.I)


def passage_of(text: str, chars: int = PASSAGE_CHARS) -> str:
    """The text's first `chars` characters, cut after the last full sentence that ends past its
    first 200 characters (else where the characters run out)."""
    text = text.strip()
    if len(text) <= chars:
        return text
    head = text[:chars]
    end = head.rfind(". ")
    return head[: end + 1] if end > 200 else head


def sample(texts: Iterable[str], limit: int, seed: int = 0) -> list[str]:
    """`limit` texts of at least MIN_CHARS characters, drawn in a seeded shuffle."""
    chosen = [t.strip() for t in texts if len(t.strip()) > MIN_CHARS]
    random.Random(seed).shuffle(chosen)
    return chosen[:limit]


def plausible(question: str) -> bool:
    """One question of 4-25 words about the subject, not about the passage."""
    return question.endswith("?") and 4 <= len(question.split()) <= 25 and not _META.search(question)


def ask(model, passage: str) -> str:
    """The model's question for this passage (greedy; first line only)."""
    text = model.generate([{"role": "user", "content": ASK.format(passage=passage)}],
                          max_new_tokens=MAX_QUESTION_TOKENS)
    return text.strip().split("\n")[0].strip()


def _scores(model, pairs: Sequence[dict]) -> np.ndarray:
    """Cosine of every question (rows) with every passage (columns), by the model's embedding."""
    return model.embed([p["query"] for p in pairs]) @ model.embed([p["passage"] for p in pairs]).T


def round_trip(model, pairs: Sequence[dict], depth: int = ROUND_TRIP_DEPTH) -> list[bool]:
    """Whether each pair's passage is within the top `depth` of all the pairs' passages for its
    question, by the model's own embedding."""
    if not pairs:
        return []
    scores = _scores(model, pairs)
    own = scores[np.arange(len(pairs)), np.arange(len(pairs))]
    return [bool(x) for x in (scores > own[:, None]).sum(1) < depth]


def with_negatives(model, pairs: Sequence[dict], seed: int = 0) -> list[dict]:
    """The pairs, each with a `negative`: another pair's passage, drawn from those ranked
    NEGATIVE_RANKS for its question. Needs at least two pairs."""
    scores = _scores(model, pairs)
    rng = random.Random(seed)
    lo, hi = NEGATIVE_RANKS
    out = []
    for i, pair in enumerate(pairs):
        others = [int(j) for j in np.argsort(-scores[i], kind="stable") if j != i][:hi]
        choice = others[rng.randrange(min(lo, len(others) - 1), len(others))]
        out.append({**pair, "negative": pairs[choice]["passage"]})
    return out


def _read_rows(path: Path) -> list[dict]:
    """The rows of a .jsonl written line by line; a last line cut by a crash is dropped (and so
    asked again)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def synthesize(model, texts: Iterable[str], output: str | Path, depth: int = ROUND_TRIP_DEPTH,
               show_progress: bool = True) -> dict[str, int]:
    """Ask one question per text, appending to OUTPUT's `.unfiltered.jsonl` beside it (texts
    already there are not asked again), then write `output` (atomically) with the pairs that pass
    the filters and the round trip, each with a hard negative. Returns the counts."""
    from tqdm.auto import tqdm

    output = Path(output)
    raw = output.with_suffix(".unfiltered.jsonl")
    rows = _read_rows(raw)
    raw.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")  # drops a cut last line
    done = {r["passage"] for r in rows}
    passages = [p for p in dict.fromkeys(passage_of(t) for t in texts if t.strip()) if p not in done]
    with raw.open("a", encoding="utf-8") as sink:
        for passage in tqdm(passages, desc="questions", unit="passage", disable=not show_progress):
            question = ask(model, passage)
            sink.write(json.dumps({"query": question, "passage": passage, "plausible": plausible(question)}) + "\n")
            sink.flush()
    rows = _read_rows(raw)
    asked = [r for r in rows if r["plausible"]]
    kept = [{"query": r["query"], "passage": r["passage"]}
            for r, ok in zip(asked, round_trip(model, asked, depth)) if ok]
    if len(kept) > 1:
        kept = with_negatives(model, kept)
    tmp = output.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
    tmp.replace(output)
    return {"passages": len(rows), "plausible": len(asked), "kept": len(kept)}
