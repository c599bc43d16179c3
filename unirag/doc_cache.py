"""Document-side KV reuse: keys and values of retrieved chunks, computed once, placed anywhere.

A RAG prompt is mostly chunk text, and the same chunks come back for many questions. This
module keeps, per chunk (keyed by its token ids), the keys and values the model computes when
it runs the chunk's tokens alone at positions 0..n-1, and builds a generation cache for a
prompt laid out as

    head | chunk 1 | separator | chunk 2 | ... | chunk k | tail

by copying each chunk's stored K/V into place and prefilling only the head, separators and
tail. Keys carry RoPE for the positions they were computed at; a chunk placed at offset P has
its keys moved to positions P..P+n-1 (`shift_keys`: undo the rotation for 0..n-1, apply it for
P..P+n-1, with the model's own rotary embedding, so llama3/linear/yarn scaling are honoured).

What is exact and what is not:
- The position shift is exact (up to float rounding): RoPE is a rotation that depends only on
  the position, so a key moved to P+i equals the key computed at P+i from the same input.
- A chunk's K/V are NOT the ones a full prefill computes, except for a chunk at position 0 with
  an empty head: from layer 1 on, a token's keys and values depend on the hidden states of the
  tokens before it, and a stored chunk never saw the head or the chunks before it (its first
  token also plays the attention-sink role a BOS would). Reuse therefore changes the model's
  output for chunks placed after other text; how much it costs in answer quality is a question
  for an evaluation, not something this module guarantees. Head, separators and tail are
  prefilled normally and attend to everything before them (including the reused chunks).
- The feature is off unless called: `UniModel.generate_ids` / `generate` never use it.

The store (`ChunkKVCache`) is an LRU bounded in bytes; entries belong to one model (name,
precision, device are part of the key): do not share a store between different weights that
carry the same name. Memory per token is layers x 2 x kv_heads x head_dim x bytes, e.g.
SmolLM2-135M in fp32: 30 x 2 x 3 x 64 x 4 = 46 KB, so a 300-token chunk takes ~14 MB.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from .errors import UniragError

if TYPE_CHECKING:
    from .unimodel import UniModel

# (keys, values) per layer, each [1, kv_heads, n, head_dim], keys with RoPE for positions 0..n-1
LayerKV = tuple[tuple[torch.Tensor, torch.Tensor], ...]
Messages = list[dict[str, str]]
_UNSUPPORTED_ROPE = ("dynamic", "longrope")  # frequencies depend on the sequence length


@dataclass(frozen=True)
class ChunkKV:
    """One chunk's per-layer keys and values, computed alone at positions 0..n-1."""

    ids: tuple[int, ...]
    layers: LayerKV

    @property
    def nbytes(self) -> int:
        return sum(k.nbytes + v.nbytes for k, v in self.layers)

    def __len__(self) -> int:
        return len(self.ids)


class ChunkKVCache:
    """A thread-safe LRU of per-chunk K/V, bounded by `max_mb` (MiB of tensor bytes).

    Keyed by (namespace, token ids): the namespace names the model and precision the K/V were
    computed with. An entry bigger than the whole budget is not stored.
    """

    def __init__(self, max_mb: float):
        if max_mb < 0:
            raise UniragError("the chunk KV cache size cannot be negative")
        self.max_bytes = int(max_mb * 2**20)
        self._entries: OrderedDict[tuple[Any, tuple[int, ...]], ChunkKV] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    def get(self, namespace: Any, ids: Sequence[int]) -> ChunkKV | None:
        key = (namespace, tuple(ids))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry

    def put(self, namespace: Any, entry: ChunkKV) -> bool:
        """Store an entry (most recently used), evicting the least recently used ones until the
        total fits. Returns False when the entry alone is over the budget (nothing changes)."""
        size = entry.nbytes
        if size > self.max_bytes:
            return False
        key = (namespace, entry.ids)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            self._entries[key] = entry
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, evicted = self._entries.popitem(last=False)
                self._bytes -= evicted.nbytes
                self.evictions += 1
        return True

    def __contains__(self, key: tuple[Any, Sequence[int]]) -> bool:
        namespace, ids = key
        with self._lock:
            return (namespace, tuple(ids)) in self._entries

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def nbytes(self) -> int:
        with self._lock:
            return self._bytes

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


