"""The trainer on a tiny random Llama: losses fall, resume is exact, outputs reload."""

import json

import numpy as np
import pytest
from safetensors.torch import load_file

from unirag import UniModel, UniragError
from unirag.training.config import load_config
from unirag.training.data import choose_mask_token, load_texts, split_sentences
from unirag.training.trainer import train

CORPUS_LINES = ["The cat sat on the mat near the door.", "A dog ran in the park all day long.",
                "Paris is the capital of France and a big city.", "Rust has ownership and borrowing rules.",
                "Loops can return values with break in Rust.", "Embeddings map text to vectors of numbers."]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(CORPUS_LINES * 4) + "\n")
    return path


def run(model_dir, corpus, out, **overrides):
    config = load_config("test-tiny", {k: str(v) for k, v in overrides.items()})
    return train(config, str(model_dir), str(corpus), str(out))


def test_losses_fall_on_a_repeated_corpus(tiny_model_dir, corpus, tmp_path):
    out = run(tiny_model_dir, corpus, tmp_path / "a", steps=40, save_steps=100, lr="1e-2")
    history = json.loads((out / "checkpoints" / "checkpoint-40" / "trainer_state.json").read_text())["log_history"]
    steps = [h for h in history if "loss_mar" in h]
    first, last = steps[:3], steps[-3:]
    for key in ("loss_mar", "loss_mrc"):
        assert np.mean([h[key] for h in last]) < 0.85 * np.mean([h[key] for h in first]), key


def test_anchor_keeps_the_language_model_closer_to_the_base(tiny_model_dir, corpus, tmp_path):
    """anchor_weight > 0: logged, and next-token distributions on clean text drift less."""
    import torch
    from transformers import AutoModelForCausalLM

    def drift(adapter):
        base = UniModel.load(str(tiny_model_dir), adapter="none", precision="fp32")
        tuned = UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32")
        ids = base.tokenizer(CORPUS_LINES, return_tensors="pt", padding=True)
        with torch.no_grad():
            p = base.model(**ids).logits.log_softmax(-1)
            q = tuned.model(**ids).logits.log_softmax(-1)
        return float((p.exp() * (p - q)).sum(-1)[ids["attention_mask"].bool()].mean())

    plain = run(tiny_model_dir, corpus, tmp_path / "plain", steps=20, save_steps=100, lr="1e-2")
    anchored = run(tiny_model_dir, corpus, tmp_path / "anchored", steps=20, save_steps=100, lr="1e-2",
                   anchor_weight=1.0, anchor_rows=1)
    history = json.loads((anchored / "checkpoints" / "checkpoint-20" / "trainer_state.json").read_text())
    assert any("loss_anchor" in h for h in history["log_history"])
    assert drift(anchored) < drift(plain)


def test_output_is_a_peft_adapter_that_changes_embeddings(tiny_model_dir, corpus, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    out = run(tiny_model_dir, corpus, tmp_path / "adapter")
    info = json.loads((out / "unirag.json").read_text())
    assert info["pooling"] == "eos" and info["mask_token"] and info["config"]["objective"] == "unimae"
    weights = load_file(out / "adapter_model.safetensors")
    assert weights and not any("decoder" in k for k in weights)  # the tiny decoder is not shipped
    assert "README.md" in {p.name for p in out.iterdir()}
    PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), str(out))  # plain PEFT loads it
    base = UniModel.load(str(tiny_model_dir), precision="fp32").embed(CORPUS_LINES)
    adapted = UniModel.load(str(tiny_model_dir), str(out), precision="fp32").embed(CORPUS_LINES)
    assert not np.allclose(base, adapted, atol=1e-4)


def test_resume_equals_uninterrupted(tiny_model_dir, corpus, tmp_path):
    whole = run(tiny_model_dir, corpus, tmp_path / "whole")
    part = run(tiny_model_dir, corpus, tmp_path / "part", steps=3)  # stops at step 3 with a checkpoint
    config = load_config("test-tiny")
    config.steps = 6
    # continue the same run from its step-3 checkpoint, as `--resume` does
    resumed = train(config, str(tiny_model_dir), str(corpus), str(part), resume=True)
    a, b = load_file(whole / "adapter_model.safetensors"), load_file(resumed / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), atol=1e-5, err_msg=key)


def test_resume_at_the_last_step_only_writes_the_output(tiny_model_dir, corpus, tmp_path):
    out = run(tiny_model_dir, corpus, tmp_path / "done", steps=3)
    before = load_file(out / "adapter_model.safetensors")
    (out / "adapter_model.safetensors").unlink()
    again = train(load_config("test-tiny", {"steps": "3"}), str(tiny_model_dir), str(corpus), str(out), resume=True)
    assert json.loads((again / "unirag.json").read_text())["steps_done"] == 3
    assert not (again / "checkpoints" / "checkpoint-4").exists()
    after = load_file(again / "adapter_model.safetensors")
    for key in before:
        np.testing.assert_allclose(before[key].numpy(), after[key].numpy(), atol=1e-6)


