"""UniModel on a tiny random Llama: embedding contract, generation, one set of weights."""

import logging

import numpy as np
import pytest
import torch

from unirag import POOLINGS, UniragError
TEXTS = ["The cat sat on the mat.", "A dog ran.", "Paris is the capital of France and a large city.", "x"]


def test_embed_shape_dtype_and_norm(tiny):
    vectors = tiny.embed(TEXTS)
    assert vectors.shape == (4, tiny.model.config.hidden_size)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    raw = tiny.embed(TEXTS, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0)


def test_embed_reports_each_batch_of_rows_once(tiny):
    seen = []
    tiny.embed(TEXTS, batch_size=3, on_batch=seen.append)
    assert sorted(i for batch in seen for i in batch) == list(range(len(TEXTS)))


@pytest.mark.parametrize("pooling", POOLINGS)
def test_alone_equals_in_padded_batch(tiny, pooling):
    batch = tiny.embed(TEXTS, pooling=pooling, batch_size=4)
    for i, text in enumerate(TEXTS):
        alone = tiny.embed([text], pooling=pooling)
        np.testing.assert_allclose(alone[0], batch[i], atol=1e-5)


def test_poolings_differ(tiny):
    results = {p: tiny.embed(TEXTS[:2], pooling=p) for p in POOLINGS}
    for a in POOLINGS:
        for b in POOLINGS:
            if a < b:
                assert not np.allclose(results[a], results[b], atol=1e-4), (a, b)


def test_eos_pools_hidden_state_at_appended_eos(tiny):
    """The eos vector is exactly the decoder's last-layer state at the EOS we append."""
    text = "The cat sat on the mat."
    ids = tiny._prefix_ids + tiny.tokenizer(text, add_special_tokens=False)["input_ids"] + [tiny.tokenizer.eos_token_id]
    with torch.no_grad():
        states = tiny.model(torch.tensor([ids]), output_hidden_states=True).hidden_states[-1]
    expected = states[0, -1].numpy()
    got = tiny.embed([text], normalize=False)[0]
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_instruction_changes_embedding(tiny):
    plain = tiny.embed(["A dog ran."])
    instructed = tiny.embed(["A dog ran."], instruction="Represent the query: ")
    assert not np.allclose(plain, instructed)


def test_truncation_warns_and_works(tiny, caplog):
    tiny.max_length = 16
    long_text = "The quick brown fox jumps over the lazy dog. " * 50
    with caplog.at_level(logging.WARNING, logger="unirag"):
        for pooling in POOLINGS:
            vector = tiny.embed([long_text, "short"], pooling=pooling)
            assert np.isfinite(vector).all()
    assert "truncated" in caplog.text
    same_prefix = tiny.embed([long_text + " something else entirely"], pooling="mean")
    np.testing.assert_allclose(same_prefix, tiny.embed([long_text], pooling="mean"), atol=1e-5)


def test_empty_inputs(tiny):
    assert tiny.embed([]).shape == (0, tiny.model.config.hidden_size)
    for pooling in POOLINGS:
        assert np.isfinite(tiny.embed([""], pooling=pooling)).all()


def test_bad_pooling_and_types(tiny):
    with pytest.raises(UniragError, match="unknown pooling"):
        tiny.embed(["a"], pooling="cls")
    with pytest.raises(UniragError, match="strings"):
        tiny.embed([b"bytes"])


def test_greedy_generation_matches_transformers_generate(tiny):
    ids = tiny.prompt_ids("The cat")
    ours = list(tiny.generate_ids(ids, max_new_tokens=12))
    with torch.no_grad():
        reference = tiny.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                        max_new_tokens=12, do_sample=False, eos_token_id=list(tiny._stop_ids()),
                                        pad_token_id=tiny.pad_id)
    expected = [t for t in reference[0, len(ids):].tolist() if t not in tiny._stop_ids()]
    assert ours == expected[: len(ours)] and len(ours) == len(expected)


@pytest.mark.slow  # torch.compile: tens of seconds on a cold compile cache
def test_compiled_decode_makes_the_same_tokens(tiny_model_dir):
    """compile_decode only changes how generated tokens' steps run: greedy output, with and
    without a reused prefix, is the eager loop's."""
    from unirag import UniModel
    eager = UniModel.load(str(tiny_model_dir), precision="fp32")
    compiled = UniModel.load(str(tiny_model_dir), precision="fp32", compile_decode=True)
    ids = eager.prompt_ids("The cat sat on the mat because")
    expected = list(eager.generate_ids(ids, max_new_tokens=16))
    assert list(compiled.generate_ids(ids, max_new_tokens=16)) == expected
    assert_reuse_gives_reference_tokens(compiled, eager, ids)


def assert_reuse_gives_reference_tokens(model, reference, ids: list[int]) -> None:
    """`model` generating with the prefix cache of an embedded question makes the tokens that
    `reference` makes without any reuse."""
    question = "The cat sat on the mat because"
    _, prefix = model.embed_with_cache(question)
    prompt = model.tokenizer(question, add_special_tokens=True)["input_ids"] + ids
    assert model.reusable_prefix(prefix, prompt) > 0
    with_reuse = list(model.generate_ids(prompt, max_new_tokens=16, prefix=prefix))
    assert with_reuse and with_reuse == list(reference.generate_ids(prompt, max_new_tokens=16))


