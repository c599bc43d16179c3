"""Keep a Chroma collection in sync with a folder: incremental, idempotent, crash-safe.

The collection itself is the only state. Every chunk's metadata holds its file (`root`,
`source`; `file_name` and `file_path` too, as LlamaIndex's readers name them), the file's
content hash and a `version` (hash of content + chunk settings), plus `chunk_index` / `n_chunks`,
and a PDF's chunk its first and last page (`page_start`, `page_end`).
Chunk ids are derived from (root, source, version, index), so the same file always produces the
same ids and upserting twice never duplicates.

Order of writes, per file: upsert all new chunks first, then delete that file's other ids.
Whatever instant a run is killed at, the next run finds each file either complete at its
current version (then only stale ids are deleted: "repaired"), or incomplete (then it is
re-embedded and upserted over the same ids), and ends in the same state as one clean run.

A changed file is re-chunked, but only the chunks whose embedded text is new are embedded: each
chunk's metadata keeps a hash of what was embedded for it (`embed_key`), and a chunk whose text
(with its label and context) some chunk under the same root already has takes that chunk's stored
vector. An edit to one section of a long page, or a reader change that touches a few passages,
costs the passages it changed, not the file.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from unirag.errors import UniragError
from unirag.retrieval import lexical, store
from unirag.retrieval.chunking import Chunk, ChunkSettings, chunk_text, embed_texts
from unirag.readers.registry import (DEFAULT_MAX_BYTES, KINDS, Document, Skipped, SourceFile, content_hash, parse, reader_format,
                      read_bytes, walk)

PAUSE_ENV = "UNIRAG_TEST_PAUSE_AFTER_UPSERT"  # tests only: seconds to sleep between upsert and delete


@dataclass
class IngestSummary:
    """What one ingest run did; `line()` is the one-line summary, `report()` adds the skips."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)  # complete already; stale ids of a killed run deleted
    unchanged: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    ignored: int = 0  # files with other extensions
    deferred: int = 0  # beyond max_files, left as they were
    chunks_written: int = 0
    chunks_reused: int = 0  # of those written, how many took a stored vector instead of an embedding
    chunks_deleted: int = 0
    tokens: int = 0
    embed_seconds: float = 0.0
    seconds: float = 0.0

    def line(self) -> str:
        rate = f" ({self.tokens / self.embed_seconds:,.0f} tokens/s)" if self.embed_seconds else ""
        extra = f", {len(self.repaired)} repaired" if self.repaired else ""
        extra += f", {self.deferred} not processed (max files)" if self.deferred else ""
        reused = f" ({self.chunks_reused} with their stored vectors)" if self.chunks_reused else ""
        return (f"{len(self.added)} added, {len(self.changed)} changed, {len(self.removed)} removed, "
                f"{self.unchanged} unchanged, {len(self.skipped)} skipped{extra}; {self.chunks_written} chunks "
                f"written{reused}, {self.chunks_deleted} deleted; {self.tokens:,} tokens embedded{rate}; "
                f"{self.seconds:.1f} s")

    def report(self) -> str:
        lines = [self.line()]
        lines += [f"  skipped {s.source}: {s.reason}" for s in sorted(self.skipped, key=lambda s: s.source)]
        if self.ignored:
            lines.append(f"  ignored {self.ignored} files with other extensions (reads {', '.join(sorted(KINDS))})")
        return "\n".join(lines)


@dataclass
class _Pending:
    """A changed file, read and chunked, waiting for its embeddings."""

    file: SourceFile
    doc: Document
    hash: str
    version: str
    chunks: list[Chunk]
    old_ids: set[str]


def doc_version(file_hash: str, settings: ChunkSettings, reader_format: int = 0) -> str:
    """What a file's chunks depend on: its bytes, the chunk settings, and how its kind is read."""
    reader = f"|reader={reader_format}" if reader_format else ""  # 0: the ids of files read as before
    return hashlib.sha256(f"{file_hash}|{settings.signature()}{reader}".encode()).hexdigest()[:16]