def test_existing_checkpoints_need_resume(tiny_model_dir, corpus, tmp_path):
    out = run(tiny_model_dir, corpus, tmp_path / "x", steps=3)
    with pytest.raises(UniragError, match="--resume"):
        run(tiny_model_dir, corpus, out, steps=3)
    with pytest.raises(UniragError, match="nothing to resume"):
        train(load_config("test-tiny"), str(tiny_model_dir), str(corpus), str(tmp_path / "new"), resume=True)


def test_simcse_continues_from_an_adapter(tiny_model_dir, corpus, tmp_path):
    first = run(tiny_model_dir, corpus, tmp_path / "unimae", steps=3)
    config = load_config("test-tiny", {"objective": "simcse", "steps": "3", "lora_dropout": "0.2",
                                       "anchor_weight": "1"})
    out = train(config, str(tiny_model_dir), str(corpus), str(tmp_path / "simcse"), init_adapter=str(first))
    meta = json.loads((out / "unirag.json").read_text())
    assert meta["objective"] == "simcse"
    # the record keeps the stage it continued (path, objective, config), and the card names it
    assert meta["continued_from"]["path"] == str(first) and meta["continued_from"]["objective"] == "unimae"
    assert meta["continued_from"]["config"]["steps"] == 3
    assert f"- continues `{first}`: recipe `test-tiny`; steps 3" in (out / "README.md").read_text()
    # the continued adapter trains with this run's dropout (PEFT would keep the first run's 0.05)
    assert json.loads((out / "adapter_config.json").read_text())["lora_dropout"] == 0.2
    history = json.loads((out / "checkpoints" / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    assert any("loss_simcse" in h and "loss_anchor" in h for h in history)
    assert not np.allclose(load_file(first / "adapter_model.safetensors")["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"].numpy(),
                           load_file(out / "adapter_model.safetensors")["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"].numpy())


def test_pairs_pull_each_question_to_its_passage(tiny_model_dir, tmp_path):
    """objective=pairs: the question -> passage loss falls on a repeated set of pairs, and the
    trained adapter embeds each question nearer its own passage than before."""
    pairs = tmp_path / "pairs.jsonl"
    n = len(CORPUS_LINES)
    rows = [{"query": f"What does line {i} say?", "passage": text, "negative": CORPUS_LINES[(i + 1) % n]}
            for i, text in enumerate(CORPUS_LINES)]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows * 4))
    out = run(tiny_model_dir, pairs, tmp_path / "pairs", objective="pairs", steps=30, save_steps=100, lr="1e-2",
              batch_size=6, micro_batch_size=6, anchor_weight=1, temperature="0.1")
    meta = json.loads((out / "unirag.json").read_text())
    assert meta["objective"] == "pairs" and meta["examples"] == len(rows) * 4
    history = json.loads((out / "checkpoints" / "checkpoint-30" / "trainer_state.json").read_text())["log_history"]
    losses = [h["loss_pairs"] for h in history if "loss_pairs" in h]
    assert any("loss_anchor" in h for h in history)
    assert np.mean(losses[-3:]) < 0.5 * np.mean(losses[:3])
    trained = UniModel.load(str(tiny_model_dir), str(out), precision="fp32", decode_copy=None)
    q = trained.embed([r["query"] for r in rows])
    p = trained.embed([r["passage"] for r in rows])
    assert ((q @ p.T).argmax(1) == np.arange(len(rows))).mean() > 0.5
    with pytest.raises(UniragError, match="passage"):
        bad = tmp_path / "bad.jsonl"
        bad.write_text(json.dumps({"query": "q?"}) + "\n")
        run(tiny_model_dir, bad, tmp_path / "bad", objective="pairs", steps=1)


