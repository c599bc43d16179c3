"""Retrieved chunks -> a generated answer with numbered citations.

The prompt goes through the model's chat template: a system message with the rules (answer from
the context, cite [n], say so when the context lacks the answer), earlier chat turns, then the
numbered context blocks "[n] path > heading" and the question. `fit()` drops the oldest turns,
then the lowest-ranked chunks, so the prompt plus the answer fit the model's context window;
citations are numbered over exactly the chunks that were shown. As the answer streams, it stops
where it starts repeating itself (`loops.py`), and sentences the model left uncited get the `[n]`
of the passage they share most words with (`attribution.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace

from unirag.answer.attribution import cite_stream
from unirag.answer.loops import first_sentence, until_repeat
from unirag.errors import UniragError
from unirag.retrieval.search import Hit

SYSTEM_PROMPT = (
    "Answer using only the numbered context passages. Cite them by number, like [1]. "
    "If the context does not contain the answer, say so; do not guess."
)
Turn = tuple[str, str]  # (question, answer)


def format_context(hits: Sequence[Hit]) -> str:
    return "\n\n".join(f"[{i}] {hit.label}\n{hit.text}" for i, hit in enumerate(hits, 1))


def build_prompt(question: str, hits: Sequence[Hit], history: Sequence[Turn] = (),
                 system: str | None = None) -> list[dict[str, str]]:
    """Chat messages: system rules (default SYSTEM_PROMPT), earlier turns, then the numbered
    context and the question."""
    messages = [{"role": "system", "content": system or SYSTEM_PROMPT}]
    for asked, answered in history:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    context = format_context(hits) if hits else "(no passages were found)"
    messages.append({"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question}"})
    return messages


def fit(model, question: str, hits: Sequence[Hit], history: Sequence[Turn] = (),
        max_new_tokens: int = 256, system: str | None = None) -> tuple[list[Hit], list[Turn]]:
    """Trim history (oldest first), then chunks (lowest first), then the last chunk's text to fit."""
    hits, history = list(hits), list(history)
    budget = model.context_window - max_new_tokens
    while True:
        excess = len(model.prompt_ids(build_prompt(question, hits, history, system))) - budget
        if excess <= 0:
            return hits, history
        if history:
            history.pop(0)
        elif len(hits) > 1:
            hits.pop()
        elif hits:
            ids = model.tokenizer(hits[0].text, add_special_tokens=False)["input_ids"]
            keep = len(ids) - excess - 4
            if keep < 8:
                raise UniragError(
                    f"the question leaves no room for context in the model's {model.context_window}-token "
                    f"window with max_new_tokens={max_new_tokens}; shorten it or lower --max-new-tokens")
            hits[0] = replace(hits[0], text=model.tokenizer.decode(ids[:keep]) + " …")
        else:
            return hits, history


def answer(model, question: str, hits: Sequence[Hit], history: Sequence[Turn] = (), *,
           max_new_tokens: int = 256, temperature: float = 0.0, stream: bool = True,
           attribute: bool = True,
           stop_repeats: bool = True, system: str | None = None,
           on_loop: Callable[[], None] | None = None, one_sentence: bool = False) -> Iterator[str] | str:
    """Generate a grounded answer; with stream=True an iterator of text pieces.

    Pass hits and history as `fit()` returns them (the ask flow does): then the prompt fits the
    context window and the citation numbers match what is printed.
    With `attribute`, each sentence without a `[n]` of its own gets the number of the passage it
    shares the most words with (`attribution.py`): unirag's attribution, not the model's.
    With `stop_repeats`, the answer ends where it starts repeating a run of words (`loops.py`),
    and `on_loop` (if given) is called when that happens. With `one_sentence`, it ends after its
    first sentence, a first line that only announces it ("The answer is:") left out
    (`loops.first_sentence`).
    """
    messages = build_prompt(question, hits, history, system)
    pieces = model.generate(messages, max_new_tokens=max_new_tokens, temperature=temperature, stream=True)
    if one_sentence:
        pieces = first_sentence(pieces)
    if stop_repeats:
        pieces = until_repeat(pieces, on_stop=on_loop)
    if attribute and hits:
        pieces = cite(pieces, hits)
    return pieces if stream else "".join(pieces)


def cite(pieces: Iterable[str] | str, hits: Sequence[Hit]) -> Iterator[str]:
    """Answer text with `[n]` added to uncited sentences; passage n is hits[n-1] (label + text)."""
    pieces = [pieces] if isinstance(pieces, str) else pieces
    return cite_stream(pieces, [f"{hit.label}\n{hit.text}" for hit in hits])


def citations(hits: Sequence[Hit]) -> list[str]:
    """"[n] path > heading" for each chunk shown to the model, in prompt order."""
    return [f"[{i}] {hit.label}" for i, hit in enumerate(hits, 1)]
