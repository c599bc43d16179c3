"""Leave-one-set-out: a setting chosen on some question sets, scored on the set it was not chosen on.

The input is one `unirag eval rag --answers N --variants ... -o RUN.json` per question set, each
answering the same candidate variants (`rag.answer_variants`), and for settings the variants
cannot express (another adapter, embedding layer or collection) a labelled run per set
(`load_runs`). For each set, the candidate with the most right answers over the *other* sets
(their mean share, so that every set weighs alike; a tie goes to the one listed first, "default"
first of all) is its held-out choice, and that candidate's right answers on the set itself are
its held-out figure. The in-set figure is the best candidate's on the set itself: what tuning on
the set being scored would report. The gap between the two is what a rule chosen on its own sets
does not carry over.

Public API: ``load_runs``, ``held_out``, ``held_out_markdown``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from unirag.errors import UniragError


@dataclass(frozen=True)
class SetResult:
    """One question set's row of the leave-one-set-out table (shares are 0..1)."""

    name: str
    questions: int
    default: float        # right with the default settings
    chosen: str           # the candidate chosen on the other sets
    held_out: float       # right with it
    best: str             # the best candidate on this set itself
    in_set: float         # right with it
    ceiling: float        # keys in the shown chunks, default settings
    hit3: float           # the right file in the top 3 chunks
    abstained: float      # default settings


def _read_run(path: Path) -> tuple[str, dict]:
    """(the run's set name: its question file's stem, the run's JSON)."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        answers = record["metrics"]["answers"]
    except (OSError, ValueError, KeyError, TypeError):
        answers = None
    if not isinstance(answers, dict):
        raise UniragError(f"{path}: not a `unirag eval rag --answers N -o FILE` result")
    return Path(record.get("questions", path.stem)).stem, record


def load_runs(paths: Sequence[str | Path]) -> dict[str, dict]:
    """{set name (the question file's stem): the run's JSON}; every run must answer the same
    variants over at least one question.

    A path given as LABEL=PATH is a run of a set given unlabelled too, with other settings the
    variants cannot express (another adapter, embedding layer or collection): its variants join
    that set's, named LABEL (its default) and LABEL/VARIANT."""
    runs: dict[str, dict] = {}
    labelled: list[tuple[str, Path]] = []
    for given in paths:
        label, sep, rest = str(given).partition("=")
        if sep and label and "/" not in label:
            labelled.append((label, Path(rest)))
            continue
        name, record = _read_run(Path(given))
        if name in runs:
            raise UniragError(f"{given}: the set {name!r} is given twice")
        runs[name] = record
    for label, path in labelled:
        name, record = _read_run(path)
        if name not in runs:
            raise UniragError(f"{label}={path}: no unlabelled run of the set {name!r} to join")
        answers = runs[name]["metrics"]["answers"]
        for variant, metrics in record["metrics"]["answers"].items():
            joined = label if variant == "default" else f"{label}/{variant}"
            if joined in answers:
                raise UniragError(f"{label}={path}: the set {name!r} has a variant {joined!r} already")
            answers[joined] = metrics
    if len(runs) < 2:
        raise UniragError("leave-one-set-out needs runs over at least two question sets")
    first = next(iter(runs.values()))["metrics"]["answers"]
    for name, run in runs.items():
        if set(run["metrics"]["answers"]) != set(first):
            raise UniragError(f"the set {name!r}: its variants ({', '.join(run['metrics']['answers'])}) differ "
                              "from the first run's")
    return runs


def held_out(runs: Mapping[str, Mapping]) -> list[SetResult]:
    """The leave-one-set-out row of each set (`load_runs`' runs), in the order given."""
    right = {name: {label: m["key_correct"] for label, m in run["metrics"]["answers"].items()}
             for name, run in runs.items()}
    labels = list(next(iter(right.values())))
    labels.sort(key=lambda label: label != "default")  # (a tie goes to the default)
    rows = []
    for name, run in runs.items():
        others = [other for other in right if other != name]
        chosen = max(labels, key=lambda label: sum(right[o][label] for o in others) / len(others))
        best = max(labels, key=lambda label: right[name][label])
        metrics = run["metrics"]
        default = metrics["answers"].get("default", metrics["answers"][labels[0]])
        rows.append(SetResult(name, default["n_answers"], default["key_correct"], chosen, right[name][chosen],
                              best, right[name][best], default["keys_shown"], metrics.get("hit@3", 0.0),
                              default["abstained"]))
    return rows


def held_out_markdown(rows: Sequence[SetResult]) -> str:
    """The table: per set, right with the default, with the choice made on the other sets, and
    with the best choice on the set itself; then their means over sets."""
    def pct(value: float) -> str:
        return f"{100 * value:.1f}"

    lines = ["| Question set | Questions | default right % | chosen on the other sets | held-out right % | "
             "best on this set | in-set right % | ceiling % | hit@3 % | abstained % |",
             "|---|---:|---:|---|---:|---|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.name} | {r.questions} | {pct(r.default)} | {r.chosen} | {pct(r.held_out)} | {r.best} | "
                     f"{pct(r.in_set)} | {pct(r.ceiling)} | {pct(r.hit3)} | {pct(r.abstained)} |")
    n = len(rows)
    lines.append(f"| mean of {n} sets | | {pct(sum(r.default for r in rows) / n)} | | "
                 f"{pct(sum(r.held_out for r in rows) / n)} | | {pct(sum(r.in_set for r in rows) / n)} | "
                 f"{pct(sum(r.ceiling for r in rows) / n)} | {pct(sum(r.hit3 for r in rows) / n)} | "
                 f"{pct(sum(r.abstained for r in rows) / n)} |")
    return "\n".join(lines) + "\n"
