"""The ask flow, once: question -> retrieved chunks -> evidence -> answer text -> citations.

`unirag ask`, `chat`, `demo`, the Gradio app, `unirag eval rag --answers` and the Python API all
call `ask()` (or `answer_hits()` when they already hold the chunks); settings travel as one
`AskSettings`. Once the evidence is selected, the shown chunks are put in the order its scores
give them (`evidence.passage_order`), and [1] is the first of that order.

An answer has up to two parts, chosen by `AskSettings.answer`:
- "extractive": the best evidence sentences (`evidence.py`), quoted with their `[n]`. Always
  grounded: every word comes from a cited passage.
- "generated": the model writes a short answer from the evidence (a focused context: the chosen
  sentences with their neighbours, not whole chunks), ending after its first sentence or where
  it starts repeating itself, with `[n]` added to an uncited sentence (`generate.answer`).
- "both": the quotes first, then the generated sentence after "In short:".
With `AskSettings.abstain` (the default), when the evidence explains the question too weakly
(`relevance` under ABSTAIN_BELOW), when no unit of it reads as an answer to the question
(`answer_gain` under ABSTAIN_ANSWER_BELOW), or when no unit of it is about what the question asks
(`similarity` under ABSTAIN_SIMILARITY_BELOW), the answer is NO_ANSWER followed by the closest
quote, so the user still sees what was found. So it is when the question gives names and the
collection mentions none of them (`mentions.py`); the answer then says which.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from unirag.errors import UniragError
from unirag.answer import evidence as evidence_mod
from unirag.retrieval import lexical
from unirag.answer import mentions
from unirag.retrieval.search import RETRIEVAL_MODES, Hit, Trace, matching_sources, retrieve
from unirag.answer.generate import Turn, answer, citations, fit
from unirag.answer.sentences import plain

ANSWER_MODES = ("extractive", "generated", "both")
NO_ANSWER = "The documents don't say."
CLOSEST = "The closest passage:"  # what an abstention shows after NO_ANSWER, before the closest quote
# under these the answer is NO_ANSWER (`AskSettings.abstains`): low enough that a question shown its
# own passages is not refused, since relevance is on no one scale across domains
ABSTAIN_BELOW = 0.2  # evidence relevance
ABSTAIN_ANSWER_BELOW = 0.6  # the best unit's answer PMI (`Evidence.answer_gain`)
# the best unit's cosine to the question: a question about something else still finds units that
# explain some of its words and that it makes likelier
ABSTAIN_SIMILARITY_BELOW = 0.5
# "both" quotes less, leaving room for its generated sentence within a short answer
EVIDENCE_WORDS = {"extractive": evidence_mod.MAX_WORDS, "generated": evidence_mod.MAX_WORDS, "both": 30}
ANSWER_SYSTEM = ("Answer the question in one short sentence, using only the evidence. "
                 "If the evidence does not answer it, say: The documents don't say.")


@dataclass(frozen=True)
class AskSettings:
    """What a user sets for the ask flow, with the defaults `unirag ask`, the app and eval share."""

    top_k: int = 3                 # chunks retrieved, shown and cited
    retrieval: str = "hybrid"      # hybrid | dense | lexical
    # candidates the same model reranks (0 = off): where users ask in their own words the hybrid
    # search's first few often miss the right page and the likelihood finds it further down
    rerank: int = 15
    answer: str = "extractive"     # extractive | generated | both
    evidence_words: int | None = None  # words of quoted evidence; None: per mode (EVIDENCE_WORDS)
    # NO_ANSWER where the evidence is too weak (`abstains`) or the question's names are never
    # mentioned (`mentions.never_mentioned`); False: always answer
    abstain: bool = True
    max_new_tokens: int = 64
    temperature: float = 0.0
    # fnmatch-style globs over the chunks' `source`: search only those files (`search.retrieve`); (): all
    sources: tuple[str, ...] = ()

    @property
    def words(self) -> int:
        """The evidence budget in words: `evidence_words`, or the answer mode's default."""
        return self.evidence_words or EVIDENCE_WORDS[self.answer]

    def abstains(self, ev: evidence_mod.Evidence) -> bool:
        """Whether, with `abstain` on, this evidence is too weak to answer from: it explains the
        question too weakly, none of its units reads as an answer to it, or none is about what it
        asks (the last two tests are skipped where that score is missing)."""
        if not self.abstain:
            return False
        if ev.relevance < ABSTAIN_BELOW:
            return True
        if ev.similarity is not None and ev.similarity < ABSTAIN_SIMILARITY_BELOW:
            return True
        return ev.answer_gain is not None and ev.answer_gain < ABSTAIN_ANSWER_BELOW

    def __post_init__(self):
        if self.top_k < 1:
            raise UniragError("--top-k must be at least 1")
        if self.rerank < 0:
            raise UniragError("--rerank must be 0 (off) or a number of candidates")
        if self.retrieval not in RETRIEVAL_MODES:
            raise UniragError(f"unknown retrieval mode {self.retrieval!r}; choose from {', '.join(RETRIEVAL_MODES)}")
        if self.answer not in ANSWER_MODES:
            raise UniragError(f"unknown answer mode {self.answer!r}; choose from {', '.join(ANSWER_MODES)}")
        if self.evidence_words is not None and self.evidence_words < 1:
            raise UniragError("evidence_words must be at least 1")
        if self.max_new_tokens < 1:
            raise UniragError("--max-new-tokens must be at least 1")


