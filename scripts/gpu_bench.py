"""A short ingest / ask / decode benchmark on one device, for `scripts/gpu_check.sh`.

Why: the GPU machine has no network, so this needs nothing it would download: the real model
where it is already in the cache (UNIRAG_CACHE), else the tiny random Llama of the tests
(timings of the code paths, not of the real model; the output says which). It ingests a small
folder (the shipped sample docs by default) into a fresh embedded database, asks a few
questions with the default and the naive flow (`benchmarks/ask_latency.py`'s), and times greedy
decoding, printing every figure with the device's name.

    python scripts/gpu_bench.py [--device cuda] [--docs FOLDER] [--questions 5] [--model NAME]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

QUESTIONS = ["How does unirag keep a crashed ingest from leaving duplicates?", "What does the chat app show as sources?",
             "How are chunks retrieved for a question?", "Which files can be ingested?",
             "How is a changed file re-indexed?", "What does hybrid retrieval fuse?"]

TINY_DOCS = {"loops.md": "# Loops\n\nLoops can return values with break. A loop runs again.\n",
             "cats.md": "# Cats\n\nThe cat sat on the mat. Cats sleep a lot.\n",
             "rust.md": "# Rust\n\nRust has ownership and borrowing. A value has one owner.\n"}
TINY_QUESTIONS = ["How does a loop return a value?", "Where did the cat sit?", "Who owns a value?",
                  "What does a loop do?", "What has ownership?", "Do cats sleep?"]


def load_model(name: str, device: str):
    """(model, what it is): the real model if it loads offline, else the tests' tiny Llama."""
    from unirag import UniModel

    if name != "tiny":
        try:
            return UniModel.load(name, device=device), name
        except Exception as err:  # not in the cache: no network to fetch it
            print(f"gpu_bench: {name} not loadable offline ({type(err).__name__}: {str(err)[:120]}); "
                  "timing the tiny random Llama instead")
    from tiny import save_tiny_model

    folder = save_tiny_model(Path(tempfile.mkdtemp(prefix="gpu-bench-tiny-")))
    return UniModel.load(str(folder), device=device), "tiny random Llama (tests/tiny.py)"


def device_name(model) -> str:
    import torch

    if model.device.type == "cuda":
        return f"{torch.cuda.get_device_name(model.device)} ({model.autocast_dtype or 'fp32'})"
    return f"CPU, {torch.get_num_threads()} threads ({model.autocast_dtype or 'fp32'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--docs", default=str(ROOT / "unirag" / "sample_docs"))
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--model", default="smollm2-135m", help="a registry name, a folder, or 'tiny'")
    args = parser.parse_args()

    from dataclasses import replace

    from ask_latency import naive_settings, one_ask
    from unirag.answer.ask import AskSettings
    from unirag.retrieval import store
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest

    started = time.perf_counter()
    model, what = load_model(args.model, args.device)
    print(f"device: {device_name(model)}; model: {what}; loaded in {time.perf_counter() - started:.1f} s")

    db = Path(tempfile.mkdtemp(prefix="gpu-bench-db-"))
    collection = store.open_collection(store.connect(db), "bench", model, create=True)
    # the tiny model's window is 256 tokens: short chunks and answers, so that a prompt fits
    small = model.context_window < 1024
    docs = Path(args.docs)
    if small:  # and short files with short names: the shipped docs' labels alone would fill it
        docs = Path(tempfile.mkdtemp(prefix="gpu-bench-docs-"))
        for name, text in TINY_DOCS.items():
            (docs / name).write_text(text)
    summary = ingest(model, collection, docs, settings=ChunkSettings(48, 8) if small else ChunkSettings())
    print(f"ingest {docs}: {summary.chunks_written} chunks, {summary.tokens:,} tokens in "
          f"{summary.seconds:.1f} s ({summary.tokens / max(summary.embed_seconds, 1e-9):,.0f} tokens/s embedded)")

    flows = {"default": AskSettings(), "naive": naive_settings()}
    if small:
        flows = {label: replace(flow, max_new_tokens=8) for label, flow in flows.items()}
    questions = (TINY_QUESTIONS if small else QUESTIONS)[:max(args.questions, 1)]
    cold = one_ask(model, collection, questions[0], flows["default"])
    print(f"first ask in process (default): first text {cold['first_text_s']:.2f} s, total {cold['total_s']:.2f} s")
    runs = {label: [] for label in flows}
    for i, question in enumerate(questions):
        for label in (list(flows) if i % 2 == 0 else list(flows)[::-1]):
            runs[label].append(one_ask(model, collection, question, flows[label]))
    for label, rows in runs.items():
        stages = {s: statistics.median(r["stages"][s] for r in rows) for s in rows[0]["stages"]}
        print(f"ask {label} ({len(rows)} questions) on {device_name(model)}: p50 first text "
              f"{statistics.median(r['first_text_s'] for r in rows):.3f} s, p50 total "
              f"{statistics.median(r['total_s'] for r in rows):.3f} s; p50 stages "
              + ", ".join(f"{s} {v:.3f}" for s, v in stages.items()))

    prompt = [{"role": "user", "content": "Write a long story about a robot who learns to paint."}]
    model.generate(prompt, max_new_tokens=8)  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        n = sum(1 for _ in model.generate_ids(model.prompt_ids(prompt), max_new_tokens=8 if small else 64))
        times.append((time.perf_counter() - t0, n))
    seconds, tokens = min(times)
    print(f"decode on {device_name(model)}: {tokens} greedy tokens in {seconds:.3f} s "
          f"({tokens / max(seconds, 1e-9):.1f} tokens/s, best of 3)")


if __name__ == "__main__":
    main()