def test_a_pairs_cue_is_trained_recorded_and_used_by_retrieval(tiny_model_dir, corpus, tmp_path):
    """query_prefix: each question is embedded after the cue in training (passages and negatives
    without it); the adapter records the cue, a later stage keeps it, and the loaded model embeds
    users' questions after it (`UniModel.query_prefix`, read by `pipeline.query_text`)."""
    from datasets import Dataset
    from transformers import AutoTokenizer

    from unirag.retrieval.search import query_text
    from unirag.training.data import tokenize_pairs

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = Dataset.from_list([{"query": "Why?", "passage": "Because.", "negative": "No."}])
    plain, cued = (tokenize_pairs(rows, tokenizer, 32, 16, prefix)[0] for prefix in ("", "Question: "))
    assert cued["query_ids"] != plain["query_ids"]
    assert tokenizer.decode(cued["query_ids"], skip_special_tokens=True).startswith("Question: ")
    assert (cued["input_ids"], cued["negative_ids"]) == (plain["input_ids"], plain["negative_ids"])

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": f"What does line {i} say?", "passage": t}) + "\n"
                             for i, t in enumerate(CORPUS_LINES)))
    out = run(tiny_model_dir, pairs, tmp_path / "cued", objective="pairs", steps=1, batch_size=6,
              micro_batch_size=6, query_prefix="Question: ")
    assert json.loads((out / "unirag.json").read_text())["query_prefix"] == "Question: "
    model = UniModel.load(str(tiny_model_dir), str(out), precision="fp32", decode_copy=None)
    assert query_text(model, "Why?") == "Question: Why?"
    config = load_config("test-tiny", {"objective": "simcse", "steps": "1"})
    later = train(config, str(tiny_model_dir), str(corpus), str(tmp_path / "later"), init_adapter=str(out))
    assert json.loads((later / "unirag.json").read_text())["query_prefix"] == "Question: "
    plain_adapter = run(tiny_model_dir, corpus, tmp_path / "plain", steps=1)
    assert "query_prefix" not in json.loads((plain_adapter / "unirag.json").read_text())


def test_an_embedding_layer_is_trained_recorded_and_kept(tiny_model_dir, corpus, tmp_path):
    """embedding_layer: the losses read the EOS state after that layer, exactly as UniModel embeds
    at the layer the adapter then records; a later stage keeps it."""
    import torch
    from transformers import AutoModelForCausalLM

    from unirag.training.objectives import eos_hidden
    from unirag.training.trainer import UniMAEModule

    config = load_config("test-tiny", {"embedding_layer": "1"})
    module = UniMAEModule(AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval(), config, mask_token_id=0)
    model = UniModel.load(str(tiny_model_dir), precision="fp32")
    model.embedding_layer = 1
    ids = torch.tensor([model.embedding_inputs(CORPUS_LINES[:1])[0].ids])
    with torch.no_grad():
        last, embedded = module.hidden(ids, torch.ones_like(ids))
        trained = eos_hidden(embedded, torch.ones_like(ids))[0].numpy()
    np.testing.assert_allclose(trained / np.linalg.norm(trained), model.embed(CORPUS_LINES[:1])[0], atol=1e-5)
    assert not torch.allclose(last, embedded)

    out = run(tiny_model_dir, corpus, tmp_path / "layer1", steps=2, embedding_layer=1)
    assert json.loads((out / "unirag.json").read_text())["embedding_layer"] == 1
    assert UniModel.load(str(tiny_model_dir), str(out), precision="fp32").embedding_layer == 1
    later = train(load_config("test-tiny", {"objective": "simcse", "steps": "1"}), str(tiny_model_dir),
                  str(corpus), str(tmp_path / "later"), init_adapter=str(out))
    assert json.loads((later / "unirag.json").read_text())["embedding_layer"] == 1
    assert "embedding_layer" not in json.loads((run(tiny_model_dir, corpus, tmp_path / "last", steps=1)
                                                / "unirag.json").read_text())
    with pytest.raises(UniragError, match="has 2 layers"):
        run(tiny_model_dir, corpus, tmp_path / "deep", steps=1, embedding_layer=3)
    for bad in ({"embedding_layer": "-1"}, {"embedding_layer": "1", "objective": "gem"}):
        with pytest.raises(UniragError, match="embedding_layer"):
            load_config("test-tiny", bad)


def test_simcse_masked_positive_is_a_harder_view(tiny_model_dir, corpus, tmp_path):
    """simcse_positive=masked: the second view reads the text with p_mar of it masked, so with
    no dropout at all the two views differ (dropout views would be identical) and the loss is higher."""
    first = run(tiny_model_dir, corpus, tmp_path / "unimae", steps=3)

    def first_loss(positive: str) -> float:
        config = load_config("test-tiny", {"objective": "simcse", "steps": "1", "lora_dropout": "0",
                                           "simcse_positive": positive, "p_mar": "0.5"})
        out = train(config, str(tiny_model_dir), str(corpus), str(tmp_path / positive), init_adapter=str(first))
        assert json.loads((out / "unirag.json").read_text())["config"]["simcse_positive"] == positive
        history = json.loads((out / "checkpoints" / "checkpoint-1" / "trainer_state.json").read_text())["log_history"]
        return next(h["loss_simcse"] for h in history if "loss_simcse" in h)

    assert first_loss("masked") > first_loss("dropout")
    with pytest.raises(UniragError, match="simcse_positive"):
        load_config("test-tiny", {"simcse_positive": "shuffled"})


