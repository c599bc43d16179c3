"""The `unirag` command on the tiny model: output format, exit codes, no tracebacks."""

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from unirag.cli import app

runner = CliRunner()


def test_embed_prints_json_lines(tiny_model_dir):
    result = runner.invoke(app, ["embed", "a dog", "a cat", "--model", str(tiny_model_dir), "--precision", "fp32"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["text"] for r in rows] == ["a dog", "a cat"]
    assert len(rows[0]["embedding"]) == 32


def test_embed_to_npy(tiny_model_dir, tmp_path):
    out = tmp_path / "e.npy"
    result = runner.invoke(app, ["embed", "a dog", "--model", str(tiny_model_dir), "-o", str(out), "--pooling", "echo"])
    assert result.exit_code == 0, result.output
    assert np.load(out).shape == (1, 32)


def test_generate(tiny_model_dir):
    result = runner.invoke(app, ["generate", "hello", "--model", str(tiny_model_dir), "--max-new-tokens", "5"])
    assert result.exit_code == 0, result.output


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "unirag.cli", *args], capture_output=True, text=True, timeout=300)


def test_user_errors_are_one_line_without_traceback(tmp_path):
    result = run_cli("embed", "x", "--model", str(tmp_path))
    assert result.returncode == 1
    assert result.stderr.strip().startswith("unirag: error:") and "no config.json" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_cli("embed", "x", "--no-such-option")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_export_merged_loads_as_plain_model(tiny_model_dir, tmp_path):
    from test_loading import make_adapter

    from unirag import UniModel

    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter")
    out = tmp_path / "merged"
    result = runner.invoke(app, ["export", "--merged", str(out), "--model", str(tiny_model_dir), "--adapter", str(adapter)])
    assert result.exit_code == 0, result.output
    assert (out / "model.safetensors").is_file() and (out / "SERVING.md").is_file()
    merged = UniModel.load(str(out), precision="fp32").embed(["A dog ran."])
    direct = UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32").embed(["A dog ran."])
    np.testing.assert_allclose(merged, direct, atol=1e-5)
    again = runner.invoke(app, ["export", "--merged", str(out), "--model", str(tiny_model_dir)])
    assert again.exit_code != 0
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), framework="pt") as f:  # fp32 as trained, whatever the CPU
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}


def test_export_refuses_bf16_held_weights(tiny_model_dir, tmp_path):
    from unirag import UniModel, UniragError
    from unirag.export import export_merged

    with pytest.raises(UniragError, match="bf16"):
        export_merged(UniModel.load(str(tiny_model_dir), precision="bf16"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_demo_rebuilds_its_own_collection_made_by_another_model(tiny_model_dir, tmp_path):
    """The demo indexes sample docs into its own collection; one left by an older adapter is
    rebuilt, and a user's `docs` collection is never touched."""
    from unirag.rag import store

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# Paris\n\nParis is the capital of France.\n")
    client = store.connect(tmp_path / "db")
    client.create_collection("unirag-demo", metadata={store.MODEL_KEY: "smollm2-135m+old@00000000",
                                                      store.DIM_KEY: 64, store.FORMAT_KEY: store.FORMAT})
    mine = client.create_collection("docs", metadata={"owner": "user"})
    mine.add(ids=["x"], embeddings=[[0.0, 1.0]], documents=["my note"])
    result = runner.invoke(app, ["demo", "--no-app", "--docs", str(docs), "--db", str(tmp_path / "db"),
                                 "--model", str(tiny_model_dir), "--question", "Capital of France?", "--max-new-tokens", "8"])
    assert result.exit_code == 0, result.output
    assert "rebuilding 'unirag-demo'" in result.output and "1 added" in result.output
    assert store.connect(tmp_path / "db").get_collection("docs").count() == 1