@dataclass
class Answer:
    """One answered question. Iterate it (or call `stream()`) for the text pieces; `text` holds
    what has been streamed so far, the whole answer once the stream ends."""

    question: str
    hits: list[Hit]                    # the passages shown and cited, [1] first
    evidence: evidence_mod.Evidence
    abstained: bool
    _pieces: Iterator[str] = field(repr=False, default_factory=lambda: iter(()))
    text: str = ""
    looped: bool = False  # the generated part was cut where it started repeating itself
    evidence_s: float = 0.0  # seconds spent selecting the evidence (0 when it was passed in)
    # seconds per stage: retrieval's (`search.Trace`), "evidence", and once the stream has ended,
    # "answer text" (the time spent making its pieces, not the caller's time between them)
    seconds: dict[str, float] = field(default_factory=dict)

    def stream(self) -> Iterator[str]:
        pieces = iter(self._pieces)
        while True:
            started = time.perf_counter()
            piece = next(pieces, None)
            self.seconds["answer text"] = self.seconds.get("answer text", 0.0) + time.perf_counter() - started
            if piece is None:
                return
            self.text += piece
            yield piece

    __iter__ = stream

    def read(self) -> str:
        """The whole answer (consumes the stream)."""
        for _ in self.stream():
            pass
        return self.text

    @property
    def citations(self) -> list[str]:
        return citations(self.hits)


def quote(span: evidence_mod.Span) -> str:
    """A span as it appears in an answer: its text as a reader reads it (`sentences.plain`), in
    quotes, with its number; "…" marks where a sentence too long to quote whole goes on, and where
    a definition's later sentence follows the term it is quoted after ("term — …sentence"); a
    section's first sentence follows the name its heading gives with no "…"."""
    text = plain(span.text, span.code)
    opening = (f"{plain(span.name.text)} — {'' if span.after_name else '…'}" if span.name
               else "…" if span.cut_before else "")
    return f"“{opening}{text}{'…' if span.cut_after else ''}” [{span.hit + 1}]"


def quotes(spans: Sequence[evidence_mod.Span]) -> list[str]:
    """The spans quoted in this order, a name (`Span.name`) not repeated before a span of the same
    passage right after one it was shown with: the quotes of one function's section or definition
    read "`os.homedir()` — …Returns ..." then "It reads HOME first.", not the name again.
    `evidence.choose` counts the name's words for each quote, so the answer stays within its word
    budget in any order."""
    out, before = [], None
    for span in spans:
        named = (span.hit, span.name and span.name.text)
        out.append(quote(replace(span, name=None) if span.name and named == before else span))
        before = named
    return out


