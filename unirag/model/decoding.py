"""Choosing the next token from logits: greedy or nucleus sampling, with optional repetition
controls over the tokens generated so far (the prompt is never penalised: an answer should
repeat its evidence's words).

- `no_repeat_ngram` n: a token that would complete an n-gram already generated is banned
  (as transformers' NoRepeatNGramLogitsProcessor, over the generated tokens only).
- `repetition_penalty` p: logits of tokens already generated are divided by p when positive and
  multiplied by p when negative (Keskar et al. 2019, as transformers applies it).

Context-aware decoding (Shi et al. 2023, "Trusting Your Evidence") contrasts the logits of the
prompt with its context against those of the same prompt without it: (1 + a) * with - a * without,
so that tokens the context makes likelier gain and tokens the model would write anyway lose.
`contrast` restricts it to tokens the context itself finds plausible (at least `PLAUSIBLE` of the
best token's probability, the adaptive plausibility of Li et al. 2023's contrastive decoding):
without it, a token that is unlikely with the context but more unlikely without it can win.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class RepetitionControl:
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0

    @property
    def active(self) -> bool:
        return self.no_repeat_ngram > 0 or self.repetition_penalty != 1.0


def banned_tokens(generated: Sequence[int], n: int) -> set[int]:
    """Tokens that would complete an n-gram that already occurs in `generated`."""
    if n <= 0 or len(generated) < n:
        return set()
    head = tuple(generated[len(generated) - n + 1:]) if n > 1 else ()
    return {generated[i + n - 1] for i in range(len(generated) - n + 1)
            if tuple(generated[i:i + n - 1]) == head}


def apply_repetition(logits: torch.Tensor, generated: Sequence[int], control: RepetitionControl) -> torch.Tensor:
    """`logits` (one row, float) with the controls applied; the input is not modified."""
    if not control.active or not generated:
        return logits
    logits = logits.clone()
    if control.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(generated)), dtype=torch.long)
        values = logits[seen]
        logits[seen] = torch.where(values > 0, values / control.repetition_penalty, values * control.repetition_penalty)
    banned = banned_tokens(generated, control.no_repeat_ngram)
    if banned:
        logits[torch.tensor(sorted(banned), dtype=torch.long)] = float("-inf")
    return logits


PLAUSIBLE = 0.1  # Li et al.'s value; not tuned here


def contrast(with_context: torch.Tensor, without: torch.Tensor, weight: float,
             plausible: float = PLAUSIBLE) -> torch.Tensor:
    """Context-aware logits (one row, float): (1 + weight) * with_context - weight * without over the
    tokens whose probability with the context is at least `plausible` times the best one's; the rest
    -inf. weight 0 returns `with_context` itself."""
    if weight == 0:
        return with_context
    log_probs = torch.log_softmax(with_context, dim=-1)
    keep = log_probs >= log_probs.max() + torch.log(torch.tensor(plausible))
    mixed = (1 + weight) * log_probs - weight * torch.log_softmax(without, dim=-1)
    return torch.where(keep, mixed, torch.tensor(float("-inf")))


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
