"""Next-token choice: greedy/nucleus sampling, repetition controls over generated tokens, and
context-aware decoding's contrast."""

from __future__ import annotations

import pytest
import torch

from unirag import UniModel
from unirag.model.decoding import RepetitionControl, apply_repetition, banned_tokens, contrast, sample


@pytest.mark.parametrize("generated, n, expected", [
    ([1, 2, 3, 1, 2], 3, {3}),        # "1 2" was followed by 3 before
    ([1, 2, 3, 1, 2], 2, {3}),        # after 2 came 3
    ([5, 5, 5], 1, {5}),              # n=1 bans every generated token
    ([1, 2], 3, set()),               # too short
    ([1, 2, 3], 0, set()),            # off
])
def test_banned_tokens(generated, n, expected):
    assert banned_tokens(generated, n) == expected


def test_apply_repetition_penalises_and_bans_without_touching_the_input():
    logits = torch.tensor([2.0, -2.0, 1.0, 0.5])
    out = apply_repetition(logits, [0, 1], RepetitionControl(repetition_penalty=2.0))
    assert out.tolist() == [1.0, -4.0, 1.0, 0.5] and logits[0] == 2.0
    out = apply_repetition(logits, [0, 2, 0], RepetitionControl(no_repeat_ngram=2))
    assert out[2] == float("-inf") and out[0] == 2.0
    assert apply_repetition(logits, [0], RepetitionControl()) is logits


def test_sample_greedy_and_nucleus():
    logits = torch.tensor([0.0, 5.0, 1.0])
    assert sample(logits, 0.0, 1.0, None) == 1
    generator = torch.Generator().manual_seed(0)
    assert {sample(logits, 1.0, 0.01, generator) for _ in range(20)} == {1}  # only the top token is kept


def test_generate_with_no_repeat_never_repeats_an_ngram(tiny):
    ids = list(tiny.generate_ids(tiny.prompt_ids("The cat sat"), max_new_tokens=40,
                                 repetition=RepetitionControl(no_repeat_ngram=2)))
    pairs = list(zip(ids, ids[1:]))
    assert len(pairs) == len(set(pairs))


def test_contrast_lifts_what_the_context_raises_among_plausible_tokens():
    with_context = torch.tensor([2.0, 1.9, -5.0, 0.0])
    without = torch.tensor([3.0, 0.0, -9.0, 0.0])
    out = contrast(with_context, without, 1.0)
    assert int(out.argmax()) == 1  # token 0 the model would write anyway; the context raised token 1
    assert out[2] == float("-inf") and out[3] > float("-inf")  # too unlikely with the context, whatever it gained
    assert contrast(with_context, without, 0.0) is with_context


def test_context_aware_decoding_matches_each_step_recomputed(tiny_model_dir):
    """Two streams, each on its own KV cache, give the tokens that a full forward of both prompts
    (with and without the context) plus the tokens so far gives at every step."""
    uni = UniModel.load(str(tiny_model_dir), precision="fp32")
    ids = uni.prompt_ids("Context: the cat sat on the mat.\nQuestion: where did the cat sit?")
    plain = uni.prompt_ids("Question: where did the cat sit?")
    got = list(uni.generate_ids(ids, 12, plain_ids=plain, contrast_weight=0.5))
    expected: list[int] = []
    with torch.inference_mode():
        while len(expected) < 12:
            rows = [uni.model(torch.tensor([p + expected])).logits[0, -1].float() for p in (ids, plain)]
            token = int(contrast(rows[0], rows[1], 0.5).argmax())
            if token in uni._stop_ids():
                break
            expected.append(token)
    assert got == expected
    assert list(uni.generate_ids(ids, 12, plain_ids=plain, contrast_weight=0.0)) == list(uni.generate_ids(ids, 12))


def test_context_aware_decoding_runs_two_lean_streams(tiny_model_dir):
    """Where generated tokens go through the decode copy's lean step, each stream keeps its own
    lean KV cache; weight 0 decodes as without a second stream."""
    uni = UniModel.load(str(tiny_model_dir), precision="bf16", decode_copy="int8", native_step=False)
    assert uni._lean is not None
    ids, plain = uni.prompt_ids("Context: red.\nQuestion: which colour?"), uni.prompt_ids("Question: which colour?")
    contrasted = list(uni.generate_ids(ids, 10, plain_ids=plain, contrast_weight=1.0))
    assert contrasted and all(isinstance(t, int) for t in contrasted)
    assert list(uni.generate_ids(ids, 10, plain_ids=plain, contrast_weight=0.0)) == list(uni.generate_ids(ids, 10))
