"""`unirag export --gguf`: the written file loads back through transformers' GGUF reader (the
path that loads the default model) and gives the in-memory model's embeddings and greedy tokens."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from unirag import UniModel, UniragError
from unirag.cli.commands import app
from unirag.export.gguf import export_gguf

TEXTS = ["Rust has ownership and borrowing.", "The cat sat on the mat.", "Paris is the capital of France."]
PROMPT = "A dog ran in the park."


def load_gguf(path) -> UniModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()
    return UniModel(model, tokenizer, name=path.name, precision="fp32", bf16_weights=False, decode_copy=None)


def greedy(uni: UniModel, n: int = 12) -> list[int]:
    return list(uni.generate_ids(uni.prompt_ids(PROMPT), n))


# (weight type, least cosine of an EOS embedding to the in-memory model's, same greedy tokens)
CASES = [("f32", 0.999999, True), ("f16", 0.9999, True), ("bf16", 0.999, False), ("q8_0", 0.999, False)]


@pytest.mark.parametrize("kind,least_cosine,same_tokens", CASES)
def test_gguf_round_trip(tiny, tmp_path, kind, least_cosine, same_tokens):
    path = export_gguf(tiny, tmp_path / f"tiny-{kind}.gguf", kind)
    back = load_gguf(path)
    assert back.tokenizer(TEXTS).input_ids == tiny.tokenizer(TEXTS).input_ids
    assert back.tokenizer.eos_token == tiny.tokenizer.eos_token
    assert back.tokenizer.chat_template == tiny.tokenizer.chat_template
    cosine = (np.asarray(back.embed(TEXTS)) * np.asarray(tiny.embed(TEXTS))).sum(1)  # both L2-normalised
    assert cosine.min() >= least_cosine, cosine
    if same_tokens:
        assert greedy(back) == greedy(tiny)


def test_metadata_comes_verbatim_from_a_source_gguf(tiny, tmp_path):
    """Registry models keep their original tokenizer metadata (e.g. llama.cpp's pre-tokenizer name)."""
    import gguf

    source = export_gguf(tiny, tmp_path / "source.gguf", "f32")
    again = export_gguf(tiny, tmp_path / "again.gguf", "q8_0", source_gguf=source)
    before, after = gguf.GGUFReader(source).fields, gguf.GGUFReader(again).fields
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type",
                "tokenizer.ggml.eos_token_id", "tokenizer.chat_template", "general.name"):
        assert after[key].contents() == before[key].contents(), key
    assert after["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    assert after["unirag.model"].contents() == tiny.name


def test_bad_requests_are_refused_and_leave_nothing(tiny, tiny_model_dir, tmp_path):
    with pytest.raises(UniragError, match="unknown GGUF type"):
        export_gguf(tiny, tmp_path / "a.gguf", "q4_k")
    with pytest.raises(UniragError, match=r"\.gguf"):
        export_gguf(tiny, tmp_path / "a.bin", "f16")
    (tmp_path / "taken.gguf").write_text("mine")
    with pytest.raises(UniragError, match="exists"):
        export_gguf(tiny, tmp_path / "taken.gguf", "f16")
    assert (tmp_path / "taken.gguf").read_text() == "mine"
    with pytest.raises(UniragError, match="bf16"):
        export_gguf(UniModel.load(str(tiny_model_dir), precision="bf16"), tmp_path / "b.gguf", "f16")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.gguf"]  # no temporary file left


def test_cli_writes_merged_folder_and_gguf(tiny_model_dir, tmp_path):
    from test_loading import make_adapter

    runner = CliRunner()
    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter")
    out = tmp_path / "tiny.gguf"
    result = runner.invoke(app, ["export", "--gguf", str(out), "--gguf-type", "f32", "--model", str(tiny_model_dir),
                                 "--adapter", str(adapter)])
    assert result.exit_code == 0, result.output
    adapted = UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32")
    np.testing.assert_allclose(load_gguf(out).embed(TEXTS), adapted.embed(TEXTS), atol=1e-5)  # the adapter is in it
    nothing = runner.invoke(app, ["export", "--model", str(tiny_model_dir)])
    assert isinstance(nothing.exception, UniragError) and "--gguf" in str(nothing.exception)


@pytest.mark.slow
def test_default_model_round_trip(tmp_path):
    """The shipped model + adapter as q8_0: what a llama.cpp user would download."""
    from unirag.model.registry import source_gguf

    uni = UniModel.load(precision="fp32", decode_copy=None)
    back = load_gguf(export_gguf(uni, tmp_path / "unirag.gguf", "q8_0", source_gguf("smollm2-135m")))
    cosine = (np.asarray(back.embed(TEXTS)) * np.asarray(uni.embed(TEXTS))).sum(1)
    assert cosine.min() >= 0.99, cosine
    ours, theirs = greedy(uni, 16), greedy(back, 16)
    assert ours[:4] == theirs[:4], (ours, theirs)  # int8-rounded weights may part later, not at once


def test_cli_refuses_a_bad_target_before_loading_the_model(tmp_path):
    (tmp_path / "taken.gguf").write_text("mine")
    result = CliRunner().invoke(app, ["export", "--gguf", str(tmp_path / "taken.gguf"), "--model",
                                      str(tmp_path / "no-such-model")])
    assert isinstance(result.exception, UniragError) and "exists" in str(result.exception)  # not "no model"
