"""Query expansion with the same model: HyDE (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval
without Relevance Labels").

A question is short and phrased unlike the passage that answers it. The LLM first writes a short
passage that *would* answer it (greedy, possibly wrong in its facts), and the question followed by
that passage is what gets searched: the made-up passage carries the vocabulary of real answers.
In a one-model system this needs no second model, only decode time: `EXPANSIONS` lists the modes
`pipeline.search` accepts, and docs/RESULTS.md gives the measured effect and latency.
"""

from __future__ import annotations

from .loops import until_repeat

EXPANSIONS = ("none", "hyde")
HYDE_SYSTEM = ("Write a short passage from a technical book that answers the question. "
               "Do not repeat the question.")
HYDE_TOKENS = 64


def hypothetical_passage(model, question: str, max_new_tokens: int = HYDE_TOKENS) -> str:
    """A short passage the model writes to answer `question` (greedy; stops where it starts looping)."""
    messages = [{"role": "system", "content": HYDE_SYSTEM}, {"role": "user", "content": question.strip()}]
    pieces = model.generate(messages, max_new_tokens=max_new_tokens, temperature=0.0, stream=True)
    return "".join(until_repeat(pieces)).strip()


def expand_query(model, question: str, expansion: str = "none") -> str:
    """The text to search with: the question alone ("none"), or followed by a HyDE passage ("hyde")."""
    if expansion == "none":
        return question
    if expansion == "hyde":
        passage = hypothetical_passage(model, question)
        return f"{question.strip()}\n{passage}" if passage else question
    raise ValueError(f"unknown query expansion {expansion!r}; choose from {', '.join(EXPANSIONS)}")
