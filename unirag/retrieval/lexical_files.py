"""A collection's BM25 index on disk, beside the embedded database: `<db>/bm25/<collection>/<stamp>/`.

Why: building BM25 reads every chunk of the collection and tokenises it, which a new process
(each `unirag ask`) paid before its first answer. Saved once after the ingest that changed the
chunks, a later process maps the arrays from disk (`bm25s.BM25.load(..., mmap=True)`) instead.

The folder is named by the collection's chunks stamp (`store.STAMP_KEY`), which every ingest that
changes the chunks renews, so a saved index is current exactly when its name is the stamp the
collection holds. It is written under a temporary name and renamed into place, so a save cut
short (a crash, a full disk) never leaves a folder by that name that loads half an index.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

log = logging.getLogger("unirag")

RECORD = "unirag.json"  # beside bm25s's own files: the chunk ids in index order, the acronyms, the owner
STALE_TEMP_S = 3600  # a temporary folder this old belongs to a save that died


def folder(db: Path, name: str) -> Path:
    return Path(db) / "bm25" / name


def save(index, db: Path, name: str, collection_id: str, stamp: str, current=None) -> Path | None:
    """Write `index` (a built `lexical.LexicalIndex`) as `<db>/bm25/<name>/<stamp>`, then drop the
    folder's older stamps. Returns the folder, or None where nothing could be written (a read-only
    database: the index then lives in memory only)."""
    if index.retriever is None:
        return None
    parent = folder(db, name)
    final = parent / stamp
    temp = parent / f".tmp-{stamp}-{uuid.uuid4().hex[:8]}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        index.retriever.save(str(temp), show_progress=False)
        record = {"collection": str(collection_id), "stamp": stamp, "ids": index.ids,
                  "sources": index.sources, "acronyms": sorted(index.acronyms)}
        (temp / RECORD).write_text(json.dumps(record), encoding="utf-8")
        try:
            os.rename(temp, final)
        except OSError:  # another process saved the same stamp first: theirs is the same index
            shutil.rmtree(temp, ignore_errors=True)
            if not (final / RECORD).is_file():
                return None
    except OSError as err:
        shutil.rmtree(temp, ignore_errors=True)
        log.info("BM25 index not saved under %s (%s): kept in memory", parent, err)
        return None
    # a process that read an older stamp mid-ingest may save after the ingest's own save: it then
    # must not drop the newer folder (`current()`: the collection's stamp now)
    if current is None or current() == stamp:
        _drop_others(parent, keep=stamp)
    return final


def load(db: Path, name: str, collection_id: str, stamp: str):
    """The index saved for this collection and stamp, or None (none saved, another collection's
    of the same name, or unreadable: the caller rebuilds it)."""
    from unirag.retrieval.lexical import LexicalIndex

    where = folder(db, name) / stamp
    try:
        record = json.loads((where / RECORD).read_text(encoding="utf-8"))
        if (record.get("collection") != str(collection_id) or record.get("stamp") != stamp
                or len(record.get("sources", ())) != len(record["ids"])):  # sources: what --source filters on
            return None
        import bm25s

        retriever = bm25s.BM25.load(str(where), mmap=True, show_progress=False)
        if retriever.scores["num_docs"] != len(record["ids"]):  # arrays of another save, or cut short
            return None
    except Exception as err:  # missing, cut short, damaged, another bm25s's layout: rebuild
        log.info("BM25 index under %s not loaded (%s: %s): rebuilding it", where, type(err).__name__, err)
        return None
    return LexicalIndex(list(record["ids"]), stamp, retriever, frozenset(record.get("acronyms", ())),
                        list(record["sources"]))


def _drop_others(parent: Path, keep: str) -> None:
    """Remove the folder's other stamps, and temporary folders of saves that died long ago (a
    recent one may be another process's save in progress)."""
    now = time.time()
    for path in parent.iterdir():
        if path.name == keep:
            continue
        try:
            if path.name.startswith(".tmp-") and now - path.stat().st_mtime < STALE_TEMP_S:
                continue
        except OSError:
            continue
        shutil.rmtree(path, ignore_errors=True)
