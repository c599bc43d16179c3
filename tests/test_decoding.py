"""Next-token choice: greedy/nucleus sampling and repetition controls over generated tokens."""

from __future__ import annotations

import pytest
import torch

from unirag.decoding import RepetitionControl, apply_repetition, banned_tokens, sample


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
