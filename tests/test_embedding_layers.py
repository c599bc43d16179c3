"""benchmarks/embedding_layers.py: every layer's embedding from one pass, on the tiny Llama."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "embedding_layers.py"


@pytest.fixture(scope="module")
def layers():
    spec = importlib.util.spec_from_file_location("bench_embedding_layers", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("pooling", ["eos", "mean"])
def test_the_last_layer_is_the_shipped_embedding(layers, tiny, pooling):
    texts = ["a short one", "a somewhat longer text than the first", "x"]
    every = layers.layer_embeddings(tiny, texts, pooling)
    assert every.shape == (tiny.model.config.num_hidden_layers + 1, len(texts), tiny.model.config.hidden_size)
    np.testing.assert_allclose(every[-1], tiny.embed(texts, pooling=pooling), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(every[1:], axis=-1), 1.0, atol=1e-5)  # layer 0: token rows


def test_hits_count_a_right_file_within_depth(layers):
    scores = np.array([[0.9, 0.5, 0.1], [0.1, 0.2, 0.9]])
    sources = ["a.md", "b.md", "c.md"]
    assert layers.hits_at(scores, sources, [["b.md"], ["c.md"]]) == {"hit@1": 50.0, "hit@3": 100.0}
