"""The rerank's and the evidence's passes on int8 matmuls (issue 91, lever 1): time and right answers.

Why: after retrieval, an answer is almost all scoring passes (15 candidates for the rerank, tens
of units for the evidence), and their time is the decoder's matmuls over many rows at once. The
CPUs here have VNNI: an int8 x int8 matmul (`torch._int_mm`) runs more multiply-adds a cycle than
a bf16 one. Here every bias-free linear of the decoder gets an int8 copy of its weight (one
scale per output row) and, inside `W8A8.active()`, multiplies passes of at least MIN_ROWS rows
(one-row decode steps and short embeddings keep bf16) with their activations quantized per row.
The "int8" variant asks exactly as "default" does with it active; the two alternate, question by
question, in one process (as `benchmarks/ask_latency.py` does its variants).

    python research/int8_scoring.py --db runs/dev/db --set rust=QUESTIONS.jsonl ... [--n 20]
        [--output runs/bench/int8_scoring.json]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

import torch

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "benchmarks")]
from ask_latency import one_ask  # noqa: E402
from bench_common import machine_info, markdown_table, write_json  # noqa: E402

MIN_ROWS = 32  # fewer rows than this (a decode step, a question's embedding) stay on bf16


class W8A8:
    """int8 copies of a decoder's bias-free linear weights, used by their forwards while active."""

    def __init__(self, decoder: torch.nn.Module):
        self.on = False
        for module in decoder.modules():
            if isinstance(module, torch.nn.Linear) and module.bias is None:
                weight = module.weight.detach().float()
                scale = weight.abs().amax(dim=1).clamp(min=1e-8) / 127
                quantized = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8).t().contiguous()
                module.forward = self._forward(module.forward, quantized, scale)

    def _forward(self, bf16_forward, quantized: torch.Tensor, scale: torch.Tensor):
        def forward(x: torch.Tensor) -> torch.Tensor:
            if not self.on or x.shape[:-1].numel() < MIN_ROWS:
                return bf16_forward(x)
            rows = x.reshape(-1, x.shape[-1]).float()
            row_scale = rows.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 127
            products = torch._int_mm(torch.round(rows / row_scale).to(torch.int8), quantized)
            return (products.float() * row_scale * scale).to(x.dtype).view(*x.shape[:-1], quantized.shape[1])
        return forward

    @contextlib.contextmanager
    def active(self):
        self.on = True
        try:
            yield
        finally:
            self.on = False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--set", action="append", required=True, help="COLLECTION=QUESTIONS.jsonl")
    parser.add_argument("--n", type=int, default=20, help="the first N questions of each set")
    parser.add_argument("--output", default="runs/bench/int8_scoring.json")
    args = parser.parse_args()

    from unirag import UniModel
    from unirag.answer.ask import AskSettings
    from unirag.evaluation.rag import load_questions
    from unirag.retrieval.store import connect, open_collection

    model = UniModel.load()
    w8a8 = W8A8(model.decoder)
    settings = AskSettings()
    client = connect(args.db, must_exist=True)
    rows, runs = [], {}
    for given in args.set:
        name, _, path = given.partition("=")
        collection = open_collection(client, name, model)
        questions = load_questions(path)[:args.n]
        one_ask(model, collection, questions[0], settings)  # warm: the BM25 index, first calls
        got: dict[str, list[dict]] = {"default": [], "int8": []}
        for i, question in enumerate(questions):
            for label in (("default", "int8") if i % 2 == 0 else ("int8", "default")):
                with w8a8.active() if label == "int8" else contextlib.nullcontext():
                    got[label].append(one_ask(model, collection, question, settings))
        same = sum(a["answer"] == b["answer"] for a, b in zip(got["default"], got["int8"]))
        for label, asked in got.items():
            rows.append([name, label, len(asked), statistics.median(r["total_s"] for r in asked),
                         statistics.median(r["stages"]["rerank"] for r in asked),
                         statistics.median(r["stages"]["evidence"] for r in asked),
                         sum(bool(r["key_correct"]) for r in asked), same])
        runs[name] = got
    headers = ("set", "variant", "questions", "p50 total s", "p50 rerank s", "p50 evidence s", "right",
               "answers the same")
    print(markdown_table(headers, rows))
    print(f"wrote {write_json(args.output, {'machine': machine_info(), 'rows': rows, 'runs': runs})}")


if __name__ == "__main__":
    main()
