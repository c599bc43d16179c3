"""Next-token choice: greedy and nucleus sampling."""

from __future__ import annotations

import torch

from unirag.model.decoding import sample


def test_sample_greedy_and_nucleus():
    logits = torch.tensor([0.0, 5.0, 1.0])
    assert sample(logits, 0.0, 1.0, None) == 1
    generator = torch.Generator().manual_seed(0)
    assert {sample(logits, 1.0, 0.01, generator) for _ in range(20)} == {1}  # only the top token is kept
