"""Generated tokens' matmuls on a 4-bit or 8-bit copy of the weights.

Why: a generated token multiplies one row by every weight matrix, so a decode step costs the time
the matmul kernels take to read the weights. PyTorch's weight-only kernels read fewer bytes than
bf16 and run one-row products faster on a CPU with VNNI (benchmarks/gemv_kernels.py):
- int4 (`torch._weight_int4pack_mm_for_cpu`): groups of 32 weights along the input, each group
  with a bf16 scale and offset, a quarter of bf16's bytes plus the scales;
- int8 (`torch._weight_int8pack_mm`): one bf16 scale per output row, half of bf16's bytes.
On many rows (prompts, embedding batches) they are slower than bf16 and they change the numbers,
so a copy serves only the one-row steps of generated tokens. Embeddings and prompt prefills run
on the bf16 weights exactly as before, and a prompt whose prefix comes from an embedding pass's
cache still gets the same first token. The price is the copy's bytes (docs/PERFORMANCE.md
measures memory, speed, greedy agreement and perplexity).

The int4 grid is the one llama.cpp's Q4_1 uses (per group: 16 evenly spaced levels from its
smallest to its largest weight), so weights that came from a Q4_1 file and were not changed
since are reproduced up to the bf16 rounding of the scales. An adapter merged into them moves
weights off that grid; re-quantizing rounds most of a small change back onto the base weight, so
the copy's generated tokens lie between the base model's and the merged model's.

How: every bias-free `nn.Linear` of the decoder keeps its module and parameters (state dicts,
adapters, export and `embed` see nothing new); its instance `forward` is wrapped to take the
copy's path while `DecodeCopy.steps()` is active and the input is one row. A Llama-architecture
decoder's generated tokens skip those wrappers: unirag/model/fast_decode/lean_step.py reads copies of a layer's
q/k/v and gate/up stacked into one matrix each (`DecodeCopy.rows(q, k, v)`).
"""

from __future__ import annotations

import contextlib
import types

import torch

# The kernels take activations and scales in one dtype; bf16 is their fast path (VNNI dot
# products). fp32 activations ran an order of magnitude slower, so CPUs without native bf16
# keep the bf16/fp32 weights (`UniModel` enables a copy only with bf16-held weights).
ACTIVATION_DTYPE = torch.bfloat16
FORMATS = ("int4", "int8")
INT4_GROUP = 32  # weights per scale and offset along a row (Q4_1's block)
INT4_ROWS_MULTIPLE = 16  # the int4 packing needs whole blocks of 16 output rows
QUANTIZE_BLOCK_ROWS = 1024  # rows quantized at a time: a multiple of the int4 packing's row blocks
REFINE_TOP = 16  # leading logits recomputed exactly per token (DecodeCopy.head_logits)
# The LM head's copy that full logits come from is int8 in either format: every logit of the
# distribution a sampled token is drawn from comes from it (only the leading ones are recomputed),
# and an int4 head cost far more wikitext-2 perplexity than int4 decoder layers did
# (docs/PERFORMANCE.md).
HEAD_FORMAT = "int8"
# Greedy decoding needs only the best token: an int4 copy of the head (fewer bytes than the int8
# head's, read once per token) shortlists GREEDY_CANDIDATES tokens, and the head's own rows pick
# among them (DecodeCopy.greedy_token).
GREEDY_HEAD_FORMAT = "int4"
GREEDY_CANDIDATES = 64


def supported(device: torch.device, fmt: str = "int8") -> bool:
    """Whether this torch build has the weight-only kernel of `fmt` for `device` (CPU only)."""
    kernel = {"int8": "_weight_int8pack_mm", "int4": "_weight_int4pack_mm_for_cpu"}[fmt]
    return device.type == "cpu" and hasattr(torch, kernel)


# ---------------------------------------------------------------------------------------- int8