def embed_key(text: str) -> str:
    """What a chunk's vector depends on besides the model: the exact text embedded for it."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def chunk_id(root: str, source: str, version: str, index: int) -> str:
    path_key = hashlib.sha256(f"{root}\0{source}".encode()).hexdigest()[:16]
    return f"{path_key}-{version}-{index:05d}"


def scan(root: Path) -> tuple[list[SourceFile], list[Skipped], int]:
    """`readers.walk`, plus the one-line error for a folder with nothing to read."""
    files, skipped, ignored = walk(root)
    if not files and not skipped:
        raise UniragError(f"no {', '.join(sorted(KINDS))} files under {root}")
    return files, skipped, ignored


def share_of(files: list[SourceFile], worker: int, workers: int) -> list[SourceFile]:
    """Worker `worker`'s files out of `workers`: largest first to the least loaded, by bytes.

    Every worker scans the same folder and computes the same split, so no file is read twice
    and none is missed, without any message between workers."""
    if workers == 1:
        return files
    load = [0] * workers
    mine = set()
    for file in sorted(files, key=lambda f: (-_size(f), f.source)):
        least = load.index(min(load))
        load[least] += _size(file) or 1
        if least == worker:
            mine.add(file.source)
    return [f for f in files if f.source in mine]


def _size(file: SourceFile) -> int:
    try:
        return file.path.stat().st_size
    except OSError:
        return 0


def ingest(model, collection, root: str | Path, *, settings: ChunkSettings = ChunkSettings(),
           max_file_bytes: int = DEFAULT_MAX_BYTES, batch_size: int = 32, max_files: int | None = None,
           progress: bool = False, worker: int = 0, workers: int = 1, reuse_vectors: bool = True) -> IngestSummary:
    """Bring `collection` in line with the files under `root` (a folder, or one file).

    With `workers` > 1, this call is one of several processes sharing the work (`share_of`); the
    first also drops removed files and reports what the scan skipped. `reuse_vectors=False`
    embeds every chunk of a changed file again (what research/reingest.py compares against)."""
    started = time.perf_counter()
    root = Path(root).expanduser()
    files, skipped, ignored = scan(root)
    store.check_model(collection, model)
    todo = files[:max_files] if max_files is not None else files
    deferred = len(files) - len(todo)
    todo = share_of(todo, worker, workers)
    run = _Run(model, collection, root, settings, batch_size, progress, todo, reuse_vectors)
    if worker == 0:
        run.summary.skipped, run.summary.ignored, run.summary.deferred = skipped, ignored, deferred
    try:
        for file in todo:
            run.visit(file, max_file_bytes)
        run.flush()
        gone = set(run.existing) - {f.source for f in files} if worker == 0 else set()
        for source in sorted(gone):
            run.touch()
            store.delete(collection, run.existing[source])
            run.summary.removed.append(source)
            run.summary.chunks_deleted += len(run.existing[source])
    finally:
        run.bar.close()
        if run.touched:  # also after an error: what was written must not pass for the old chunks
            store.mark_changed(collection)
    if run.touched and store.persist_folder(collection) is not None:
        try:  # once, here, rather than in the first query after it; a query rebuilds it if this fails
            lexical.rebuild(collection)
        except Exception as err:  # noqa: BLE001 - the chunks are written; the index is only a cache
            print(f"unirag: BM25 index not saved ({type(err).__name__}: {err}); the first query builds it",
                  file=sys.stderr)
    run.summary.seconds = time.perf_counter() - started
    return run.summary


class _Run:
    """State of one ingest run: what the collection holds under this root, and the pending batch."""

    def __init__(self, model, collection, root: Path, settings, batch_size, progress, todo: list[SourceFile],
                 reuse_vectors: bool = True):
        from tqdm.auto import tqdm

        self.model, self.collection, self.settings, self.batch_size = model, collection, settings, batch_size
        self.root = str((root if root.is_dir() else root.parent).resolve())
        where = {"root": self.root} if root.is_dir() else {"$and": [{"root": self.root}, {"source": root.name}]}
        self.existing: dict[str, set[str]] = defaultdict(set)
        self.meta: dict[str, dict] = {}
        self.reuse_vectors = reuse_vectors
        self.stored: dict[str, str] = {}  # embed_key -> the id of a stored chunk embedded from that text
        for id_, meta in store.records(collection, where).items():
            self.existing[meta["source"]].add(id_)
            self.meta[id_] = meta
            if reuse_vectors and meta.get("embed_key"):
                self.stored[meta["embed_key"]] = id_
        self.existing = dict(self.existing)
        self.pooling = store.collection_pooling(collection)
        self.pending: list[_Pending] = []
        self.summary = IngestSummary()
        self.pause = float(os.environ.get(PAUSE_ENV, "0") or 0)
        self.touched = False  # whether this run has written to the collection
        # progress counts the files' bytes, not the files: one large file (a PDF, a single-page
        # manual) is most of the work, and its chunks' embeddings move the bar as they are done
        self.sizes = {f.source: max(_size(f), 1) for f in todo}
        self.files, self.finished, self.done = len(todo), 0, 0.0
        self.bar = tqdm(total=sum(self.sizes.values()), unit="B", unit_scale=True, desc="ingest",
                        disable=not progress, file=sys.stderr, dynamic_ncols=True)
        self.bar.set_postfix(files=f"0/{self.files}")

    def touch(self) -> None:
        """Before the run's first write: a new chunks stamp, so that a run killed mid-way (no
        `finally`) still leaves a stamp no saved BM25 index carries, and the next query rebuilds."""
        if not self.touched:
            store.mark_changed(self.collection)
            self.touched = True

    def visit(self, file: SourceFile, max_file_bytes: int) -> None:
        old = self.existing.get(file.source, set())
        data = read_bytes(file, max_file_bytes)
        if isinstance(data, Skipped):
            return self.skip(data, old)
        file_hash = content_hash(data)
        version = doc_version(file_hash, self.settings, reader_format(file, data))
        if (current := self.complete_ids(file.source, version, old)) is not None:
            stale = old - current
            if stale:  # a killed run upserted this version but did not get to delete the old one
                self.touch()
                store.delete(self.collection, stale)
                self.summary.repaired.append(file.source)
                self.summary.chunks_deleted += len(stale)
            else:
                self.summary.unchanged += 1
            return self.advance(self.sizes[file.source], file_done=True)
        doc = parse(file, data)
        if isinstance(doc, Skipped):
            return self.skip(doc, old)
        chunks = chunk_text(doc.text, self.model.tokenizer, self.settings, doc.markdown)
        if not chunks:
            return self.skip(Skipped(file.source, "no text after chunking"), old)
        self.pending.append(_Pending(file, doc, file_hash, version, chunks, old))
        if sum(len(p.chunks) for p in self.pending) >= self.batch_size:
            self.flush()

    def complete_ids(self, source: str, version: str, old: set[str]) -> set[str] | None:
        """The ids of this version if all of them are stored, else None."""
        counts = {self.meta[i].get("n_chunks") for i in old if self.meta[i].get("version") == version}
        if len(counts) != 1:
            return None
        expected = {chunk_id(self.root, source, version, i) for i in range(counts.pop())}
        return expected if expected <= old else None

    def skip(self, skipped: Skipped, old: set[str]) -> None:
        if old:  # the file is no longer indexable: its old chunks must not answer questions
            self.touch()
            store.delete(self.collection, old)
            self.summary.chunks_deleted += len(old)
            skipped = Skipped(skipped.source, skipped.reason + " (its old chunks were removed)")
        self.summary.skipped.append(skipped)
        self.advance(self.sizes.get(skipped.source, 0), file_done=True)

    def advance(self, size: float, file_done: bool = False) -> None:
        """Move the bar by `size` bytes of work (float: a chunk is a share of its file)."""
        self.finished += file_done
        before, self.done = self.done, self.done + size
        self.bar.update(round(self.done) - round(before))
        if file_done:
            self.bar.set_postfix(files=f"{self.finished}/{self.files}", refresh=False)

    def flush(self) -> None:
        """Embed the pending chunks together; then per file: upsert, and only then delete stale ids."""
        if not self.pending:
            return
        texts = [text for p in self.pending for text in embed_texts(p.chunks, p.doc.title, self.settings)]
        keys = [embed_key(text) for text in texts]
        vectors: list = [None] * len(texts)
        stored = store.embeddings(self.collection, {self.stored[k] for k in keys if k in self.stored})
        for i, key in enumerate(keys):
            if key in self.stored and self.stored[key] in stored:
                vectors[i] = stored[self.stored[key]]
        new = [i for i, vector in enumerate(vectors) if vector is None]
        # each chunk's share of its file's bytes, for the bar
        shares = [self.sizes[p.file.source] / len(p.chunks) for p in self.pending for _ in p.chunks]
        self.advance(sum(shares[i] for i in range(len(texts)) if vectors[i] is not None))
        self.summary.chunks_reused += len(texts) - len(new)
        if new:
            t0 = time.perf_counter()
            embedded = self.model.embed([texts[i] for i in new], pooling=self.pooling, batch_size=self.batch_size,
                                        on_batch=lambda rows: self.advance(sum(shares[new[i]] for i in rows)))
            self.summary.embed_seconds += time.perf_counter() - t0
            for i, vector in zip(new, embedded):
                vectors[i] = vector
            if self.settings.embed_headings or self.settings.context_words:  # count labels and context too
                self.summary.tokens += sum(map(len, self.model.tokenizer([texts[i] for i in new],
                                                                         add_special_tokens=False)["input_ids"]))
            else:
                chunks = [c for p in self.pending for c in p.chunks]
                self.summary.tokens += sum(chunks[i].n_tokens for i in new)
        vectors = np.stack(vectors)
        self.touch()
        row = 0
        for p in self.pending:
            n = len(p.chunks)
            ids = [chunk_id(self.root, p.file.source, p.version, c.index) for c in p.chunks]
            store.upsert(self.collection, ids, vectors[row:row + n], [c.text for c in p.chunks],
                         [self.metadata(p, c, n, key) for c, key in zip(p.chunks, keys[row:row + n])])
            if self.reuse_vectors:
                self.stored.update(zip(keys[row:row + n], ids))
            row += n
            if self.pause:
                print(f"unirag-test: upserted {p.file.source}", file=sys.stderr, flush=True)
                time.sleep(self.pause)
            stale = p.old_ids - set(ids)
            if stale:
                store.delete(self.collection, stale)
            (self.summary.changed if p.old_ids else self.summary.added).append(p.file.source)
            self.summary.chunks_written += n
            self.summary.chunks_deleted += len(stale)
            self.advance(0, file_done=True)
        rate = self.summary.tokens / max(self.summary.embed_seconds, 1e-9)
        self.bar.set_postfix(files=f"{self.finished}/{self.files}", chunks=self.summary.chunks_written,
                             tok_s=f"{rate:,.0f}")
        self.pending = []

    def metadata(self, p: _Pending, chunk: Chunk, n: int, key: str) -> dict:
        # file_name and file_path as LlamaIndex's readers name them, so its tools find them there
        meta = {"root": self.root, "source": p.file.source, "file_name": Path(p.file.source).name,
                "file_path": str(Path(self.root) / p.file.source), "title": p.doc.title, "heading": chunk.heading,
                "chunk_index": chunk.index, "n_chunks": n, "n_tokens": chunk.n_tokens,
                "content_hash": p.hash, "version": p.version, "model": self.model.name, "embed_key": key}
        # a PDF's chunk names its pages, which its citations show (`search.Hit.label`)
        if (pages := p.doc.page_span(chunk.start, chunk.end)) is not None:
            meta["page_start"], meta["page_end"] = pages
        return meta
