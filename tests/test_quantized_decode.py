"""unirag.quantized_decode: generated tokens' steps on an int8 copy; everything else unchanged."""

import numpy as np
import pytest
import torch

from unirag import quantized_decode
from unirag.lean_step import LeanStep
from unirag.quantized_decode import Int8Decode, int8_matmul, quantize_rows
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
    tokens' one-row matmuls go through the int8 kernel (4 per layer in the lean step, one per
    linear layer in transformers' forward); the module's parameters and state dict are untouched."""
    plain = UniModel.load(str(tiny_model_dir), precision="bf16", int8_decode=False)
    keys = set(plain.model.state_dict())
    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    assert quant.int8 is not None and plain.int8 is None and plain._lean is None
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
    assert len(calls) == (len(tokens) - 1) * (4 * quant.model.config.num_hidden_layers + 1)  # fused q/k/v, gate/up
    calls.clear()
    forward = _without_lean(quant)
    assert list(forward.generate_ids(ids, max_new_tokens=6)) == tokens
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


# ---------------------------------------------------------------- fused copies and the lean step

def _without_lean(uni: UniModel) -> UniModel:
    """A UniModel over the same module (and int8 copy) whose generated tokens run transformers'
    forward with the int8-wrapped linear layers: the path the lean step stands in for."""
    twin = UniModel(uni.model, uni.tokenizer, uni.name, precision="bf16")
    twin._lean = None
    return twin


def _step_logits(uni: UniModel, ids: list[int], n: int) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens and the logits each step sampled from."""
    logits = []
    real = uni._next_token_logits
    uni._next_token_logits = lambda hidden, int8=False: logits.append(real(hidden, int8)) or logits[-1]
    try:
        return list(uni.generate_ids(ids, max_new_tokens=n)), logits
    finally:
        del uni._next_token_logits


