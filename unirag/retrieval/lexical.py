"""Lexical (BM25) search over a collection's own chunks, and reciprocal rank fusion with dense search.

Why: a question such as "When is `if let` more convenient than `match`?" names the very words of
the right chapter. A 135M-parameter embedding blurs such rare keywords; BM25 does not. Fusing the
two rankings costs one sparse lookup, no second model.

The index is built from what the Chroma collection itself stores (each chunk's title, heading path
and text), so it cannot drift from the vectors. It is keyed by the collection's chunks stamp
(`store.STAMP_KEY`), which every ingest that changes the chunks renews: a query re-reads that one
value instead of every chunk id. In an embedded database the index is saved beside it
(`lexical_files.py`: `<db>/bm25/<collection>/<stamp>/`), built once by the ingest that changed the
chunks and mapped from disk by later processes; with a Chroma server it lives in memory. A
collection no ingest has stamped yet (made before stamps) is keyed by a digest of its chunk ids,
as before, and rebuilt in memory whenever they change.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from unirag.retrieval import lexical_files, store

RRF_K = 60  # the constant of Cormack et al. (2009); larger flattens the rank weights


def tokenize(texts: Sequence[str]):
    """Lower-cased words of 2+ characters, English stopwords dropped, Snowball-stemmed ("loops" -> "loop")."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")  # cheap to make; one per call because stemmers are not thread-safe
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=stemmer.stemWords, show_progress=False)


def chunk_words(document: str, metadata: dict) -> str:
    """What BM25 reads for a chunk: its title and heading path (as embedded at ingest), then its text."""
    title, heading = metadata.get("title", ""), metadata.get("heading", "")
    return "\n".join(part for part in (title, heading, document) if part)


# a run of capitalised words on one line ("Lesser General Public License", "GNU LESSER GENERAL")
_CAPITALISED_RUN = re.compile(r"[A-Z][A-Za-z]*(?:[ \t]+[A-Z][A-Za-z]*)+")
# letters of an acronym read as spelled out: of three, capitalised words in a row collide too
# often by chance (the Python docs' "Monty Python Live" spells MPL)
MIN_SPELLED_OUT, MAX_SPELLED_OUT = 4, 6


def spelled_out_acronyms(texts: Sequence[str]) -> frozenset[str]:
    """The acronyms the texts spell out: the initials of every four to six capitalised words in a
    row ("GNU Lesser General Public License" -> LGPL, GLGPL, GLGP, ...)."""
    found = set()
    for text in texts:
        for run in _CAPITALISED_RUN.finditer(text):
            initials = "".join(word[0] for word in run.group().split()).upper()
            found.update(initials[i:j] for i in range(len(initials))
                         for j in range(i + MIN_SPELLED_OUT, min(i + MAX_SPELLED_OUT, len(initials)) + 1))
    return frozenset(found)


@dataclass
class LexicalIndex:
    """BM25 over one snapshot of a collection; `search` returns (chunk id, BM25 score), best first."""

    ids: list[str]
    digest: str
    retriever: object  # bm25s.BM25, or None for an empty collection
    acronyms: frozenset[str] = frozenset()  # spelled out in the chunks (`spelled_out_acronyms`)
    sources: list[str] = field(default_factory=list)  # each id's `source` metadata ("" when not given)

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str], digest: str = "",
              sources: Sequence[str] | None = None) -> LexicalIndex:
        import bm25s

        sources = list(sources) if sources is not None else [""] * len(ids)
        if not ids:
            return cls([], digest, None)
        retriever = bm25s.BM25()
        retriever.index(tokenize(texts), show_progress=False)
        return cls(list(ids), digest, retriever, spelled_out_acronyms(texts), sources)

    def search(self, query: str, k: int, sources: Collection[str] | None = None) -> list[tuple[str, float]]:
        """The k best chunks for `query`; with `sources`, the k best of the chunks of those files
        (the others are masked out of the ranking, not dropped after it)."""
        import numpy as np

        if self.retriever is None or k < 1:
            return []
        tokens = tokenize([query])
        if not tokens.vocab:  # only stopwords or punctuation: no lexical signal
            return []
        mask = None
        if sources is not None:
            mask = np.fromiter((s in sources for s in self.sources), dtype=np.float32, count=len(self.ids))
            if not mask.any():
                return []
        docs, scores = self.retriever.retrieve(tokens, k=min(k, len(self.ids)), show_progress=False,
                                               weight_mask=mask)
        return [(self.ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0]) if s > 0]

    def mentions_in(self, word: str, sources: Collection[str]) -> bool:
        """`mentions`, within the chunks of those files: a chunk of theirs holds `word` as BM25
        reads it (an acronym spelled out anywhere still counts: its letters are not indexed)."""
        if not list(tokenize([word]).vocab):
            return True
        return bool(self.search(word, 1, sources)) or (word.isupper() and word in self.acronyms)

    def mentions(self, word: str) -> bool:
        """Whether some chunk holds `word`, as BM25 reads words (stemmed: "Makefiles" finds
        "Makefile"), or, for an acronym, spelled out ("LGPL": "Lesser General Public License").
        A word BM25 does not index (a stopword, one letter) counts as mentioned: there is no
        telling."""
        stems = list(tokenize([word]).vocab)
        if not stems:
            return True
        known = self.retriever.vocab_dict if self.retriever is not None else {}
        return any(stem in known for stem in stems) or (word.isupper() and word in self.acronyms)