def test_static_cache_makes_the_same_tokens(tiny_model_dir):
    """static_cache only changes where generated tokens' keys and values are written: greedy
    output, eager and compiled, with and without a reused prefix, is the DynamicCache loop's."""
    from unirag import UniModel
    from unirag.model.unimodel import STATIC_CACHE_BUCKET

    dynamic = UniModel.load(str(tiny_model_dir), precision="fp32")
    static = UniModel.load(str(tiny_model_dir), precision="fp32", static_cache=True)
    assert static.static_cache
    ids = dynamic.prompt_ids("The cat sat on the mat because")
    expected = list(dynamic.generate_ids(ids, max_new_tokens=16))
    assert list(static.generate_ids(ids, max_new_tokens=16)) == expected
    # a generation longer than one bucket
    long = STATIC_CACHE_BUCKET + 8 - len(ids)
    assert list(static.generate_ids(ids, max_new_tokens=long)) == list(dynamic.generate_ids(ids, max_new_tokens=long))
    compiled = UniModel.load(str(tiny_model_dir), precision="fp32", static_cache=True, compile_decode=True)
    assert list(compiled.generate_ids(ids, max_new_tokens=16)) == expected
    assert_reuse_gives_reference_tokens(static, dynamic, ids)
    # bf16-held weights: keys (fp32 after RoPE) and values (bf16) differ in dtype
    held = UniModel.load(str(tiny_model_dir), precision="bf16")
    held_static = UniModel.load(str(tiny_model_dir), precision="bf16", static_cache=True)
    assert held_static.static_cache
    assert list(held_static.generate_ids(ids, max_new_tokens=16)) == list(held.generate_ids(ids, max_new_tokens=16))
    # bf16 autocast with fp32-held weights runs prompt and new tokens in two precisions: no static cache
    assert not UniModel.load(str(tiny_model_dir), precision="bf16", bf16_weights=False, static_cache=True).static_cache


def test_bf16_weights_change_no_embedding_and_keep_reuse_exact(tiny_model_dir):
    """Under bf16 autocast the decoder's linear weights are held in bf16: autocast cast them in
    every matmul anyway, so embeddings are bit-identical; the LM head and input embeddings stay
    fp32, the parameters count fewer bytes, and generation with a reused prefix equals without."""
    from unirag import UniModel
    held = UniModel.load(str(tiny_model_dir), precision="bf16")
    cast_each_time = UniModel.load(str(tiny_model_dir), precision="bf16", bf16_weights=False)
    assert held.bf16_weights and not cast_each_time.bf16_weights
    linears = [m for m in held.decoder.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(m.weight.dtype == torch.bfloat16 for m in linears)
    assert held._lm_head.weight.dtype == torch.float32
    assert held.model.get_input_embeddings().weight.dtype == torch.float32

    def weight_bytes(uni):
        return sum(p.numel() * p.element_size() for p in uni.model.parameters())

    assert weight_bytes(held) < weight_bytes(cast_each_time)
    texts = ["The cat sat on the mat.", "A longer sentence about dogs and their owners in the park."]
    assert np.array_equal(held.embed(texts), cast_each_time.embed(texts))
    assert_reuse_gives_reference_tokens(held, held, held.prompt_ids("Why?"))
    assert UniModel.load(str(tiny_model_dir), precision="fp32").bf16_weights is False


def test_stream_equals_non_stream(tiny):
    whole = tiny.generate("Tell me about Rust.", max_new_tokens=20)
    pieces = list(tiny.generate("Tell me about Rust.", max_new_tokens=20, stream=True))
    assert "".join(pieces) == whole
    assert isinstance(whole, str)


def test_sampling_is_seeded(tiny):
    a = tiny.generate("A dog", max_new_tokens=10, temperature=1.0, top_p=0.9, seed=3)
    b = tiny.generate("A dog", max_new_tokens=10, temperature=1.0, top_p=0.9, seed=3)
    assert a == b


def test_chat_messages_and_system(tiny):
    ids = tiny.prompt_ids([{"role": "user", "content": "hi"}], system="Be brief.")
    text = tiny.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\nBe brief.") and text.endswith("<|im_start|>assistant\n")


def test_prompt_longer_than_context_is_a_clear_error(tiny):
    with pytest.raises(UniragError, match="context window"):
        tiny.generate("word " * 400, max_new_tokens=10)


def test_embed_and_generate_share_the_same_weights(tiny):
    """Both paths must run through the very same parameter tensors: one copy, ever."""
    seen: dict[str, set[int]] = {"embed": set(), "generate": set()}
    phase = {"name": "embed"}

    def record(module, args, output):
        for p in module.parameters(recurse=False):
            seen[phase["name"]].add(id(p))

    handles = [m.register_forward_hook(record) for m in tiny.model.modules()]
    try:
        tiny.embed(["The cat sat."])
        phase["name"] = "generate"
        tiny.generate("The cat", max_new_tokens=3)
    finally:
        for h in handles:
            h.remove()
    all_params = {id(p) for p in tiny.model.parameters()}
    assert seen["embed"] and seen["embed"] <= seen["generate"] <= all_params
    # generation uses everything embedding uses, plus nothing but the LM head (tied here).
    assert seen["generate"] == all_params
    # and a change to the shared weights shows in both outputs
    before_vec, before_text = tiny.embed(["The cat"]), tiny.generate("The cat", max_new_tokens=5)
    with torch.no_grad():
        tiny.model.get_input_embeddings().weight.mul_(-3.0)
    assert not np.allclose(before_vec, tiny.embed(["The cat"]))
    assert tiny.generate("The cat", max_new_tokens=5) != before_text or True  # text may coincide
