"""What keeping the BM25 index current costs a query, and a new process, before and after stamps.

Why: retrieval's BM25 half used to page through every chunk id of the collection and hash them
on each query (to see whether the index was current), and a new process rebuilt the index from
every chunk's text. Now a query re-reads one metadata value (the chunks stamp) and a new process
maps the index an ingest saved (retrieval/lexical.py, lexical_files.py). Only the chunks' text
matters here, so the collection is filled with a folder's real chunks (the model's tokenizer
cuts them as ingest does) and random vectors: no model pass, a large collection in seconds.

    python benchmarks/bm25_index.py --docs ../shared/data/docs/rust-book/src [--repeats 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def timed(fn, repeats: int) -> float:
    """Median seconds of `repeats` calls."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="../shared/data/docs/rust-book/src")
    parser.add_argument("--model", default="smollm2-135m", help="whose tokenizer cuts the chunks")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from unirag.model.registry import resolve_model
    from unirag.readers.registry import parse, read_bytes, walk
    from unirag.retrieval import lexical, lexical_files, store
    from unirag.retrieval.chunking import ChunkSettings, chunk_text

    tokenizer = AutoTokenizer.from_pretrained(resolve_model(args.model))
    files, _, _ = walk(Path(args.docs))
    ids, texts, metas = [], [], []
    for file in files:
        doc = parse(file, read_bytes(file, 20 * 2**20))
        if not hasattr(doc, "text"):
            continue
        for chunk in chunk_text(doc.text, tokenizer, ChunkSettings(), doc.markdown):
            ids.append(f"{file.source}-{chunk.index:05d}")
            texts.append(chunk.text)
            metas.append({"source": file.source, "title": doc.title, "heading": chunk.heading})
    db = Path(tempfile.mkdtemp(prefix="bm25-bench-"))
    client = store.connect(db)
    collection = client.create_collection("bench", configuration={"hnsw": {"space": "cosine"}},
                                          metadata={"unirag_model": "bench"}, embedding_function=None)
    vectors = np.random.default_rng(0).standard_normal((len(ids), 64)).astype(np.float32)
    store.upsert(collection, ids, vectors, texts, metas)

    scan = timed(lambda: lexical.ids_digest(lexical._all_ids(collection)), args.repeats)
    texts, ids, sources = lexical._all_texts(collection)
    build = timed(lambda: lexical.LexicalIndex.build(ids, texts, "", sources), 3)
    store.mark_changed(collection)
    stamp_read = timed(lambda: store.chunks_stamp(collection), args.repeats)
    index = lexical.rebuild(collection)
    stamp = store.chunks_stamp(collection)
    load = timed(lambda: lexical_files.load(db, "bench", f"{collection.id}", stamp), 3)
    loaded = lexical_files.load(db, "bench", f"{collection.id}", stamp)
    query = "How does a loop return a value with break?"
    same = loaded.search(query, 20) == index.search(query, 20)
    search = timed(lambda: loaded.search(query, 20), args.repeats)
    print(f"{len(ids)} chunks of {args.docs}")
    print(f"per query, is the index current?  before: page through every id and hash them {scan * 1000:.1f} ms;"
          f"  now: re-read the chunks stamp {stamp_read * 1000:.2f} ms")
    print(f"a new process's index:  before: build from every chunk {build:.2f} s;  now: map the saved one "
          f"{load * 1000:.1f} ms (same results: {same}); one BM25 search {search * 1000:.2f} ms")


if __name__ == "__main__":
    main()