def focused_hits(hits: Sequence[Hit], spans: Sequence[evidence_mod.Span]) -> list[Hit]:
    """The hits cut down to their chosen spans with one unit of text on each side, in document
    order; the numbering (and so the citations) stays that of `hits`."""
    from unirag.answer.sentences import split_units

    out = list(hits)
    for i, hit in enumerate(hits):
        chosen = [s for s in spans if s.hit == i]
        if not chosen:
            out[i] = replace(hit, text="")
            continue
        units = split_units(hit.text)
        keep = set()
        for span in chosen:
            j = next((k for k, u in enumerate(units) if u.start == span.start), None)
            keep |= {j} if j is None else {max(j - 1, 0), j, min(j + 1, len(units) - 1)}
        pieces = [" ".join(hit.text[u.start:u.end].split()) for k, u in enumerate(units) if k in keep]
        out[i] = replace(hit, text=" … ".join(pieces))
    return out


def _generated(model, question: str, hits: list[Hit], spans, history, settings: AskSettings,
               on_loop) -> Iterator[str]:
    shown = focused_hits(hits, spans) if spans else hits
    # passages left empty keep their number (so [n] still means hits[n-1]) but say nothing
    shown = [h if h.text else replace(h, text="(not relevant)") for h in shown]
    return answer(model, question, shown, history, max_new_tokens=settings.max_new_tokens,
                  temperature=settings.temperature, stream=True, system=ANSWER_SYSTEM, on_loop=on_loop,
                  one_sentence=True)


def _pieces(model, question: str, hits: list[Hit], ev: evidence_mod.Evidence, abstained: bool,
            history, settings: AskSettings, on_loop, unmentioned: Sequence[str] = ()) -> Iterator[str]:
    if not hits:
        yield NO_ANSWER + " (No passages were found: the collection is empty.)"
        return
    spans = evidence_mod.reading_order(ev.spans)
    if abstained:
        yield NO_ANSWER
        if unmentioned and settings.abstain:
            yield f" They never mention {_listed(unmentioned)}."
        if spans:  # the quote an answer would have led with
            yield f" {CLOSEST} {quote(spans[0])}"
        return
    if settings.answer in ("extractive", "both"):
        for i, line in enumerate(quotes(spans)):  # one quote per line, streamed one by one
            yield ("\n" if i else "") + line
    if settings.answer in ("generated", "both"):
        if settings.answer == "both":
            yield "\n\nIn short: "
        yield from _generated(model, question, hits, ev.spans, history, settings, on_loop)


