"""What this CPU can do fast, so precision defaults follow measurements, not hopes.

bf16 autocast only pays off where the CPU has native bf16 matrix instructions (AMX or
AVX512-BF16). Without them (e.g. AMD Zen 3 with AVX2 only) PyTorch emulates bf16 and the same
forward pass gets slower, so "auto" keeps fp32 there. See docs/PERFORMANCE.md.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported only when a model is used, so `unirag --help` stays fast
    import torch


@functools.cache
def cpu_flags() -> frozenset[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_fast_bf16() -> bool:
    flags = cpu_flags()
    return "amx_bf16" in flags or "avx512_bf16" in flags


DEVICES = ("auto", "cpu", "cuda")


def resolve_device(device: "str | torch.device | None" = "auto") -> "torch.device":
    """Map "auto" | "cpu" | "cuda" (or "cuda:N") to a torch device: "auto" (and None) picks CUDA
    where `torch.cuda.is_available()`, else the CPU; "cuda" without a usable GPU is refused."""
    import torch

    from unirag.errors import UniragError

    if isinstance(device, torch.device):
        device = str(device)
    name = (device or "auto").strip().lower()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cpu":
        return torch.device("cpu")
    if name == "cuda" or name.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise UniragError(f"--device {device}: no CUDA GPU is available to this torch build; "
                              "use --device cpu or auto")
        try:
            chosen = torch.device(name)
        except RuntimeError:
            raise UniragError(f"--device {device}: write cuda or cuda:N") from None
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise UniragError(f"--device {device}: only {torch.cuda.device_count()} CUDA device(s)")
        return chosen
    raise UniragError(f"unknown device {device!r}; use {', '.join(DEVICES)} (or cuda:N)")


def resolve_precision(precision: str, device: "torch.device") -> "torch.dtype | None":
    """Map "auto" | "fp32" | "bf16" to the autocast dtype (None means plain fp32)."""
    import torch

    if precision not in ("auto", "fp32", "bf16"):
        from unirag.errors import UniragError

        raise UniragError(f"unknown precision {precision!r}; use auto, fp32 or bf16")
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    return torch.bfloat16 if cpu_has_fast_bf16() else None


# glibc malloc parameters (mallopt): M_TRIM_THRESHOLD=-1, M_TOP_PAD=-2, M_MMAP_THRESHOLD=-3
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


@functools.cache
def tune_allocator() -> bool:
    """Keep freed tensor memory in the process instead of returning it to the kernel.

    By default glibc serves every allocation above ~128 KB-32 MB with a fresh mmap and unmaps it
    on free, so each new activation tensor page-faults its memory in again, and a training forward
    pass on CPU ran several times slower that way (benchmarks/cpu_basics.py measures it).
    Raising the mmap threshold and never trimming lets the heap reuse pages. The price is memory
    kept after a peak: a serving process embedding a batch held more (benchmarks/memory.py;
    docs/PERFORMANCE.md section 4), so only `train()` calls this, not an import.
    Setting UNIRAG_NO_MALLOC_TUNING turns it off. Returns True if applied.
    """
    import ctypes
    import ctypes.util
    import os

    if os.environ.get("UNIRAG_NO_MALLOC_TUNING") or not ctypes.util.find_library("c"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)  # the largest value glibc accepts
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
        ok &= libc.mallopt(_M_TOP_PAD, 64 * 1024 * 1024)
        return bool(ok)
    except (OSError, AttributeError):
        return False