def test_config_errors():
    with pytest.raises(UniragError, match="unknown recipe"):
        load_config("no-such-recipe")
    with pytest.raises(UniragError, match="unknown training option"):
        load_config("paper", {"stepz": "3"})
    with pytest.raises(UniragError, match="takes a int"):
        load_config("paper", {"steps": "many"})
    with pytest.raises(UniragError, match="between 0 and 1"):
        load_config("paper", {"p_mar": "1.5"})
    with pytest.raises(UniragError, match="text_unit"):
        load_config("paper", {"text_unit": "paragraph"})
    assert load_config("paper").p_mar == 0.5 and load_config("paper").alpha == 0.1


def test_split_sentences_keeps_abbreviations_and_closing_quotes():
    import datasets

    rows = datasets.Dataset.from_dict({"text": [
        'Paris has 2.1 million people (2020). It is big, e.g. in 1999. He said "Go." Why? No!', "One line"]})
    assert list(split_sentences(rows)["text"]) == [
        "Paris has 2.1 million people (2020).", "It is big, e.g. in 1999.", 'He said "Go."', "Why?", "No!",
        "One line"]


def test_sentence_unit_trains_on_sentences(tiny_model_dir, tmp_path):
    corpus = tmp_path / "leads.txt"
    corpus.write_text(" ".join(CORPUS_LINES) + "\n")  # one document of six sentences
    out = run(tiny_model_dir, corpus, tmp_path / "s", steps=2, text_unit="sentence")
    assert json.loads((out / "unirag.json").read_text())["examples"] == len(CORPUS_LINES)


def test_time_budget_stops_early_and_still_writes_the_adapter(tiny_model_dir, corpus, tmp_path):
    out = run(tiny_model_dir, corpus, tmp_path / "b", steps=50, save_steps=100, max_minutes=0.0001)
    info = json.loads((out / "unirag.json").read_text())
    assert info["steps_done"] == 1 and (out / "adapter_model.safetensors").is_file()
    assert "steps 1 of 50 (time budget" in (out / "README.md").read_text()


def test_data_inputs(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title\n\nFirst paragraph.\n\nSecond paragraph.\n")
    assert len(load_texts(tmp_path / "docs")) == 1
    (tmp_path / "d.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    assert load_texts(tmp_path / "d.jsonl")["text"] == ["one", "two"]
    (tmp_path / "bad.jsonl").write_text('{"body": "one"}\n')
    with pytest.raises(UniragError, match="no `text` field"):
        load_texts(tmp_path / "bad.jsonl")
    with pytest.raises(UniragError, match="does not exist"):
        load_texts(tmp_path / "missing.txt")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "x.txt").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(UniragError, match="not UTF-8"):
        load_texts(tmp_path / "bin")


def test_mask_token_choice():
    from tiny import tiny_tokenizer

    tok = tiny_tokenizer()
    assert choose_mask_token(tok) == ("<|endoftext|>", tok.get_vocab()["<|endoftext|>"])
    with pytest.raises(UniragError, match="differ from EOS"):
        choose_mask_token(tok, "<|im_end|>")
    with pytest.raises(UniragError, match="not in the tokenizer"):
        choose_mask_token(tok, "<mask>")


def test_gem_objective_trains_and_embeds_at_the_summary_token(tiny_model_dir, corpus, tmp_path):
    out = run(tiny_model_dir, corpus, tmp_path / "gem", objective="gem", steps=4, gem_contrastive=0.5)
    info = json.loads((out / "unirag.json").read_text())
    assert info["objective"] == "gem" and info["summary_tokens"] == ["<|summary|>"]
    card = (out / "README.md").read_text()
    assert "summary token" in card and "`<|summary|>`" in card and "p_mar" not in card
    history = json.loads((out / "checkpoints" / "checkpoint-3" / "trainer_state.json").read_text())["log_history"]
    assert any("loss_gem_lm" in h and "loss_gem_simcse" in h for h in history)
    model = UniModel.load(str(tiny_model_dir), str(out), precision="fp32")
    assert model.embed_suffix_ids == info["embed_suffix_ids"]
    assert model.embed(CORPUS_LINES).shape == (len(CORPUS_LINES), 32)


def test_recipes_ship_in_the_package_and_a_yaml_path_works(tmp_path):
    from unirag.training.config import recipe_names

    assert {"adapt", "cpu-quick", "domain", "paper", "pairs", "simcse"} <= set(recipe_names())
    mine = tmp_path / "mine.yaml"
    mine.write_text("steps: 7\nlr: 0.01\n")
    config = load_config(str(mine), {"seed": "3"})
    assert (config.steps, config.lr, config.seed, config.recipe) == (7, 0.01, 3, "mine")
    with pytest.raises(UniragError, match="does not exist"):
        load_config(str(tmp_path / "missing.yaml"))
    with pytest.raises(UniragError, match="not a YAML mapping"):
        (tmp_path / "list.yaml").write_text("- steps\n")
        load_config(str(tmp_path / "list.yaml"))
