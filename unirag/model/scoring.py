"""Log-likelihood scoring with the model's LM head: the one scorer that rerank, evidence
selection and the LM evaluation share.

`loglikelihoods` scores continuations after contexts in right-padded batches, running the LM head
only where a continuation token is predicted. `shared_context_loglikelihoods` does the same for
continuations that all follow one context, which then runs once. `read` embeds texts and scores
what follows them in the same pass. `question_logprobs` is query likelihood (UPR): how likely the
model finds a question after a passage.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from unirag.errors import UniragError
from unirag.model.pooling import padded_batch, pooled, token_budget_batches

Pair = tuple[list[int], list[int]]  # (context token ids, continuation token ids)


def _states_and_logits(model: Any, ids: torch.Tensor, attention: torch.Tensor, rows: torch.Tensor,
                       positions: torch.Tensor, cache: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(embedding-layer states of every position, float32 logits at the (row, position) pairs only)."""
    lm_head = model.model.get_output_embeddings()
    with model.forward_context():
        states, last = model.embedding_and_last_states(ids.to(model.device), attention.to(model.device), cache)
        logits = lm_head(last[rows.to(model.device), positions.to(model.device)])
    return states, logits.float().cpu()


def logits_at(model: Any, ids: torch.Tensor, attention: torch.Tensor,
              rows: torch.Tensor, positions: torch.Tensor, cache: Any = None) -> torch.Tensor:
    """float32 logits at (row, position) pairs only: the LM head runs on the selected states only.

    With a `cache` (keys and values of earlier positions, one row per batch row), `ids` continue
    it and `attention` covers the cached positions too; `positions` index `ids`."""
    lm_head = model.model.get_output_embeddings()
    with model.forward_context():
        states = model.hidden_states(ids.to(model.device), attention.to(model.device), cache)
        logits = lm_head(states[rows.to(model.device), positions.to(model.device)])
    return logits.float().cpu()


def _token_logprobs(logits: torch.Tensor, tokens: Sequence[int]) -> torch.Tensor:
    """log p(token) under each row of `logits`."""
    return torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(tokens, dtype=torch.long)[:, None])[:, 0]


def _scored_batch(model: Any, rows: Sequence[tuple[list[int], list[int]]], cache: Any = None,
                  cached: int = 0) -> list[tuple[float, bool]]:
    """One right-padded pass over rows of (input ids, targets), each row's targets being the
    tokens its last len(targets) positions predict: (sum of their log-probabilities, all greedy).
    With a `cache` of `cached` earlier positions (one row per batch row), the inputs continue it."""
    length = max(len(inp) for inp, _ in rows)
    ids = torch.full((len(rows), length), model.pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), cached + length), dtype=torch.long)
    attention[:, :cached] = 1
    picked_rows, positions, targets, spans = [], [], [], []
    for row, (inp, tgt) in enumerate(rows):
        ids[row, :len(inp)] = torch.tensor(inp)
        attention[row, cached:cached + len(inp)] = 1
        spans.append((len(targets), len(targets) + len(tgt)))
        picked_rows += [row] * len(tgt)
        positions += range(len(inp) - len(tgt), len(inp))  # logits at position p predict token p + 1
        targets += tgt
    logits = logits_at(model, ids, attention, torch.tensor(picked_rows, dtype=torch.long),
                       torch.tensor(positions, dtype=torch.long), cache)
    token_lp = _token_logprobs(logits, targets)
    greedy = logits.argmax(-1) == torch.tensor(targets, dtype=torch.long)
    return [(float(token_lp[a:b].sum()), bool(greedy[a:b].all())) for a, b in spans]


def _similar_length_batches(inputs: Sequence[list[int]], batch_size: int) -> list[list[int]]:
    """Indices of the non-empty inputs, longest first, in batches of similar lengths."""
    order = sorted((i for i, inp in enumerate(inputs) if inp), key=lambda i: -len(inputs[i]))
    return [[order[j] for j in cut]
            for cut in token_budget_batches([len(inputs[i]) for i in order], batch_size, None)]


