"""The precision the model's passes run in: the autocast context, and decoder weights held in
bf16. Pure helpers behind `UniModel` (unirag/model/unimodel.py); which precision a machine gets by
default is `hardware.resolve_precision`.
"""

from __future__ import annotations

import contextlib

import torch


def autocast(device: torch.device, dtype: torch.dtype | None):
    """The context a pass runs in: autocast to `dtype` on `device`, or nothing when `dtype` is None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def hold_linear_weights_in_bf16(module: torch.nn.Module) -> None:
    """Convert the weights of every `nn.Linear` under `module` to bf16 in place (the module is changed).

    Autocast casts them to bf16 in every matmul anyway, so outputs under autocast are unchanged,
    but a matmul reads half the bytes and no per-token re-cast is needed.
    """
    for sub in module.modules():
        if isinstance(sub, torch.nn.Linear):
            sub.weight.data = bf16_in_place(sub.weight.data)


def bf16_in_place(weight: torch.Tensor) -> torch.Tensor:
    """`weight` (fp32) as bf16, written into the first half of its own buffer.

    A new bf16 tensor would add half the weights' size at load, and the fp32 buffers would not
    be given back: loaded weights live in one mapping of the safetensors file (copy-on-write
    where the adapter was merged in place) that stays resident while any tensor points into it.
    Reusing the buffer keeps the peak at the fp32 model's (docs/PERFORMANCE.md section 4).
    """
    if weight.dtype != torch.float32 or not weight.is_contiguous():
        return weight.to(torch.bfloat16)
    values = weight.to(torch.bfloat16)
    held = torch.empty(0, dtype=torch.bfloat16, device=weight.device)
    held.set_(weight.untyped_storage(), weight.storage_offset() * 2, weight.shape)  # offset in bf16 elements
    held.copy_(values)
    return held
