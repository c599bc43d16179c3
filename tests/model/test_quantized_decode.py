"""unirag.model.fast_decode.quantized_decode: generated tokens' steps on an int4 or int8 copy; everything else unchanged."""

import numpy as np
import pytest
import torch

from unirag.model.fast_decode import quantized_decode
from unirag.model.fast_decode.lean_step import LeanStep
from unirag.model.fast_decode.quantized_decode import DecodeCopy, Int4Rows, Int8Rows, int8_matmul, quantize_int4, quantize_rows
from unirag.model.unimodel import UniModel

pytestmark = pytest.mark.skipif(not all(quantized_decode.supported(torch.device("cpu"), fmt)
                                        for fmt in quantized_decode.FORMATS),
                                reason="this torch build lacks a weight-only int4 or int8 CPU kernel")
FORMATS = quantized_decode.FORMATS


def test_rows_round_trip_within_half_a_step():
    torch.manual_seed(0)
    weight = torch.randn(64, 32) * torch.linspace(0.01, 3, 64)[:, None]  # rows of very different sizes
    quantized, scale = quantize_rows(weight)
    assert quantized.dtype == torch.int8 and scale.shape == (64,)
    restored = quantized.float() * scale.float()[:, None]
    step = scale.float()[:, None]
    assert torch.all((restored - weight).abs() <= 0.5 * step * (1 + 1e-5))


def _int4_restored(levels, scale, offset):
    group = quantized_decode.INT4_GROUP
    shape = levels.shape
    grouped = (levels.view(shape[0], -1, group).float() - 8) * scale.float()[..., None] + offset.float()[..., None]
    return grouped.view(shape)


def test_int4_groups_round_trip_within_half_a_step():
    torch.manual_seed(0)
    weight = torch.randn(32, 96) * torch.linspace(0.01, 3, 96)  # groups of very different sizes
    levels, scale, offset = quantize_int4(weight)
    assert levels.min() >= 0 and levels.max() <= 15 and scale.shape == (32, 3)
    error = (_int4_restored(levels, scale, offset) - weight).abs().view(32, 3, -1)
    # half a step, plus the bf16 rounding of the group's offset
    assert torch.all(error <= 0.5 * scale.float()[..., None] + offset.float().abs()[..., None] * 2 ** -8 + 1e-7)


def test_int4_reproduces_weights_already_on_a_q4_1_grid():
    """Weights dequantized from a Q4_1 file (16 levels per group of 32 from its minimum up) come
    back on their own levels: only the bf16 rounding of scale and offset moves them."""
    torch.manual_seed(0)
    low, step = torch.randn(16, 2, 1), torch.rand(16, 2, 1) * 0.1 + 0.01
    levels = torch.randint(0, 16, (16, 2, 32))
    levels[..., 0], levels[..., 1] = 0, 15  # Q4_1 spans each group from its minimum to its maximum
    weight = (low + step * levels).view(16, 64)
    found, scale, offset = quantize_int4(weight)
    assert torch.equal(found.view(16, 2, 32), levels.to(torch.int32))
    torch.testing.assert_close(_int4_restored(found, scale, offset), weight, atol=0.02, rtol=0.01)


@pytest.mark.parametrize("rows_class", [Int8Rows, Int4Rows])
@pytest.mark.parametrize("shape", [(1, 64), (1, 1, 64), (5, 64)])
def test_copies_multiply_as_the_dequantized_weights(rows_class, shape):
    torch.manual_seed(0)
    weight = torch.randn(48, 64)
    if rows_class is Int8Rows:
        quantized, scale = quantize_rows(weight)
        dequantized = quantized.float() * scale.float()[:, None]
    else:
        dequantized = _int4_restored(*quantize_int4(weight))
    rows = rows_class.of(weight)
    x = torch.randn(*shape)
    got = rows.matmul(x)
    assert got.shape == (*shape[:-1], 48) and rows.out_features == 48
    torch.testing.assert_close(got.float(), x @ dequantized.T, atol=0.05, rtol=0.02)  # bf16 activations
    if rows_class is Int8Rows:
        torch.testing.assert_close(int8_matmul(x, quantized, scale), got)


def test_int4_packs_a_tall_matrix_block_by_block_as_a_whole():
    """More rows than QUANTIZE_BLOCK_ROWS (an LM head) are packed block by block, the last one
    partial: the copy still multiplies as its dequantized weights."""
    torch.manual_seed(0)
    weight = torch.randn(quantized_decode.QUANTIZE_BLOCK_ROWS * 2 + 48, 64)
    x = torch.randn(2, 64)
    expected = x @ _int4_restored(*quantize_int4(weight)).T
    torch.testing.assert_close(Int4Rows.of(weight).matmul(x).float(), expected, atol=0.05, rtol=0.02)


