"""Language-modelling evaluation: does the model still generate well after (embedding) training?

Three kinds of measurement, on local copies of standard sets (``shared/README.md``, ``data/eval/lm``):

- ``perplexity``: token-level perplexity of a text file (wikitext-2 test) with the sliding-window
  method of the Hugging Face perplexity guide: windows of ``max_length`` tokens moved by ``stride``,
  each window scoring only the tokens not scored by an earlier window, so every token after the
  first is scored exactly once with up to ``max_length - stride`` tokens of context.
- ``multiple_choice``: zero-shot multiple choice (ARC-Easy, PIQA, SciQ, HellaSwag) scored by
  log-likelihood exactly as lm-evaluation-harness does: each choice is the continuation
  ``" " + choice`` of the context; ``acc`` takes the choice with the highest summed log-probability,
  ``acc_norm`` the highest log-probability divided by the choice's length in characters
  (``len(choice)``, without the delimiter, as the harness's ``completion_len``).
- ``lambada``: LAMBADA (OpenAI version) as the harness's ``lambada_openai``: the target is
  ``" " + last word`` given the rest (split on single spaces); ``acc`` counts targets whose every
  token is the greedy (argmax) prediction; ``perplexity`` is ``exp(-mean over passages of the
  target's summed log-probability)``.

Context/continuation tokenisation follows the harness's ``HFLM._encode_pair``: trailing whitespace of
the context moves to the front of the continuation, then ``context + continuation`` and ``context``
are encoded without special tokens and the continuation is ``whole[len(context_enc):]``; an empty
context is replaced by one prefix token (BOS, else EOS). Inputs longer than the model's context
window keep their last tokens, as in the harness.

Public API: ``TASK_FILES``, ``DEFAULT_TASKS``, ``encode_pair``, ``loglikelihoods``,
``score_choices``, ``perplexity``, ``multiple_choice``, ``lambada``, ``run_lm_eval``,
``lm_results_markdown``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unirag.errors import UniragError
from unirag.model.scoring import Pair, logits_at, loglikelihoods  # noqa: F401  (loglikelihoods: part of this module's API)
from unirag.evaluation.files import check_file, read_jsonl

# Task name -> file under the evaluation data folder (``.../data/eval``).
TASK_FILES: dict[str, str] = {
    "wikitext2": "lm/wikitext2-test.txt",
    "arc_easy": "lm/arc_easy.jsonl",
    "piqa": "lm/piqa.jsonl",
    "sciq": "lm/sciq.jsonl",
    "hellaswag": "lm/hellaswag.jsonl",
    "lambada": "lm/lambada_openai.jsonl",
}
DEFAULT_TASKS: tuple[str, ...] = ("wikitext2", "arc_easy", "piqa", "sciq", "hellaswag", "lambada")
MULTIPLE_CHOICE_TASKS = ("arc_easy", "piqa", "sciq", "hellaswag")

DEFAULT_WINDOW = 1024
DEFAULT_STRIDE = 512
# With ``limit`` and no ``limit_tokens``, run_lm_eval scores this many wikitext tokens per unit of limit.
TOKENS_PER_LIMIT = 100


# ----------------------------------------------------------------------------- tokenisation


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _prefix_token_id(tokenizer: Any) -> int:
    """The token standing in for an empty context (the harness's ``prefix_token_id``)."""
    return tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id


def encode_pair(tokenizer: Any, context: str, continuation: str) -> Pair:
    """Token ids of (context, continuation) the way lm-evaluation-harness's HFLM makes them.

    An empty context becomes the prefix token. Otherwise trailing whitespace of the context is
    moved to the continuation, and the continuation's ids are the tail of the encoding of the
    whole string after as many tokens as the context alone encodes to.
    """
    if context == "":
        return [_prefix_token_id(tokenizer)], _encode(tokenizer, continuation)
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces > 0:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = _encode(tokenizer, context + continuation)
    context_ids = _encode(tokenizer, context)
    return context_ids, whole[len(context_ids):]


# ----------------------------------------------------------------------------- scoring


def score_choices(lls: Sequence[float], choices: Sequence[str], label: int) -> tuple[float, float]:
    """(acc, acc_norm) of one item as the harness computes them.

    acc: argmax of the log-likelihoods; acc_norm: argmax of log-likelihood / len(choice), the
    choice's length in characters without the leading delimiter. Ties go to the first choice.
    """
    lls = np.asarray(lls, dtype=np.float64)
    completion_len = np.array([float(len(c)) for c in choices])
    acc = float(int(np.argmax(lls)) == int(label))
    acc_norm = float(int(np.argmax(lls / completion_len)) == int(label))
    return acc, acc_norm


def _stderr(values: Sequence[float]) -> float:
    """Standard error of a mean (sample standard deviation / sqrt(n)), as the harness reports."""
    n = len(values)
    return float(np.std(values, ddof=1) / math.sqrt(n)) if n > 1 else math.nan


# ----------------------------------------------------------------------------- readers


def read_text_lines(path: str | Path) -> list[str]:
    """The lines of a text file (a final newline does not make an extra empty line)."""
    raw = check_file(path).read_text(encoding="utf-8")
    lines = raw.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ----------------------------------------------------------------------------- tasks


def perplexity(model: Any, path: str | Path, max_length: int | None = None, stride: int | None = None,
               limit_tokens: int | None = None, show_progress: bool = True) -> dict[str, Any]:
    """Token-level perplexity of a text file with the sliding-window method.

    The file's lines are joined with "\\n\\n" (as the HF guide joins wikitext-2's lines) and
    tokenised once (with the tokenizer's special tokens, as the guide does); ``limit_tokens`` keeps
    the first tokens only. Windows of ``max_length`` tokens (default min(1024, context window))
    start every ``stride`` tokens (default min(512, max_length)); each window scores only the
    tokens after the previous window's end. With ``stride < max_length`` every token but the first
    is scored once, so ``tokens`` (the number scored) is the text's token count minus one (with
    ``stride == max_length`` the first token of each window has no context and is skipped), and
    ``perplexity = exp(total NLL / tokens)`` exactly (the guide's loop approximates this count).
    """
    window = int(max_length or min(DEFAULT_WINDOW, model.context_window))
    if window > model.context_window:
        raise UniragError(f"max_length={window} exceeds the model's context window of {model.context_window}")
    stride = int(stride or min(DEFAULT_STRIDE, window))
    if window < 2 or not 1 <= stride <= window:
        raise UniragError(f"need max_length >= 2 and 1 <= stride <= max_length (got {window}, {stride})")
    text = "\n\n".join(read_text_lines(path))
    ids = list(model.tokenizer(text, verbose=False)["input_ids"])
    if limit_tokens:
        ids = ids[:limit_tokens]
    if len(ids) < 2:
        raise UniragError(f"{path} has fewer than 2 tokens: nothing to score")
    seq_len = len(ids)
    starts = list(range(0, seq_len, stride))
    if show_progress:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="perplexity", unit="window")
    nll_sum, n_tokens, prev_end = 0.0, 0, 0
    for begin in starts:
        end = min(begin + window, seq_len)
        first = max(prev_end, begin + 1)  # first token this window scores (token 0 is never scored)
        chunk = torch.tensor([ids[begin:end]])
        positions = torch.arange(first - 1 - begin, end - 1 - begin)
        logits = logits_at(model, chunk, torch.ones_like(chunk), torch.zeros_like(positions), positions)
        targets = chunk[0, first - begin:end - begin]
        nll = -torch.log_softmax(logits, dim=-1).gather(1, targets[:, None])[:, 0]
        nll_sum += float(nll.double().sum())
        n_tokens += len(targets)
        prev_end = end
        if end == seq_len:
            break
    mean_nll = nll_sum / n_tokens
    return {"perplexity": math.exp(mean_nll), "tokens": n_tokens, "window": window, "stride": stride,
            "nll": mean_nll}


