"""How texts become embedding batches: token layout per pooling, batching by a token budget, and
the pooled vector of each row. Pure helpers behind `UniModel.embed` (unirag/model/unimodel.py), which
owns the tokenizer and the forward pass.

Pooling (the UniMAE paper's names):
- eos:  append the tokenizer's EOS, take the hidden state there (the UniMAE embedding)
- last: the hidden state of the last text token, nothing appended
- mean: mean over the text tokens
- echo: feed the text twice, mean over the second copy (Springer et al., "Repetition
        improves language model embeddings")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from unirag.errors import UniragError

POOLINGS = ("eos", "mean", "last", "echo")


@dataclass
class Encoded:
    """One text ready for the model: token ids, the slice of positions to pool over, and the
    slice that holds the text's own tokens (its first copy, for echo)."""

    ids: list[int]
    pool_start: int
    pool_end: int
    truncated: bool
    text_start: int
    text_end: int


def encode(text_ids: list[int], pooling: str, head: list[int], suffix_ids: list[int], max_length: int,
           pad_id: int) -> Encoded:
    """Lay out one text's token ids for `pooling`: `head` (e.g. BOS + instruction), the text cut to
    what fits in `max_length`, and `suffix_ids` (what "eos" pooling appends)."""
    budget = max_length - len(head) - (len(suffix_ids) if pooling == "eos" else 0)
    if pooling == "echo":
        budget //= 2
    if budget < 1:
        raise UniragError(f"max_length={max_length} leaves no room for text after the instruction")
    truncated = len(text_ids) > budget
    ids = text_ids[:budget]
    if not ids:  # an empty text still gets one position to pool
        ids = [pad_id] if pooling != "eos" else []
    text = (len(head), len(head) + len(ids))
    if pooling == "eos":
        full = head + ids + suffix_ids
        return Encoded(full, len(full) - 1, len(full), truncated, *text)
    if pooling == "last":
        full = head + ids
        return Encoded(full, len(full) - 1, len(full), truncated, *text)
    if pooling == "mean":
        full = head + ids
        return Encoded(full, len(head), len(full), truncated, *text)
    full = head + ids + ids  # echo
    return Encoded(full, len(head) + len(ids), len(full), truncated, *text)


MIN_FILL = 0.75  # a row joins a batch only at this share of the batch's longest row, or more


def token_budget_batches(lengths: Sequence[int], max_rows: int | None, max_tokens: int | None,
                         min_fill: float = MIN_FILL) -> list[list[int]]:
    """Cut positions 0..n-1 (lengths sorted longest first) into consecutive batches of at most
    `max_rows` rows whose padded size, rows x the first (longest) length, stays within
    `max_tokens` (None: no limit); a text longer than the budget gets a batch of its own.

    A row shorter than `min_fill` x the batch's longest starts a new batch: each row then pads by
    at most a quarter of its batch's width. Why: texts of very different lengths in one batch (a
    question and the sentences of its evidence) would spend much of the pass on padding."""
    if max_rows is not None and max_rows < 1:
        raise UniragError("batch_size must be at least 1")
    batches: list[list[int]] = []
    for i in range(len(lengths)):
        batch = batches[-1] if batches else None
        if (batch and (max_rows is None or len(batch) < max_rows)
                and (max_tokens is None or lengths[batch[0]] * (len(batch) + 1) <= max_tokens)
                and lengths[i] >= min_fill * lengths[batch[0]]):
            batch.append(i)
        else:
            batches.append([i])
    return batches


def padded_batch(items: Sequence[Encoded], pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded (input ids, attention mask, pooling weights), each rows x longest length.

    With causal attention and right padding, padding comes after every real token, so it can
    never change a real token's hidden state: a text embeds the same alone or batched, up to the
    rounding of matmuls of other shapes.
    """
    length = max(len(e.ids) for e in items)
    ids = torch.full((len(items), length), pad_id, dtype=torch.long)
    attention = torch.zeros((len(items), length), dtype=torch.long)
    pool = torch.zeros((len(items), length), dtype=torch.float32)
    for row, e in enumerate(items):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        attention[row, : len(e.ids)] = 1
        pool[row, e.pool_start:e.pool_end] = 1.0
    return ids, attention, pool


def pooled(states: torch.Tensor, pool: torch.Tensor) -> np.ndarray:
    """Each row's mean hidden state over its pooling weights (`padded_batch`), as float32."""
    states = states.float().cpu()
    return ((states * pool[..., None]).sum(1) / pool.sum(1, keepdim=True)).numpy()
