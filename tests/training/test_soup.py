"""unirag.training.soup: the souped LoRA is exactly the mean of its sources' weight deltas."""

import json

import pytest
import torch

from unirag import UniModel, UniragError
from unirag.training.soup import soup_adapters, truncate_lora

from test_loading import make_adapter


def _weights(model_dir, adapter=None):
    model = UniModel.load(str(model_dir), str(adapter) if adapter else None, precision="fp32").model
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_soup_is_the_mean_of_the_deltas(tmp_path, tiny_model_dir):
    sources = [make_adapter(tiny_model_dir, tmp_path / f"a{seed}", seed=seed) for seed in (1, 2, 3)]
    soup = soup_adapters(sources, tmp_path / "soup")

    config = json.loads((soup / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (12, 24)  # rank 3 x 4, scale alpha/r unchanged
    info = json.loads((soup / "unirag.json").read_text())["soup"]
    assert info["exact"] and [s["adapter"] for s in info["sources"]] == [str(s) for s in sources]

    base = _weights(tiny_model_dir)
    deltas = [{k: w[k] - base[k] for k in base} for w in (_weights(tiny_model_dir, s) for s in sources)]
    souped = _weights(tiny_model_dir, soup)
    changed = 0
    for key in base:
        expected = base[key] + sum(d[key] for d in deltas) / len(deltas)
        torch.testing.assert_close(souped[key], expected, atol=1e-5, rtol=1e-5)
        changed += bool(deltas[0][key].abs().max() > 1e-3)
    assert changed >= 3  # q, v and up projections moved, so the check is not vacuous


def test_soup_refuses_adapters_that_do_not_match(tmp_path, tiny_model_dir):
    a = make_adapter(tiny_model_dir, tmp_path / "a", r=4)
    b = make_adapter(tiny_model_dir, tmp_path / "b", r=8)
    with pytest.raises(UniragError, match="differs .* in r"):
        soup_adapters([a, b], tmp_path / "soup")
    with pytest.raises(UniragError, match="at least two"):
        soup_adapters([a], tmp_path / "soup")
    with pytest.raises(UniragError, match="does not exist"):
        soup_adapters([a, tmp_path / "missing"], tmp_path / "soup")
    assert not (tmp_path / "soup").exists()
    with pytest.raises(UniragError, match="already exists"):  # never overwrites (or deletes) a folder
        soup_adapters([a, a], b)
    assert (b / "adapter_model.safetensors").is_file()
    config = json.loads((b / "adapter_config.json").read_text())
    (b / "adapter_config.json").write_text(json.dumps(dict(config, use_rslora=True)))
    with pytest.raises(UniragError, match="use_rslora"):  # scale alpha / sqrt(r): not averaged here
        soup_adapters([b, b], tmp_path / "soup")


def test_truncated_factors_are_the_best_low_rank_approximation():
    torch.manual_seed(0)
    b, a = torch.randn(20, 6), torch.randn(6, 15)
    u, s, vh = torch.linalg.svd(b @ a)
    b3, a3 = truncate_lora(b, a, 3)
    assert b3.shape == (20, 3) and a3.shape == (3, 15)
    torch.testing.assert_close(b3 @ a3, u[:, :3] * s[:3] @ vh[:3], atol=1e-4, rtol=1e-4)
    b6, a6 = truncate_lora(b, a, 6)
    torch.testing.assert_close(b6 @ a6, b @ a, atol=1e-4, rtol=1e-4)


def test_soup_cut_to_one_adapters_rank_loads(tmp_path, tiny_model_dir):
    sources = [make_adapter(tiny_model_dir, tmp_path / f"a{seed}", seed=seed) for seed in (1, 2)]
    soup = soup_adapters(sources, tmp_path / "soup", rank=4)
    config = json.loads((soup / "adapter_config.json").read_text())
    assert (config["r"], config["lora_alpha"]) == (4, 8)
    assert not json.loads((soup / "unirag.json").read_text())["soup"]["exact"]
    base, souped = _weights(tiny_model_dir), _weights(tiny_model_dir, soup)
    assert any((souped[k] - base[k]).abs().max() > 1e-3 for k in base)
    with pytest.raises(UniragError, match="rank must be between 1 and 8"):
        soup_adapters(sources, tmp_path / "bad", rank=9)
