"""Document-side KV reuse (doc_cache.py), on the tiny random Llama and one-layer variants of it."""

import copy

import pytest
import torch

from unirag import UniragError
from unirag.doc_cache import (ChunkKV, ChunkKVCache, ChunkedPrompt, chunk_kv, namespace, prefill_chunked,
                              rotary_embedding, shift_keys, split_prompt)

CHUNKS = ["The cat sat on the mat. A dog ran in the park.", "Paris is the capital of France.",
          "Rust has ownership and borrowing. Loops can return values with break."]


def variant(tiny, name, **config_changes):
    """A UniModel over a fresh random Llama with the tiny config changed (same tokenizer)."""
    from transformers import LlamaForCausalLM

    from unirag import UniModel

    config = copy.deepcopy(tiny.model.config)
    for key, value in config_changes.items():
        setattr(config, key, value)
    torch.manual_seed(1)
    return UniModel(LlamaForCausalLM(config).eval(), tiny.tokenizer, name=name, precision="fp32")


def tokens(model, text):
    return model.tokenizer(text, add_special_tokens=False)["input_ids"]


def greedy(model, ids, n=12):
    return list(model.generate_ids(ids, max_new_tokens=n))


def chunked_greedy(model, prompt, store, n=12):
    """New ids and the prefill; prefill.cache is the live cache, checked before decoding grows it."""
    ids, prefill = model.generate_with_chunks(prompt, store, max_new_tokens=n)
    assert prefill.cache.get_seq_length() == len(prompt) - 1 and prefill.last_id == prompt.ids[-1]
    out = list(ids)
    assert prefill.cache.get_seq_length() > len(prompt) - 1
    return out, prefill


def rag_prompt(model, chunks=CHUNKS):
    """head / chunks / separators / tail ids, as a RAG prompt lays them out."""
    head = model.prompt_ids([{"role": "user", "content": "Context:\n[1] a.md\n"}])[:-4]  # no closing turn
    seps = [tokens(model, f"\n\n[{i}] b.md\n") for i in range(2, len(chunks) + 1)]
    tail = tokens(model, "\n\nQuestion: where is the cat?") + model.prompt_ids("x")[-4:]
    return ChunkedPrompt.from_parts(head, [tokens(model, c) for c in chunks], tail, seps)


def layer0_keys(model, ids):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.model.config)
    with torch.inference_mode():
        model.decoder(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return cache.layers[0].keys


ROPES = {
    "default": None,
    "llama3": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 64},
}


@pytest.mark.parametrize("rope", list(ROPES))
def test_shift_keys_equals_keys_computed_at_the_offset(tiny, rope):
    """Layer-0 keys depend only on the token and its position: keys computed at 0..n-1 and moved
    by P equal the keys the model computes for the same tokens at P..P+n-1."""
    model = tiny if ROPES[rope] is None else variant(tiny, f"tiny-{rope}", rope_parameters=ROPES[rope])
    rotary = rotary_embedding(model)
    if rope == "yarn":
        assert rotary.attention_scaling != 1.0  # the undo has to divide it out
    chunk = tokens(model, CHUNKS[2])
    alone = layer0_keys(model, chunk)
    for offset in (1, 17, 150):
        filler = tokens(model, "The quick brown fox jumps over the lazy dog. " * 20)[:offset]
        assert len(filler) == offset
        placed = layer0_keys(model, filler + chunk)[..., offset:, :]
        moved = shift_keys(alone, offset, rotary)
        assert not torch.allclose(alone, placed, atol=1e-3)
        torch.testing.assert_close(moved, placed, atol=1e-5, rtol=1e-5)
    assert shift_keys(alone, 0, rotary) is alone


