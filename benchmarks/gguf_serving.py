"""Serving a unirag model with llama.cpp: `unirag export --gguf` files against unirag itself.

Why: llama.cpp and Ollama users should get the same embeddings and answers from an exported file
as from unirag. For each `--types` (GGUF weight types) the script exports the default model (the
shipped adapter merged) into a temporary folder, loads the file with llama-cpp-python, and reports
side by side with unirag's default serving model (bf16 weights, int4 decode copy):

- embedding agreement: cosine between llama.cpp's embedding (`pooling last`, text + EOS) and the
  vector unirag stored for the same chunk, over the first `--chunks` chunks of each set's
  collection (built by `unirag eval rag` or benchmarks/retrieval.py), and embedding tokens/s of
  both engines on those chunks (one text per call for llama.cpp, its fastest here);
- retrieval: the dev questions embedded by llama.cpp, searched against unirag's stored chunk
  vectors (a collection ingested by unirag, queried by a llama.cpp server), file-level
  hit@1/3/5 and MRR beside unirag's dense search on the same collection;
- generation: decode tokens/s over `--new-tokens` greedy tokens (benchmarks/decode.py's prompt and
  timing), and greedy agreement with the fp32 model over decode.py's 12 prompts: the share of
  tokens made before the first difference, and the prompts answered identically.

llama-cpp-python is optional; build it as benchmarks/decode.py says (LLAMA_CPP_INSTALL).

    python benchmarks/gguf_serving.py [--types q8_0,f16] [--db runs/db] [--sets rust,pydocs]
        [--chunks 128] [--new-tokens 64] [--repeats 3] [--output runs/bench/gguf_serving.json]
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
from bench_common import machine_info, markdown_table, write_json  # noqa: E402
from decode import (AGREEMENT_PROMPTS, LLAMA_CPP_INSTALL, PROMPT, greedy_agreement, measure, run_llama_cpp,  # noqa: E402
                    run_unirag)
from retrieval import SETS  # noqa: E402


class LlamaCppEmbedder:
    """EOS embeddings from a GGUF file: llama.cpp's last-token pooling over text + EOS."""

    def __init__(self, path: Path, eos: str, threads: int):
        import llama_cpp

        self.eos = eos
        self.llm = llama_cpp.Llama(model_path=str(path), embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_LAST,
                                   n_ctx=1024, n_batch=512, n_ubatch=512, n_threads=threads, verbose=False)
        tokenize = self.llm.tokenize
        # embed() tokenizes without special tokens and would spell "<|im_end|>" out in pieces;
        # the EOS must be the one special token at the end, as unirag appends it.
        self.llm.tokenize = lambda text, add_bos=True, special=False: tokenize(text, add_bos=False, special=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.array([self.llm.embed(text + self.eos, normalize=True) for text in texts], dtype=np.float32)


class LlamaCppGenerator:
    """Greedy generation from a GGUF file over given prompt ids, stopping at EOS as users get it."""

    def __init__(self, path: Path, threads: int):
        import llama_cpp

        self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=1024, n_batch=512, n_threads=threads, verbose=False)

    def generate_ids(self, prompt_ids: list[int], n: int) -> list[int]:
        self.llm.reset()
        out = []
        for token in self.llm.generate(prompt_ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0,
                                       reset=True):
            if token == self.llm.token_eos() or len(out) >= n:
                break
            out.append(int(token))
        return out


def chunk_sample(collection, n: int) -> tuple[list[str], np.ndarray, int]:
    """The first n chunks as unirag embedded them (heading path + text) and their stored vectors."""
    from unirag.retrieval.chunking import Chunk, ChunkSettings, embed_text

    got = collection.get(limit=n, include=["documents", "metadatas", "embeddings"])
    settings = ChunkSettings(embed_headings=True)
    texts = [embed_text(Chunk(doc or "", meta.get("heading", ""), 0, 0), meta.get("title", ""), settings)
             for doc, meta in zip(got["documents"], got["metadatas"])]
    return texts, np.asarray(got["embeddings"], dtype=np.float32), len(got["ids"])


