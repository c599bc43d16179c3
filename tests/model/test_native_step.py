"""unirag.model.fast_decode.native_step: the lean step compiled gives the Python step's values bit for bit, and
where it cannot be built generation runs on as before."""

import logging
import shutil

import pytest
import torch
from test_quantized_decode import FORMATS, LLAMA_VARIANTS, _tiny_variant

from unirag.model.fast_decode import native_step

from unirag.model.fast_decode import quantized_decode
from unirag.model.fast_decode.lean_step import _UNBUILT

pytestmark = pytest.mark.skipif(not all(quantized_decode.supported(torch.device("cpu"), fmt) for fmt in FORMATS),
                                reason="this torch build lacks a weight-only int4 or int8 CPU kernel")
needs_compiler = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler to build the native step")


def _prefilled(uni, prompt: str):
    """The prompt's ids and its DynamicCache, as generation's first step leaves them."""
    from transformers import DynamicCache

    ids, cache = uni.prompt_ids(prompt), DynamicCache(config=uni.model.config)
    with uni._lock, torch.inference_mode():
        uni._forward_step(0, torch.tensor([ids]), cache, False)
    return ids, cache


@needs_compiler
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("variant", LLAMA_VARIANTS)
def test_native_step_is_the_python_step_bit_for_bit(tiny_model_dir, variant, fmt):
    """Fed the same tokens from the same prompt cache, both steps give equal hidden states and
    write equal keys and values, token after token."""
    uni = _tiny_variant(tiny_model_dir, fmt, **LLAMA_VARIANTS[variant])
    lean = uni._lean
    assert lean.native is _UNBUILT  # built on the first generated token, not at load
    native = native_step.build(lean)
    assert native is not None, "the native step did not build (see the log)"
    for prompt in ["The cat sat on the mat because", "Why?"]:
        ids, cache = _prefilled(uni, prompt)
        python_kv, native_kv = lean.new_cache(cache, 24), lean.new_cache(cache, 24)
        token = ids[-1]
        with torch.inference_mode():
            for _ in range(24):
                lean.native = None
                want = lean.hidden(token, python_kv)
                lean.native = native
                got = lean.hidden(token, native_kv)
                assert torch.equal(got, want)
                token = int(uni._next_token_logits(want, True).argmax())
        assert native_kv.length == python_kv.length == len(ids) + 24
        assert torch.equal(native_kv.keys, python_kv.keys) and torch.equal(native_kv.values, python_kv.values)


@needs_compiler
def test_generation_is_the_same_with_and_without_it(tiny_model_dir):
    """Greedy and seeded sampled tokens come out alike; the step builds on the first token."""
    uni = _tiny_variant(tiny_model_dir, "int4")
    ids = uni.prompt_ids("Paris is the capital of")
    compiled = [list(uni.generate_ids(ids, max_new_tokens=16, **kw)) for kw in ({}, {"temperature": 0.8, "seed": 3})]
    assert uni._lean.native is not None and uni._lean.native is not _UNBUILT
    uni._lean.native = None
    assert [list(uni.generate_ids(ids, max_new_tokens=16, **kw))
            for kw in ({}, {"temperature": 0.8, "seed": 3})] == compiled


def test_without_a_build_the_python_step_serves(tiny_model_dir, monkeypatch, caplog):
    """A failed build is logged once, in one line, and generation runs on the Python step;
    UNIRAG_NATIVE_STEP=0 or native_step=False never builds."""
    import torch.utils.cpp_extension

    def no_compiler(*args, **kwargs):
        raise RuntimeError("Error building extension 'unirag_native_step':\n c++: not found")

    monkeypatch.setattr(torch.utils.cpp_extension, "load", no_compiler)
    native_step.extension.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="unirag.model.fast_decode.native_step"):
            uni = _tiny_variant(tiny_model_dir, "int4")
            tokens = list(uni.generate_ids(uni.prompt_ids("Why?"), max_new_tokens=4))
            assert uni._lean.native is None and len(tokens) == 4
            second = _tiny_variant(tiny_model_dir, "int8")
            assert len(list(second.generate_ids(second.prompt_ids("Why?"), max_new_tokens=2))) == 2
        failures = [r.getMessage() for r in caplog.records
                    if r.name == "unirag.model.fast_decode.native_step" and "did not build" in r.getMessage()]
        assert len(failures) == 1 and "c++: not found" in failures[0] and "\n" not in failures[0]
    finally:
        native_step.extension.cache_clear()

    monkeypatch.setenv("UNIRAG_NATIVE_STEP", "0")
    assert native_step.build(_tiny_variant(tiny_model_dir, "int4")._lean) is None
    monkeypatch.delenv("UNIRAG_NATIVE_STEP")
    from unirag.model.unimodel import UniModel

    plain = _tiny_variant(tiny_model_dir, "int4")
    off = UniModel(plain.model, plain.tokenizer, "off", precision="bf16", decode_copy="int4", native_step=False)
    assert off._lean.native is None


@pytest.mark.parametrize("message, reason", [
    ("Error building extension 'x': [1/2] c++ -c a.cpp -o a.o \nFAILED: a.o \nc++ -c a.cpp -o a.o \n"
     "/bin/sh: 1: c++: not found\nninja: build stopped: subcommand failed.\n", "/bin/sh: 1: c++: not found"),
    ("Error building extension 'x': [1/2] c++ -c a.cpp\nFAILED: a.o\nIn file included from a.cpp:1:\n"
     "torch/extension.h:9:10: fatal error: Python.h: No such file or directory\ncompilation terminated.\n"
     "ninja: build stopped: subcommand failed.", "torch/extension.h:9:10: fatal error: Python.h: No such file or directory"),
    ("Ninja is required to load C++ extensions", "Ninja is required to load C++ extensions"),
])
def test_a_failed_build_says_why_in_one_line(message, reason):
    assert native_step._reason(RuntimeError(message)) == reason
