"""The model on a CUDA GPU: every pass runs there and gives what the CPU gives, up to rounding.

Skipped without a GPU. `scripts/gpu_check.sh` runs these on a GPU machine (no network needed).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from unirag import UniModel
from unirag.retrieval import lexical, store

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

TEXTS = ["The cat sat on the mat.", "Rust has ownership and borrowing.", "Loops can return values with break."]


@pytest.fixture
def pair(tiny_model_dir):
    """The tiny model on the CPU and on the GPU, both in fp32 (so the two compare closely)."""
    cpu = UniModel.load(str(tiny_model_dir), precision="fp32", device="cpu")
    gpu = UniModel.load(str(tiny_model_dir), precision="fp32", device="cuda")
    return cpu, gpu


def test_auto_loads_on_the_gpu_in_bf16_without_the_cpu_decode_paths(tiny_model_dir):
    model = UniModel.load(str(tiny_model_dir), device="auto")
    assert model.device.type == "cuda"
    assert all(p.device.type == "cuda" for p in model.model.parameters())
    if torch.cuda.is_bf16_supported():
        assert model.autocast_dtype is torch.bfloat16
    assert model.decode_copy is None and model._lean is None  # int4/int8 and the native step are CPU kernels
    assert model.generate("The cat", max_new_tokens=4) is not None
    assert np.isfinite(model.embed(TEXTS)).all()


def test_embeddings_match_the_cpu(pair):
    cpu, gpu = pair
    assert np.allclose(cpu.embed(TEXTS), gpu.embed(TEXTS), atol=1e-4)
    vector, cache = gpu.embed_with_cache(TEXTS[0])
    assert np.allclose(vector, cpu.embed([TEXTS[0]])[0], atol=1e-4)


def test_greedy_generation_matches_the_cpu(pair):
    cpu, gpu = pair
    for prompt in ("The cat", "Rust has"):
        assert cpu.generate(prompt, max_new_tokens=12) == gpu.generate(prompt, max_new_tokens=12)


def test_rerank_and_evidence_scores_match_the_cpu(pair):
    from unirag.answer import evidence
    from unirag.model.scoring import question_logprobs, shared_context_loglikelihoods
    from unirag.retrieval.search import Hit

    cpu, gpu = pair
    assert np.allclose(question_logprobs(cpu, "What does a loop return?", TEXTS),
                       question_logprobs(gpu, "What does a loop return?", TEXTS), atol=1e-3)
    context, continuations = [5, 6, 7, 8], [[9, 10], [11], [12, 13, 14]]
    assert np.allclose([s for s, _ in shared_context_loglikelihoods(cpu, context, continuations)],
                       [s for s, _ in shared_context_loglikelihoods(gpu, context, continuations)], atol=1e-3)
    hits = [Hit(str(i), 1.0, text + " It is true. That is all.", f"{i}.md") for i, text in enumerate(TEXTS)]
    _, on_cpu, null_cpu = evidence.score(cpu, "What does a loop return?", hits)
    _, on_gpu, null_gpu = evidence.score(gpu, "What does a loop return?", hits)
    assert null_cpu == pytest.approx(null_gpu, abs=1e-3)
    for name in on_cpu:
        assert np.allclose(on_cpu[name], on_gpu[name], atol=1e-3), name


def test_ingest_and_ask_on_the_gpu(tiny_model_dir, tmp_path):
    from unirag.answer.ask import AskSettings, ask
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "loops.md").write_text("# Loops\n\nLoops can return values with break. A loop runs again.\n")
    (docs / "cats.md").write_text("# Cats\n\nThe cat sat on the mat. Cats sleep a lot.\n")
    gpu = UniModel.load(str(tiny_model_dir), device="cuda")
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", gpu, create=True)
    summary = ingest(gpu, collection, docs, settings=ChunkSettings(chunk_size=32, overlap=8))
    assert summary.chunks_written >= 2 and lexical.index_for(collection).ids
    for mode in ("extractive", "generated"):
        answer = ask(gpu, collection, "How does a loop return a value?", AskSettings(answer=mode, max_new_tokens=8))
        assert answer.hits and isinstance(answer.read(), str)


def test_training_steps_on_the_gpu(tiny_model_dir, tmp_path):
    from unirag.training.config import load_config
    from unirag.training.trainer import train

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(TEXTS * 8) + "\n")
    out = train(load_config("test-tiny", {"steps": "3", "save_steps": "100"}), str(tiny_model_dir), str(corpus),
                str(tmp_path / "adapter"), device="cuda")
    adapted = UniModel.load(str(tiny_model_dir), str(out), device="cuda")
    assert np.isfinite(adapted.embed(TEXTS)).all()
