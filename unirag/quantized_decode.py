"""Generated tokens' matmuls on an int8 copy of the weights.

Why: a generated token multiplies one row by every weight matrix, so a decode step costs the time
the matmul kernels take to read the weights. PyTorch's weight-only int8 kernel
(`torch._weight_int8pack_mm`: int8 weights, one bf16 scale per output row) reads half the bytes
of bf16 and runs one-row products faster than bf16 `F.linear` on a CPU with VNNI (measured by
benchmarks/gemv_kernels.py). On many rows (prompts, embedding batches) it is slower than bf16,
and it changes the numbers; so the int8 copy serves only the one-row steps of generated tokens.
Embeddings and prompt prefills run on the bf16 weights exactly as before, and a prompt whose
prefix comes from an embedding pass's cache still gets the same first token. The price is the
copy: one byte per weight of the decoder's linear layers and the LM head (docs/PERFORMANCE.md
measures memory, speed, greedy agreement and perplexity).

How: every `nn.Linear` of the decoder keeps its module and parameters (state dicts, adapters,
export and `embed` see nothing new); its instance `forward` is wrapped to take the int8 path
while `Int8Decode.steps()` is active and the input is one row. A Llama-architecture decoder's
generated tokens skip those wrappers: unirag/lean_step.py reads the same copies directly, a
layer's q/k/v and gate/up as one matrix each (`Int8Decode.fused`).
"""

from __future__ import annotations

import contextlib
import types

import torch

# The kernel takes activations and scales in one dtype; bf16 is its fast path (VNNI dot
# products). fp32 activations ran an order of magnitude slower, so CPUs without native bf16
# keep the bf16/fp32 weights (`UniModel` enables this only with bf16-held weights).
ACTIVATION_DTYPE = torch.bfloat16
QUANTIZE_BLOCK_ROWS = 1024
REFINE_TOP = 16  # leading logits recomputed exactly per token (Int8Decode.head_logits)


