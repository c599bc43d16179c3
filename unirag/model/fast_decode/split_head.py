"""The LM head for one generated token, its vocabulary rows split over CPU threads.

Why: for one token the head is a matrix-vector product over the whole vocabulary (SmolLM2:
49152 x 576, 113 MB in fp32, a third of the bytes a decode step reads), and on the 2-core test
machine PyTorch's fp32 kernel for it left the second core idle. Viewing the rows as a batch of
blocks and running the same one-row product per block as a `bmm` puts the blocks on torch's own
threads: faster, with the same logits bit for bit (each block meets the kernel as a one-row
product, as the whole matrix did; tested). Measured by benchmarks/lm_head.py (docs/PERFORMANCE.md,
section 2, has the numbers); a Python thread pool gained nothing inside a decode step,
where torch's worker threads still held the cores.
"""

from __future__ import annotations

import torch

MAX_PARTS = 8
# Blocks are whole multiples of ALIGN rows, so each row meets the kernel's blocking as in the
# full matrix (a tail block of another size may round differently).
ALIGN = 64


def _parts_for(rows: int, wanted: int) -> int:
    """The most blocks, at most `wanted`, that cut `rows` into equal multiples of ALIGN (1: none)."""
    return next((p for p in range(wanted, 1, -1) if rows % (p * ALIGN) == 0), 1)


def head_logits(head: torch.nn.Linear, vector: torch.Tensor, parts: int | None = None) -> torch.Tensor:
    """`head(vector)` for a 1-D `vector`, as a batch of `parts` row blocks (default: torch's
    thread count, at most MAX_PARTS). Only a bias-free contiguous fp32 head on the CPU is split
    (the kernel measured single-threaded there); anything else runs `head(vector)` as is."""
    weight = head.weight
    if (vector.dim() != 1 or head.bias is not None or weight.device.type != "cpu"
            or weight.dtype != torch.float32 or not weight.is_contiguous()):
        return head(vector)
    rows = weight.shape[0]
    parts = _parts_for(rows, min(torch.get_num_threads(), MAX_PARTS) if parts is None else parts)
    if parts < 2:
        return head(vector)
    blocks = weight.view(parts, rows // parts, weight.shape[1])
    return torch.bmm(vector.expand(parts, 1, -1), blocks.transpose(1, 2)).reshape(rows)
