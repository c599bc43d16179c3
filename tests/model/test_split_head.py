"""unirag.model.fast_decode.split_head: the LM head as a batch of row blocks gives the same logits, bit for bit."""

import pytest
import torch

from unirag.model.fast_decode.split_head import _parts_for, head_logits


@pytest.mark.parametrize("parts", [2, 3, 4, 8])
@pytest.mark.parametrize("rows, inner", [(1024, 64), (3072, 96), (1003, 64)])
def test_split_head_is_exact(parts, rows, inner):
    torch.manual_seed(0)
    head = torch.nn.Linear(inner, rows, bias=False)
    vector = torch.randn(inner)
    with torch.inference_mode():
        expected = head(vector)
        got = head_logits(head, vector, parts)
    assert got.shape == expected.shape
    assert torch.equal(got, expected)


def test_blocks_are_equal_multiples_of_64_rows():
    assert _parts_for(49152, 2) == 2
    assert _parts_for(3072, 3) == 3 and _parts_for(2048, 3) == 2  # 2048 rows have no 3 equal aligned blocks
    assert _parts_for(1003, 8) == 1  # no equal aligned cut: the head runs whole
    assert _parts_for(128256, 8) == 6  # Llama 3's vocabulary


def test_split_head_leaves_other_heads_alone():
    head = torch.nn.Linear(16, 128, bias=False).to(torch.bfloat16)  # bf16 kernels already use the threads
    vector = torch.randn(16, dtype=torch.bfloat16)
    biased = torch.nn.Linear(16, 128)
    with torch.inference_mode():
        assert torch.equal(head_logits(head, vector, 2), head(vector))
        rows = torch.randn(3, 16, dtype=torch.bfloat16)  # more than one position: not split
        assert torch.equal(head_logits(head, rows, 2), head(rows))
        assert torch.equal(head_logits(biased, vector.float(), 2), biased(vector.float()))
