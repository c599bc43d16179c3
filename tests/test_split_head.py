"""unirag.split_head: the LM head in row blocks on threads gives the same logits, bit for bit."""

import pytest
import torch

from unirag.split_head import head_logits


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("parts", [2, 3, 8])
@pytest.mark.parametrize("rows, inner", [(1003, 64), (4999, 96)])  # rows not divisible by the parts
def test_split_head_is_exact(bias, parts, rows, inner):
    torch.manual_seed(0)
    head = torch.nn.Linear(inner, rows, bias=bias)
    vector = torch.randn(inner)
    with torch.inference_mode():
        expected = head(vector)
        got = head_logits(head, vector, parts)
    assert got.shape == expected.shape
    assert torch.equal(got, expected)
    assert not got.requires_grad


def test_split_head_leaves_other_heads_alone():
    head = torch.nn.Linear(16, 40, bias=False).to(torch.bfloat16)  # bf16 kernels already use the threads
    vector = torch.randn(16, dtype=torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(head_logits(head, vector, 2), head(vector))
        rows = torch.randn(3, 16, dtype=torch.bfloat16)  # more than one position: not split
        assert torch.equal(head_logits(head, rows, 2), head(rows))