def test_int4_falls_back_to_int8_where_the_shape_does_not_fit():
    assert isinstance(quantized_decode.quantized_rows(torch.randn(48, 64), "int4"), Int4Rows)
    assert isinstance(quantized_decode.quantized_rows(torch.randn(40, 64), "int4"), Int8Rows)  # rows not 16s
    assert isinstance(quantized_decode.quantized_rows(torch.randn(48, 40), "int4"), Int8Rows)  # no whole groups


def _count_copy_matmuls(monkeypatch) -> list:
    calls = []
    for rows_class in (Int8Rows, Int4Rows):
        real = rows_class.matmul
        monkeypatch.setattr(rows_class, "matmul", lambda self, x, real=real: calls.append(1) or real(self, x))
    return calls


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_copy_serves_only_generated_tokens(tiny_model_dir, monkeypatch, fmt):
    """Embeddings, the prompt and the first token are the bf16 model's bit for bit; later
    tokens' one-row matmuls go through the copy (4 per layer in the lean step, one per
    linear layer in transformers' forward, and the head); the module's parameters and state dict
    are untouched. Counted on the Python lean step (its compiled twin calls the same kernels from
    C++, with the same values: tests/model/test_native_step.py)."""
    plain = UniModel.load(str(tiny_model_dir), precision="bf16", decode_copy=None)
    keys = set(plain.model.state_dict())
    quant = UniModel.load(str(tiny_model_dir), precision="bf16", decode_copy=fmt, native_step=False)
    assert quant.decode_copy.format == fmt and plain.decode_copy is None and plain._lean is None
    assert set(quant.model.state_dict()) == keys
    texts = ["The cat sat on the mat.", "A longer sentence about dogs and their owners in the park."]
    assert np.array_equal(quant.embed(texts), plain.embed(texts))

    calls = _count_copy_matmuls(monkeypatch)
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
    assert quant.decode_copy.active is False
    calls.clear()
    quant.embed(texts)
    assert not calls


def test_reuse_stays_exact_and_copies_are_shared(tiny_model_dir):
    from test_unimodel import assert_reuse_gives_reference_tokens

    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    assert_reuse_gives_reference_tokens(quant, quant, quant.prompt_ids("Why?"))
    other = UniModel(quant.model, quant.tokenizer, quant.name, precision="bf16")
    assert other.decode_copy is quant.decode_copy  # one copy per module and format
    eight = UniModel(quant.model, quant.tokenizer, quant.name, precision="bf16", decode_copy="int8")
    assert eight.decode_copy is not quant.decode_copy and eight.decode_copy.format == "int8"
    assert UniModel.load(str(tiny_model_dir), precision="fp32").decode_copy is None  # no bf16 activations


# ---------------------------------------------------------------- fused copies and the lean step

def _without_lean(uni: UniModel) -> UniModel:
    """A UniModel over the same module (and copy) whose generated tokens run transformers'
    forward with the wrapped linear layers: the path the lean step stands in for."""
    twin = UniModel(uni.model, uni.tokenizer, uni.name, precision="bf16",
                    decode_copy=uni.decode_copy.format)
    twin._lean = None
    return twin


def _step_logits(uni: UniModel, ids: list[int], n: int) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens and the logits each step sampled from."""
    logits = []
    real = uni._next_token_logits
    uni._next_token_logits = lambda hidden, quantized=False: logits.append(real(hidden, quantized)) or logits[-1]
    try:
        return list(uni.generate_ids(ids, max_new_tokens=n)), logits
    finally:
        del uni._next_token_logits


def _tiny_variant(tiny_model_dir, decode_copy="int4", **config_changes) -> UniModel:
    """The tiny Llama's tokenizer over a fresh random model whose config differs as given."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(tiny_model_dir)
    for key, value in config_changes.items():
        setattr(config, key, value)
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(config).eval()
    return UniModel(model, AutoTokenizer.from_pretrained(tiny_model_dir), "variant", precision="bf16",
                    decode_copy=decode_copy)


