"""Loss building blocks for UniMAE and GEM, in plain torch.

UniMAE ("Decoder-Only LLMs can be Masked Auto-Encoders", ACL 2025) trains one
decoder-only LLM to be both a generator and an embedder with two losses:

- MAR (masked auto-regression): corrupt the input with [MASK] tokens and keep the
  ordinary next-token loss on the ORIGINAL tokens, so generation is not forgotten
  while the model learns to read around holes.
- MRC (masked reconstruction): a tiny, throw-away decoder must rebuild every
  token x_i from the EOS hidden state h_eos plus a random subset of the other
  tokens, which forces h_eos to summarise the whole text (that is the embedding).

GEM inserts k summary tokens into the text and blocks attention so that text
after them can only see the text before them *through* the summary tokens; the
ordinary next-token loss then teaches the summary tokens to compress.

Conventions: batches are right-padded, attention_mask is 1 on real tokens, the
last real token of each row is EOS. Label tensors are aligned with input ids
(not shifted); the losses shift internally, as Hugging Face does. A `generator`
must live on the same device as the tensors (torch.rand needs that).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE_INDEX = -100

__all__ = [
    "IGNORE_INDEX",
    "last_real_index",
    "mar_corrupt",
    "mar_loss",
    "anchor_loss",
    "eos_hidden",
    "mrc_attention_mask",
    "TinyDecoder",
    "mrc_loss",
    "simcse_loss",
    "gem_insert",
    "gem_attention_mask",
    "gem_labels",
    "gem_embedding",
]


# -----------------------------------------------------------------------------
# shared helpers


def last_real_index(attention_mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of the last real token of each row (the EOS).

    Found from the mask, not a token id, so it works whatever the tokenizer's EOS
    is; argmax of (mask * position) also tolerates left padding."""
    pos = torch.arange(attention_mask.shape[1], device=attention_mask.device)
    return (attention_mask.long() * pos).argmax(dim=1)


