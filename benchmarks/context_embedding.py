"""Chunk embeddings that see the text before them: dense retrieval with each chunk embedded after
the tail of the chunk that precedes it in the same file, against the vectors ingest stored.

Why: a chunk in the middle of a section often never names what it is about ("it", "this
method"); its heading path says a little of that. A causal model can read the text before the
chunk too: embedded after the previous chunk's last words, the EOS state has seen the context
the chunk continues. This measures whether that helps dense search, before ingest offers it.

Reads an existing collection (the one `benchmarks/retrieval.py` ingests per set) with its stored
vectors, embeds every chunk again as "<previous chunk's last --tail words>\\n\\n<title / heading
path>\\n\\n<chunk>" (the label and text exactly as ingest embeds them; the first chunk of a file
has no previous text), and scores dense search alone (top 5 chunks, `score_ranking` as `unirag
eval rag` scores it) for both, with the question as it is and after the cue "Question: ".

    python benchmarks/context_embedding.py [--db runs/db] [--sets rust,pydocs] [--tail 64]
        [--output runs/bench/context_embedding.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from retrieval import SETS  # noqa: E402

CUES = ("", "Question: ")
TOP_K = 5
METRICS = ("hit@1", "hit@3", "hit@5", "rr")


def with_context(docs: list[str], metas: list[dict], tail: int) -> list[str]:
    """Each chunk's embedded text (`embed_text`, as ingest builds it from the stored title and
    heading), after the last `tail` words of the chunk before it in its file."""
    from unirag.rag.chunking import Chunk, ChunkSettings, embed_text

    settings = ChunkSettings()
    by_source: dict[str, list[int]] = {}
    for i, meta in enumerate(metas):
        by_source.setdefault(meta["source"], []).append(i)
    texts = [""] * len(docs)
    for indices in by_source.values():
        indices.sort(key=lambda i: metas[i]["chunk_index"])
        for j, i in enumerate(indices):
            meta = metas[i]
            own = embed_text(Chunk(docs[i], meta.get("heading", ""), meta["chunk_index"], 0), meta.get("title", ""),
                             settings)
            before = " ".join(docs[indices[j - 1]].split()[-tail:]) if j > 0 else ""
            texts[i] = f"{before}\n\n{own}" if before else own
    return texts


def unit_rows(vectors) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def scores(chunks: np.ndarray, queries: np.ndarray, sources: list[str], questions) -> dict[str, float]:
    from unirag.evaluation.rag import score_ranking

    total = dict.fromkeys(METRICS, 0.0)
    for question, query in zip(questions, queries):
        top = np.argsort(-(chunks @ query))[:TOP_K]
        got = score_ranking([sources[i] for i in top], question.files)
        for metric in METRICS:
            total[metric] += got[metric]
    return {metric: round(100 * value / len(questions), 1) for metric, value in total.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="runs/db")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--tail", type=int, default=64, help="words of the previous chunk embedded before each chunk")
    parser.add_argument("--output", default="runs/bench/context_embedding.json")
    args = parser.parse_args()

    from unirag.evaluation.rag import load_questions
    from unirag.rag.store import connect, pages
    from unirag.unimodel import UniModel

    model = UniModel.load()
    client = connect(args.db, must_exist=True)
    results, rows = {}, []
    for name in args.sets.split(","):
        _, questions_path, collection_name = SETS[name]
        collection = client.get_collection(collection_name)
        docs, metas, stored = [], [], []
        for got in pages(collection, ["documents", "metadatas", "embeddings"]):
            docs += got["documents"]
            metas += got["metadatas"]
            stored += list(got["embeddings"])
        questions = load_questions(questions_path)
        sources = [meta["source"] for meta in metas]
        queries = {cue: unit_rows(model.embed([cue + q.question for q in questions])) for cue in CUES}
        start = time.perf_counter()
        context = unit_rows(model.embed(with_context(docs, metas, args.tail)))
        seconds = time.perf_counter() - start
        results[name] = {"chunks": len(docs), "context_embed_s": round(seconds, 1), "runs": {}}
        for kind, chunks in (("stored", unit_rows(stored)), (f"after {args.tail} words", context)):
            for cue in CUES:
                got = scores(chunks, queries[cue], sources, questions)
                results[name]["runs"][f"{kind} [{cue!r}]"] = got
                rows.append([name, kind, repr(cue), *(got[m] for m in METRICS)])
    print(markdown_table(["set", "chunk embedding", "cue", *METRICS], rows))
    print({name: (r["chunks"], r["context_embed_s"]) for name, r in results.items()})
    summary = {"benchmark": "context_embedding", "model": model.name, "tail_words": args.tail, "top_k": TOP_K,
               "machine": machine_info(), "sets": results}
    print(f"wrote {write_json(args.output, summary)}")


if __name__ == "__main__":
    main()
