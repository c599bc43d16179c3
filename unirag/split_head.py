"""The LM head for one generated token, its vocabulary rows split over CPU threads.

Why: for one token the head is a matrix-vector product over the whole vocabulary (SmolLM2:
49152 x 576, 113 MB in fp32, a third of the bytes a decode step reads). On the 2-core test
machine PyTorch's fp32 kernel for it ran on one thread: 7.2 ms (15.8 GB/s) with one thread or
two, while a plain read of memory reaches 36-41 GB/s. Each logit is its own dot product, so
computing blocks of rows on separate threads gives the same logits bit for bit (tested, with
blocks aligned to 64 rows) in
3.8 ms there (docs/PERFORMANCE.md, section 2).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

MAX_PARTS = 8
# Blocks start at multiples of ALIGN rows, so each row meets the kernel's blocking as in the
# full matrix: with arbitrary cuts (e.g. 502 + 501 rows) the last bits of some logits differed.
ALIGN = 64
_pools: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    if workers not in _pools:
        _pools[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="unirag-head")
    return _pools[workers]


def _linear(vector: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    with torch.inference_mode():  # grad mode is per thread: the caller's does not reach here
        return F.linear(vector, weight, bias)


def head_logits(head: torch.nn.Linear, vector: torch.Tensor, parts: int | None = None) -> torch.Tensor:
    """`head(vector)` for a 1-D `vector`, computed in `parts` row blocks on as many threads
    (default: torch's thread count, at most MAX_PARTS). Only fp32 heads on the CPU are split
    (the kernel measured single-threaded); anything else runs `head(vector)` as is."""
    parts = min(torch.get_num_threads(), MAX_PARTS) if parts is None else parts
    weight = head.weight
    if parts < 2 or vector.dim() != 1 or weight.device.type != "cpu" or weight.dtype != torch.float32:
        return head(vector)
    rows = weight.shape[0]
    cuts = sorted({min(rows, round(rows * i / parts / ALIGN) * ALIGN) for i in range(parts + 1)} | {0, rows})
    sizes = [b - a for a, b in zip(cuts, cuts[1:]) if b > a]
    if len(sizes) < 2:
        return head(vector)
    weights = weight.split(sizes)
    biases = head.bias.split(sizes) if head.bias is not None else [None] * len(weights)
    pending = [_pool(len(weights) - 1).submit(_linear, vector, w, b) for w, b in zip(weights[1:], biases[1:])]
    first = _linear(vector, weights[0], biases[0])
    return torch.cat([first, *(p.result() for p in pending)])