def quantize_rows(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output row: (int8 weight [out, in], bf16 scale [out]) with
    weight ~= int8 * scale[:, None]."""
    quantized = torch.empty(weight.shape, dtype=torch.int8, device=weight.device)
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


class Int8Rows:
    """One weight matrix's int8 copy: weight ~= quantized * scale[:, None]."""

    def __init__(self, quantized: torch.Tensor, scale: torch.Tensor):
        self.quantized, self.scale = quantized, scale

    @classmethod
    def of(cls, weight: torch.Tensor) -> "Int8Rows":
        return cls(*quantize_rows(weight))

    @property
    def out_features(self) -> int:
        return self.quantized.shape[0]

    @property
    def nbytes(self) -> int:
        return self.quantized.numel() + self.scale.numel() * self.scale.element_size()

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """`x @ weight.T` on the int8 copy, in bf16 (through the module's `int8_matmul`)."""
        return int8_matmul(x, self.quantized, self.scale)


# ---------------------------------------------------------------------------------------- int4

def int4_fits(weight: torch.Tensor) -> bool:
    """Whether the int4 kernel takes a matrix of this shape (whole groups, whole row blocks)."""
    out_features, in_features = weight.shape
    return in_features % INT4_GROUP == 0 and out_features % INT4_ROWS_MULTIPLE == 0


def quantize_int4(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric int4 per group of INT4_GROUP weights along each row.

    Returns (levels, scale, offset): levels int32 [out, in] in 0..15, scale and offset bf16
    [out, in / INT4_GROUP], with weight ~= (levels - 8) * scale + offset, the kernel's formula.
    The levels span each group from its smallest weight (level 0) to about its largest (15)."""
    out_features, in_features = weight.shape
    groups = in_features // INT4_GROUP
    levels = torch.empty(weight.shape, dtype=torch.int32, device=weight.device)
    scale = torch.empty(out_features, groups, dtype=ACTIVATION_DTYPE, device=weight.device)
    offset = torch.empty_like(scale)
    for start in range(0, out_features, QUANTIZE_BLOCK_ROWS):
        block = weight[start:start + QUANTIZE_BLOCK_ROWS].detach().float().view(-1, groups, INT4_GROUP)
        low, high = block.amin(-1), block.amax(-1)
        # The kernel reads scale and offset in bf16: round them first (the scale up by a hair, so
        # the group's extremes stay within 0..15) and pick levels against the rounded values.
        step = ((high - low).clamp(min=1e-8) / 15 * (1 + 2 ** -7)).to(ACTIVATION_DTYPE)
        middle = (low + 8 * step.float()).to(ACTIVATION_DTYPE)
        found = torch.round((block - middle.float()[..., None]) / step.float()[..., None]) + 8
        end = start + len(step)
        levels[start:end] = found.clamp(0, 15).view(-1, in_features).to(torch.int32)
        scale[start:end], offset[start:end] = step, middle
    return levels, scale, offset


class Int4Rows:
    """One weight matrix's int4 copy in the kernel's packed layout: `packed` uint8 [out, in/2],
    `scales` bf16 [in / INT4_GROUP, out, 2] (each group's scale and offset)."""

    def __init__(self, packed: torch.Tensor, scales: torch.Tensor):
        self.packed, self.scales = packed, scales

    @classmethod
    def of(cls, weight: torch.Tensor) -> "Int4Rows":
        out_features, in_features = weight.shape
        packed = torch.empty(out_features, in_features // 2, dtype=torch.uint8, device=weight.device)
        # contiguous: the kernel reads the scales by position and gives wrong sums on a strided view
        scales = torch.empty(in_features // INT4_GROUP, out_features, 2, dtype=ACTIVATION_DTYPE, device=weight.device)
        # Quantized and packed one block of rows at a time, into the final buffers: a whole
        # matrix's int32 levels (4 bytes a weight; 113 MB for the LM head) would set the
        # process's peak. Blocks of whole row tiles pack as the whole matrix would (tested).
        for start in range(0, out_features, QUANTIZE_BLOCK_ROWS):
            levels, scale, offset = quantize_int4(weight[start:start + QUANTIZE_BLOCK_ROWS])
            end = start + len(levels)
            packed[start:end] = torch._convert_weight_to_int4pack_for_cpu(levels, 1)
            scales[:, start:end, 0], scales[:, start:end, 1] = scale.t(), offset.t()
        return cls(packed, scales)

    @property
    def out_features(self) -> int:
        return self.scales.shape[1]

    @property
    def nbytes(self) -> int:
        return self.packed.numel() * self.packed.element_size() + self.scales.numel() * self.scales.element_size()

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """`x @ weight.T` on the int4 copy, in bf16."""
        rows = x.reshape(-1, x.shape[-1]).to(ACTIVATION_DTYPE)
        out = torch._weight_int4pack_mm_for_cpu(rows, self.packed, INT4_GROUP, self.scales)
        return out.view(*x.shape[:-1], self.out_features)


def quantized_rows(weight: torch.Tensor, fmt: str) -> Int8Rows | Int4Rows:
    """A copy of `weight` in `fmt`; int8 where int4 is asked for but the shape does not fit."""
    if fmt == "int4" and int4_fits(weight):
        return Int4Rows.of(weight)
    return Int8Rows.of(weight)


# ------------------------------------------------------------------------------------- the copy

class DecodeCopy:
    """Quantized copies of a decoder's linear weights and of an LM head, used inside `steps()`.

    Copies are made on first use: a layer's own for the wrapped forward, a stack of sibling
    layers' rows for the lean step (`rows(q, k, v)`), so a Llama decoder served by the lean step
    holds only the stacks. Build it with `for_decoder`: several UniModels over one module share
    one copy per format.
    """

    @classmethod
    def for_decoder(cls, decoder: torch.nn.Module, lm_head: torch.nn.Linear, fmt: str = "int4") -> "DecodeCopy":
        """The decoder's copy in `fmt`, made on first ask."""
        return decoder.__dict__.get("_unirag_decode_copies", {}).get(fmt) or cls(decoder, lm_head, fmt)

    def __init__(self, decoder: torch.nn.Module, lm_head: torch.nn.Linear, fmt: str = "int4"):
        if fmt not in FORMATS:
            raise ValueError(f"decode copy format {fmt!r}; one of {', '.join(FORMATS)}")
        self.format = fmt
        self.active = False
        self.any_rows = False
        self._copies: dict[tuple[torch.nn.Linear, ...], Int8Rows | Int4Rows] = {}
        self._covered = {module for module in decoder.modules()
                         if isinstance(module, torch.nn.Linear) and module.bias is None}
        # the decoder's copies by format, which its wrapped layers consult; the newest of a format serves
        copies = decoder.__dict__.setdefault("_unirag_decode_copies", {})
        copies[fmt] = self
        for linear in self._covered:
            _wrap(linear, copies)
        self.exact_head = lm_head.weight  # the head's own weights (no copy): see head_logits
        self._head: Int8Rows | Int4Rows | None = None
        self._greedy_head: Int8Rows | Int4Rows | None = None

    def covers(self, linear: torch.nn.Module) -> bool:
        """Whether `linear` is one of the decoder's layers this copy serves."""
        return linear in self._covered

    def rows(self, *linears: torch.nn.Linear) -> Int8Rows | Int4Rows:
        """One copy of the layers' weights stacked by rows (they read the same input), made on
        first ask: one kernel call computes all their outputs side by side, each as its own
        layer's copy would (scales are per row or per group within a row)."""
        if not linears or not all(self.covers(linear) for linear in linears):
            raise KeyError("rows() takes layers of the decoder this copy was made for")
        if linears not in self._copies:
            weight = linears[0].weight if len(linears) == 1 else torch.cat([linear.weight for linear in linears])
            self._copies[linears] = quantized_rows(weight, self.format)
        return self._copies[linears]

    @property
    def head(self) -> Int8Rows | Int4Rows:
        """The LM head's copy (in HEAD_FORMAT), made on first use: at load it would add its
        bytes and the pages of the tied embedding it reads to the peak that loading already sets."""
        if self._head is None:
            self._head = quantized_rows(self.exact_head, HEAD_FORMAT)
        return self._head

    @property
    def greedy_head(self) -> Int8Rows | Int4Rows:
        """The head copy greedy decoding shortlists with: in GREEDY_HEAD_FORMAT for an int4 copy
        (made on first use, like `head`), the int8 `head` itself for an int8 copy."""
        if self.format != GREEDY_HEAD_FORMAT:
            return self.head
        if self._greedy_head is None:
            self._greedy_head = quantized_rows(self.exact_head, GREEDY_HEAD_FORMAT)
        return self._greedy_head

    @property
    def nbytes(self) -> int:
        """Bytes of the copies made so far (the heads' included) and their scales."""
        heads = [head for head in (self._head, self._greedy_head) if head is not None]
        return sum(rows.nbytes for rows in [*self._copies.values(), *heads])

    @contextlib.contextmanager
    def steps(self, any_rows: bool = False):
        """Run one-row linear layers on the copies (a generated token's step); with `any_rows`,
        every linear layer (to measure the quantized weights, e.g. their perplexity)."""
        self.active, self.any_rows = True, any_rows
        try:
            yield
        finally:
            self.active, self.any_rows = False, False

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head's logits for hidden vectors (..., hidden) as fp32: every logit from the
        copy, then the REFINE_TOP highest recomputed from the head's own weights.

        Why: the kernels return bf16, whose step near a typical top logit (about 20) is 0.125, so
        near-ties between the leading tokens were decided by rounding and greedy text parted from
        the unquantized model's early. The leading tokens' exact logits cost REFINE_TOP rows of
        the head, and which token wins among them is then decided as without the copy."""
        logits = self.head.matmul(hidden).float()
        top = logits.topk(min(REFINE_TOP, logits.shape[-1]), dim=-1).indices
        rows = self.exact_head[top].float()  # (..., REFINE_TOP, hidden)
        with torch.autocast(hidden.device.type, enabled=False):  # exact: fp32 even inside autocast
            exact = (rows @ hidden.float().unsqueeze(-1)).squeeze(-1)
        return logits.scatter(-1, top, exact)

    def greedy_token(self, hidden: torch.Tensor) -> int:
        """The greedy next token for one hidden vector (hidden,): the GREEDY_CANDIDATES tokens
        with the highest logits on `greedy_head`, then the one whose logit from the head's own
        weights is highest.

        Why: greedy decoding reads the whole head once per token for one argmax. The shortlist
        reads an int4 copy, smaller than the int8 head, and since the winner is chosen on exact logits, the
        token is the unquantized head's argmax whenever that is on the shortlist (a logit
        soft-cap, being monotonic, changes no argmax). Sampling and perplexity need every logit
        and keep `head_logits`."""
        proposals = self.greedy_head.matmul(hidden.view(1, -1)).float().view(-1)
        top = proposals.topk(min(GREEDY_CANDIDATES, proposals.shape[0])).indices
        rows = self.exact_head[top].float()  # (GREEDY_CANDIDATES, hidden)
        with torch.autocast(hidden.device.type, enabled=False):  # exact: fp32 even inside autocast
            exact = rows @ hidden.float().view(-1)
        return int(top[exact.argmax()])


def _wrap(linear: torch.nn.Linear, copies: dict[str, DecodeCopy]) -> None:
    """Route `linear`'s one-row inputs to whichever of the decoder's copies is in `steps()`
    (once per layer: copies of other formats share the wrapper)."""
    if getattr(linear, "_unirag_plain_forward", None) is not None:
        return
    plain = linear._unirag_plain_forward = linear.forward

    def forward(self_linear, x):
        for copy in copies.values():
            if copy.active and (copy.any_rows or x.shape[:-1].numel() == 1):
                return copy.rows(self_linear).matmul(x)
        return plain(x)

    linear.forward = types.MethodType(forward, linear)
