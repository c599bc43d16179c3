"""Choosing the next token from logits: greedy or nucleus sampling."""

from __future__ import annotations

import torch


def sample(logits: torch.Tensor, temperature: float, top_p: float, generator) -> int:
    """Greedy when temperature is 0, else nucleus sampling from softmax(logits / temperature)."""
    if temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        keep = sorted_probs.cumsum(0) - sorted_probs < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
    return int(torch.multinomial(probs, 1, generator=generator))