def _listed(names: Sequence[str]) -> str:
    """“A”, “A” or “B”, “A”, “B” or “C”."""
    quoted = [f"“{name}”" for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def never_mentioned(collection, question: str, settings: AskSettings = AskSettings()) -> tuple[str, ...]:
    """The names `question` gives when `collection` mentions none of them (`mentions.py`), or ()
    (also when `settings.abstain` is off): what `answer_hits` is told to abstain on."""
    if not settings.abstain or not mentions.names(question):
        return ()  # most questions give no names: no need to build the collection's BM25 index
    index = lexical.index_for(collection)
    if not settings.sources:
        return mentions.never_mentioned(question, index.mentions)
    # with --source, a name only the other files hold is not mentioned in what is searched
    allowed = matching_sources(dict.fromkeys(index.sources, 0), settings.sources)
    return mentions.never_mentioned(question, lambda word: index.mentions_in(word, allowed))


def chosen_evidence(hits: Sequence[Hit], cands, scores: dict[str, list[float]], null: float,
                    settings: AskSettings = AskSettings(), scorers: Sequence[str] | None = None
                    ) -> tuple[list[Hit], evidence_mod.Evidence]:
    """The evidence `settings` choose from units already scored (`evidence.score`'s output), and
    the passages in the order to show them (`evidence.passage_order`), the evidence renumbered to
    match. The one choice `answer_hits` makes, and what `research/selection_replay.py` replays over
    cached scores. `scorers` (default: `evidence.SCORERS`) names the rankings fused: a research
    script passes a reference judge's name with its scores in `scores`."""
    hits = list(hits)
    chosen = evidence_mod.choose(hits, cands, scores, null, settings.words, scorers or evidence_mod.SCORERS)
    if len(chosen.passage_likelihood) == len(hits) > 1:
        order = evidence_mod.passage_order(chosen)
        hits, chosen = [hits[i] for i in order], chosen.renumbered(order)
    return hits, chosen


def select_evidence(model, question: str, hits: Sequence[Hit], settings: AskSettings = AskSettings()
                    ) -> tuple[list[Hit], evidence_mod.Evidence]:
    """Score `hits`' units against `question` with the model (`evidence.score`) and choose from
    them as `settings` say (`chosen_evidence`): the passages in the order to show them and the
    evidence numbered to match. What `answer_hits` and the LlamaIndex `UniEvidence` run."""
    cands, scores, null = evidence_mod.score(model, question, hits)
    return chosen_evidence(hits, cands, scores, null, settings)


def answer_hits(model, question: str, hits: Sequence[Hit], settings: AskSettings = AskSettings(),
                history: Sequence[Turn] = (), evidence: evidence_mod.Evidence | None = None,
                unmentioned: Sequence[str] = (), trace: Trace | None = None) -> Answer:
    """The answer to `question` from these chunks (already retrieved), as `ask` gives it.

    `evidence`, if given, is used as is instead of selecting it again: pass `.hits` and
    `.evidence` of an earlier Answer to the same question with the same word budget (evaluation
    shares them between answer modes). `unmentioned`: the question's names that the collection
    never mentions (`never_mentioned()`); given, the answer abstains and says so, unless
    `settings.abstain` is off. `trace`: the retrieval's (`search.Trace`), whose stage seconds the
    answer reports."""
    if not question.strip():
        raise UniragError("the question is empty")
    trace = trace if trace is not None else Trace()
    hits, history = fit(model, question, list(hits)[: settings.top_k], history, settings.max_new_tokens,
                        ANSWER_SYSTEM)
    started = time.perf_counter()
    if evidence is None:
        if hits:
            hits, evidence = select_evidence(model, question, hits, settings)
        else:
            evidence = evidence_mod.Evidence([], float("-inf"))
        selected_s = time.perf_counter() - started
    else:
        selected_s = 0.0
    ev = evidence
    names_unmentioned = settings.abstain and bool(unmentioned)
    abstained = bool(hits) and (settings.abstains(ev) or names_unmentioned)
    result = Answer(question, hits, ev, abstained, evidence_s=selected_s,
                    seconds={**trace.seconds, "evidence": selected_s})
    result._pieces = _pieces(model, question, hits, ev, abstained, history, settings,
                             on_loop=lambda: setattr(result, "looped", True), unmentioned=unmentioned)
    return result


def ask(model, collection, question: str, settings: AskSettings = AskSettings(),
        history: Sequence[Turn] = (), query: str | None = None,
        on_retrieved: Callable[[list[Hit]], None] | None = None) -> Answer:
    """Retrieve for `query` (default: the question) and answer `question` from what was found.

    `on_retrieved`, if given, is called with the retrieved chunks (best first, before the
    evidence is selected and the shown ones reordered) as soon as retrieval ends: a caller can
    show what is being read while the answer is made (`ask_in_stages` yields them instead)."""
    stages = ask_in_stages(model, collection, question, settings, history, query)
    hits = next(stages)
    if on_retrieved is not None:
        on_retrieved(hits)
    return next(stages)


def ask_in_stages(model, collection, question: str, settings: AskSettings = AskSettings(),
                  history: Sequence[Turn] = (), query: str | None = None) -> Iterator:
    """`ask` for a caller that shows progress (a generator, as the app is): yields the retrieved
    chunks (a list of Hit, best first) as soon as retrieval ends, then the Answer, which is
    `ask`'s, value for value."""
    if not question.strip():
        raise UniragError("the question is empty")
    trace = Trace()
    hits = retrieve(model, collection, query or question, settings.top_k, settings.retrieval, settings.rerank,
                    sources=settings.sources, trace=trace)
    yield list(hits)
    yield answer_hits(model, question, hits, settings, history,
                      unmentioned=never_mentioned(collection, question, settings), trace=trace)