def _shifted_ce(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token CE: position t predicts labels[t+1]; IGNORE_INDEX targets skipped."""
    logits = logits[:, :-1].float()
    labels = labels[:, 1:]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX)


# -----------------------------------------------------------------------------
# UniMAE: MAR


def mar_corrupt(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    mask_token_id: int,
    p_mar: float,
    protect_ids: Sequence[int] = (),
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Replace each real token by mask_token_id with probability p_mar.

    The EOS (last real token) is never masked: its hidden state is the embedding,
    so it must always see the real EOS. Padding and protect_ids (e.g. BOS, chat
    markers) are kept too. Returns (corrupted_ids, masked_positions) where the
    second is a bool tensor shaped like input_ids."""
    real = attention_mask.bool()
    if p_mar <= 0:
        return input_ids.clone(), torch.zeros_like(real)
    eos = torch.zeros_like(real)
    eos[torch.arange(real.shape[0], device=real.device), last_real_index(attention_mask)] = True
    candidate = real & ~eos
    if len(protect_ids) > 0:
        protect = torch.as_tensor(list(protect_ids), dtype=input_ids.dtype, device=input_ids.device)
        candidate &= ~torch.isin(input_ids, protect)
    draw = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    masked = candidate & (draw < p_mar)
    return input_ids.masked_fill(masked, mask_token_id), masked


def mar_loss(logits: torch.Tensor, labels_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Causal LM loss on the ORIGINAL ids: logits at t (from corrupted input)
    predict labels_ids[t+1]. Mean over real target tokens; padding targets ignored."""
    labels = labels_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)
    return _shifted_ce(logits, labels)


def anchor_loss(logits: torch.Tensor, teacher_logits: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) of the next-token distributions, mean over real positions.

    Pulls the adapted model back towards the frozen base model on clean text: the direct way to
    keep generation while the embedding objectives move the weights."""
    teacher = F.log_softmax(teacher_logits.float(), dim=-1)
    student = F.log_softmax(logits.float(), dim=-1)
    kl = (teacher.exp() * (teacher - student)).sum(-1)
    real = attention_mask.to(kl.dtype)
    return (kl * real).sum() / real.sum().clamp(min=1)


def eos_hidden(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """(B, N, D) -> (B, D): the hidden state at each row's last real position (EOS)."""
    idx = last_real_index(attention_mask)
    return hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), idx]


# -----------------------------------------------------------------------------
# UniMAE: MRC


def mrc_attention_mask(
    attention_mask: torch.Tensor, p_mrc: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Bool (B, N, N+1), True = query i may attend to key j.

    Key column 0 is h_eos and is always visible (it is the only route to the
    text as a whole, and it keeps every row non-empty, so no NaNs). Key column
    j+1 is token j: visible with probability p_mrc (fresh per example, per query),
    never to its own query (i == j, or the task is copying), never if padding."""
    B, N = attention_mask.shape
    dev = attention_mask.device
    keep = torch.rand((B, N, N), generator=generator, device=dev) < p_mrc
    keep &= ~torch.eye(N, dtype=torch.bool, device=dev)
    keep &= attention_mask.bool()[:, None, :]
    eos_col = torch.ones((B, N, 1), dtype=torch.bool, device=dev)
    return torch.cat([eos_col, keep], dim=2)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.type_as(x) * self.weight


class CrossBlock(nn.Module):
    """Pre-norm block: queries cross-attend to a fixed key/value stream, then an MLP."""

    def __init__(self, dim: int, num_heads: int, dropout: float = 0.0):
        super().__init__()
        assert dim % num_heads == 0, "hidden_size must be divisible by num_heads"
        self.num_heads, self.dropout = num_heads, dropout
        self.norm_q, self.norm_kv, self.norm_mlp = RMSNorm(dim), RMSNorm(dim), RMSNorm(dim)
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.o_proj = nn.Linear(dim, dim, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim, bias=False), nn.GELU(), nn.Linear(4 * dim, dim, bias=False), nn.Dropout(dropout)
        )

    def forward(self, x: torch.Tensor, kv: torch.Tensor, add_mask: torch.Tensor) -> torch.Tensor:
        B, N, D = x.shape
        M, h = kv.shape[1], self.num_heads
        kv = self.norm_kv(kv)
        q = self.q_proj(self.norm_q(x)).view(B, N, h, D // h).transpose(1, 2)
        k = self.k_proj(kv).view(B, M, h, D // h).transpose(1, 2)
        v = self.v_proj(kv).view(B, M, h, D // h).transpose(1, 2)
        # softmax(QK^T/sqrt(d) + M) V; add_mask is (B, 1, N, N+1), broadcast over heads
        a = F.scaled_dot_product_attention(
            q, k, v, attn_mask=add_mask, dropout_p=self.dropout if self.training else 0.0
        )
        x = x + self.o_proj(a.transpose(1, 2).reshape(B, N, D))
        return x + self.mlp(self.norm_mlp(x))


class TinyDecoder(nn.Module):
    """The MRC decoder: rebuilds x_1..x_N from h_eos and a random subset of the
    other tokens. Newly initialised and discarded after training.

    Layout (RetroMAE-style "enhanced decoding"):
      queries H1 = [h_eos + p_1, ..., h_eos + p_N]       (query i predicts x_i)
      keys    H2 = [h_eos, e_x1 + p_1, ..., e_xN + p_N]   (N+1 keys)
    Key 0 carries NO position embedding: h_eos is a summary of the whole text,
    not a token at a place. Row p_0 of the (max_positions+1)-row table is
    therefore unused; token i (1-based) uses p_i. With num_layers > 1 the
    queries are refined layer by layer while H2 stays fixed (cross-attention).

    If lm_head_weight (the LLM's output embeddings, (V, D)) is given, the head is
    tied to it but frozen: it is kept as a detached, non-persistent buffer, so it
    gets no gradient and is not saved in this module's state_dict."""

    def __init__(
        self,
        hidden_size: int,
        vocab_size: int,
        num_heads: int,
        max_positions: int,
        num_layers: int = 1,
        lm_head_weight: torch.Tensor | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.max_positions = max_positions
        self.pos = nn.Embedding(max_positions + 1, hidden_size)
        nn.init.normal_(self.pos.weight, std=0.02)
        self.blocks = nn.ModuleList(CrossBlock(hidden_size, num_heads, dropout) for _ in range(num_layers))
        self.norm = RMSNorm(hidden_size)
        if lm_head_weight is not None:
            assert lm_head_weight.shape == (vocab_size, hidden_size), "lm_head_weight must be (vocab, hidden)"
            self.register_buffer("lm_head_weight", lm_head_weight.detach(), persistent=False)
            self.lm_head = None
        else:
            self.lm_head_weight = None
            self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(
        self,
        h_eos: torch.Tensor,
        token_embeds: torch.Tensor,
        attention_mask: torch.Tensor,
        p_mrc: float,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        B, N, D = token_embeds.shape
        assert N <= self.max_positions, f"sequence length {N} > max_positions {self.max_positions}"
        token_embeds = token_embeds.to(h_eos.dtype)
        p = self.pos(torch.arange(1, N + 1, device=h_eos.device)).to(h_eos.dtype)  # (N, D): p_1..p_N
        x = h_eos[:, None, :] + p[None]  # H1 (B, N, D)
        kv = torch.cat([h_eos[:, None, :], token_embeds + p[None]], dim=1)  # H2 (B, N+1, D)
        allowed = mrc_attention_mask(attention_mask, p_mrc, generator)
        add_mask = torch.zeros(allowed.shape, dtype=x.dtype, device=x.device)
        add_mask = add_mask.masked_fill(~allowed, float("-inf"))[:, None]  # key 0 always open -> no NaN rows
        for block in self.blocks:
            x = block(x, kv, add_mask)
        x = self.norm(x)
        if self.lm_head is not None:
            return self.lm_head(x)
        return F.linear(x, self.lm_head_weight.to(x.dtype))


def mrc_loss(logits: torch.Tensor, target_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """CE of query i against x_i (no shift), mean over real tokens.

    The EOS position is NOT a target: EOS is the same token in every row, so
    "reconstructing" it only teaches the decoder where the text ends, not what
    it says. (EOS stays visible as a key.) Padding is never a target."""
    targets = target_ids.masked_fill(attention_mask == 0, IGNORE_INDEX)
    rows = torch.arange(targets.shape[0], device=targets.device)
    targets[rows, last_real_index(attention_mask)] = IGNORE_INDEX
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX)


# -----------------------------------------------------------------------------
# SimCSE


def simcse_loss(emb_a: torch.Tensor, emb_b: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """Unsupervised SimCSE (InfoNCE with in-batch negatives).

    emb_a and emb_b are two dropout views of the same batch; row i of a must
    pick row i of b among all rows of b. One-directional a -> b, as in the
    original SimCSE."""
    a = F.normalize(emb_a.float(), dim=-1)
    b = F.normalize(emb_b.float(), dim=-1)
    sim = a @ b.T / temperature
    return F.cross_entropy(sim, torch.arange(a.shape[0], device=a.device))


# -----------------------------------------------------------------------------
# GEM


def gem_insert(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    summary_token_ids: Sequence[int],
    generator: torch.Generator | None = None,
    min_prefix: int = 1,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Insert k summary tokens at a random place inside each row's real text.

    Row b with n real tokens (EOS last) gets them at index s in
    [min(min_prefix, n-1), n-1]: at least min_prefix text tokens before (when the
    row is long enough) and always at least the EOS after. The rest shifts right
    by k; rows stay right-padded (padding slots keep the input's pad ids).
    Returns (new_ids (B, N+k), new_attention_mask (B, N+k), summary_start (B,))."""
    B, N = input_ids.shape
    k = len(summary_token_ids)
    dev = input_ids.device
    n_real = attention_mask.long().sum(dim=1)
    high = n_real - 1
    low = torch.minimum(torch.full_like(high, min_prefix), high).clamp(min=0)
    span = (high - low + 1).clamp(min=1)  # number of allowed insertion points
    u = torch.rand((B,), generator=generator, device=dev)
    start = low + torch.minimum((u * span).long(), span - 1)

    j = torch.arange(N + k, device=dev)[None, :].expand(B, -1)  # output positions
    s = start[:, None]
    in_summary = (j >= s) & (j < s + k)
    src = torch.where(j < s, j, j - k).clamp(0, N - 1)
    new_ids = torch.gather(input_ids, 1, src)
    if k > 0:
        summary = torch.as_tensor(list(summary_token_ids), dtype=input_ids.dtype, device=dev)
        new_ids = torch.where(in_summary, summary[(j - s).clamp(0, k - 1)], new_ids)
    new_mask = (j < (n_real + k)[:, None]).to(attention_mask.dtype)
    return new_ids, new_mask, start


def gem_attention_mask(
    attention_mask: torch.Tensor,
    summary_start: torch.Tensor,
    k: int,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Additive (B, 1, L, L) mask for GEM: 0 = may attend, finfo(dtype).min = blocked.

    With s = summary_start and e = s + k:
      - text before the summary (q < s): plain causal;
      - summary token q in [s, e): the text before it (keys < s) and itself,
        not the other summary tokens;
      - text after the summary (q >= e): causal, but only keys >= s, i.e. the
        summary tokens and later text; the prefix is reachable only through
        the summary tokens, which is what forces them to compress it;
      - padding keys are blocked; the diagonal is always open so no row is empty.

    Use with transformers 5.x (checked on 5.23, Llama): pass it directly as
    `model(input_ids=..., attention_mask=gem_mask)`. A 4D tensor is returned
    as-is by masking_utils (no causal/padding mask is added on top, so this mask
    must carry both, as it does) and is added to the scores by both the "eager"
    and "sdpa" attention implementations (they agree in the tests). The dtype
    must match the model's compute dtype (sdpa requires it), e.g.
    dtype=torch.bfloat16 for a bf16 model. Keep the default position_ids
    (0..L-1): summary tokens take real positions. flash_attention_2 cannot take
    a custom mask; use eager or sdpa."""
    B, L = attention_mask.shape
    dev = attention_mask.device
    q = torch.arange(L, device=dev)[None, :, None]  # (1, L, 1)
    kv = torch.arange(L, device=dev)[None, None, :]  # (1, 1, L)
    s = summary_start.to(dev)[:, None, None]  # (B, 1, 1)
    e = s + k
    allowed = kv <= q
    in_summary = (q >= s) & (q < e)
    allowed = torch.where(in_summary, (kv < s) | (kv == q), allowed)
    allowed = torch.where(q >= e, allowed & (kv >= s), allowed)
    allowed &= attention_mask.bool()[:, None, :]
    allowed |= q == kv
    mask = torch.zeros((B, L, L), dtype=dtype, device=dev)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]


def gem_labels(
    new_ids: torch.Tensor, new_attention_mask: torch.Tensor, summary_start: torch.Tensor, k: int
) -> torch.Tensor:
    """Labels for GEM's next-token loss, aligned with new_ids (HF convention:
    the loss shifts; pass as `labels=` to a HF causal LM or use mar_loss-style CE).

    Summary tokens are inputs, never targets (-100): predicting them would
    only teach a fixed pattern. The token right after the last summary token
    IS a target, predicted from the last summary token: that is the signal that
    makes the summary carry the prefix. Padding is -100."""
    L = new_ids.shape[1]
    j = torch.arange(L, device=new_ids.device)[None, :]
    s = summary_start.to(new_ids.device)[:, None]
    ignore = (new_attention_mask == 0) | ((j >= s) & (j < s + k))
    return new_ids.masked_fill(ignore, IGNORE_INDEX)


def gem_embedding(hidden_states: torch.Tensor, summary_start: torch.Tensor, k: int) -> torch.Tensor:
    """(B, L, D) -> (B, D): last-layer hidden state at the last summary token."""
    idx = summary_start.to(hidden_states.device) + k - 1
    return hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), idx]
