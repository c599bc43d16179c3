"""Every layer as an embedder: STS Spearman and dense retrieval hit@k per decoder layer.

The shipped embedding is the EOS state after the last of the model's layers. Intermediate layers
may embed better (Skean et al., ICML 2025, "Layer by Layer") and cost k/L of the pass. One forward
pass with all hidden states gives every layer at once; each layer's state goes through the
model's final norm, as the last layer's does, before pooling.

    python benchmarks/embedding_layers.py --adapter default --sick-limit 2000 \
        --retrieval runs/db:stats:benchmarks/questions/stats_papers.jsonl --output runs/bench/layers.json

`--retrieval DB:COLLECTION:QUESTIONS` (repeatable) re-embeds an ingested collection's chunks (as
ingest embedded them: title and headings before the text) at every layer and scores file-level
hit@1/3 of the questions, beside all-MiniLM-L6-v2 on the same chunks.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def read_sts(path: Path, limit: int | None) -> tuple[list[str], list[str], np.ndarray]:
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[:limit]
    return [r["sentence1"] for r in rows], [r["sentence2"] for r in rows], np.array([float(r["score"]) for r in rows])


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).correlation)


def layer_embeddings(model, texts: list[str], pooling: str, instruction: str | None = None,
                     batch_size: int = 32) -> np.ndarray:
    """(layers + 1, n, hidden): the pooled, final-normed, L2-normalised state of every layer (0 = the
    token embeddings) for each text."""
    from unirag.model.pooling import padded_batch, pooled, token_budget_batches

    _, encoded = model._prepare(texts, pooling, instruction)
    order = sorted(range(len(texts)), key=lambda i: -len(encoded[i].ids))
    batches = token_budget_batches([len(encoded[i].ids) for i in order], batch_size, model.embed_batch_tokens)
    out = None
    norm = model.decoder.norm
    for batch in batches:
        rows = [order[j] for j in batch]
        ids, attention, pool = padded_batch([encoded[i] for i in rows], model._pad_id)
        with model.forward_context():
            states = model.decoder(input_ids=ids.to(model.device), attention_mask=attention.to(model.device),
                                   output_hidden_states=True, use_cache=False).hidden_states
            layers = [norm(s) for s in states[:-1]] + [states[-1]]  # the last one is normed already
            vectors = np.stack([pooled(s, pool) for s in layers])
        if out is None:
            out = np.empty((len(layers), len(texts), vectors.shape[-1]), dtype=np.float32)
        out[:, rows] = vectors
    return out / np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)


def sts_by_layer(model, path: Path, limit: int | None, pooling: str) -> list[float]:
    left, right, gold = read_sts(path, limit)
    a, b = layer_embeddings(model, left, pooling), layer_embeddings(model, right, pooling)
    return [spearman((a[k] * b[k]).sum(-1), gold) for k in range(a.shape[0])]


def collection_chunks(db: str, name: str):
    """The chunks of an ingested collection: (sources, texts as ingest embedded them)."""
    from unirag.retrieval import store
    from unirag.retrieval.chunking import Chunk, ChunkSettings, embed_text

    collection = store.open_collection(store.connect(db), name)
    settings, sources, texts = ChunkSettings(), [], []
    for got in store.pages(collection, ["documents", "metadatas"]):
        for doc, meta in zip(got["documents"], got["metadatas"]):
            meta, doc = meta or {}, doc or ""
            sources.append(meta.get("source", ""))
            texts.append(embed_text(Chunk(doc, meta.get("heading", ""), 0, 0), meta.get("title", ""), settings))
    return sources, texts


def hits_at(scores: np.ndarray, sources: list[str], gold: list[list[str]], depths=(1, 3)) -> dict[str, float]:
    """File-level hit@k: a hit when one of the top k chunks comes from a right file."""
    from unirag.evaluation.rag import same_file

    out = {f"hit@{d}": 0.0 for d in depths}
    for row, files in zip(scores, gold):
        top = np.argsort(-row, kind="stable")[: max(depths)]
        for d in depths:
            out[f"hit@{d}"] += any(same_file(sources[i], g) for i in top[:d] for g in files)
    return {k: 100 * v / len(gold) for k, v in out.items()}


def retrieval_by_layer(model, spec: str) -> dict:
    from unirag.evaluation.rag import load_questions
    from unirag.evaluation.reference import minilm_encoder

    db, name, questions_path = spec.split(":", 2)
    sources, texts = collection_chunks(db, name)
    questions = load_questions(questions_path)
    asked = [model.query_prefix + q.question for q in questions]
    gold = [list(q.files) for q in questions]
    started = time.perf_counter()
    chunks = layer_embeddings(model, texts, "eos")
    seconds = time.perf_counter() - started
    queries = layer_embeddings(model, asked, "eos")
    per_layer = [hits_at(queries[k] @ chunks[k].T, sources, gold) for k in range(chunks.shape[0])]
    encoder = minilm_encoder()
    ref_chunks = encoder.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    ref_queries = encoder.encode([q.question for q in questions], normalize_embeddings=True, convert_to_numpy=True)
    return {"set": name, "chunks": len(texts), "questions": len(questions), "layers": per_layer,
            "minilm": hits_at(ref_queries @ ref_chunks.T, sources, gold), "all_layers_pass_s": seconds}


def table(result: dict) -> str:
    n = len(result["sts"]["STSBenchmark-dev"]["eos"])
    sets = result["retrieval"]
    head = ["layer", "cost", "STSB-dev eos", "STSB-dev mean", "SICK-R eos"] + [
        f"{r['set']} hit@{d}" for r in sets for d in (1, 3)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    sts = result["sts"]
    for k in range(1, n):
        cells = [str(k), f"{k / (n - 1):.2f}", f"{100 * sts['STSBenchmark-dev']['eos'][k]:.1f}",
                 f"{100 * sts['STSBenchmark-dev']['mean'][k]:.1f}", f"{100 * sts['SICK-R']['eos'][k]:.1f}"]
        cells += [f"{r['layers'][k][f'hit@{d}']:.1f}" for r in sets for d in (1, 3)]
        lines.append("| " + " | ".join(cells) + " |")
    if sets:
        cells = ["MiniLM", "", "", "", ""] + [f"{r['minilm'][f'hit@{d}']:.1f}" for r in sets for d in (1, 3)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default", help="'none' for the base model")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sick-limit", type=int, default=None, help="first N SICK-R pairs (all: 9,927)")
    parser.add_argument("--stsb-limit", type=int, default=None)
    parser.add_argument("--retrieval", action="append", default=[], metavar="DB:COLLECTION:QUESTIONS")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)

    import unirag

    model = unirag.load(args.model, None if args.adapter == "none" else args.adapter)
    sts_dir = args.data / "eval" / "sts"
    result = {"model": model.name, "adapter": args.adapter, "sts": {
        "STSBenchmark-dev": {p: sts_by_layer(model, sts_dir / "STSBenchmark-dev.tsv", args.stsb_limit, p)
                             for p in ("eos", "mean")},
        "SICK-R": {"eos": sts_by_layer(model, sts_dir / "SICK-R-test.tsv", args.sick_limit, "eos")},
    }, "retrieval": [retrieval_by_layer(model, spec) for spec in args.retrieval]}
    print(table(result))
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
