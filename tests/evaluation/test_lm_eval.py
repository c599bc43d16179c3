"""LM evaluation (perplexity, harness-style multiple choice, LAMBADA) and `unirag eval` on the tiny model."""

import json
import math

import numpy as np
import pytest
import torch
import typer
from typer.testing import CliRunner

from unirag.errors import UniragError
from unirag.evaluation import lm
from unirag.evaluation.cli import eval_app

runner = CliRunner()


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def direct_loglikelihood(uni, context, continuation):
    """Sum of log p(continuation tokens | context) from one plain forward of the causal LM."""
    ctx = uni.tokenizer(context, add_special_tokens=False)["input_ids"]
    whole = uni.tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
    cont = whole[len(ctx):]
    with torch.no_grad():
        logits = uni.model(input_ids=torch.tensor([whole])).logits[0].float()
    logprobs = torch.log_softmax(logits, -1)
    return sum(float(logprobs[len(ctx) + j - 1, tok]) for j, tok in enumerate(cont))


@pytest.mark.parametrize("continuations, batch_size", [
    ([" on the mat", " in the park", " here"], 3),   # one right-padded batch of three lengths
    ([" on the mat", " in the park", " here"], 1),   # one continuation per batch
    ([" on", " a very much longer continuation than the others", ""], 2),  # one-token and empty ones
])
def test_shared_context_scores_as_separate_pairs(tiny, continuations, batch_size):
    """The context's KV cache, run once and copied per batch, gives each continuation the score
    that scoring it after its own copy of the context gives, and the same greedy flags."""
    from unirag.model.scoring import shared_context_loglikelihoods

    encode = lambda text: tiny.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    context, conts = encode("Question: Where did the cat sit?\nAnswer:"), [encode(c) for c in continuations]
    got = shared_context_loglikelihoods(tiny, context, conts, batch_size=batch_size)
    expected = lm.loglikelihoods(tiny, [(context, c) for c in conts], batch_size=1)
    assert [ll for ll, _ in got] == pytest.approx([ll for ll, _ in expected], abs=1e-4)
    assert [g for _, g in got] == [g for _, g in expected]


READ_TEXTS = ["The cat sat on the mat and looked at the door.", "Dogs bark.", "A", ""]


@pytest.mark.parametrize("pooling, batch_size, own_tokens", [
    ("eos", 4, 48),   # one right-padded batch; the empty text is the likelihood's baseline row
    ("eos", 1, 48),   # one text per batch
    ("eos", 4, 3),    # own tokens cut short
    ("mean", 2, 48),  # another pooling lays the text out another way
    ("echo", 4, 48),  # the text twice: its own tokens are the first copy
])
def test_read_gives_the_separate_passes_scores(tiny, monkeypatch, pooling, batch_size, own_tokens):
    """One pass per text gives the embedding `embed` gives, the targets' likelihood after the text
    as laid out and the prompt, and the text's own tokens' likelihood after its first, each as
    its own pass gives it."""
    from unirag.model.scoring import read

    monkeypatch.setattr(tiny, "default_pooling", pooling)
    encode = lambda text: tiny.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompt, targets = encode("\nQuestion:"), encode(" Where did the cat sit?")
    got = read(tiny, READ_TEXTS, prompt, targets, own_tokens, batch_size=batch_size)
    np.testing.assert_allclose(got.vectors, tiny.embed(READ_TEXTS), atol=1e-4)
    layouts = tiny.embedding_inputs(READ_TEXTS)
    expected = lm.loglikelihoods(tiny, [(e.ids + prompt, targets) for e in layouts], batch_size=1)
    assert got.likelihood == pytest.approx([ll / len(targets) for ll, _ in expected], abs=1e-4)
    for e, own in zip(layouts, got.own):
        stop = min(e.text_end, e.text_start + own_tokens)
        if stop - e.text_start < 2:  # nothing after the first token
            assert own == 0.0
            continue
        (ll, _), = lm.loglikelihoods(tiny, [(e.ids[:e.text_start + 1], e.ids[e.text_start + 1:stop])], batch_size=1)
        assert own == pytest.approx(ll / (stop - e.text_start - 1), abs=1e-4)


def test_read_keeps_rows_within_the_context_window(tiny, monkeypatch):
    """With `max_length` at the context window, a long text leaves the targets only the room that
    is left: they are cut, not run past the model's positions."""
    from unirag.model.scoring import read

    window = tiny.context_window
    encode = lambda text: tiny.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompt, targets = encode("\nQuestion:"), encode(" Where did the cat sit on the mat today?")
    monkeypatch.setattr(tiny, "max_length", window - len(prompt) - 3)
    texts = [" ".join(["cat sat on the mat"] * window), "Dogs bark."]
    layouts = tiny.embedding_inputs(texts)
    room = window - len(prompt) - max(len(e.ids) for e in layouts)
    assert 0 < room < len(targets)
    got = read(tiny, texts, prompt, targets, 48)
    cut = targets[:room]
    expected = lm.loglikelihoods(tiny, [(e.ids + prompt, cut) for e in layouts], batch_size=1)
    assert got.likelihood == pytest.approx([ll / len(cut) for ll, _ in expected], abs=1e-4)