@pytest.mark.parametrize("fmt", FORMATS)
def test_stacked_rows_compute_each_layers_outputs(fmt):
    """Sibling layers' rows stacked into one copy compute every output as each layer's own copy
    does (scales are per row or per group within a row); copies are made once, when asked."""
    torch.manual_seed(0)
    decoder = torch.nn.Sequential(*(torch.nn.Linear(32, n, bias=False) for n in (48, 16, 16)))
    head = torch.nn.Linear(32, 64, bias=False)
    copy = DecodeCopy(decoder, head, fmt)
    x = torch.randn(1, 32)
    separate = torch.cat([copy.rows(linear).matmul(x) for linear in decoder], dim=-1)
    stacked = copy.rows(*decoder)
    assert stacked.out_features == 80 and copy.rows(*decoder) is stacked
    assert torch.equal(stacked.matmul(x), separate)
    with copy.steps():
        assert torch.equal(decoder[2](x), separate[:, 64:])  # the wrapped layer reads its own copy
    assert torch.equal(decoder[2](x), torch.nn.functional.linear(x, decoder[2].weight))  # outside steps()
    with pytest.raises(KeyError):
        copy.rows(head)


LLAMA_VARIANTS = {
    "tied head, grouped kv heads": {},
    "untied head, one kv head per head": {"tie_word_embeddings": False, "num_key_value_heads": 4},
    "linear rope scaling": {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}},
    "llama3 rope scaling": {"rope_parameters": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16,
                                                "rope_theta": 10000.0}},
}


def _lean_logits(uni: UniModel, ids: list[int], tokens: list[int]) -> list[torch.Tensor]:
    """The lean step's logits after each of `tokens`, fed in turn after the prompt `ids`."""
    from transformers import DynamicCache

    cache, logits = DynamicCache(config=uni.model.config), []
    with uni._lock, torch.inference_mode():
        uni._forward_step(0, torch.tensor([ids]), cache, False)
        kv = uni._lean.new_cache(cache, len(tokens))
        for token in tokens:
            logits.append(uni._next_token_logits(uni._lean.hidden(token, kv), True))
    return logits


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("variant", LLAMA_VARIANTS)
def test_lean_step_gives_the_copys_forward_logits(tiny_model_dir, variant, fmt):
    """The lean step runs transformers' operations in their dtypes and order (attention aside:
    its own fp32 products over the same bf16-rounded inputs): fed the forward's greedy tokens,
    it gives the logits the forward over the same copy gave, to rounding."""
    lean = _tiny_variant(tiny_model_dir, fmt, **LLAMA_VARIANTS[variant])
    assert isinstance(lean._lean, LeanStep)
    forward = _without_lean(lean)
    for prompt in ["The cat sat on the mat because", "Why?", "Paris is the capital of"]:
        ids = lean.prompt_ids(prompt)
        tokens, expected = _step_logits(forward, ids, 24)
        assert len(tokens) >= 2
        for got, want in zip(_lean_logits(lean, ids, tokens[:-1]), expected[1:]):
            # not bit for bit: with bf16 inputs SDPA's CPU kernel rounds the attention weights to
            # bf16 (outputs off by up to half their size where terms cancel), the lean step's
            # fp32 products do not (test_one_query_attention_is_sdpas), and a random tiny model
            # carries such differences into its logits; a wrong head, position or cache entry
            # moves them by far more
            assert (got - want).abs().max() <= 2 ** -4 * want.abs().max()