def ids_digest(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


_CACHE: dict[str, LexicalIndex] = {}
_LOCK = threading.Lock()


def index_for(collection) -> LexicalIndex:
    """The collection's BM25 index: the one in memory or on disk for its current chunks stamp,
    else built (and saved, in an embedded database). Unstamped: rebuilt only when its set of
    chunk ids changed since last time."""
    stamp = store.chunks_stamp(collection)
    key = f"{collection.id}"
    with _LOCK:
        index = _CACHE.get(key)
        if stamp is None:
            digest = ids_digest(_all_ids(collection))
            if index is None or index.digest != digest:
                texts, ids, sources = _all_texts(collection)
                index = _CACHE[key] = LexicalIndex.build(ids, texts, ids_digest(ids), sources)
            return index
        if index is not None and index.digest == stamp:
            return index
        db = store.persist_folder(collection)
        loaded = lexical_files.load(db, collection.name, key, stamp) if db is not None else None
        index = _CACHE[key] = loaded or _built(collection, stamp, db)
        return index


def rebuild(collection) -> LexicalIndex | None:
    """Build the index for the collection's current stamp now, and save it beside an embedded
    database: what an ingest that changed the chunks calls, so that no query waits for it.
    None for an unstamped collection."""
    stamp = store.chunks_stamp(collection)
    if stamp is None:
        return None
    with _LOCK:
        index = _CACHE[f"{collection.id}"] = _built(collection, stamp, store.persist_folder(collection))
    return index


def _built(collection, stamp: str, db) -> LexicalIndex:
    """Read every chunk (after the stamp was read, so the index holds at least what it stamps)."""
    texts, ids, sources = _all_texts(collection)
    index = LexicalIndex.build(ids, texts, stamp, sources)
    if db is not None:
        lexical_files.save(index, db, collection.name, f"{collection.id}", stamp,
                           current=lambda: store.chunks_stamp(collection))
    return index


def _all_ids(collection) -> list[str]:
    return [id_ for got in store.pages(collection, []) for id_ in got["ids"]]


def _all_texts(collection) -> tuple[list[str], list[str], list[str]]:
    """Every chunk's words for BM25, its id and its source, in the order of their ids.

    Why sorted: the collection returns chunks in the order they were written, which depends on
    its history (a file re-ingested goes last), and BM25 ranks chunks of equal score in index
    order; sorted, the same chunks give the same ranking however the collection was built."""
    rows = []
    for got in store.pages(collection, ["documents", "metadatas"]):
        rows += [(id_, chunk_words(doc or "", meta or {}), str((meta or {}).get("source", "")))
                 for id_, doc, meta in zip(got["ids"], got["documents"], got["metadatas"])]
    rows.sort()
    return [text for _, text, _ in rows], [id_ for id_, _, _ in rows], [source for _, _, source in rows]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K,
                           weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(id) = sum over lists of weight / (k + rank), rank from 1 (every
    weight 1 unless given); best first.

    Ties keep the order of first appearance (the first list wins), so the result is deterministic.
    """
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        for rank, id_ in enumerate(ranking, 1):
            scores[id_] = scores.get(id_, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])
