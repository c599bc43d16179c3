"""The tiny random Llama of tests/conftest.py, for the research scripts' tests."""

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from tiny import save_tiny_model  # tests/tiny.py, on pytest's pythonpath

    return save_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def tiny(tiny_model_dir):
    from unirag import UniModel

    return UniModel.load(str(tiny_model_dir), precision="fp32")