def loglikelihoods(model: Any, pairs: Sequence[Pair], batch_size: int = 16,
                   show_progress: bool = False) -> list[tuple[float, bool]]:
    """For each (context ids, continuation ids): (sum of log p(continuation | context), is_greedy).

    ``is_greedy`` is True when every continuation token is the argmax prediction. Pairs are sorted
    longest first and run at most ``batch_size`` at a time, in batches of similar lengths
    (`token_budget_batches`), right-padded (with causal attention, padding after the real tokens
    cannot change them). Like the harness, an input longer than the context
    window keeps its last ``context_window + 1`` tokens.
    """
    max_len = int(model.context_window)
    prepared = []  # (input ids, targets): input = (ctx + cont)[-(max_len+1):][:-1]
    for ctx, cont in pairs:
        if not cont:
            prepared.append(([], []))
            continue
        full = (list(ctx) + list(cont))[-(max_len + 1):]
        n_cont = min(len(cont), len(full) - 1)
        prepared.append((full[:-1], full[len(full) - n_cont:]))
    out: list[tuple[float, bool]] = [(0.0, True)] * len(pairs)  # an empty continuation scores 0
    batches = _similar_length_batches([inp for inp, _ in prepared], batch_size)
    if show_progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc="log-likelihood", unit="batch")
    for batch in batches:
        for i, scored in zip(batch, _scored_batch(model, [prepared[i] for i in batch])):
            out[i] = scored
    return out


def shared_context_loglikelihoods(model: Any, context: list[int], continuations: Sequence[list[int]],
                                  batch_size: int = 16) -> list[tuple[float, bool]]:
    """`loglikelihoods` of (context, continuation) pairs that share one context, up to rounding.

    Why: evidence selection scores tens of short units after one question ("Question: ...
    Answer:"), a context often longer than the units themselves. Causal attention gives the
    context the same keys and values before every continuation, so it runs once; each batch of
    continuations then runs on a copy of its KV cache. Pairs too long for the context window,
    or an empty context, go to `loglikelihoods`, which cuts them as the harness does.
    """
    from transformers import DynamicCache

    longest = max((len(c) for c in continuations), default=0)
    if not context or len(context) + longest > model.context_window:
        return loglikelihoods(model, [(context, c) for c in continuations], batch_size)
    cache = DynamicCache(config=model.model.config)
    # the context's last position predicts every continuation's first token; its pass fills the cache
    first = logits_at(model, torch.tensor([context]), torch.ones(1, len(context), dtype=torch.long),
                      torch.tensor([0]), torch.tensor([len(context) - 1]), cache)[0]
    first_lp, first_greedy = torch.log_softmax(first, dim=-1), int(first.argmax())
    out = [(float(first_lp[c[0]]), first_greedy == c[0]) if c else (0.0, True) for c in continuations]
    rows = [(list(c[:-1]), list(c[1:])) for c in continuations]  # each later token after the cache
    for batch in _similar_length_batches([inp for inp, _ in rows], batch_size):
        batch_cache = copy.deepcopy(cache)
        batch_cache.batch_repeat_interleave(len(batch))
        for i, (total, greedy) in zip(batch, _scored_batch(model, [rows[i] for i in batch], batch_cache,
                                                           len(context))):
            out[i] = (out[i][0] + total, out[i][1] and greedy)
    return out


@dataclass(frozen=True)
class Reading:
    """What `read` gives, one entry per text."""

    vectors: np.ndarray  # (n, hidden) float32, L2-normalised: each text's embedding, as `embed` gives it
    likelihood: list[float]  # mean log-probability of the targets after the text and the prompt
    # mean log-probability of the text's own tokens after its first (at most `own_tokens` tokens),
    # with nothing before the text: how likely its words are alone; 0.0 for a one-token text
    own: list[float]


