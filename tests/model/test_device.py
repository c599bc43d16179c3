"""`--device auto|cpu|cuda`: how a device name is read, without needing a GPU."""

from __future__ import annotations

import pytest
import torch

from unirag import UniModel, UniragError
from unirag.model.hardware import resolve_device


def test_auto_picks_cuda_only_where_torch_sees_it():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device(None).type == expected
    assert resolve_device("CPU") == torch.device("cpu")


def test_bad_devices_are_refused_in_one_line():
    with pytest.raises(UniragError, match="unknown device 'tpu'"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(UniragError, match="no CUDA GPU"):
            resolve_device("cuda")
    else:
        with pytest.raises(UniragError, match="CUDA device"):
            resolve_device(f"cuda:{torch.cuda.device_count()}")


def test_load_on_the_cpu_keeps_the_cpu_paths(tiny_model_dir):
    model = UniModel.load(str(tiny_model_dir), precision="fp32", device="cpu")
    assert model.device.type == "cpu"
    with pytest.raises(UniragError, match="unknown device"):
        UniModel.load(str(tiny_model_dir), device="gpu0")


def test_the_cli_refuses_a_bad_device_before_loading(tiny_model_dir):
    from typer.testing import CliRunner

    from unirag.cli.commands import app

    result = CliRunner().invoke(app, ["embed", "hello", "--model", str(tiny_model_dir), "--device", "tpu"])
    assert result.exit_code != 0
    assert "unknown device 'tpu'" in (result.output + str(result.exception))
