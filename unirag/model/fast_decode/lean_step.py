"""A lean decode step for Llama-architecture decoders: one generated token through the layer
weights' quantized copies, with no transformers module in between.

Why: the quantized copies (unirag/model/fast_decode/quantized_decode.py) made the matmul kernels cheap enough that
the rest of a generated token's step weighs as much: transformers' per-module Python, the
DynamicCache growing every layer's keys and values by concatenation, the attention mask built
each step, and autocast casting the whole cache to bf16 in every layer. One query token needs
none of that: it attends to every cached position, and its keys and values can be written into
tensors sized once for the whole generation.

What it computes: the operations of transformers' `LlamaModel.forward` as `UniModel` runs a
generated token (bf16 autocast, bf16-held weights, linear layers wrapped onto the copy), in the
same order and dtypes, so the logits are that path's (up to the attention, last item):
- RMSNorm and the residual stream in fp32, each linear layer on bf16 activations (its copy
  returns bf16), RoPE in fp32 with the cos/sin of the model's own rotary module (so any rope
  scaling the config asks for), attention over the bf16-rounded queries, keys and values with
  grouped-query heads;
- q/k/v and gate/up as one quantized matmul each (rows stacked; scales are per row or per group
  within a row, so every output is the one its own layer's copy gives), so a layer runs 4 kernel
  calls instead of 7;
- keys and values rounded to bf16 once, as autocast hands them to SDPA, and held in fp32: one
  query's attention is two small matrix products, which run faster in fp32 over a cache that
  needs no cast each step than SDPA's kernel does (built for many queries; its cost grew
  several times faster with the cache's length). This is the one place the step computes
  otherwise: SDPA's CPU kernel rounds the attention weights to bf16 before weighting the
  values, which these fp32 products do not, so the step's attention is the more exact of the
  two and its logits match the forward's to rounding, not bit for bit.

Anything it does not reproduce (attention or MLP biases, sliding windows, soft-capping, another
architecture or attention implementation, hooks on the modules) is refused once, when
`LeanStep.for_decoder` is asked, and `UniModel` keeps transformers' forward for those models.

Where it can be built, `native_step.py` runs these same operations from C++ (bit for bit the
values `_python_hidden` gives), without their per-operation Python and dispatch cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from unirag.model.fast_decode.quantized_decode import ACTIVATION_DTYPE, DecodeCopy, Int4Rows, Int8Rows


def unsupported_reason(decoder: torch.nn.Module, copy: DecodeCopy) -> str | None:
    """Why the lean step cannot stand in for `decoder`'s forward on generated tokens, or None.

    Checked by module class and config, not by model name: a checkpoint of another name with the
    Llama modules and a plain config is served; anything the step would compute differently is
    refused rather than approximated.
    """
    from transformers.models.llama import modeling_llama as llama

    if not isinstance(decoder, llama.LlamaModel):
        return f"{type(decoder).__name__} is not a LlamaModel"
    return _config_reason(decoder.config) or _modules_reason(decoder, copy)


def _config_reason(config) -> str | None:
    """What in a LlamaModel's config the step does not compute (None: nothing)."""
    if config._attn_implementation != "sdpa":
        return f"attention implementation {config._attn_implementation!r} (the step reproduces sdpa)"
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        return "attention or MLP biases"
    if config.hidden_act not in ("silu", "swish"):
        return f"activation {config.hidden_act!r}"
    layer_types = getattr(config, "layer_types", None) or ()
    if getattr(config, "sliding_window", None) or any(kind != "full_attention" for kind in layer_types):
        return "sliding-window layers"  # a DynamicCache would also keep only the window
    if getattr(config, "attn_logit_softcapping", None) or getattr(config, "final_logit_softcapping", None):
        return "logit soft-capping"
    if getattr(config, "pretraining_tp", 1) != 1 or getattr(config, "attention_dropout", 0.0):
        return "tensor-parallel slicing or attention dropout"
    return None


def _modules_reason(decoder: torch.nn.Module, copy: DecodeCopy) -> str | None:
    """What in a LlamaModel's modules the step would skip or misread (None: nothing): modules
    swapped for others, linear layers the copy does not serve, forward hooks."""
    from transformers.models.llama import modeling_llama as llama

    layers = decoder.layers[: decoder.config.num_hidden_layers]
    if len(layers) < decoder.config.num_hidden_layers:
        return "fewer layers than the config names"
    for layer in layers:
        attention, mlp = layer.self_attn, layer.mlp
        norms = (layer.input_layernorm, layer.post_attention_layernorm)
        if not (isinstance(layer, llama.LlamaDecoderLayer) and isinstance(attention, llama.LlamaAttention)
                and isinstance(mlp, llama.LlamaMLP) and all(isinstance(n, llama.LlamaRMSNorm) for n in norms)):
            return "a layer made of other modules than Llama's"
        linears = (attention.q_proj, attention.k_proj, attention.v_proj, attention.o_proj,
                   mlp.gate_proj, mlp.up_proj, mlp.down_proj)
        if not all(copy.covers(linear) for linear in linears):
            return "a linear layer the decode copy does not serve"
    if not isinstance(decoder.norm, llama.LlamaRMSNorm) or type(decoder.embed_tokens) is not torch.nn.Embedding:
        return "a final norm or embedding other than Llama's"
    hooked = [name for name, module in decoder.named_modules() if module._forward_hooks or module._forward_pre_hooks]
    if hooked:
        return f"forward hooks on {hooked[0]!r}"  # the step would skip what they do
    return None


