"""The lean step compiled: `native_step.cpp` runs one generated token through every layer in C++.

Why: with the quantized copies the matmul kernels take less than half of a generated token's
time; the rest went to the Python step's forty-odd small operations per layer, each mostly the
cost of calling it. The C++ step makes the same kernel calls and does the elementwise work in
loops, in the same order and dtypes, so its hidden states are the Python step's bit for bit
(its source says how; tests/model/test_native_step.py checks it).

It is built on first use with `torch.utils.cpp_extension` (a C++ compiler, Python's headers and
the `ninja` package), once per machine: torch caches the build (in ~/.cache/torch_extensions, or
$TORCH_EXTENSIONS_DIR) and rebuilds only when the source changes. `scripts/setup.sh` builds it at
install. Where it cannot be built, generated tokens take the Python step, with one warning;
UNIRAG_NATIVE_STEP=0, or `UniModel.load(native_step=False)`, keeps the Python step.
"""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path
from typing import Any

import torch

from unirag.model.fast_decode.quantized_decode import INT4_GROUP, Int4Rows, Int8Rows

log = logging.getLogger(__name__)

NAME = "unirag_native_step"
SOURCE = Path(__file__).with_name("native_step.cpp")
# No floating-point contraction: a fused multiply-add rounds once where ATen's separate multiply
# and add round twice, and the step would no longer be the Python step's bit for bit.
CFLAGS = ["-O3", "-ffp-contract=off"]


def wanted() -> bool:
    """Whether the environment allows the native step (UNIRAG_NATIVE_STEP=0 does not)."""
    return os.environ.get("UNIRAG_NATIVE_STEP", "1").strip().lower() not in ("0", "false", "no", "off")


@functools.cache
def extension() -> Any | None:
    """The compiled module (built or loaded from torch's cache), or None where it cannot be
    built; the reason is logged once per process."""
    try:
        from torch.utils.cpp_extension import _get_build_directory, load

        if not (Path(_get_build_directory(NAME, verbose=False)) / f"{NAME}.so").exists():
            # a pause of up to a minute, once per machine, would otherwise look like a hang
            log.warning("unirag: compiling the native decode step, once per machine (under a minute)")
        return load(name=NAME, sources=[str(SOURCE)], extra_cflags=CFLAGS, verbose=False)
    except Exception as error:  # no compiler, headers or ninja: the Python step serves
        log.warning("unirag: generated tokens take the Python lean step (the native step did not build: %s)",
                    _reason(error))
        return None


def _reason(error: Exception) -> str:
    """One line of a failed build's message that says why: the last naming an error or something
    not found (a compiler's "fatal error: Python.h: ...", a shell's "c++: not found"), not the
    echoed command lines or ninja's own summary."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    telling = [line for line in lines if ("error" in line.lower() or "not found" in line.lower())
               and not line.startswith(("ninja:", "FAILED:"))]
    return (telling[-1] if telling else lines[0] if lines else type(error).__name__)[:300]


def _rows(rows: Int8Rows | Int4Rows) -> tuple[list[torch.Tensor], bool]:
    if isinstance(rows, Int4Rows):
        return [rows.packed, rows.scales], True
    return [rows.quantized, rows.scale], False


def build(lean) -> Any | None:
    """A compiled step over `lean`'s weights (a LeanStep; the tensors are shared, not copied),
    or None where the extension cannot be built or the weights are not as it takes them."""
    if not wanted():
        return None
    module = extension()
    if module is None:
        return None
    norms = [lean.norm[0], *(norm[0] for layer in lean.layers for norm in (layer.input_norm, layer.post_norm))]
    if any(tensor.dtype != torch.float32 or not tensor.is_contiguous() for tensor in (lean.embed, *norms)):
        log.info("generated tokens take the Python lean step: the native step reads contiguous fp32 norms and "
                 "embedding")
        return None
    step = module.Step(lean.embed, lean.norm[0], float(lean.norm[1]), lean.heads, lean.kv_heads,
                       lean.head_dim, float(lean.scaling), INT4_GROUP)
    for layer in lean.layers:
        step.add_layer(layer.input_norm[0], float(layer.input_norm[1]), layer.post_norm[0],
                       float(layer.post_norm[1]), *_rows(layer.qkv), *_rows(layer.o), *_rows(layer.gate_up),
                       *_rows(layer.down))
    return step


if __name__ == "__main__":  # scripts/setup.sh: build it now, not on the first answer
    print("unirag: native decode step", "built" if extension() is not None else "not built (Python step serves)")
