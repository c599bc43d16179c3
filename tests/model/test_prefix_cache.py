"""Exact prefix reuse and token-budget batching, on the tiny random Llama."""

import numpy as np
import pytest
import torch

from unirag.model.prefix_cache import PrefixCache, common_prefix_length, crop_to
from unirag.model.unimodel import token_budget_batches

TEXT = "The cat sat on the mat. A dog ran in the park."
USER_HEAD = "<|im_start|>user\n"  # the tiny chat template's start of a user turn


def prefilled(tiny):
    """Record how many tokens each forward pass of the model is given."""
    lengths: list[int] = []
    handle = tiny.model.get_input_embeddings().register_forward_hook(
        lambda module, args, out: lengths.append(args[0].shape[-1]))
    return lengths, handle


def greedy(tiny, ids, prefix=None, n=12):
    return list(tiny.generate_ids(ids, max_new_tokens=n, prefix=prefix))


def test_common_prefix_length():
    assert common_prefix_length([], [1, 2]) == 0
    assert common_prefix_length([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix_length([1, 2, 3], [1, 2]) == 2
    assert common_prefix_length([1, 2, 3], [1, 5, 3]) == 1
    assert common_prefix_length([9], [1]) == 0


def test_embed_with_cache_gives_embed_vector_and_the_pass_cache(tiny):
    vector, prefix = tiny.embed_with_cache(TEXT)
    np.testing.assert_allclose(vector, tiny.embed([TEXT])[0], atol=1e-6)
    text_ids = tiny.tokenizer(TEXT, add_special_tokens=False)["input_ids"]
    assert prefix.ids == tiny._prefix_ids + text_ids + [tiny.tokenizer.eos_token_id]
    assert prefix.cache.get_seq_length() == len(prefix) == len(prefix.ids)


def test_full_match_reuses_everything_and_output_is_identical(tiny):
    """Embedded as the template shows it, the text and its EOS (= <|im_end|>) open the prompt."""
    _, prefix = tiny.embed_with_cache(TEXT, instruction=USER_HEAD)
    ids = tiny.prompt_ids(TEXT)
    assert ids[: len(prefix)] == prefix.ids and len(ids) > len(prefix)
    assert tiny.reusable_prefix(prefix, ids) == len(prefix)
    lengths, handle = prefilled(tiny)
    try:
        with_reuse = greedy(tiny, ids, prefix)
    finally:
        handle.remove()
    assert lengths[0] == len(ids) - len(prefix)  # only the rest of the prompt was prefilled
    assert with_reuse == greedy(tiny, ids) and len(with_reuse) > 0


def test_prompt_head_opens_the_prompt(tiny):
    assert tiny.prompt_head() == USER_HEAD
    head = tiny.prompt_head("Be brief.")
    assert head == "<|im_start|>system\nBe brief.<|im_end|>\n" + USER_HEAD
    _, prefix = tiny.embed_with_cache(TEXT, instruction=head)
    ids = tiny.prompt_ids(TEXT + "\n\nQuestion: where?", system="Be brief.")
    assert tiny.reusable_prefix(prefix, ids) == len(prefix) - 1  # all but the EOS
    assert greedy(tiny, ids, prefix) == greedy(tiny, ids)


def test_no_common_prefix_reuses_nothing(tiny):
    _, prefix = tiny.embed_with_cache(TEXT)  # plain text; the prompt starts with <|im_start|>
    ids = tiny.prompt_ids(TEXT)
    assert tiny.reusable_prefix(prefix, ids) == 0
    assert greedy(tiny, ids, prefix) == greedy(tiny, ids)


def test_mismatch_at_the_eos_crops_it(tiny):
    """The prompt continues the text where the embed pass had its EOS: that position is dropped."""
    _, prefix = tiny.embed_with_cache(TEXT, instruction=USER_HEAD)
    ids = tiny.prompt_ids(TEXT + " Paris is the capital of France.")
    reused = tiny.reusable_prefix(prefix, ids)
    assert reused == common_prefix_length(prefix.ids, ids) and 0 < reused < len(prefix)
    assert greedy(tiny, ids, prefix) == greedy(tiny, ids)


@pytest.mark.parametrize("cut", [1, 2, 5, None])
def test_prompt_not_longer_than_cache_leaves_one_token_to_prefill(tiny, cut):
    _, prefix = tiny.embed_with_cache(TEXT, instruction=USER_HEAD)
    ids = prefix.ids[:cut] if cut else list(prefix.ids)  # None: the prompt is exactly the cached ids
    assert tiny.reusable_prefix(prefix, ids) == len(ids) - 1
    assert greedy(tiny, ids, prefix) == greedy(tiny, ids)


def test_prefix_cache_is_not_used_up(tiny):
    _, prefix = tiny.embed_with_cache(TEXT, instruction=USER_HEAD)
    ids = tiny.prompt_ids(TEXT)
    first, second = greedy(tiny, ids, prefix), greedy(tiny, ids, prefix)
    assert first == second == greedy(tiny, ids)
    assert prefix.cache.get_seq_length() == len(prefix)


def test_generate_text_and_sampling_with_prefix(tiny):
    _, prefix = tiny.embed_with_cache(TEXT, instruction=USER_HEAD)
    assert tiny.generate(TEXT, max_new_tokens=10, prefix=prefix) == tiny.generate(TEXT, max_new_tokens=10)
    sampled = [tiny.generate(TEXT, max_new_tokens=10, temperature=1.0, seed=5, prefix=p) for p in (prefix, None)]
    assert sampled[0] == sampled[1]


def test_cache_of_another_precision_is_not_reused(tiny):
    _, prefix = tiny.embed_with_cache(TEXT, instruction=USER_HEAD)
    prefix.autocast_dtype = torch.bfloat16
    assert tiny.reusable_prefix(prefix, tiny.prompt_ids(TEXT)) == 0


def test_crop_to_and_length_check(tiny):
    _, prefix = tiny.embed_with_cache(TEXT)
    crop_to(prefix.cache, len(prefix))  # no-op
    assert prefix.cache.get_seq_length() == len(prefix)
    with pytest.raises(ValueError):
        crop_to(prefix.cache, len(prefix) + 1)
    copy = prefix.cropped_copy(3)
    assert copy.get_seq_length() == 3 and prefix.cache.get_seq_length() == len(prefix)
    with pytest.raises(ValueError, match="positions"):
        PrefixCache(prefix.ids[:-1], prefix.cache)


def test_token_budget_batches():
    assert token_budget_batches([10, 10, 10, 10], None, 40) == [[0, 1, 2, 3]]
    assert token_budget_batches([10, 10, 10, 10], 3, 1000) == [[0, 1, 2], [3]]
    assert token_budget_batches([30, 20, 10, 10, 5], None, 40, min_fill=0) == [[0], [1, 2], [3, 4]]
    # a row under 3/4 of its batch's longest starts a new one: little padding
    assert token_budget_batches([30, 20, 10, 10, 5], None, 40) == [[0], [1], [2, 3], [4]]
    assert token_budget_batches([100, 80, 75, 74, 60], None, None) == [[0, 1, 2], [3, 4]]
    assert token_budget_batches([100] * 5, 2, None) == [[0, 1], [2, 3], [4]]
    assert token_budget_batches([100, 3], None, 50) == [[0], [1]]  # over budget alone: own batch
    assert token_budget_batches([], 4, 10) == []


def spy_on_batches(model, monkeypatch) -> list[tuple[int, int]]:
    """(rows, longest length) of every batch `model.embed` runs from now on."""
    calls: list[tuple[int, int]] = []
    original = model._embed_batch

    def spy(items, cache=None):
        calls.append((len(items), max(len(e.ids) for e in items)))
        return original(items, cache)

    monkeypatch.setattr(model, "_embed_batch", spy)
    return calls


def test_embed_with_token_budget_equals_fixed_batches(tiny, monkeypatch):
    texts = ["word " * n for n in (1, 3, 40, 7, 2, 25, 60, 5)]
    calls = spy_on_batches(tiny, monkeypatch)
    budgeted = tiny.embed(texts, batch_size=None, max_batch_tokens=64)
    assert all(rows * length <= 64 or rows == 1 for rows, length in calls) and len(calls) > 1
    assert sum(rows for rows, _ in calls) == len(texts)
    np.testing.assert_allclose(budgeted, tiny.embed(texts, batch_size=1), atol=1e-5)


def test_embed_batches_stay_within_the_devices_budget(tiny, monkeypatch):
    from unirag.model import unimodel
    assert tiny.embed_batch_tokens == unimodel.EMBED_BATCH_TOKENS["cpu"]
    monkeypatch.setattr(tiny, "embed_batch_tokens", 40)
    calls = spy_on_batches(tiny, monkeypatch)
    tiny.embed(["word " * 9] * 8)  # ~10 tokens each: four to a batch of 40
    assert len(calls) > 1 and all(rows * length <= 40 for rows, length in calls)
