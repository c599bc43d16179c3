"""Exact prefix reuse: the KV cache of an embedding pass as the start of a generation.

UniMAE keeps causal attention, so the pass that embeds a text computes exactly the keys and
values that a prompt beginning with the same tokens needs (same weights, same positions).
Reuse compares token ids, never strings: a text tokenised alone and inside a prompt may split
differently at its end, and only the ids that really match are reused. The EOS that eos pooling
appends is the cache's last position; a prompt that continues differently there drops it.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading token ids two sequences share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def crop_to(cache: Any, length: int) -> None:
    """Keep the first `length` positions of a transformers Cache, in place.

    `crop` with a negative count removes that many positions in every transformers release
    (positive values mean different things in 4.x and 5.x), so only that form is used.
    """
    remove = cache.get_seq_length() - length
    if remove < 0:
        raise ValueError(f"cannot crop a cache of {cache.get_seq_length()} positions to {length}")
    if remove:
        cache.crop(-remove)


@dataclass
class PrefixCache:
    """The token ids of one forward pass and the KV cache (a transformers DynamicCache) it left.

    `autocast_dtype` records the precision of the pass: a cache made under bf16 autocast is
    not reused by an fp32 generation, whose output it would change.
    """

    ids: list[int]
    cache: Any
    autocast_dtype: torch.dtype | None = None

    def __post_init__(self):
        if self.cache.get_seq_length() != len(self.ids):
            raise ValueError(f"the cache holds {self.cache.get_seq_length()} positions for {len(self.ids)} ids")

    def __len__(self) -> int:
        return len(self.ids)

    def reusable(self, prompt_ids: Sequence[int]) -> int:
        """How many leading prompt tokens this cache covers; at least one is left to prefill,
        because the last prompt position's logits are what the first new token comes from."""
        return min(common_prefix_length(self.ids, prompt_ids), max(len(prompt_ids) - 1, 0))

    def cropped_copy(self, length: int) -> Any:
        """A new cache with the first `length` positions; this one stays whole for another use."""
        cache = copy.deepcopy(self.cache)
        crop_to(cache, length)
        return cache


def static_copy(cache: Any, config, max_cache_len: int) -> Any:
    """The positions of a DynamicCache copied into a transformers StaticCache of `max_cache_len`.

    A static cache is written in place at each step instead of growing by concatenation, and its
    tensors keep one shape, so a compiled decode step sees the same shapes at every token.
    """
    from transformers import StaticCache

    static = StaticCache(config=config, max_cache_len=max_cache_len)
    static.layers = [_casting_static_layer()(max_cache_len=max_cache_len) for _ in cache.layers]
    for index, layer in enumerate(cache.layers):
        static.update(layer.keys, layer.values, index)
    return static


@functools.cache
def _casting_static_layer() -> type:
    """A StaticLayer that stores new keys and values in the cache's dtype, as a DynamicCache's
    concatenation does (under bf16 autocast RoPE leaves keys fp32, so both are kept in fp32
    there). Made once: torch.compile guards on the class."""
    from transformers.cache_utils import StaticLayer

    class CastingStaticLayer(StaticLayer):
        def update(self, key_states, value_states, *args, **kwargs):
            if self.is_initialized:
                key_states, value_states = key_states.to(self.keys.dtype), value_states.to(self.values.dtype)
            return super().update(key_states, value_states, *args, **kwargs)

    return CastingStaticLayer
