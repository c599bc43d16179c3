"""Answer quality on question sets that carry gold keys (`unirag eval rag --answers N`).

A row of such a set has ``keys``: 1-3 lowercase strings a correct answer must contain. Per answer:

- ``key_correct``: every key appears in the answer (case-insensitive), the answer has at most
  MAX_WORDS words, quoted evidence included, so pasting whole passages cannot pass, and it is no
  abstention (an answer that says the documents don't say is not right, even where the closest
  quote it shows holds the keys);
- ``keys_shown``: every key appears somewhere in the passages shown (the ceiling retrieval leaves);
- ``first_line``: every key appears in the answer's first line (an extractive answer's first
  quote: what a reader meets first), counted for key-correct answers only;
- ``degenerate``: empty, cut by the loop stop, or a preamble alone ("The answer is:");
- ``grounded``: the share of the answer's sentences whose content words come mostly (over half)
  from the passage they cite; every sentence of a quote cites what the quote cites, a sentence
  citing nothing is not grounded, and the abstention's own words are not counted;
- ``abstained``: the answer is the flow's NO_ANSWER;
- ``first_text_s`` / ``total_s``: seconds to the first non-empty piece and to the end.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from unirag.answer.ask import CLOSEST, NO_ANSWER
from unirag.answer.attribution import content_words, sentence_ends
from unirag.answer.sentences import word_count

MAX_WORDS = 60
# "The answer is:", "Answer:", "Here is the answer to your question:" with nothing after it
_PREAMBLE = re.compile(r"^\W*(?:here\s+is\s+)?(?:the\s+)?(?:answer|response)\b[\w\s']{0,40}?(?::|\b(?:is|are))\W*$", re.I)
_MARKERS = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_QUOTE = re.compile(r"“([^”]*)”\s*((?:\[\d+(?:\s*,\s*\d+)*\]\s*)+)")


def has_keys(text: str, keys: Sequence[str]) -> bool:
    lowered = text.lower()
    return bool(keys) and all(key.lower() in lowered for key in keys)


def key_correct(text: str, keys: Sequence[str], max_words: int = MAX_WORDS) -> bool:
    return word_count(text) <= max_words and has_keys(text, keys)


def degenerate(text: str, looped: bool = False) -> bool:
    stripped = _MARKERS.sub("", text).strip()
    return not stripped or looped or bool(_PREAMBLE.match(stripped))


def sentences(text: str) -> list[str]:
    parts, start = [], 0
    for match in sentence_ends(text + "\n\n"):
        parts.append(text[start:match.end()].strip())
        start = match.end()
    return [p for p in parts if p]


def grounded_share(text: str, passages: Sequence[str]) -> float | None:
    """Share of sentences whose content words are mostly in the passage(s) they cite; None when
    the answer has no sentence with content words."""
    words_of = [content_words(p) for p in passages]
    counted = grounded = 0
    text = text.replace(NO_ANSWER, "").replace(CLOSEST, "")
    # a quote of several sentences carries its citation once, after it: each of them cites it
    quoted = [f"{sentence} {match.group(2).strip()}" for match in _QUOTE.finditer(text)
              for sentence in sentences(match.group(1))]
    for sentence in quoted + sentences(_QUOTE.sub("\n\n", text)):
        words = content_words(_MARKERS.sub("", sentence))
        if not words:
            continue
        counted += 1
        cited = {int(n) for group in _MARKERS.findall(sentence) for n in group.split(",")}
        source = set().union(*(words_of[n - 1] for n in cited if 1 <= n <= len(words_of)))
        grounded += len(words & source) > len(words) / 2
    return grounded / counted if counted else None


def score(text: str, keys: Sequence[str], passages: Sequence[str], looped: bool = False) -> dict[str, Any]:
    abstained = text.strip().startswith(NO_ANSWER)
    right = key_correct(text, keys) and not abstained
    first_line = text.strip().split("\n", 1)[0]
    return {"key_correct": int(right), "keys_shown": int(has_keys("\n".join(passages), keys)),
            "first_line": int(right and has_keys(first_line, keys)),
            "degenerate": int(degenerate(text, looped)), "grounded": grounded_share(text, passages),
            "abstained": int(abstained), "words": word_count(text)}


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Means over answers, grounded share over all counted sentences' answers, time percentiles."""
    n = len(rows)
    out: dict[str, Any] = {"n_answers": n}
    for key in ("key_correct", "keys_shown", "first_line", "degenerate", "abstained"):
        out[key] = sum(r[key] for r in rows) / n if n else 0.0
    grounded = [r["grounded"] for r in rows if r["grounded"] is not None]
    out["grounded"] = statistics.fmean(grounded) if grounded else None
    shown = sum(r["keys_shown"] for r in rows)
    out["of_ceiling"] = sum(r["key_correct"] for r in rows) / shown if shown else None
    for key in ("first_text_s", "total_s"):
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out[f"{key}_p50"] = statistics.median(values)
            out[f"{key}_p95"] = _percentile(values, 0.95)
    return out


def answers_markdown(runs: Mapping[str, Mapping[str, Any]]) -> str:
    """One row per variant: key accuracy, its share of the ceiling, degenerate, grounded, time."""
    lines = ["| Variant | Answers | key accuracy % | in first line % | ceiling (keys shown) % | of ceiling % | "
             "degenerate % | grounded % | abstained % | first text p50 / p95 s | total p50 / p95 s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def pct(value):
        return "" if value is None else f"{100 * value:.1f}"

    for label, m in runs.items():
        lines.append(
            f"| {label} | {m['n_answers']} | {pct(m['key_correct'])} | {pct(m['first_line'])} | "
            f"{pct(m['keys_shown'])} | {pct(m['of_ceiling'])} | "
            f"{pct(m['degenerate'])} | {pct(m['grounded'])} | {pct(m['abstained'])} | "
            f"{m.get('first_text_s_p50', 0):.2f} / {m.get('first_text_s_p95', 0):.2f} | "
            f"{m.get('total_s_p50', 0):.2f} / {m.get('total_s_p95', 0):.2f} |")
    return "\n".join(lines) + "\n"