def multiple_choice(model: Any, path: str | Path, limit: int | None = None, batch_size: int = 16,
                    show_progress: bool = True) -> dict[str, Any]:
    """Zero-shot multiple choice on a ``{"context", "choices", "label"}`` JSONL file, harness-style.

    Returns ``{"acc", "acc_norm", "acc_stderr", "acc_norm_stderr", "n"}`` (accuracies as fractions).
    """
    rows = read_jsonl(path, limit)
    if not rows:
        raise UniragError(f"{path} has no rows")
    pairs, owner = [], []
    for k, row in enumerate(rows):
        for choice in row["choices"]:
            pairs.append(encode_pair(model.tokenizer, row["context"], " " + choice))
            owner.append(k)
    results = loglikelihoods(model, pairs, batch_size=batch_size, show_progress=show_progress)
    per_item: list[list[float]] = [[] for _ in rows]
    for k, (ll, _) in zip(owner, results):
        per_item[k].append(ll)
    accs, norms = [], []
    for row, lls in zip(rows, per_item):
        acc, acc_norm = score_choices(lls, row["choices"], row["label"])
        accs.append(acc)
        norms.append(acc_norm)
    return {"acc": float(np.mean(accs)), "acc_norm": float(np.mean(norms)),
            "acc_stderr": _stderr(accs), "acc_norm_stderr": _stderr(norms), "n": len(rows)}