# ---------------------------------------------------------------------------------- the prompt
@dataclass
class ChunkedPrompt:
    """A prompt's token ids cut into segments; `is_chunk` segments may come from the store,
    the others (head, separators, tail, chunks not found verbatim) are prefilled in place."""

    segments: list[tuple[list[int], bool]]

    @classmethod
    def from_parts(cls, head_ids: Sequence[int], chunks: Sequence[Sequence[int]], tail_ids: Sequence[int],
                   separators: Sequence[int] | Sequence[Sequence[int]] = ()) -> "ChunkedPrompt":
        """head + chunk 1 + sep + chunk 2 + ... + chunk k + tail. `separators`: one id list put
        between every two chunks, or a list of len(chunks) - 1 id lists."""
        if separators and not isinstance(separators[0], int):
            seps = [list(s) for s in separators]
            if len(seps) != max(len(chunks) - 1, 0):
                raise UniragError(f"{len(chunks)} chunks need {max(len(chunks) - 1, 0)} separators, got {len(seps)}")
        else:
            seps = [list(separators)] * max(len(chunks) - 1, 0)
        segments: list[tuple[list[int], bool]] = [(list(head_ids), False)]
        for i, chunk in enumerate(chunks):
            if i:
                segments.append((seps[i - 1], False))
            segments.append((list(chunk), True))
        segments.append((list(tail_ids), False))
        return cls([(ids, is_chunk) for ids, is_chunk in segments if ids])

    @property
    def ids(self) -> list[int]:
        return [t for ids, _ in self.segments for t in ids]

    @property
    def chunk_tokens(self) -> int:
        return sum(len(ids) for ids, is_chunk in self.segments if is_chunk)

    def __len__(self) -> int:
        return sum(len(ids) for ids, _ in self.segments)


def _find(haystack: Sequence[int], needle: Sequence[int], start: int) -> int:
    """The first index >= start where `needle` occurs in `haystack`, or -1."""
    n = len(needle)
    if n == 0:
        return -1
    first = needle[0]
    for i in range(start, len(haystack) - n + 1):
        if haystack[i] == first and list(haystack[i:i + n]) == list(needle):
            return i
    return -1


def split_prompt(model: "UniModel", prompt: Sequence[int] | Messages, chunk_texts: Sequence[str],
                 system: str | None = None) -> ChunkedPrompt:
    """Cut a prompt (token ids, or messages as `pipeline.build_prompt` makes them) into
    head / chunk / separator / tail segments by finding each chunk text's token ids (tokenised
    alone, no special tokens) in the prompt's ids, in order. A chunk whose ids do not occur
    verbatim after the previous chunk (its tokenisation at a boundary differs inside the prompt)
    stays in the surrounding plain segment: it is prefilled, not reused."""
    if prompt and isinstance(prompt[0], dict):
        ids = model.prompt_ids(list(prompt), system)  # type: ignore[arg-type]
    else:
        ids = list(prompt)  # type: ignore[arg-type]
    segments: list[tuple[list[int], bool]] = []
    cursor = 0
    for text in chunk_texts:
        chunk = model.tokenizer(text, add_special_tokens=False)["input_ids"]
        at = _find(ids, chunk, cursor)
        if at < 0:
            continue
        if at > cursor:
            segments.append((ids[cursor:at], False))
        segments.append((ids[at:at + len(chunk)], True))
        cursor = at + len(chunk)
    if cursor < len(ids):
        segments.append((ids[cursor:], False))
    return ChunkedPrompt(segments)


# ---------------------------------------------------------------------------------- RoPE
def rotary_embedding(model: "UniModel"):
    """The model's rotary embedding module, checked to be one `shift_keys` handles exactly."""
    rotary = getattr(model.decoder, "rotary_emb", None)
    if rotary is None or not hasattr(rotary, "inv_freq"):
        raise UniragError(f"{model.name}: no shared rotary embedding (model.rotary_emb); chunk KV reuse "
                          "supports Llama-style decoders")
    config = model.model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    if rotary.inv_freq.numel() * 2 != head_dim:
        raise UniragError(f"{model.name}: RoPE covers part of each head; chunk KV reuse needs full rotary")
    if getattr(rotary, "rope_type", "default") in _UNSUPPORTED_ROPE:
        raise UniragError(f"{model.name}: rope type {rotary.rope_type!r} changes with the sequence length; "
                          "chunk KV reuse cannot move keys exactly")
    return rotary