def test_one_layer_model_chunked_prefill_is_exact(tiny):
    """With one layer every cached K/V is a layer-0 one, so reuse at any offset is exact: the
    whole assembly (positions, order, separators, tail) must then match a plain prefill."""
    from transformers import DynamicCache

    model = variant(tiny, "tiny-1-layer", num_hidden_layers=1)
    prompt = rag_prompt(model)
    ids = prompt.ids
    plain = DynamicCache(config=model.model.config)
    with torch.inference_mode():
        model.decoder(input_ids=torch.tensor([ids[:-1]]), past_key_values=plain, use_cache=True)
    store = ChunkKVCache(64)
    for round_ in range(2):  # computed, then taken from the store
        prefill = prefill_chunked(model, prompt, store)
        assert prefill.cache.get_seq_length() == len(ids) - 1 and prefill.last_id == ids[-1]
        torch.testing.assert_close(prefill.cache.layers[0].keys, plain.layers[0].keys, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(prefill.cache.layers[0].values, plain.layers[0].values, atol=1e-5, rtol=1e-5)
        assert (prefill.reused_tokens > 0) == (round_ == 1)
    out, _ = chunked_greedy(model, prompt, store)
    assert out == greedy(model, ids)


def test_prompt_ending_in_a_chunk_reuses_all_but_its_last_token(tiny):
    model = variant(tiny, "tiny-1-layer", num_hidden_layers=1)
    head = model.prompt_ids("Context:")
    chunks = [tokens(model, c) for c in CHUNKS[:2]]
    prompt = ChunkedPrompt.from_parts(head, chunks, [], tokens(model, "\n\n"))
    store = ChunkKVCache(64)
    out, prefill = chunked_greedy(model, prompt, store)
    assert prefill.computed_tokens == len(chunks[0]) + len(chunks[1]) - 1
    assert out == greedy(model, prompt.ids)
    assert (namespace(model), chunks[1]) in store  # stored whole, used cut


@pytest.mark.parametrize("stored", [False, True])
def test_single_chunk_at_position_zero_is_exact(tiny, stored):
    chunk = tokens(tiny, CHUNKS[0])
    tail = tokens(tiny, "\n\nQuestion: where is the cat?") + tiny.prompt_ids("x")[-4:]
    prompt = ChunkedPrompt.from_parts([], [chunk], tail)
    store = ChunkKVCache(64)
    if stored:
        store.put(namespace(tiny), chunk_kv(tiny, chunk))
    out, prefill = chunked_greedy(tiny, prompt, store)
    assert (prefill.reused_tokens, prefill.computed_tokens) == ((len(chunk), 0) if stored else (0, len(chunk)))
    assert prefill.prefilled_tokens == len(tail) - 1
    plain = greedy(tiny, chunk + tail)
    assert out == plain and len(plain) > 0


def test_several_chunks_run_and_hit_the_store_the_second_time(tiny):
    prompt = rag_prompt(tiny)
    store = ChunkKVCache(64)
    out, first = chunked_greedy(tiny, prompt, store)
    chunk_tokens = prompt.chunk_tokens
    assert (first.hits, first.misses, first.reused_tokens, first.computed_tokens) == (0, 3, 0, chunk_tokens)
    assert first.prefilled_tokens == len(prompt) - 1 - chunk_tokens
    assert len(store) == 3 and 0 < len(out) <= 12
    again, second = chunked_greedy(tiny, prompt, store)
    assert (second.hits, second.misses, second.reused_tokens, second.computed_tokens) == (3, 0, chunk_tokens, 0)
    assert again == out  # stored K/V are the ones computed on the miss
    # approximate: chunks after the head did not attend to it, so the cache differs from a full prefill
    from transformers import DynamicCache

    plain = DynamicCache(config=tiny.model.config)
    with torch.inference_mode():
        tiny.decoder(input_ids=torch.tensor([prompt.ids[:-1]]), past_key_values=plain, use_cache=True)
    third = prefill_chunked(tiny, prompt, store).cache
    assert not torch.allclose(third.layers[1].values, plain.layers[1].values, atol=1e-3)
    torch.testing.assert_close(third.layers[0].keys, plain.layers[0].keys, atol=1e-5, rtol=1e-5)


def test_reordered_chunks_reuse_the_same_entries(tiny):
    store = ChunkKVCache(64)
    prefill_chunked(tiny, rag_prompt(tiny), store)
    prefill = prefill_chunked(tiny, rag_prompt(tiny, CHUNKS[::-1]), store)
    assert prefill.misses == 0 and prefill.hits == 3


def fake_entry(ids, n_bytes):
    k = torch.zeros(n_bytes // 8, dtype=torch.float32)
    return ChunkKV(tuple(ids), ((k, k.clone()),))


def test_lru_evicts_least_recently_used_by_size():
    store = ChunkKVCache(max_mb=3 / 1024)  # 3 KiB
    for i in range(3):
        assert store.put("m", fake_entry([i], 1024))
    assert len(store) == 3 and store.nbytes == 3072
    assert store.get("m", [0]) is not None  # 0 is now the most recently used
    assert store.put("m", fake_entry([3], 1024))
    assert ("m", [1]) not in store and ("m", [0]) in store and store.evictions == 1
    assert store.put("m", fake_entry([4], 2048))  # order was 2, 0, 3: the two oldest make room
    assert [("m", [i]) in store for i in range(5)] == [False, False, False, True, True]
    assert store.nbytes <= store.max_bytes
    assert not store.put("m", fake_entry([5], 4096))  # bigger than the whole budget: not stored
    assert ("m", [5]) not in store and store.nbytes <= store.max_bytes
    assert store.get("other-model", [4]) is None and store.get("m", [4]) is not None
    store.clear()
    assert len(store) == 0 and store.nbytes == 0


def test_lru_accounting_in_tensor_bytes(tiny):
    entry = chunk_kv(tiny, tokens(tiny, CHUNKS[1]))
    config = tiny.model.config
    head_dim = config.hidden_size // config.num_attention_heads
    per_token = config.num_hidden_layers * 2 * config.num_key_value_heads * head_dim * 4
    assert entry.nbytes == per_token * len(entry)
    store = ChunkKVCache(max_mb=1.5 * entry.nbytes / 2**20)
    store.put("m", entry)
    store.put("m", ChunkKV(entry.ids + (1,), entry.layers))
    assert len(store) == 1 and ("m", entry.ids + (1,)) in store


def test_split_prompt_finds_the_chunks_of_a_rag_prompt(tiny):
    from unirag.rag.pipeline import Hit, build_prompt

    hits = [Hit(str(i), 1.0, text, f"doc{i}.md") for i, text in enumerate(CHUNKS)]
    messages = build_prompt("Where is the cat?", hits)
    prompt = split_prompt(tiny, messages, [h.text for h in hits] + ["not in the prompt at all"])
    assert prompt.ids == tiny.prompt_ids(messages)
    chunk_segments = [ids for ids, is_chunk in prompt.segments if is_chunk]
    assert chunk_segments == [tokens(tiny, c) for c in CHUNKS]
    assert not prompt.segments[0][1] and not prompt.segments[-1][1]  # head and tail are prefilled
    out, prefill = chunked_greedy(tiny, prompt, ChunkKVCache(64))
    assert prefill.computed_tokens == prompt.chunk_tokens


def test_split_prompt_leaves_a_chunk_it_cannot_find_to_prefill(tiny):
    ids = tiny.prompt_ids("Context: Paris is the capital of France.")
    prompt = split_prompt(tiny, ids, ["capital of Spain", "Paris is the capital of France."])
    assert prompt.ids == ids and sum(is_chunk for _, is_chunk in prompt.segments) == 1


def test_from_parts_separators():
    prompt = ChunkedPrompt.from_parts([1], [[5, 6], [7], [8]], [9], [0])
    assert prompt.ids == [1, 5, 6, 0, 7, 0, 8, 9] and prompt.chunk_tokens == 4
    prompt = ChunkedPrompt.from_parts([], [[5], [7], [8]], [], [[0], [0, 0]])
    assert prompt.ids == [5, 0, 7, 0, 0, 8] and prompt.segments[0] == ([5], True)
    with pytest.raises(UniragError, match="separators"):
        ChunkedPrompt.from_parts([], [[5], [7]], [], [[0], [0]])


def test_context_window_and_unsupported_rope(tiny):
    prompt = ChunkedPrompt.from_parts([1], [[5] * 200], [9])
    with pytest.raises(UniragError, match="context window"):
        tiny.generate_with_chunks(prompt, ChunkKVCache(1), max_new_tokens=100)
    dynamic = variant(tiny, "tiny-dynamic", rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0,
                                                             "factor": 2.0})
    with pytest.raises(UniragError, match="sequence length"):
        prefill_chunked(dynamic, prompt, ChunkKVCache(1))
