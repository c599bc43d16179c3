import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One intra-op thread per test process (before torch is imported; set OMP_NUM_THREADS to override):
# the tiny model's matrices are too small to gain from a second thread, and on a shared 2-core
# machine OpenMP threads spinning against another busy process made its steps several times
# slower. No result depends on it: the tiny model's LM head is never split over threads.
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def tiny(tiny_model_dir):
    """A fresh UniModel over the tiny model (fresh so tests may modify weights)."""
    from unirag import UniModel
    return UniModel.load(str(tiny_model_dir), precision="fp32", device="cpu")  # CUDA tests ask for it


@pytest.fixture(scope="session")
def real_model():
    """The real default model (SmolLM2-135M + default adapter), loaded once, in fp32 so that
    exactness checks do not depend on whether this CPU has fast bf16 (test_integration_model
    checks the bf16 path separately where it is the default)."""
    from unirag import UniModel
    return UniModel.load(precision="fp32", device="cpu")
