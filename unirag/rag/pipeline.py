"""Question -> retrieved chunks -> grounded answer with numbered citations.

The same UniModel embeds the question (with the pooling the collection was built with) and
writes the answer. Retrieval is hybrid by default: the dense ranking is fused with BM25 over the
same chunks (`lexical.py`); the CLI then reranks the first few with the same model (`rerank.py`).
As the answer streams, it stops where it starts repeating itself (`loops.py`), and sentences the
model left uncited get the `[n]` of the passage they share most words with (`attribution.py`).
The prompt goes through the model's chat template: a system message with the rules (answer
from the context, cite [n], say so when the context lacks the answer), earlier chat turns, then
the numbered context blocks "[n] path > heading" and the question. `fit()` drops the oldest
turns, then the lowest-ranked chunks, so the prompt plus the answer fit the model's context
window; citations are numbered over exactly the chunks that were shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from ..errors import UniragError
from . import lexical, store
from .attribution import cite_stream
from .expand import EXPANSIONS, expand_query
from .loops import first_sentence, until_repeat

SYSTEM_PROMPT = (
    "Answer using only the numbered context passages. Cite them by number, like [1]. "
    "If the context does not contain the answer, say so; do not guess."
)
Turn = tuple[str, str]  # (question, answer)
RETRIEVAL_MODES = ("hybrid", "dense", "lexical")
CANDIDATES = 20  # per ranking, before fusion
SEARCH_DEPTH = 400  # nearest neighbours asked of the vector index (`dense_search`)


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk. score: cosine similarity (1 - Chroma's cosine distance) in dense mode,
    the fused reciprocal-rank score in hybrid mode, the BM25 score in lexical mode."""

    id: str
    score: float
    text: str
    source: str
    heading: str = ""
    metadata: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.source} > {self.heading}" if self.heading else self.source

    @property
    def first_line(self) -> str:
        """The first line of text that is not a heading (headings are already in the label)."""
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip()]
        line = next((ln for ln in lines if not ln.startswith("#")), lines[0] if lines else "")
        return line if len(line) <= 100 else line[:99] + "…"


def retrieve(model, collection, question: str, top_k: int = 5, mode: str = "hybrid", rerank: int = 0,
             rerank_fusion: bool = True, expand: str = "none", rerank_weight: float | None = None) -> list[Hit]:
    """The top_k chunks for the question, best first.

    mode "dense": nearest EOS embeddings. "lexical": BM25 over the same chunks (`lexical.py`).
    "hybrid" (default): the top CANDIDATES of each, fused by reciprocal rank.
    A chunk whose text a higher-ranked one already holds is left out (`distinct`).
    rerank=N: the first N of that ranking are reordered by the same model's query likelihood
    (`rerank.py`), fused with their retrieval order (the likelihood's counted `rerank_weight` times,
    None: `rerank.LIKELIHOOD_WEIGHT`) unless rerank_fusion=False, before the top_k are kept; 0
    leaves the ranking as it is.
    expand="hyde": the model first writes a hypothetical answer passage, and the question plus it
    is what dense and lexical search look up (`expand.py`); the rerank still scores the question.
    """
    if not question.strip():
        raise UniragError("the question is empty")
    if top_k < 1:
        raise UniragError("--top-k must be at least 1")
    if rerank < 0:
        raise UniragError("--rerank must be 0 (off) or a number of candidates")
    if mode not in RETRIEVAL_MODES:
        raise UniragError(f"unknown retrieval mode {mode!r}; choose from {', '.join(RETRIEVAL_MODES)}")
    if expand not in EXPANSIONS:
        raise UniragError(f"unknown query expansion {expand!r}; choose from {', '.join(EXPANSIONS)}")
    store.check_model(collection, model)
    count = collection.count()
    if count == 0:
        return []
    query = expand_query(model, question, expand)
    dense: list[Hit] = []
    if mode != "lexical":
        vector = model.embed([query_text(model, query)], pooling=store.collection_pooling(collection))[0]
        dense_depth = max(top_k, rerank) if mode == "dense" else max(top_k, rerank, CANDIDATES)
        dense = dense_search(collection, vector, dense_depth)
    depth = max(top_k, rerank)
    if mode == "dense":
        hits = distinct(dense)
    else:
        words = lexical.index_for(collection).search(query, depth if mode == "lexical" else max(depth, CANDIDATES))
        if mode == "lexical":
            ranked = words
        else:
            ranked = lexical.reciprocal_rank_fusion([[h.id for h in dense], [id_ for id_, _ in words]])
        # read only as far down the ranking as `depth` distinct chunks need (one read, unless some repeat)
        known, hits, read = {h.id: h for h in dense}, [], 0
        while len(hits) < depth and read < len(ranked):
            more = ranked[read:read + depth - len(hits)]
            read += len(more)
            hits = distinct(hits + _hits(collection, more, known))
    if rerank:
        from .rerank import LIKELIHOOD_WEIGHT, rerank as rerank_hits

        weight = LIKELIHOOD_WEIGHT if rerank_weight is None else rerank_weight
        hits = rerank_hits(model, question, hits, rerank, fuse=rerank_fusion, weight=weight)
    return hits[:top_k]