def _tiny_variant(tiny_model_dir, **config_changes) -> UniModel:
    """The tiny Llama's tokenizer over a fresh random model whose config differs as given."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(tiny_model_dir)
    for key, value in config_changes.items():
        setattr(config, key, value)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(config).eval()
    return UniModel(model, AutoTokenizer.from_pretrained(tiny_model_dir), "variant", precision="bf16")


def test_fused_rows_compute_each_layers_outputs():
    """Siblings quantized side by side are one matrix that computes every row as its own layer's
    copy did, a view of their buffer: no extra bytes; layers apart are not fused."""
    torch.manual_seed(0)
    decoder = torch.nn.Sequential(*(torch.nn.Linear(32, n, bias=False) for n in (48, 16, 16)))
    head = torch.nn.Linear(32, 50, bias=False)
    int8 = Int8Decode(decoder, head)
    x = torch.randn(1, 32)
    separate = torch.cat([int8.rows[linear].matmul(x) for linear in decoder], dim=-1)
    nbytes = int8.nbytes
    fused = int8.fused(list(decoder))
    assert fused.quantized.shape == (80, 32)
    assert torch.equal(fused.matmul(x), separate)
    assert int8.fused([decoder[0], decoder[2]]) is None and int8.fused([decoder[1], decoder[0]]) is None
    assert int8.nbytes == nbytes
    assert int8.rows[decoder[1]].quantized.data_ptr() == fused.quantized[48:].data_ptr()
    with int8.steps():
        assert torch.equal(decoder[2](x), separate[:, 64:])  # the wrapped layer reads its view


LLAMA_VARIANTS = {
    "tied head, grouped kv heads": {},
    "untied head, one kv head per head": {"tie_word_embeddings": False, "num_key_value_heads": 4},
    "linear rope scaling": {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}},
    "llama3 rope scaling": {"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                                                "rope_theta": 10000.0}},
}


@pytest.mark.parametrize("variant", LLAMA_VARIANTS)
def test_lean_step_gives_the_int8_forwards_logits(tiny_model_dir, variant):
    """The lean step runs transformers' operations in their dtypes and order: each generated
    token's logits are the int8 forward's (bit for bit on the CPUs tried; the bound leaves room
    for a kernel that orders a sum differently), and greedy tokens are the same."""
    lean = _tiny_variant(tiny_model_dir, **LLAMA_VARIANTS[variant])
    assert isinstance(lean._lean, LeanStep)
    forward = _without_lean(lean)
    for prompt in ["The cat sat on the mat because", "Why?", "Paris is the capital of"]:
        ids = lean.prompt_ids(prompt)
        tokens, logits = _step_logits(lean, ids, 24)
        expected_tokens, expected = _step_logits(forward, ids, 24)
        assert tokens == expected_tokens and len(tokens) >= 2
        for got, want in zip(logits, expected):
            assert (got - want).abs().max() <= 1e-3 * want.abs().max()


def test_lean_step_keeps_reuse_exact_and_generation_limits(tiny_model_dir):
    """A reused prefix gives the tokens of no reuse; max_new_tokens and stop tokens end the
    lean loop as they end the forward's; the KV cache is sized to the generation."""
    from test_unimodel import assert_reuse_gives_reference_tokens

    lean = UniModel.load(str(tiny_model_dir), precision="bf16")
    forward = _without_lean(lean)
    ids = lean.prompt_ids("Why?")
    assert_reuse_gives_reference_tokens(lean, lean, ids)
    assert_reuse_gives_reference_tokens(lean, forward, ids)
    reference = list(forward.generate_ids(ids, max_new_tokens=12))
    for n in (1, 2, 5):
        assert list(lean.generate_ids(ids, max_new_tokens=n)) == reference[:n]
    stop = reference[4]
    lean._stop_ids = lambda: {stop}
    assert list(lean.generate_ids(ids, max_new_tokens=12)) == reference[:reference.index(stop)]
    del lean._stop_ids

    from transformers import DynamicCache

    cache = DynamicCache(config=lean.model.config)
    with lean.forward_context():
        lean.decoder(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
        kv = lean._lean.new_cache(cache, 2)
        assert (kv.length, kv.capacity) == (len(ids), len(ids) + 2)
        assert torch.equal(kv.keys[0, :, :len(ids)], cache.layers[0].keys[0].to(kv.keys.dtype))
        lean._lean.hidden(5, kv)
        lean._lean.hidden(6, kv)
        with pytest.raises(ValueError, match="full"):
            lean._lean.hidden(7, kv)


def test_lean_steps_hold_nothing_across_a_yield(tiny_model_dir):
    """Each step takes the lock and leaves it (and inference mode) before its token is yielded,
    so generations interleave on threads and each still gets its own tokens."""
    import threading

    lean = UniModel.load(str(tiny_model_dir), precision="bf16")
    prompts = [lean.prompt_ids(p) for p in ("The cat sat on the mat because", "A dog ran in the", "Why?")]
    expected = [list(lean.generate_ids(ids, max_new_tokens=16)) for ids in prompts]
    for _ in lean.generate_ids(prompts[0], max_new_tokens=4):
        assert not lean._lock.locked() and not torch.is_inference_mode_enabled()
    results = [None] * len(prompts)

    def run(i):
        results[i] = [token for token in lean.generate_ids(prompts[i], max_new_tokens=16)]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == expected
    # generators of one model advanced in turn: each keeps its own KV cache
    generators = [lean.generate_ids(ids, max_new_tokens=16) for ids in prompts]
    interleaved = [[] for _ in prompts]
    for _ in range(16):
        for tokens, generator in zip(interleaved, generators):
            token = next(generator, None)
            if token is not None:
                tokens.append(token)
    assert interleaved == expected


@pytest.mark.parametrize("change, reason", [
    ({"attention_bias": True}, "biases"),
    ({"sliding_window": 8}, "sliding"),
    ({"hidden_act": "gelu"}, "activation"),
    ({"model_type": "mistral"}, "not a LlamaModel"),
    ({"_attn_implementation": "eager"}, "attention implementation"),
    ({"hook": True}, "hooks"),
])
def test_other_models_fall_back_to_the_forward(tiny_model_dir, caplog, monkeypatch, change, reason):
    """A model the lean step would compute differently keeps transformers' forward (with the
    int8 copies), decided once when the UniModel is made."""
    import logging

    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    change = dict(change)
    config = AutoConfig.from_pretrained(tiny_model_dir)
    if change.pop("model_type", None):
        from transformers import MistralConfig

        shared = {k: v for k, v in config.to_dict().items() if k not in ("model_type", "architectures")}
        config = MistralConfig(**shared)
    hook = change.pop("hook", False)
    for key, value in change.items():
        setattr(config, key, value)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(config).eval()
    if hook:
        model.model.layers[1].mlp.register_forward_hook(lambda module, args, output: output)
    with caplog.at_level(logging.INFO, logger="unirag"):
        uni = UniModel(model, AutoTokenizer.from_pretrained(tiny_model_dir), "other", precision="bf16")
    assert uni.int8 is not None and uni._lean is None
    assert reason in caplog.text
    calls = []
    real = quantized_decode.int8_matmul
    monkeypatch.setattr(quantized_decode, "int8_matmul", lambda *a: calls.append(1) or real(*a))
    tokens = list(uni.generate_ids(uni.prompt_ids("The cat sat on the mat because"), max_new_tokens=6))
    wrapped = len(uni.int8.rows)  # every linear layer without a bias
    assert len(tokens) >= 2 and len(calls) == (len(tokens) - 1) * (wrapped + 1)


def test_leading_logits_are_recomputed_from_the_head_itself():
    """The int8 head's bf16 output decides no near-tie: its REFINE_TOP leading logits are the
    head's own, so greedy picks the unquantized head's argmax whenever that is among them."""
    from unirag.quantized_decode import REFINE_TOP, Int8Decode

    torch.manual_seed(0)
    head = torch.nn.Linear(32, 500, bias=False)
    copy = Int8Decode(torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False)), head)
    for hidden in (torch.randn(32), torch.randn(3, 32)):
        logits = copy.head_logits(hidden)
        exact = head(hidden)
        assert logits.shape == exact.shape and logits.dtype == torch.float32
        top = copy.head.matmul(hidden).float().topk(REFINE_TOP, dim=-1).indices  # the int8 shortlist
        torch.testing.assert_close(logits.gather(-1, top), exact.gather(-1, top))
        assert torch.equal(logits.argmax(-1), exact.argmax(-1))


def test_leading_logits_stay_exact_under_autocast():
    from unirag.quantized_decode import Int8Decode

    head = torch.nn.Linear(32, 200, bias=False)
    copy = Int8Decode(torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False)), head)
    hidden = torch.randn(4, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = copy.head_logits(hidden)
    assert logits.dtype == torch.float32 and torch.equal(logits.argmax(-1), head(hidden).argmax(-1))


def test_sibling_layers_fuse_as_views_without_a_second_copy(tiny_model_dir):
    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    attention = quant.decoder.layers[0].self_attn
    fused = quant.int8.fused([attention.q_proj, attention.k_proj, attention.v_proj])
    first = quant.int8.rows[attention.q_proj].quantized
    assert fused.quantized.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
    assert fused.quantized.shape[0] == sum(p.out_features for p in (attention.q_proj, attention.k_proj,
                                                                     attention.v_proj))