def lambada_pair(text: str) -> tuple[str, str]:
    """(context, target) of a LAMBADA passage: the harness's ``text.split(' ')`` templates."""
    words = text.split(" ")
    return " ".join(words[:-1]), " " + words[-1]


def lambada(model: Any, path: str | Path, limit: int | None = None, batch_size: int = 16,
            show_progress: bool = True) -> dict[str, Any]:
    """LAMBADA (``{"text"}`` JSONL): ``{"acc", "perplexity", "acc_stderr", "n"}`` as lm_eval's lambada_openai."""
    rows = read_jsonl(path, limit)
    if not rows:
        raise UniragError(f"{path} has no rows")
    pairs = [encode_pair(model.tokenizer, *lambada_pair(row["text"])) for row in rows]
    results = loglikelihoods(model, pairs, batch_size=batch_size, show_progress=show_progress)
    lls = [ll for ll, _ in results]
    greedy = [float(g) for _, g in results]
    return {"acc": float(np.mean(greedy)), "perplexity": math.exp(-float(np.mean(lls))),
            "acc_stderr": _stderr(greedy), "n": len(rows)}


def run_lm_eval(model: Any, data_dir: str | Path, tasks: Sequence[str] = DEFAULT_TASKS,
                limit: int | None = None, *, limit_tokens: int | None = None, batch_size: int = 16,
                max_length: int | None = None, stride: int | None = None,
                show_progress: bool = True) -> dict[str, dict[str, Any]]:
    """Run the named tasks (keys of ``TASK_FILES``) on files under ``data_dir`` (``.../data/eval``).

    ``limit`` keeps the first N items of each multiple-choice/LAMBADA file; for wikitext2 it keeps
    the first ``TOKENS_PER_LIMIT * limit`` tokens unless ``limit_tokens`` is given. Returns
    ``{task: metrics}`` (each with ``seconds``); everything is checked before anything runs.
    """
    unknown = [t for t in tasks if t not in TASK_FILES]
    if unknown:
        raise UniragError(f"unknown LM task(s) {', '.join(unknown)}; known: {', '.join(TASK_FILES)}")
    data_dir = Path(data_dir)
    missing = [str(data_dir / TASK_FILES[t]) for t in tasks if not (data_dir / TASK_FILES[t]).is_file()]
    if missing:
        raise UniragError(f"evaluation file(s) not found: {', '.join(missing)}")
    if limit_tokens is None and limit:
        limit_tokens = TOKENS_PER_LIMIT * limit
    out: dict[str, dict[str, Any]] = {}
    for task in tasks:
        path = data_dir / TASK_FILES[task]
        start = time.perf_counter()
        if task == "wikitext2":
            result = perplexity(model, path, max_length=max_length, stride=stride,
                                limit_tokens=limit_tokens, show_progress=show_progress)
        elif task == "lambada":
            result = lambada(model, path, limit=limit, batch_size=batch_size, show_progress=show_progress)
        else:
            result = multiple_choice(model, path, limit=limit, batch_size=batch_size, show_progress=show_progress)
        result["seconds"] = round(time.perf_counter() - start, 1)
        out[task] = result
    return out


# ----------------------------------------------------------------------------- reporting

_METRICS = ("perplexity", "acc", "acc_norm")  # shown in this order when a task has them


def lm_results_markdown(runs: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """Markdown table, one row per (task, metric), one column per run (``{label: run_lm_eval result}``).

    Accuracies are shown as percentages. With exactly two runs a last column gives the change of
    the second against the first: relative change in % for perplexity (lower is better), change
    in percentage points for accuracies.
    """
    labels = list(runs)
    tasks = list(dict.fromkeys(t for result in runs.values() for t in result))
    compare = len(labels) == 2
    header = "| Task | Metric | " + " | ".join(labels) + (" | Change |" if compare else " |")
    lines = [header, "|---|---|" + "---:|" * (len(labels) + compare)]
    for task in tasks:
        metrics = [m for m in _METRICS if any(m in r.get(task, {}) for r in runs.values())]
        for metric in metrics:
            values = [runs[label].get(task, {}).get(metric) for label in labels]
            scale = 1.0 if metric == "perplexity" else 100.0
            cells = ["–" if v is None else f"{scale * v:.2f}" for v in values]
            if compare:
                a, b = values
                if a is None or b is None:
                    cells.append("–")
                elif metric == "perplexity":
                    cells.append(f"{100.0 * (b - a) / a:+.2f}%")
                else:
                    cells.append(f"{100.0 * (b - a):+.2f} pts")
            lines.append(f"| {task} | {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