def dense_search(collection, vector, depth: int) -> list[Hit]:
    """The `depth` chunks nearest to `vector`, nearest first (score: cosine similarity).

    Chroma's HNSW index is approximate, and searches with a candidate list as long as the larger
    of its `ef_search` (100) and the results asked for. On the dev collections (2-3 thousand
    chunks) asking for 20 missed one of the true top 20, once the fourth, for about one question
    in thirteen, and which ones it missed changed from one load of the database to the next,
    since the index is rebuilt in parallel threads. So SEARCH_DEPTH are asked for (ids and
    distances only) and the first `depth` kept. 200 was not enough on the hard case of
    tests/rag/test_dense_search.py (random 64-d vectors: about one query in a hundred still missed
    one of the top 20); 400 missed none of 3,000 there, and costs a fraction of a millisecond.
    Only the kept chunks are read in full."""
    count = collection.count()
    if count == 0 or depth < 1:
        return []
    found = collection.query(query_embeddings=[vector], n_results=min(max(depth, SEARCH_DEPTH), count),
                             include=["distances"])
    ids, distances = found["ids"][0][:depth], found["distances"][0][:depth]
    got = collection.get(ids=ids, include=["documents", "metadatas"])
    stored = {id_: (doc, meta) for id_, doc, meta in zip(got["ids"], got["documents"], got["metadatas"])}
    hits = []
    for id_, distance in zip(ids, distances):
        if id_ in stored:  # else deleted since the query (an ingest writing meanwhile)
            doc, meta = stored[id_]
            meta = meta or {}
            hits.append(Hit(id_, 1.0 - float(distance), doc or "", meta.get("source", ""), meta.get("heading", ""),
                            meta))
    return hits


def distinct(hits: Sequence[Hit]) -> list[Hit]:
    """The hits less those whose text a higher-ranked hit already holds (spacing aside).

    Why: documentation repeats itself across files. npm's command pages each carry the full
    description of every config option they take, and Node.js ships its whole API again on one
    page (all.html). Shown twice, one passage takes two of the few places the answer is drawn from,
    and the rerank reads it twice."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        text = " ".join(hit.text.split())
        if text not in seen:
            seen.add(text)
            kept.append(hit)
    return kept


def query_text(model, question: str) -> str:
    """What the dense search embeds for a question: the model's `query_prefix` (the cue its adapter
    was trained with; chunks are embedded as they are) before it. BM25, the rerank and the answer
    always read the question alone."""
    return model.query_prefix + question


def _hits(collection, ranked: Sequence[tuple[str, float]], known: dict[str, Hit]) -> list[Hit]:
    """Hits for (id, score) pairs, reading from Chroma only the chunks dense search did not return."""
    missing = [id_ for id_, _ in ranked if id_ not in known]
    if missing:
        got = collection.get(ids=missing, include=["documents", "metadatas"])
        for id_, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
            known[id_] = Hit(id_, 0.0, doc or "", meta.get("source", ""), meta.get("heading", ""), meta)
    return [replace(known[id_], score=score) for id_, score in ranked if id_ in known]


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


def without_context(question: str, history: Sequence[Turn] = (), system: str | None = None) -> list[dict[str, str]]:
    """`build_prompt`'s messages with no context at all: what context-aware decoding contrasts
    the answer's prompt with (not "(no passages were found)", which asks for a refusal)."""
    messages = build_prompt(question, (), history, system)
    messages[-1] = {"role": "user", "content": f"Question: {question}"}
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
           on_loop: Callable[[], None] | None = None, repetition=None,
           one_sentence: bool = False, contrast: float = 0.0) -> Iterator[str] | str:
    """Generate a grounded answer; with stream=True an iterator of text pieces.

    Pass hits and history as `fit()` returns them (the ask flow does): then the prompt fits the
    context window and the citation numbers match what is printed.
    With `attribute`, each sentence without a `[n]` of its own gets the number of the passage it
    shares the most words with (`attribution.py`): unirag's attribution, not the model's.
    With `stop_repeats`, the answer ends where it starts repeating a run of words (`loops.py`),
    and `on_loop` (if given) is called when that happens. `repetition` (a
    `decoding.RepetitionControl`) bans or penalises repeats of generated tokens. With
    `one_sentence`, it ends after its first sentence, a first line that only announces it ("The
    answer is:") left out (`loops.first_sentence`). A `contrast` above 0 decodes context-aware
    with that weight: each token contrasted with the same prompt without the passages
    (`decoding.contrast`).
    """
    messages = build_prompt(question, hits, history, system)
    plain = without_context(question, history, system) if contrast else None
    pieces = model.generate(messages, max_new_tokens=max_new_tokens, temperature=temperature, stream=True,
                            repetition=repetition, without_context=plain, contrast_weight=contrast)
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