def _cos_sin(rotary, start: int, length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    positions = torch.arange(start, start + length, device=device).unsqueeze(0)
    cos, sin = rotary(torch.empty(0, dtype=torch.float32, device=device), positions)
    return cos.float().unsqueeze(1), sin.float().unsqueeze(1)  # [1, 1, n, head_dim]


def shift_keys(keys: torch.Tensor, offset: int, rotary) -> torch.Tensor:
    """Keys [batch, heads, n, head_dim] with RoPE for positions 0..n-1 -> the same keys with RoPE
    for positions offset..offset+n-1.

    The rotation at 0..n-1 is undone and the one at offset+i applied with the cos/sin the model
    itself uses there (so the result matches a direct computation to float rounding, and any
    rope scaling the rotary module implements is honoured). cos/sin carry the module's
    attention_scaling s, so undoing divides by s^2. Computed in fp32, returned in keys' dtype.
    """
    if offset == 0:
        return keys
    from transformers.models.llama.modeling_llama import rotate_half

    n = keys.shape[-2]
    cos0, sin0 = _cos_sin(rotary, 0, n, keys.device)
    cos1, sin1 = _cos_sin(rotary, offset, n, keys.device)
    k = keys.float()
    scale = float(getattr(rotary, "attention_scaling", 1.0))
    raw = (k * cos0 - rotate_half(k) * sin0) / (scale * scale)  # before RoPE
    return (raw * cos1 + rotate_half(raw) * sin1).to(keys.dtype)


# ---------------------------------------------------------------------------------- prefill
def namespace(model: "UniModel") -> tuple[str, str, str]:
    """What a stored chunk's K/V depend on besides its ids: the model, precision and device."""
    return (model.name, str(model.autocast_dtype), str(model.device))


def _layers(cache) -> LayerKV:
    return tuple((layer.keys, layer.values) for layer in cache.layers)


def chunk_kv(model: "UniModel", ids: Sequence[int]) -> ChunkKV:
    """Run a chunk's tokens alone (no BOS, nothing before them) at positions 0..n-1."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.model.config)
    input_ids = torch.tensor([list(ids)], device=model.device)
    with model._lock, torch.inference_mode(), model._autocast():
        model.decoder(input_ids=input_ids, past_key_values=cache, use_cache=True,
                        position_ids=torch.arange(len(ids), device=model.device).unsqueeze(0))
    return ChunkKV(tuple(ids), _layers(cache))


@dataclass
class ChunkedPrefill:
    """A generation cache for every prompt token but the last (`last_id`, which the first
    decoding step feeds), and where its positions came from. `cache` is the live cache that
    decoding then extends: it holds exactly len(prompt) - 1 positions only until then."""

    cache: Any  # transformers DynamicCache
    last_id: int
    reused_tokens: int = 0    # chunk K/V taken from the store
    computed_tokens: int = 0  # chunk K/V computed alone now (a miss; stored when it fits)
    prefilled_tokens: int = 0  # run in place, attending to everything before them
    hits: int = 0
    misses: int = 0


def prefill_chunked(model: "UniModel", prompt: ChunkedPrompt, store: ChunkKVCache) -> ChunkedPrefill:
    """Build the cache for `prompt.ids[:-1]`: chunk segments from `store` (computed alone and
    stored on a miss) with keys moved to their offset; everything else prefilled in order."""
    from transformers import DynamicCache

    ids = prompt.ids
    if not ids:
        raise UniragError("the prompt is empty")
    rotary = rotary_embedding(model)
    space = namespace(model)
    cache = DynamicCache(config=model.model.config)
    if any(getattr(layer, "is_sliding", False) for layer in getattr(cache, "layers", ())):
        raise UniragError(f"{model.name}: sliding-window attention layers; chunk KV reuse needs full attention")
    result = ChunkedPrefill(cache, ids[-1])
    budget = len(ids) - 1
    pending: list[int] = []

    def flush() -> None:
        if not pending:
            return
        start = cache.get_seq_length()
        positions = torch.arange(start, start + len(pending), device=model.device).unsqueeze(0)
        with model._lock, torch.inference_mode(), model._autocast():
            model.decoder(input_ids=torch.tensor([pending], device=model.device), past_key_values=cache,
                            use_cache=True, position_ids=positions)
        result.prefilled_tokens += len(pending)
        pending.clear()

    position = 0
    for segment, is_chunk in prompt.segments:
        take = min(len(segment), budget - position)
        if take <= 0:
            break
        if not is_chunk:
            pending.extend(segment[:take])
        else:
            flush()
            entry = store.get(space, segment)
            if entry is None:
                entry = chunk_kv(model, segment)
                store.put(space, entry)
                result.misses += 1
                result.computed_tokens += take
            else:
                result.hits += 1
                result.reused_tokens += take
            with model._lock, torch.inference_mode():
                for layer, (keys, values) in enumerate(entry.layers):
                    cache.update(shift_keys(keys[..., :take, :], position, rotary), values[..., :take, :], layer)
        position += take
    flush()
    if cache.get_seq_length() != budget:  # pragma: no cover - a bug, not an input error
        raise RuntimeError(f"chunked prefill built {cache.get_seq_length()} positions for {budget}")
    return result