def test_encode_pair_moves_trailing_space_to_continuation(tiny):
    tok = tiny.tokenizer
    ctx, cont = lm.encode_pair(tok, "The cat sat ", "on the mat.")
    whole = tok("The cat sat on the mat.", add_special_tokens=False)["input_ids"]
    assert ctx == tok("The cat sat", add_special_tokens=False)["input_ids"]
    assert ctx + cont == whole
    ctx, cont = lm.encode_pair(tok, "", " dog")
    assert ctx == [lm._prefix_token_id(tok)] and cont == tok(" dog", add_special_tokens=False)["input_ids"]


def test_multiple_choice_matches_hand_computed_loglikelihoods(tiny, tmp_path):
    context, choices = "Question: Where did the cat sit?\nAnswer:", ["on the mat", "in the park"]
    expected = [direct_loglikelihood(tiny, context, " " + c) for c in choices]
    pairs = [lm.encode_pair(tiny.tokenizer, context, " " + c) for c in choices]
    got = lm.loglikelihoods(tiny, pairs, batch_size=2)  # both in one right-padded batch
    assert [ll for ll, _ in got] == pytest.approx(expected, abs=1e-4)
    assert lm.loglikelihoods(tiny, pairs[1:], batch_size=1)[0][0] == pytest.approx(expected[1], abs=1e-4)

    best = max(range(2), key=lambda i: expected[i])
    path = write_jsonl(tmp_path / "mc.jsonl", [{"context": context, "choices": choices, "label": best}])
    result = lm.multiple_choice(tiny, path, show_progress=False)
    assert result["acc"] == 1.0 and result["n"] == 1
    norm_best = max(range(2), key=lambda i: expected[i] / len(choices[i]))
    assert result["acc_norm"] == float(norm_best == best)


def test_acc_norm_divides_by_choice_length_in_characters(tiny, tmp_path, monkeypatch):
    # "a" is likelier in total, but per character the long choice wins
    assert lm.score_choices([-2.0, -5.0], ["a", "bbbbbbbbbb"], label=0) == (1.0, 0.0)
    assert lm.score_choices([-2.0, -5.0], ["a", "bbbbbbbbbb"], label=1) == (0.0, 1.0)

    fake = {" a": (-2.0, False), " bbbbbbbbbb": (-5.0, False)}

    def fake_loglikelihoods(model, pairs, batch_size=16, show_progress=False):
        return [fake[tiny.tokenizer.decode(cont)] for _, cont in pairs]

    monkeypatch.setattr(lm, "loglikelihoods", fake_loglikelihoods)
    rows = [{"context": "Pick:", "choices": ["a", "bbbbbbbbbb"], "label": 0},
            {"context": "Pick:", "choices": ["a", "bbbbbbbbbb"], "label": 1}]
    result = lm.multiple_choice(tiny, write_jsonl(tmp_path / "mc.jsonl", rows), show_progress=False)
    assert (result["acc"], result["acc_norm"], result["n"]) == (0.5, 0.5, 2)


def test_perplexity_is_exp_mean_nll_when_the_window_covers_the_text(tiny, tmp_path):
    lines = ["The cat sat on the mat.", "", "A dog ran in the park."]
    path = tmp_path / "t.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ids = tiny.tokenizer("\n\n".join(lines))["input_ids"]
    with torch.no_grad():
        loss = tiny.model(input_ids=torch.tensor([ids]), labels=torch.tensor([ids])).loss  # mean NLL
    result = lm.perplexity(tiny, path, max_length=128, show_progress=False)
    assert result["tokens"] == len(ids) - 1
    assert result["window"] == 128 and result["stride"] == 128
    assert result["perplexity"] == pytest.approx(math.exp(float(loss)), rel=1e-4)


