"""Question -> retrieved chunks, best first.

The same UniModel embeds the question (with the pooling the collection was built with) that
later writes the answer (`unirag.answer`). Retrieval is hybrid by default: the dense ranking is
fused with BM25 over the same chunks (`lexical.py`), and the first few are reranked by the same
model (`rerank.py`).
"""

from __future__ import annotations

import contextlib
import fnmatch
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from unirag.errors import UniragError
from unirag.retrieval import lexical, store

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
        """What a citation names: the file, its pages when it has them ("guide.pdf pp. 12-13"), and
        the heading path."""
        where = " ".join(part for part in (self.source, pages_label(self.metadata)) if part)
        return f"{where} > {self.heading}" if self.heading else where

    @property
    def first_line(self) -> str:
        """The first line of text that is not a heading (headings are already in the label)."""
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip()]
        line = next((ln for ln in lines if not ln.startswith("#")), lines[0] if lines else "")
        return line if len(line) <= 100 else line[:99] + "…"


@dataclass
class Trace:
    """What one `retrieve` call did, for the ask flow and benchmarks: seconds per stage
    ("embed question", "dense search", "bm25", "rerank")."""

    seconds: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def stage(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - started


def pages_label(metadata: dict) -> str:
    """"p. 12" or "pp. 12-13" for a chunk whose metadata names its pages (a PDF's), else "" (other
    formats, and collections ingested before chunks recorded their pages)."""
    first, last = metadata.get("page_start"), metadata.get("page_end")
    if not isinstance(first, int) or isinstance(first, bool):
        return ""
    last = last if isinstance(last, int) and not isinstance(last, bool) and last > first else first
    return f"p. {first}" if last == first else f"pp. {first}-{last}"


def retrieve(model, collection, question: str, top_k: int = 5, mode: str = "hybrid", rerank: int = 0,
             sources: Sequence[str] = (), trace: Trace | None = None) -> list[Hit]:
    """The top_k chunks for the question, best first.

    mode "dense": nearest EOS embeddings. "lexical": BM25 over the same chunks (`lexical.py`).
    "hybrid" (default): the top CANDIDATES of each, fused by reciprocal rank.
    A chunk whose text a higher-ranked one already holds is left out (`distinct`).
    rerank=N: the first N of that ranking are reordered by the same model's query likelihood
    (`rerank.py`), fused with their retrieval order, before the top_k are kept; 0 leaves the
    ranking as it is.
    sources: fnmatch-style globs over the chunks' `source` (the file's path under the ingested
    folder, e.g. "guide/*.md"); given, only chunks of matching files are searched, by dense search
    and BM25 alike, so top_k matching chunks come back (not top_k chunks, then filtered).
    `trace`, if given, records the stages' seconds.
    """
    trace = trace if trace is not None else Trace()
    if not question.strip():
        raise UniragError("the question is empty")
    if top_k < 1:
        raise UniragError("--top-k must be at least 1")
    if rerank < 0:
        raise UniragError("--rerank must be 0 (off) or a number of candidates")
    if mode not in RETRIEVAL_MODES:
        raise UniragError(f"unknown retrieval mode {mode!r}; choose from {', '.join(RETRIEVAL_MODES)}")
    store.check_model(collection, model)
    count = collection.count()
    if count == 0:
        return []
    allowed = None
    if sources:
        # the BM25 index (current by the chunks stamp) holds each chunk's source: no scan per query
        counts = dict.fromkeys(lexical.index_for(collection).sources, 0)
        allowed = matching_sources(counts, sources)
        if not allowed:
            raise UniragError(f"no file in collection {collection.name!r} matches --source "
                              f"{' '.join(sources)}; `unirag collections {collection.name}` lists its files")
        if len(allowed) == len(counts):
            allowed = None  # every file: no filter, and no list of every source for Chroma to match
    dense: list[Hit] = []
    if mode != "lexical":
        with trace.stage("embed question"):
            vector = model.embed([query_text(model, question)], pooling=store.collection_pooling(collection))[0]
        dense_depth = max(top_k, rerank) if mode == "dense" else max(top_k, rerank, CANDIDATES)
        with trace.stage("dense search"):
            dense = dense_search(collection, vector, dense_depth, allowed)
    depth = max(top_k, rerank)
    if mode == "dense":
        hits = distinct(dense)
    else:
        with trace.stage("bm25"):
            words = lexical.index_for(collection).search(question, depth if mode == "lexical"
                                                         else max(depth, CANDIDATES), allowed)
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
        from unirag.retrieval.rerank import rerank as rerank_hits

        with trace.stage("rerank"):
            hits = rerank_hits(model, question, hits, rerank)
    return hits[:top_k]


def matching_sources(counts: dict[str, int], globs: Sequence[str]) -> set[str]:
    """The sources (keys of `counts`) that match any of the fnmatch-style `globs`; a
    glob also matches a source it names exactly, and case matters."""
    return {source for source in counts if any(source == g or fnmatch.fnmatchcase(source, g) for g in globs)}


def dense_search(collection, vector, depth: int, sources: set[str] | None = None) -> list[Hit]:
    """The `depth` chunks nearest to `vector`, nearest first (score: cosine similarity); with
    `sources`, the nearest among the chunks of those files (Chroma filters before it ranks).

    Chroma's HNSW index is approximate, and searches with a candidate list as long as the larger
    of its `ef_search` (100) and the results asked for. On the dev collections (2-3 thousand
    chunks) asking for 20 missed one of the true top 20, once the fourth, for about one question
    in thirteen, and which ones it missed changed from one load of the database to the next,
    since the index is rebuilt in parallel threads. So SEARCH_DEPTH are asked for (ids and
    distances only) and the first `depth` kept. 200 was not enough on the hard case of
    tests/retrieval/test_dense_search.py (random 64-d vectors: about one query in a hundred still missed
    one of the top 20); 400 missed none of 3,000 there, and costs a fraction of a millisecond.
    Only the kept chunks are read in full."""
    count = collection.count()
    if count == 0 or depth < 1 or sources is not None and not sources:
        return []
    where = {"source": {"$in": sorted(sources)}} if sources is not None else None
    found = collection.query(query_embeddings=[vector], n_results=min(max(depth, SEARCH_DEPTH), count),
                             where=where, include=["distances"])
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
            meta = meta or {}
            known[id_] = Hit(id_, 0.0, doc or "", meta.get("source", ""), meta.get("heading", ""), meta)
    return [replace(known[id_], score=score) for id_, score in ranked if id_ in known]