@pytest.mark.parametrize("heads, kv_heads, length", [(9, 3, 7), (4, 4, 1), (8, 2, 300)])
def test_one_query_attention_is_sdpas(heads, kv_heads, length):
    """The lean step's attention for one position equals SDPA's with grouped-query heads."""
    import torch.nn.functional as F

    from unirag.model.fast_decode.lean_step import one_query_attention

    torch.manual_seed(0)
    queries, keys, values = torch.randn(heads, 16), torch.randn(kv_heads, length, 16), torch.randn(kv_heads, length, 16)
    expected = F.scaled_dot_product_attention(queries.view(1, heads, 1, 16), keys[None], values[None], scale=0.3,
                                              enable_gqa=heads != kv_heads)
    torch.testing.assert_close(one_query_attention(queries, keys, values, 0.3), expected.view(heads, 16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_is_llamas(dtype):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    from unirag.model.fast_decode.lean_step import rms_norm

    torch.manual_seed(0)
    norm = LlamaRMSNorm(64, eps=1e-5)
    norm.weight.data = torch.rand(64) + 0.5
    x = torch.randn(3, 64, dtype=dtype) * 4
    torch.testing.assert_close(rms_norm(x, norm.weight.data, norm.variance_epsilon), norm(x))


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
        assert torch.equal(kv.keys[0, :, :len(ids)], cache.layers[0].keys[0].to(torch.bfloat16).float())
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
    copy), decided once when the UniModel is made."""
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
    assert uni.decode_copy is not None and uni._lean is None
    assert reason in caplog.text
    calls = _count_copy_matmuls(monkeypatch)
    tokens = list(uni.generate_ids(uni.prompt_ids("The cat sat on the mat because"), max_new_tokens=6))
    wrapped = sum(uni.decode_copy.covers(m) for m in uni.decoder.modules())  # every linear layer without a bias
    assert len(tokens) >= 2 and len(calls) == (len(tokens) - 1) * (wrapped + 1)


def test_leading_logits_are_recomputed_from_the_head_itself():
    """The head copy's bf16 output decides no near-tie: its REFINE_TOP leading logits are the
    head's own, so greedy picks the unquantized head's argmax whenever that is among them."""
    from unirag.model.fast_decode.quantized_decode import REFINE_TOP

    torch.manual_seed(0)
    head = torch.nn.Linear(32, 500, bias=False)
    copy = DecodeCopy(torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False)), head)
    for hidden in (torch.randn(32), torch.randn(3, 32)):
        logits = copy.head_logits(hidden)
        exact = head(hidden)
        assert logits.shape == exact.shape and logits.dtype == torch.float32
        top = copy.head.matmul(hidden).float().topk(REFINE_TOP, dim=-1).indices  # the copy's shortlist
        torch.testing.assert_close(logits.gather(-1, top), exact.gather(-1, top))
        assert torch.equal(logits.argmax(-1), exact.argmax(-1))


def test_leading_logits_stay_exact_under_autocast():
    head = torch.nn.Linear(32, 200, bias=False)
    copy = DecodeCopy(torch.nn.Sequential(torch.nn.Linear(32, 32, bias=False)), head)
    hidden = torch.randn(4, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = copy.head_logits(hidden)
    assert logits.dtype == torch.float32 and torch.equal(logits.argmax(-1), head(hidden).argmax(-1))


@pytest.mark.parametrize("fmt", FORMATS)
def test_greedy_token_is_the_heads_own_argmax(fmt):
    """The shortlisting head (int4 for an int4 copy, the int8 head for an int8 one) only
    proposes: the token taken is the unquantized head's argmax, for every hidden vector tried,
    inside autocast too; an int4 copy makes no int8 head for greedy tokens."""
    torch.manual_seed(0)
    head = torch.nn.Linear(64, 512, bias=False)
    copy = DecodeCopy(torch.nn.Sequential(torch.nn.Linear(64, 64, bias=False)), head, fmt)
    for _ in range(50):
        hidden = torch.randn(64)
        assert copy.greedy_token(hidden) == int(head(hidden).argmax())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert copy.greedy_token(hidden) == int(head(hidden).argmax())
    assert isinstance(copy.greedy_head, Int4Rows if fmt == "int4" else Int8Rows)
    assert (copy._head is None) == (fmt == "int4")


def test_only_plain_greedy_decoding_takes_the_shortlist(tiny_model_dir, monkeypatch):
    """Greedy tokens come from `greedy_token`; sampled tokens need every logit (`head_logits`).
    The prompt's step uses neither."""
    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    quant._stop_ids = lambda: set()  # every step makes a token
    used = []
    for name in ("greedy_token", "head_logits"):
        real = getattr(DecodeCopy, name)
        monkeypatch.setattr(DecodeCopy, name, lambda self, h, real=real, name=name: used.append(name) or real(self, h))
    ids = quant.prompt_ids("The cat sat on the mat because")
    for options, expected in (({}, "greedy_token"), ({"temperature": 0.8, "seed": 0}, "head_logits")):
        used.clear()
        assert len(list(quant.generate_ids(ids, max_new_tokens=5, **options))) == 5
        assert used == [expected] * 4, options


def test_the_lean_step_holds_only_stacked_copies(tiny_model_dir):
    """A Llama decoder served by the lean step gets copies of its q/k/v and gate/up stacked, and
    no copy of each of those layers alone (copies are made when first asked)."""
    quant = UniModel.load(str(tiny_model_dir), precision="bf16")
    attention = quant.decoder.layers[0].self_attn
    stacked = quant.decode_copy.rows(attention.q_proj, attention.k_proj, attention.v_proj)
    assert quant._lean.layers[0].qkv is stacked
    assert stacked.out_features == sum(p.out_features for p in (attention.q_proj, attention.k_proj,
                                                                 attention.v_proj))
    assert (attention.q_proj,) not in quant.decode_copy._copies
