"""unirag.quantized_decode: generated tokens' steps on an int8 copy; everything else unchanged."""

import numpy as np
import pytest
import torch

from unirag import quantized_decode
from unirag.quantized_decode import int8_matmul, quantize_rows
from unirag.unimodel import UniModel

pytestmark = pytest.mark.skipif(not quantized_decode.supported(torch.device("cpu")),
                                reason="this torch build has no weight-only int8 CPU kernel")


def test_rows_round_trip_within_half_a_step():
    torch.manual_seed(0)
    weight = torch.randn(64, 32) * torch.linspace(0.01, 3, 64)[:, None]  # rows of very different sizes
    quantized, scale = quantize_rows(weight)
    assert quantized.dtype == torch.int8 and scale.shape == (64,)
    restored = quantized.float() * scale.float()[:, None]
    step = scale.float()[:, None]
    assert torch.all((restored - weight).abs() <= 0.5 * step * (1 + 1e-5))


@pytest.mark.parametrize("shape", [(1, 32), (1, 1, 32), (5, 32)])
def test_int8_matmul_is_the_dequantized_product(shape):
    torch.manual_seed(0)
    quantized, scale = quantize_rows(torch.randn(48, 32))
    x = torch.randn(*shape)
    expected = x @ (quantized.float() * scale.float()[:, None]).T
    got = int8_matmul(x, quantized, scale)
    assert got.shape == (*shape[:-1], 48)
    torch.testing.assert_close(got.float(), expected, atol=0.05, rtol=0.02)  # bf16 activations


def test_int8_copy_serves_only_generated_tokens(tiny_model_dir, monkeypatch):
    """Embeddings, the prompt and the first token are the bf16 model's bit for bit; later
    tokens' one-row matmuls go through the int8 kernel; the module's parameters and state dict
    are untouched."""
    plain = UniModel.load(str(tiny_model_dir), precision="bf16", int8_decode=False)
    keys = set(plain.model.state_dict())
    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    assert quant.int8 is not None and plain.int8 is None
    assert set(quant.model.state_dict()) == keys
    texts = ["The cat sat on the mat.", "A longer sentence about dogs and their owners in the park."]
    assert np.array_equal(quant.embed(texts), plain.embed(texts))

    calls = []
    real = quantized_decode.int8_matmul
    monkeypatch.setattr(quantized_decode, "int8_matmul", lambda *a: calls.append(1) or real(*a))
    ids = quant.prompt_ids("The cat sat on the mat because")
    first = next(iter(quant.generate_ids(ids, max_new_tokens=1)))
    assert not calls  # the prompt step runs on the bf16 weights
    assert first == next(iter(plain.generate_ids(ids, max_new_tokens=1)))
    tokens = list(quant.generate_ids(ids, max_new_tokens=6))
    linears = sum(isinstance(m, torch.nn.Linear) for m in quant.decoder.modules())
    assert len(calls) == (len(tokens) - 1) * (linears + 1)  # every linear and the head, per later step
    assert quant.int8.active is False
    calls.clear()
    quant.embed(texts)
    assert not calls


def test_reuse_stays_exact_and_copies_are_shared(tiny_model_dir):
    from test_unimodel import assert_reuse_gives_reference_tokens

    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    assert_reuse_gives_reference_tokens(quant, quant, quant.prompt_ids("Why?"))
    other = UniModel(quant.model, quant.tokenizer, quant.name, precision="bf16")
    assert other.int8 is quant.int8  # one int8 copy per module
    assert UniModel.load(str(tiny_model_dir), precision="fp32").int8 is None  # no bf16 activations: no int8
