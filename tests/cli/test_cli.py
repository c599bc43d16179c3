"""The `unirag` command on the tiny model: output format, exit codes, no tracebacks."""

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from unirag.cli.commands import app

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


def test_decode_copy_option_picks_the_weights_generated_tokens_read(tiny_model_dir):
    from unirag.cli.options import load_model
    from unirag.errors import UniragError
    from unirag.model.fast_decode.quantized_decode import supported

    for choice in ("none", "int8", "int4"):
        result = runner.invoke(app, ["generate", "hello", "--model", str(tiny_model_dir), "--max-new-tokens", "5",
                                     "--precision", "bf16", "--decode-copy", choice])
        assert result.exit_code == 0, result.output
    assert load_model(str(tiny_model_dir), "none", "bf16", decode_copy="none").decode_copy is None
    on = load_model(str(tiny_model_dir), "none", "bf16")
    assert (on.decode_copy is not None) == supported(on.device)
    if on.decode_copy is not None:
        assert on.decode_copy.format == ("int4" if supported(on.device, "int4") else "int8")
    result = runner.invoke(app, ["generate", "hello", "--model", str(tiny_model_dir), "--decode-copy", "int3"])
    assert isinstance(result.exception, UniragError) and "int3" in str(result.exception)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "unirag.cli.commands", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.slow  # child processes
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
    record = json.loads((adapter / "unirag.json").read_text())
    (adapter / "unirag.json").write_text(json.dumps({**record, "query_prefix": "Question: "}))
    out = tmp_path / "merged"
    result = runner.invoke(app, ["export", "--merged", str(out), "--model", str(tiny_model_dir), "--adapter", str(adapter)])
    assert result.exit_code == 0, result.output
    assert (out / "model.safetensors").is_file() and (out / "SERVING.md").is_file()
    merged = UniModel.load(str(out), precision="fp32").embed(["A dog ran."])
    direct = UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32").embed(["A dog ran."])
    np.testing.assert_allclose(merged, direct, atol=1e-5)
    # the merged folder keeps how its adapter embeds: pooling and the question cue
    loaded = UniModel.load(str(out), precision="fp32")
    assert (loaded.default_pooling, loaded.query_prefix) == ("eos", "Question: ")
    again = runner.invoke(app, ["export", "--merged", str(out), "--model", str(tiny_model_dir)])
    assert again.exit_code != 0
    from safetensors import safe_open

    with safe_open(str(out / "model.safetensors"), framework="pt") as f:  # fp32 as trained, whatever the CPU
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}


def test_export_refuses_bf16_held_weights(tiny_model_dir, tmp_path):
    from unirag import UniModel, UniragError
    from unirag.export.merged import export_merged

    with pytest.raises(UniragError, match="bf16"):
        export_merged(UniModel.load(str(tiny_model_dir), precision="bf16"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_demo_rebuilds_its_own_collection_made_by_another_model(tiny_model_dir, tmp_path):
    """The demo indexes sample docs into its own collection; one left by an older adapter is
    rebuilt, and a user's `docs` collection is never touched."""
    from unirag.retrieval import store
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


def test_only_unirags_own_warnings_reach_the_user(capsys):
    """Library log records (bm25s logs "Building index from IDs objects" at DEBUG on a logger it
    sets to DEBUG) never print mid-answer; unirag's own warnings do, as one prefixed line."""
    import logging

    from unirag.cli.commands import configure_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []  # as in a fresh `unirag` process (pytest has put its own handlers here)
    try:
        configure_logging()
        configure_logging()  # a second call (in-process tests run main() many times) adds nothing
        assert len(root.handlers) == 1
        bm25s = logging.getLogger("bm25s")
        old = bm25s.level
        bm25s.setLevel(logging.DEBUG)
        bm25s.debug("Building index from IDs objects")
        bm25s.warning("a library's warning")
        bm25s.setLevel(old)
        logging.getLogger("unirag").warning("1 of 1 texts were longer than max_length=8 tokens and were truncated")
        logging.getLogger("unirag.rag").debug("not at debug")
    finally:
        root.handlers = handlers
        root.setLevel(level)
    assert capsys.readouterr().err == ("unirag: warning: 1 of 1 texts were longer than max_length=8 tokens "
                                       "and were truncated\n")


def test_python_dash_m_unirag_and_dir(monkeypatch, capsys):
    import runpy

    import unirag

    monkeypatch.setattr(sys, "argv", ["unirag", "--help"])
    runpy.run_module("unirag", run_name="__main__", alter_sys=False)
    assert "Usage: unirag" in capsys.readouterr().out
    assert {"UniModel", "POOLINGS", "load", "UniragError"} <= set(dir(unirag))


def test_demo_documents_ship_in_the_package_and_answer_the_default_question():
    from pathlib import Path

    import unirag
    from unirag.cli.commands import SAMPLE_DOCS

    assert SAMPLE_DOCS == Path(unirag.__file__).resolve().parent / "sample_docs"
    pages = sorted(SAMPLE_DOCS.glob("*.md"))
    assert 2 <= len(pages) <= 4
    text = " ".join(" ".join(p.read_text().split()) for p in pages)
    assert "unirag keeps a crashed ingest from leaving duplicates because each chunk id comes from" in text


def test_ingest_help_names_every_file_type_ingest_reads():
    from unirag.readers.registry import KINDS
    from unirag.cli.rag_commands import INGESTED_TYPES

    assert sorted(INGESTED_TYPES.split()) == sorted(KINDS)