def test_sliding_window_scores_every_token_once(tiny, tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("The quick brown fox jumps over the lazy dog.\nParis is the capital of France.\n")
    n = len(tiny.tokenizer("The quick brown fox jumps over the lazy dog.\n\nParis is the capital of France.")["input_ids"])
    assert n > 12
    result = lm.perplexity(tiny, path, max_length=8, stride=3, show_progress=False)
    assert math.isfinite(result["perplexity"]) and result["perplexity"] > 1
    assert result["tokens"] == n - 1
    # no overlap: each window's first token has no context and is not scored
    no_overlap = lm.perplexity(tiny, path, max_length=4, stride=4, show_progress=False)
    assert no_overlap["tokens"] == n - math.ceil(n / 4)
    assert lm.perplexity(tiny, path, max_length=8, stride=3, limit_tokens=10, show_progress=False)["tokens"] == 9
    with pytest.raises(UniragError):
        lm.perplexity(tiny, path, max_length=4, stride=5, show_progress=False)


def test_lambada_runs_on_two_rows(tiny, tmp_path):
    assert lm.lambada_pair("the cat sat on the mat") == ("the cat sat on the", " mat")
    rows = [{"text": "The cat sat on the mat"}, {"text": "A dog ran in the park"}]
    result = lm.lambada(tiny, write_jsonl(tmp_path / "lambada.jsonl", rows), show_progress=False)
    assert result["n"] == 2 and 0.0 <= result["acc"] <= 1.0
    ll = direct_loglikelihood(tiny, "The cat sat on the", " mat")
    ll2 = direct_loglikelihood(tiny, "A dog ran in the", " park")
    assert result["perplexity"] == pytest.approx(math.exp(-(ll + ll2) / 2), rel=1e-4)


def lm_data(root):
    lm_dir = root / "lm"
    lm_dir.mkdir(parents=True)
    (lm_dir / "wikitext2-test.txt").write_text(" = Cats = \n The cat sat on the mat . \n")
    mc = [{"context": "Question: Where is Paris?\nAnswer:", "choices": ["France", "the park"], "label": 0},
          {"context": "The dog", "choices": ["ran in the park.", "sat."], "label": 0}]
    for name in lm.MULTIPLE_CHOICE_TASKS:
        write_jsonl(lm_dir / f"{name}.jsonl", mc)
    write_jsonl(lm_dir / "lambada_openai.jsonl", [{"text": "The cat sat on the mat"}])
    return root


def test_run_lm_eval_and_side_by_side_table(tiny, tmp_path):
    results = lm.run_lm_eval(tiny, lm_data(tmp_path), show_progress=False)
    assert list(results) == list(lm.DEFAULT_TASKS)
    assert results["arc_easy"]["n"] == 2 and "perplexity" in results["wikitext2"]
    worse = {t: dict(r) for t, r in results.items()}
    worse["wikitext2"]["perplexity"] = results["wikitext2"]["perplexity"] * 1.1
    table = lm.lm_results_markdown({"base": results, "adapted": worse})
    assert "| wikitext2 | perplexity |" in table and "+10.00%" in table and "+0.00 pts" in table
    with pytest.raises(UniragError):
        lm.run_lm_eval(tiny, tmp_path, tasks=["nope"])


def cli_app():
    app = typer.Typer()

    @app.callback()
    def main():  # a callback keeps "eval" a named subcommand group
        pass

    app.add_typer(eval_app, name="eval")
    return app


def test_cli_eval_embed_prints_markdown_table(tiny_model_dir, tmp_path):
    sts = tmp_path / "data" / "sts"
    sts.mkdir(parents=True)
    pairs = [("A cat sat on the mat.", "The cat sat on the mat.", 4.8), ("A dog ran.", "Paris is in France.", 0.2),
             ("The dog ran in the park.", "A dog ran in the park.", 4.5), ("Rust has loops.", "The fox jumps.", 0.5),
             ("Embeddings map text.", "Text maps to vectors.", 3.5), ("The lazy dog.", "The quick fox.", 1.5)]
    (sts / "STSBenchmark-test.tsv").write_text(
        "sentence1\tsentence2\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs), encoding="utf-8")
    out = tmp_path / "out"
    result = runner.invoke(cli_app(), [
        "eval", "embed", "--model", str(tiny_model_dir), "--pooling", "eos", "--pooling", "mean",
        "--tasks", "STSBenchmark", "--data", str(tmp_path / "data"), "--output", str(out),
        "--precision", "fp32", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    assert "| Method | STSBenchmark | Average |" in result.stdout
    assert f"| {tiny_model_dir} eos |" in result.stdout and f"| {tiny_model_dir} mean |" in result.stdout
    assert (out / "results.md").read_text() in result.stdout
    assert len(list(out.glob("mteb_*.json"))) == 2


def test_cli_eval_lm_and_missing_data(tiny_model_dir, tmp_path):
    app = cli_app()
    result = runner.invoke(app, ["eval", "lm", "--model", str(tiny_model_dir), "--data", str(lm_data(tmp_path)),
                                 "--tasks", "wikitext2,piqa", "--precision", "fp32", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "| piqa | acc_norm |" in result.stdout
    result = runner.invoke(app, ["eval", "lm", "--model", str(tiny_model_dir), "--data", str(tmp_path / "nope")])
    assert isinstance(result.exception, UniragError) and "not found" in str(result.exception)