def queries_by(embedder, collection, prefix: str = ""):
    """A retriever for run_rag_eval: questions embedded by `embedder` after `prefix` (the
    adapter's question cue, as unirag's dense search embeds them), searched in the collection."""
    from unirag.retrieval.search import Hit

    def retrieve(question: str, top_k: int = 5):
        found = collection.query(query_embeddings=[embedder.embed([prefix + question])[0].tolist()], n_results=top_k,
                                 include=["documents", "metadatas", "distances"])
        return [Hit(i, 1.0 - float(d), doc or "", meta.get("source", ""), meta.get("heading", ""), meta)
                for i, doc, meta, d in zip(found["ids"][0], found["documents"][0], found["metadatas"][0],
                                           found["distances"][0])]

    return retrieve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", default="q8_0,f16")
    parser.add_argument("--db", default="runs/db")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--chunks", type=int, default=128)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="runs/bench/gguf_serving.json")
    args = parser.parse_args()
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        sys.exit(f"llama_cpp is not installed; to run this benchmark: {LLAMA_CPP_INSTALL}")

    from unirag import UniModel
    from unirag.evaluation.rag import load_questions, run_rag_eval
    from unirag.export.gguf import export_gguf
    from unirag.model.registry import source_gguf
    from unirag.retrieval.store import connect

    serving = UniModel.load()  # what `unirag ask` runs
    yardstick = UniModel.load(precision="fp32", decode_copy=None)  # the weights as trained, fp32
    client = connect(args.db)
    collections = {name: client.get_collection(SETS[name][2]) for name in args.sets.split(",")}
    questions = {name: load_questions(SETS[name][1]) for name in collections}
    samples = {name: chunk_sample(c, args.chunks) for name, c in collections.items()}
    tokens = {name: sum(len(serving.tokenizer(t).input_ids) + 1 for t in texts) for name, (texts, _, _) in samples.items()}
    prompt = serving.prompt_ids(PROMPT)

    results: dict = {"unirag": {}, "gguf": {}}
    rows = []
    for name, collection in collections.items():
        start = time.perf_counter()
        serving.embed(samples[name][0])
        rate = tokens[name] / (time.perf_counter() - start)
        dense = run_rag_eval(serving, collection, questions[name], mode="dense")["metrics"]
        results["unirag"][name] = {"embed_tokens_per_s": rate, "dense": dense}
        rows.append(["unirag (bf16, int4 decode copy)", name, "1 (its own)", f"{rate:,.0f}",
                     *(f"{100 * dense[m]:.1f}" for m in ("hit@1", "hit@3", "hit@5", "mrr"))])
    unirag_decode = measure(lambda: run_unirag(serving, prompt, args.new_tokens), args.repeats)
    unirag_agree = greedy_agreement(serving, yardstick, AGREEMENT_PROMPTS, args.new_tokens)
    results["unirag"]["decode"] = unirag_decode
    results["unirag"]["agreement"] = unirag_agree

    with tempfile.TemporaryDirectory() as folder:
        for kind in args.types.split(","):
            start = time.perf_counter()
            path = export_gguf(yardstick, Path(folder) / f"unirag-{kind}.gguf", kind, source_gguf("smollm2-135m"))
            entry = {"export_s": time.perf_counter() - start, "bytes": path.stat().st_size}
            embedder = LlamaCppEmbedder(path, serving.tokenizer.eos_token, args.threads)
            for name, collection in collections.items():
                texts, stored, n = samples[name]
                start = time.perf_counter()
                vectors = embedder.embed(texts)
                rate = tokens[name] / (time.perf_counter() - start)
                cosine = (vectors * stored).sum(1) / np.linalg.norm(stored, axis=1)
                dense = run_rag_eval(serving, collection, questions[name], retriever=queries_by(embedder, collection, serving.query_prefix))["metrics"]
                entry[name] = {"chunks": n, "cosine_min": float(cosine.min()), "cosine_mean": float(cosine.mean()),
                               "embed_tokens_per_s": rate, "dense": dense}
                rows.append([f"llama.cpp, {kind} GGUF", name, f"{cosine.mean():.5f} (min {cosine.min():.5f})",
                             f"{rate:,.0f}", *(f"{100 * dense[m]:.1f}" for m in ("hit@1", "hit@3", "hit@5", "mrr"))])
            del embedder
            generator = LlamaCppGenerator(path, args.threads)
            entry["decode"] = measure(lambda: run_llama_cpp(generator.llm, prompt, args.new_tokens), args.repeats)
            entry["agreement"] = greedy_agreement(generator, yardstick, AGREEMENT_PROMPTS, args.new_tokens)
            results["gguf"][kind] = entry
            del generator

    print(markdown_table(("engine", "set", "cosine to unirag's vectors", "embed tokens/s",
                          "dense hit@1", "hit@3", "hit@5", "MRR"), rows))
    decode_rows = [["unirag (bf16, int4 decode copy)", "", f"{unirag_decode['decode_tokens_per_s']:.1f}", "1.00x",
                    f"{unirag_agree['token_share_before_first_difference']:.0%}",
                    f"{unirag_agree['identical_share'] * unirag_agree['prompts']:.0f}/{unirag_agree['prompts']}"]]
    for kind, entry in results["gguf"].items():
        rate = entry["decode"]["decode_tokens_per_s"]
        decode_rows.append([f"llama.cpp, {kind} GGUF", f"{entry['bytes'] / 1e6:.0f} MB", f"{rate:.1f}",
                            f"{rate / unirag_decode['decode_tokens_per_s']:.2f}x",
                            f"{entry['agreement']['token_share_before_first_difference']:.0%}",
                            f"{entry['agreement']['identical_share'] * entry['agreement']['prompts']:.0f}/{entry['agreement']['prompts']}"])
    print(markdown_table(("engine", "file", "decode tokens/s", "vs unirag", "tokens before the first difference "
                          "from fp32", "identical answers"), decode_rows))
    print(f"wrote {write_json(args.output, {'benchmark': 'gguf_serving', 'model': serving.name, 'machine': machine_info(), 'new_tokens': args.new_tokens, 'results': results})}")


if __name__ == "__main__":
    main()