def read(model: Any, texts: Sequence[str], prompt: list[int], targets: list[int], own_tokens: int,
         batch_size: int = 16) -> Reading:
    """Embed each text and score `targets` after it and `prompt`, in one pass per text.

    Why: evidence selection needs three things of every unit: its embedding, how likely the
    question is after it, and how likely its own words are alone. Each row is laid out as `embed`
    lays the text out ([text, EOS] with EOS pooling) and continued by `prompt` and `targets`. With
    causal attention nothing that follows changes the states the embedding pools, so the vector
    is `embed`'s up to the rounding of other shapes; the LM head read at the targets' positions
    gives their likelihood, and read at the text's own positions, theirs. Three passes become one.
    """
    encoded = model.embedding_inputs(texts)
    # a row must fit the context window: with `max_length` near it, the targets keep what room is
    # left after the longest text and the prompt (the embedding and the own tokens stay whole)
    room = model.context_window - len(prompt) - max((len(e.ids) for e in encoded), default=0)
    targets = list(targets)[:max(room, 0)]
    tail = list(prompt) + targets
    rows = [e.ids + tail for e in encoded]
    vectors = np.zeros((len(texts), model.model.config.hidden_size), dtype=np.float32)
    likelihood, own = [0.0] * len(texts), [0.0] * len(texts)
    for batch in _similar_length_batches(rows, batch_size):
        ids, attention, pool = padded_batch([replace(encoded[i], ids=rows[i]) for i in batch], model.pad_id)
        picked_rows, positions, tokens, spans = [], [], [], []
        for row, i in enumerate(batch):
            e, full = encoded[i], rows[i]
            stop = min(e.text_end, e.text_start + own_tokens)
            first = len(tokens)
            # logits at position p predict token p + 1
            positions += range(len(full) - len(targets) - 1, len(full) - 1)
            tokens += targets
            middle = len(tokens)
            positions += range(e.text_start, stop - 1)
            tokens += full[e.text_start + 1:stop]
            picked_rows += [row] * (len(tokens) - first)
            spans.append((i, first, middle, len(tokens)))
        states, logits = _states_and_logits(model, ids, attention, torch.tensor(picked_rows, dtype=torch.long),
                                            torch.tensor(positions, dtype=torch.long))
        vectors[batch] = pooled(states, pool)
        token_lp = _token_logprobs(logits, tokens)
        for i, first, middle, last in spans:
            likelihood[i] = float(token_lp[first:middle].mean()) if middle > first else 0.0
            own[i] = float(token_lp[middle:last].mean()) if last > middle else 0.0
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return Reading(vectors, likelihood, own)


PROMPT = "Passage: {passage}\nPlease write a question based on this passage.\nQuestion:"
MAX_PASSAGE_TOKENS = 256


def question_logprobs(model, question: str, passages: Sequence[str],
                      max_passage_tokens: int = MAX_PASSAGE_TOKENS) -> list[float]:
    """Mean log P(question tokens | passage prompt) for each passage, under `model` (a UniModel).

    The scoring is the evaluation's log-likelihood scorer (`loglikelihoods`:
    batched, right-padded, LM head only where a question token is predicted). Passages are cut
    to `max_passage_tokens`, and a question to half of `max_length`, so a long chunk or question
    costs no more than a bounded one.
    """
    tokenizer = model.tokenizer
    question_ids = tokenizer(" " + question.strip(), add_special_tokens=False)["input_ids"][:model.max_length // 2]
    if not question_ids:
        raise UniragError("the question is empty")
    pairs = []
    for passage in passages:
        cut = tokenizer(passage, add_special_tokens=False)["input_ids"][:max_passage_tokens]
        pairs.append((tokenizer(PROMPT.format(passage=tokenizer.decode(cut).strip()))["input_ids"], question_ids))
    return [total / len(question_ids) for total, _ in loglikelihoods(model, pairs, batch_size=8)]