@dataclass
class _Layer:
    """One decoder layer's weights as the step reads them."""

    input_norm: tuple[torch.Tensor, float]  # (weight, epsilon)
    post_norm: tuple[torch.Tensor, float]
    qkv: Int8Rows | Int4Rows
    o: Int8Rows | Int4Rows
    gate_up: Int8Rows | Int4Rows
    down: Int8Rows | Int4Rows


class KVCache:
    """Every layer's keys and values in tensors sized once for a whole generation.

    `keys[i]`/`values[i]` are layer i's, shaped (kv_heads, capacity, head_dim): bf16-rounded
    values held in fp32 (twice bf16's bytes, so that attention casts nothing per step); the
    first `length` positions are filled. A new token's keys are written
    in place, where a DynamicCache would concatenate (copy) every layer's cache at every token.
    """

    def __init__(self, layers: int, kv_heads: int, head_dim: int, capacity: int):
        shape = (layers, kv_heads, capacity, head_dim)
        self.keys = torch.empty(shape, dtype=torch.float32)
        self.values = torch.empty(shape, dtype=torch.float32)
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def fill_from(self, cache: Any) -> "KVCache":
        """Copy a transformers DynamicCache's positions (one row) in. Under autocast its keys are
        fp32 after RoPE and SDPA reads them cast to bf16; the same rounding happens here, once."""
        length = cache.get_seq_length()
        if length > self.capacity:
            raise ValueError(f"a cache of {length} positions does not fit in {self.capacity}")
        for index, layer in enumerate(cache.layers):
            self.keys[index, :, :length] = layer.keys[0].to(ACTIVATION_DTYPE)
            self.values[index, :, :length] = layer.values[0].to(ACTIVATION_DTYPE)
        self.length = length
        return self


_UNBUILT = object()  # LeanStep.native before the first generated token