def quantize_rows(weight: torch.Tensor, quantized: torch.Tensor | None = None,
                  scale: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output row: (int8 weight [out, in], bf16 scale [out]) with
    weight ~= int8 * scale[:, None], written into `quantized` and `scale` when given."""
    if quantized is None:
        quantized = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
    if scale is None:
        scale = torch.empty(weight.shape[0], dtype=ACTIVATION_DTYPE, device=weight.device)
    # Block by block, so the fp32 temporaries stay small: a whole LM head at once would add
    # several times its size to the process's peak memory at load.
    for start in range(0, weight.shape[0], QUANTIZE_BLOCK_ROWS):
        block = weight[start:start + QUANTIZE_BLOCK_ROWS].detach().float()
        # The kernel reads the scale in bf16: round it first (up by a hair, so the row's largest
        # weight still fits in 127 steps) and quantize against the rounded value, so each weight
        # is off by at most half a step.
        rows = (block.abs().amax(dim=1).clamp(min=1e-8) / 127 * (1 + 2 ** -7)).to(ACTIVATION_DTYPE)
        quantized[start:start + len(block)] = torch.round(block / rows.float()[:, None]).clamp(-127, 127)
        scale[start:start + len(block)] = rows
    return quantized, scale


def int8_matmul(x: torch.Tensor, quantized: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """`x @ (quantized * scale).T` for x of shape (..., in), in bf16."""
    rows = x.reshape(-1, x.shape[-1]).to(ACTIVATION_DTYPE)
    return torch._weight_int8pack_mm(rows, quantized, scale).view(*x.shape[:-1], quantized.shape[0])


def supported(device: torch.device) -> bool:
    """Whether this torch build has the weight-only int8 kernel for `device` (CPU only here)."""
    return device.type == "cpu" and hasattr(torch, "_weight_int8pack_mm")


class Int8Rows:
    """One weight matrix's int8 copy: weight ~= quantized * scale[:, None]."""

    def __init__(self, quantized: torch.Tensor, scale: torch.Tensor):
        self.quantized, self.scale = quantized, scale

    @classmethod
    def of(cls, weight: torch.Tensor) -> "Int8Rows":
        return cls(*quantize_rows(weight))

    @property
    def nbytes(self) -> int:
        return self.quantized.numel() + self.scale.numel() * self.scale.element_size()

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """`x @ weight.T` on the int8 copy, in bf16 (through the module's `int8_matmul`)."""
        return int8_matmul(x, self.quantized, self.scale)


class Int8Decode:
    """Int8 copies of a decoder's linear weights and of an LM head, used inside `steps()`.

    Build it with `for_decoder`: several UniModels over one module share one copy.
    """

    @classmethod
    def for_decoder(cls, decoder: torch.nn.Module, lm_head: torch.nn.Linear) -> "Int8Decode":
        """The decoder's int8 copy, made on first use (the wrapped layers point at it)."""
        existing = getattr(decoder, "_unirag_int8", None)
        if existing is None:
            existing = cls(decoder, lm_head)
            decoder._unirag_int8 = existing
        return existing

    def __init__(self, decoder: torch.nn.Module, lm_head: torch.nn.Linear):
        self.active = False
        self.any_rows = False
        self.rows: dict[torch.nn.Linear, Int8Rows] = {}  # each wrapped layer's copy
        # Sibling layers reading inputs of one width (a layer's q/k/v/o, its gate/up) are
        # quantized into one buffer, in registration order, each keeping a view of its rows:
        # `fused` then serves adjacent siblings as one matrix with no second copy in memory.
        self._stacks: dict[torch.nn.Linear, tuple[Int8Rows, int, int]] = {}
        for parent in decoder.modules():
            by_width: dict[int, list[torch.nn.Linear]] = {}
            for child in parent.children():
                if isinstance(child, torch.nn.Linear) and child.bias is None:
                    by_width.setdefault(child.in_features, []).append(child)
            for siblings in by_width.values():
                self._quantize_stacked(siblings)
        for linear in self.rows:
            self._wrap(linear)
        self.exact_head = lm_head.weight  # the head's own weights (no copy): see head_logits
        self._head: Int8Rows | None = None

    @property
    def head(self) -> Int8Rows:
        """The LM head's int8 copy, made on first use: at load it would add its bytes and the
        pages of the tied embedding it reads to the peak that loading already sets."""
        if self._head is None:
            self._head = Int8Rows.of(self.exact_head)
        return self._head

    @property
    def nbytes(self) -> int:
        """Bytes of the int8 copies and their scales (fused copies share their layers' bytes)."""
        return sum(rows.nbytes for rows in self.rows.values()) + self.head.nbytes

    def _quantize_stacked(self, linears: list[torch.nn.Linear]) -> None:
        """Quantize `linears` (same input width) into one buffer; each gets a view of its rows."""
        total = sum(linear.out_features for linear in linears)
        weight = linears[0].weight
        stack = Int8Rows(torch.empty(total, weight.shape[1], dtype=torch.int8, device=weight.device),
                         torch.empty(total, dtype=ACTIVATION_DTYPE, device=weight.device))
        begin = 0
        for linear in linears:
            end = begin + linear.out_features
            quantize_rows(linear.weight, stack.quantized[begin:end], stack.scale[begin:end])
            self.rows[linear] = Int8Rows(stack.quantized[begin:end], stack.scale[begin:end])
            self._stacks[linear] = (stack, begin, end)
            begin = end

    def _wrap(self, linear: torch.nn.Linear) -> None:
        plain = linear.forward
        switch = self

        def forward(self_linear, x):
            if switch.active and (switch.any_rows or x.shape[:-1].numel() == 1):
                return switch.rows[self_linear].matmul(x)
            return plain(x)

        linear.forward = types.MethodType(forward, linear)

    def fused(self, linears: list[torch.nn.Linear]) -> Int8Rows | None:
        """One int8 matrix for sibling layers that read the same input (a layer's q/k/v, or its
        gate/up), as a view of the buffer they were quantized into; None where they are not
        adjacent there (registered apart or in another order).

        Why: one kernel call instead of several (each call launches its threads). Scales are per
        row, so each output is computed exactly as by its own layer's copy, and a view costs no
        memory.
        """
        places = [self._stacks.get(linear) for linear in linears]
        if not all(places) or any(a[0] is not b[0] or a[2] != b[1] for a, b in zip(places, places[1:])):
            return None
        stack, begin, end = places[0][0], places[0][1], places[-1][2]
        return Int8Rows(stack.quantized[begin:end], stack.scale[begin:end])

    @contextlib.contextmanager
    def steps(self, any_rows: bool = False):
        """Run one-row linear layers on the int8 copies (a generated token's step); with
        `any_rows`, every linear layer (to measure the int8 weights, e.g. their perplexity)."""
        self.active, self.any_rows = True, any_rows
        try:
            yield
        finally:
            self.active, self.any_rows = False, False

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head's logits for hidden vectors (..., hidden) as fp32: every logit from the
        int8 copy, then the REFINE_TOP highest recomputed from the head's own weights.

        Why: the kernel returns bf16, whose step near a typical top logit (about 20) is 0.125, so
        near-ties between the leading tokens were decided by rounding and greedy text parted from
        the unquantized model's early. The leading tokens' exact logits cost REFINE_TOP rows of
        the head, and which token wins among them is then decided as without the copy."""
        logits = self.head.matmul(hidden).float()
        top = logits.topk(min(REFINE_TOP, logits.shape[-1]), dim=-1).indices
        rows = self.exact_head[top].float()  # (..., REFINE_TOP, hidden)
        with torch.autocast(hidden.device.type, enabled=False):  # exact: fp32 even inside autocast
            exact = (rows @ hidden.float().unsqueeze(-1)).squeeze(-1)
        return logits.scatter(-1, top, exact)
