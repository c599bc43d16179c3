"""Rerank retrieved chunks with the same model: how likely is the question, given the passage?

Query likelihood (UPR, Sachan et al. 2022, "Improving Passage Retrieval with Zero-Shot Question
Generation"): the LLM reads a candidate passage followed by an instruction to write a question
about it, and the candidate's score is the mean log-probability of the user's actual question
tokens. It needs no second model and no training, only the LLM that unirag already holds; it
costs one forward pass per candidate (batched), so it reorders only the first `depth` hits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import torch

from ..errors import UniragError

PROMPT = "Passage: {passage}\nPlease write a question based on this passage.\nQuestion:"
MAX_PASSAGE_TOKENS = 256


def question_logprobs(model, question: str, passages: Sequence[str], batch_size: int = 8,
                      max_passage_tokens: int = MAX_PASSAGE_TOKENS) -> list[float]:
    """Mean log P(question tokens | passage prompt) for each passage, under `model` (a UniModel).

    Passages are cut to `max_passage_tokens` so that a long chunk costs no more than a short one.
    Rows are right-padded, so padding never changes a real position (causal attention), and the
    LM head runs only on the positions that predict question tokens.
    """
    tokenizer = model.tokenizer
    question_ids = tokenizer(" " + question.strip(), add_special_tokens=False)["input_ids"]
    if not question_ids:
        raise UniragError("the question is empty")
    rows = []
    for passage in passages:
        cut = tokenizer(passage, add_special_tokens=False)["input_ids"][:max_passage_tokens]
        prompt = tokenizer(PROMPT.format(passage=tokenizer.decode(cut).strip()))["input_ids"]
        rows.append(prompt[-(model.max_length - len(question_ids)):] + question_ids)
    head = model.model.get_output_embeddings()
    target = torch.tensor(question_ids)
    scores: list[float] = []
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        length = max(len(r) for r in batch)
        ids = torch.full((len(batch), length), model._pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), length), dtype=torch.long)
        for i, row in enumerate(batch):
            ids[i, :len(row)] = torch.tensor(row)
            mask[i, :len(row)] = 1
        with model._lock, torch.inference_mode(), model._autocast():
            states = model.hidden_states(ids.to(model.device), mask.to(model.device))
            n = len(question_ids)
            # position t predicts token t + 1: the question's tokens are the last n of each row
            picked = torch.stack([states[i, len(row) - n - 1:len(row) - 1] for i, row in enumerate(batch)])
            logprobs = torch.log_softmax(head(picked).float(), dim=-1).cpu()
        scores += logprobs.gather(-1, target.expand(len(batch), n)[..., None]).squeeze(-1).mean(-1).tolist()
    return scores


def rerank(model, question: str, hits: Sequence, depth: int) -> list:
    """The first `depth` hits reordered by `question_logprobs` (score = that log-probability),
    followed by the rest in their original order."""
    hits = list(hits)
    head, tail = hits[:depth], hits[depth:]
    if len(head) < 2:
        return hits
    scores = question_logprobs(model, question, [hit.text for hit in head])
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep the retrieval order
    return [replace(head[i], score=scores[i]) for i in order] + tail