class LeanStep:
    """The decode step for one Llama-architecture decoder and its quantized copy (module docstring).

    It holds no generation's state (that is the `KVCache`), so one serves every generation on the
    decoder; steps still have to be serialised like any other pass on the shared weights.
    """

    @classmethod
    def for_decoder(cls, decoder: torch.nn.Module, copy: DecodeCopy,
                    native: bool = True) -> tuple["LeanStep | None", str | None]:
        """(the step, None), or (None, why not) where `unsupported_reason` refuses the decoder.
        With `native`, tokens run through the compiled step where it builds."""
        reason = unsupported_reason(decoder, copy)
        return (None, reason) if reason else (cls(decoder, copy, native), None)

    def __init__(self, decoder: torch.nn.Module, copy: DecodeCopy, native: bool = True):
        config = decoder.config
        self.embed = decoder.embed_tokens.weight
        self.rotary = decoder.rotary_emb
        self.norm = (decoder.norm.weight, decoder.norm.variance_epsilon)
        first = decoder.layers[0].self_attn
        self.head_dim, self.scaling = first.head_dim, first.scaling
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.layers = [self._layer(layer, copy) for layer in decoder.layers[: config.num_hidden_layers]]
        # the same operations compiled (native_step.py), built on the first generated token:
        # a process that only embeds never builds it
        self.native: Any = _UNBUILT if native else None

    @staticmethod
    def _layer(layer: torch.nn.Module, copy: DecodeCopy) -> _Layer:
        attention, mlp = layer.self_attn, layer.mlp
        return _Layer(
            input_norm=(layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon),
            post_norm=(layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon),
            qkv=copy.rows(attention.q_proj, attention.k_proj, attention.v_proj),
            o=copy.rows(attention.o_proj),
            gate_up=copy.rows(mlp.gate_proj, mlp.up_proj),
            down=copy.rows(mlp.down_proj))

    def new_cache(self, cache: Any, new_tokens: int) -> KVCache:
        """A KVCache holding `cache`'s positions (the prompt's DynamicCache) and room for
        `new_tokens` more."""
        capacity = cache.get_seq_length() + new_tokens
        return KVCache(len(self.layers), self.kv_heads, self.head_dim, capacity).fill_from(cache)

    def hidden(self, token_id: int, cache: KVCache) -> torch.Tensor:
        """The final norm's output (1, 1, hidden) in fp32 for `token_id` at position
        `cache.length`, whose keys and values it appends. It needs no autocast context: every
        cast that autocast makes in transformers' forward is written out here."""
        if cache.length >= cache.capacity:
            raise ValueError(f"the KV cache is full ({cache.capacity} positions)")
        position = cache.length
        cos, sin = self._rotation(position)
        if self.native is _UNBUILT:
            from unirag.model.fast_decode import native_step
            self.native = native_step.build(self)
        if self.native is not None:
            out = self.native.hidden(token_id, position, cache.keys, cache.values, cos, sin)
        else:
            out = self._python_hidden(token_id, position, cos, sin, cache)
        cache.length = position + 1
        return out

    def _rotation(self, position: int) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE's cos and sin (head_dim,) at `position` from the model's own rotary module, sin
        with its first half negated: rotate_half(q) * sin == (q's halves swapped) * that sin,
        one flip per layer instead of a slice, a negation and a concatenation."""
        cos, sin = self.rotary(self.embed[:1], torch.tensor([[position]]))
        cos, sin = cos.view(-1), sin.view(-1)
        half = self.head_dim // 2
        return cos, torch.cat((-sin[:half], sin[half:]))

    def _python_hidden(self, token_id: int, position: int, cos: torch.Tensor, sin: torch.Tensor,
                       cache: KVCache) -> torch.Tensor:
        """`hidden` in PyTorch operations (what native_step.cpp computes in C++)."""
        x = self.embed[token_id].view(1, -1)
        cos, sin = cos.view(1, -1), sin.view(1, -1)
        for index, layer in enumerate(self.layers):
            x = x + self._attention(index, layer, rms_norm(x, *layer.input_norm), cos, sin, cache)
            x = x + self._mlp(layer, rms_norm(x, *layer.post_norm))
        return rms_norm(x, *self.norm).view(1, 1, -1)

    def _attention(self, index: int, layer: _Layer, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                   cache: KVCache) -> torch.Tensor:
        """Self-attention of the new token over every cached position and itself (bf16 out);
        `sin` with its first half negated (see `hidden`)."""
        d, rotated = self.head_dim, self.heads + self.kv_heads
        qkv = layer.qkv.matmul(x).view(-1, d)  # (heads + 2 kv_heads, d) in bf16
        # RoPE on the queries and keys together, in cos/sin's dtype (fp32): transformers'
        # apply_rotary_pos_emb promotes bf16 q/k to it in each product; promoting once first
        # gives the same values with fewer casts. SDPA reads them rounded to bf16.
        qk = qkv[:rotated].to(cos.dtype)
        swapped = qk.view(rotated, 2, d // 2).flip(1).view(rotated, d)
        qk = torch.addcmul(qk * cos, swapped, sin).to(ACTIVATION_DTYPE).float()
        end = cache.length + 1
        cache.keys[index, :, cache.length] = qk[self.heads:]
        cache.values[index, :, cache.length] = qkv[rotated:]
        out = one_query_attention(qk[: self.heads], cache.keys[index, :, :end], cache.values[index, :, :end],
                                  self.scaling)
        return layer.o.matmul(out.view(1, -1))  # (heads, d): the heads side by side

    @staticmethod
    def _mlp(layer: _Layer, x: torch.Tensor) -> torch.Tensor:
        """SiLU-gated MLP (bf16 out): gate and up from one matmul."""
        gate, up = layer.gate_up.matmul(x).chunk(2, dim=-1)
        return layer.down.matmul(F.silu(gate) * up)


def one_query_attention(queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
                        scaling: float) -> torch.Tensor:
    """Scaled dot-product attention of one position's queries (heads, d) over keys and values
    (kv_heads, length, d), with grouped-query heads (query head h reads kv head
    h // (heads // kv_heads), as transformers' repeat_kv pairs them): (heads, d)."""
    kv_heads, _, d = keys.shape
    grouped = queries.view(kv_heads, -1, d)  # each kv head's query heads, side by side
    scores = torch.matmul(grouped, keys.transpose(1, 2)).mul_(scaling)
    return torch.matmul(scores.softmax(-1), values).view(-1, d)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """Llama's RMSNorm. Where the residual stream and the weight are fp32 (as UniModel loads
    models) it is PyTorch's one fused op, which a one-row step calls 2 x layers + 1 times, a third
    faster than six small ones; otherwise Llama's operations in its order and dtypes."""
    if x.dtype == weight.dtype == torch.float32:
        return F.rms_norm(x, weight.shape, weight, eps)
    dtype = x.dtype
    x = x.float()
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)
