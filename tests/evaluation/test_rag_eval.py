"""`unirag eval rag`: the scoring as pure functions, the wiring through pipeline.retrieve, and the
command end to end on the tiny model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from unirag.errors import UniragError
from unirag.evaluation import rag as rag_eval
from unirag.evaluation.cli import eval_app
from unirag.evaluation.rag import (Question, aggregate, depths_for, load_questions, rag_results_markdown,
                                   same_file, score_ranking)
from unirag.answer import evidence
from unirag.answer.ask import AskSettings
from unirag.retrieval.search import Hit

runner = CliRunner()


def test_same_file_matches_relative_paths_and_bare_names():
    assert same_file("ch03.md", "ch03.md")
    assert same_file("src/ch03.md", "ch03.md")  # a bare name matches in a sub-folder
    assert same_file("src/ch03.md", "./src/ch03.md")
    assert not same_file("other/ch03.md", "src/ch03.md")  # a path must match as a path
    assert not same_file("ch03.md.bak", "ch03.md")
    assert not same_file("xch03.md", "ch03.md")


def test_score_ranking_hits_count_chunks_mrr_counts_distinct_files():
    # chunks: a, a, b, c, d -> distinct files a, b, c, d
    ranking = ["a.md", "a.md", "b.md", "c.md", "d.md"]
    s = score_ranking(ranking, ["b.md"])
    assert (s["hit@1"], s["hit@3"], s["hit@5"]) == (0, 1, 1)
    assert s["chunk_rank"] == 3 and s["file_rank"] == 2 and s["rr"] == 0.5
    s = score_ranking(ranking, ["c.md"])
    assert (s["hit@1"], s["hit@3"], s["hit@5"]) == (0, 0, 1)
    assert s["chunk_rank"] == 4 and s["file_rank"] == 3 and s["rr"] == pytest.approx(1 / 3)
    s = score_ranking(ranking, ["a.md"])
    assert (s["hit@1"], s["rr"]) == (1, 1.0)
    s = score_ranking(ranking, ["z.md"])
    assert (s["hit@5"], s["rr"], s["file_rank"], s["chunk_rank"]) == (0, 0.0, None, None)
    s = score_ranking(ranking, ["z.md", "d.md"])  # any of several answer files counts
    assert (s["hit@3"], s["hit@5"], s["file_rank"]) == (0, 1, 4)
    assert score_ranking([], ["a.md"])["hit@1"] == 0
    assert set(score_ranking(["a.md"], ["a.md"], depths=[1, 10])) == {"hit@1", "hit@10", "rr", "file_rank",
                                                                       "chunk_rank"}


def test_aggregate_means_and_latency_percentiles():
    rows = [score_ranking(["a", "b"], ["a"]), score_ranking(["a", "b"], ["b"]), score_ranking(["a", "b"], ["c"])]
    m = aggregate(rows, [0.010, 0.030, 0.020], depths=[1, 3])
    assert m["hit@1"] == pytest.approx(1 / 3) and m["hit@3"] == pytest.approx(2 / 3)
    assert m["mrr"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["n_questions"] == 3 and m["latency_ms_p50"] == pytest.approx(20.0)
    assert m["latency_ms_p90"] == pytest.approx(30.0)
    with pytest.raises(UniragError):
        aggregate([], [])


def test_depths_for():
    assert depths_for(5) == [1, 3, 5]
    assert depths_for(3) == [1, 3]
    assert depths_for(1) == [1]
    assert depths_for(10) == [1, 3, 5, 10]


def test_load_questions_accepts_both_spellings_and_names_bad_lines(tmp_path):
    good = tmp_path / "q.jsonl"
    good.write_text('{"q": "How?", "files": ["a.md"]}\n\n{"question": "Why?", "file": "b.md"}\n')
    assert load_questions(good) == [Question("How?", ("a.md",)), Question("Why?", ("b.md",))]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"q": "How?", "files": ["a.md"]}\n{"q": "no files"}\n')
    with pytest.raises(UniragError, match=r"bad.jsonl:2"):
        load_questions(bad)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UniragError, match="no questions"):
        load_questions(tmp_path / "empty.jsonl")
    with pytest.raises(UniragError, match="not found"):
        load_questions(tmp_path / "missing.jsonl")


def test_markdown_table():
    table = rag_results_markdown({"m c": {"hit@1": 0.5, "hit@3": 0.75, "hit@5": 1.0, "mrr": 0.625,
                                          "n_questions": 4, "latency_ms_p50": 12.3}})
    assert "| Run | Questions | hit@1 | hit@3 | hit@5 | MRR | p50 ms |" in table
    assert "| m c | 4 | 50.0 | 75.0 | 100.0 | 62.5 | 12 |" in table


def test_run_rag_eval_scores_what_pipeline_retrieve_returns(monkeypatch):
    """The eval goes through unirag.retrieval.search.retrieve, the function `ask` uses."""
    rankings = {"q1": ["a.md", "b.md", "c.md"], "q2": ["c.md", "c.md", "b.md"]}
    calls = []

    def fake_retrieve(model, collection, question, top_k=5, mode="hybrid", rerank=0):
        calls.append((question, top_k, mode, rerank))
        return [Hit(f"{question}-{i}", 1.0 - i / 10, "text", s) for i, s in enumerate(rankings[question][:top_k])]

    monkeypatch.setattr("unirag.retrieval.search.retrieve", fake_retrieve)
    result = rag_eval.run_rag_eval(None, None, [Question("q1", ("b.md",)), Question("q2", ("b.md",))], top_k=3,
                                   mode="dense", rerank=4)
    assert calls == [("q1", 3, "dense", 4), ("q1", 3, "dense", 4), ("q2", 3, "dense", 4)]  # warm-up, then each once
    m = result["metrics"]
    assert (m["hit@1"], m["hit@3"], m["mrr"]) == (0.0, 1.0, 0.5)  # b is file 2 in both rankings
    assert "hit@5" not in m
    assert [r["retrieved"][0]["source"] for r in result["per_question"]] == ["a.md", "c.md"]


def test_score_answer_reads_citation_markers():
    sources = ["a.md", "b.md", "c.md"]
    assert rag_eval.cited_numbers("See [2] and [1, 3]; again [2].") == [2, 1, 3]
    s = rag_eval.score_answer("Use break [2].", sources, ["b.md"])
    assert (s["cited"], s["cites"], s["cites_right"]) == ([2], 1, 1)
    s = rag_eval.score_answer("As [1] says, and [9] (no such passage).", sources, ["b.md"])
    assert (s["cited"], s["cites"], s["cites_right"]) == ([1], 1, 0)
    s = rag_eval.score_answer("The context does not contain the answer.", sources, ["b.md"])
    assert (s["cites"], s["cites_right"]) == (0, 0)
    assert [rag_eval.score_answer("x", sources, [gold])["first_source_right"] for gold in ("a.md", "b.md")] == [1, 0]
    assert rag_eval.score_answer("x", [], ["a.md"])["first_source_right"] == 0


def test_answer_variants_are_the_answer_modes_and_the_whole_chunks_baseline():
    variants = rag_eval.answer_variants("default, extractive,generated,both,chunks")
    assert list(variants) == ["default", "extractive", "generated", "both", "chunks"]
    assert variants["default"] == AskSettings() and variants["generated"].answer == "generated"
    assert variants["default"].words == evidence.MAX_WORDS
    assert isinstance(variants["chunks"], rag_eval.WholeChunks)
    for bad in ("poem", "extractive@noabstain", "top_k=5", "speed=2", "rerank="):
        with pytest.raises(UniragError, match="unknown answer variant"):
            rag_eval.answer_variants(bad)
    # settings changed from the default: the candidates a held-out choice is made among
    changed = rag_eval.answer_variants("rerank=5,abstain=false+evidence_words=40,answer=both+evidence_words=none")
    assert changed["rerank=5"] == replace(AskSettings(), rerank=5)
    assert changed["abstain=false+evidence_words=40"] == replace(AskSettings(), abstain=False, evidence_words=40)
    assert changed["answer=both+evidence_words=none"] == replace(AskSettings(), answer="both")
    with pytest.raises(UniragError, match="--rerank must be 0"):
        rag_eval.answer_variants("rerank=-1")
    for bad, message in (("rerank=five", "expected a number"), ("rerank=none", "expected a number"),
                         ("abstain=maybe", "expected true or false")):
        with pytest.raises(UniragError, match=message):
            rag_eval.answer_variants(bad)


def test_the_chunks_variant_generates_from_the_whole_chunks(tiny):
    chunks = [Hit("a", 1.0, "Loops can return values with break.", "loops.md", "Loops"),
              Hit("b", 0.5, "The cat sat on the mat.", "cats.md", "")]
    result = rag_eval.chunks_answer(tiny, "How does a loop return a value?", chunks,
                                    rag_eval.WholeChunks(top_k=2, max_new_tokens=6))
    assert not result.abstained and [h.id for h in result.hits] == ["a", "b"]  # shown as retrieved, whole
    assert isinstance(result.read(), str)


def test_load_questions_reads_keys(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"q": "Q?", "files": ["a.md"], "keys": ["break"]}\n{"q": "R?", "files": ["b.md"]}\n')
    assert [q.keys for q in load_questions(path)] == [("break",), ()]
    path.write_text('{"q": "Q?", "files": ["a.md"], "keys": [""]}\n')
    with pytest.raises(UniragError, match="keys"):
        load_questions(path)


def write_tiny_docs(root: Path) -> Path:
    root.mkdir()
    (root / "loops.md").write_text("# Loops\n\nLoops can return values with break.\n")
    (root / "cats.md").write_text("# Cats\n\nThe cat sat on the mat.\n")
    (root / "sub").mkdir()
    (root / "sub" / "paris.md").write_text("# Paris\n\nParis is the capital of France.\n")
    return root


def test_eval_rag_command_on_tiny_model(tiny_model_dir, tmp_path, monkeypatch):
    from unirag.answer import ask

    for threshold in ("ABSTAIN_BELOW", "ABSTAIN_ANSWER_BELOW", "ABSTAIN_SIMILARITY_BELOW"):
        monkeypatch.setattr(ask, threshold, float("-inf"))  # the tiny model's scores are noise
    docs = write_tiny_docs(tmp_path / "docs")
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(json.dumps(q) for q in [
        {"q": "How does a loop return a value?", "files": ["loops.md"], "keys": ["break"]},
        {"q": "Where did the cat sit?", "files": ["cats.md"]},
        {"q": "What is the capital of France?", "files": ["paris.md"]},
    ]) + "\n")
    out = tmp_path / "out" / "rag.json"
    args = ["rag", "--docs", str(docs), "--questions", str(questions), "--db", str(tmp_path / "db"),
            "--collection", "tiny-eval", "--model", str(tiny_model_dir), "--precision", "fp32", "--top-k", "3",
            "--output", str(out), "--no-progress"]
    result = runner.invoke(eval_app, args)
    assert result.exit_code == 0, result.output
    assert "3 added" in result.output
    record = json.loads(out.read_text())
    assert record["chunks"] == 3 and record["top_k"] == 3
    m = record["metrics"]
    assert m["n_questions"] == 3 and set(m) >= {"hit@1", "hit@3", "mrr", "latency_ms_p50"}
    assert m["hit@3"] == 1.0  # three one-chunk files, top 3: every file is retrieved
    assert 0 < m["mrr"] <= 1 and m["hit@1"] <= m["hit@3"]
    assert all(len(q["retrieved"]) == 3 for q in record["per_question"])
    assert out.with_suffix(".md").read_text() in result.output
    again = runner.invoke(eval_app, args)  # reuses the collection: nothing re-embedded, same numbers
    assert again.exit_code == 0, again.output
    assert "0 added, 0 changed, 0 removed, 3 unchanged" in again.output
    assert json.loads(out.read_text())["metrics"]["mrr"] == m["mrr"]
    (docs / "new.md").write_text("# New\n\nA page added after the collection was built.\n")
    as_is = runner.invoke(eval_app, args + ["--no-ingest"])  # scores the collection as it is
    assert as_is.exit_code == 0 and "not ingested" in as_is.output, as_is.output
    assert json.loads(out.read_text())["chunks"] == 3
    (docs / "new.md").unlink()
    answered = runner.invoke(eval_app, args + ["--answers", "1", "--answer-top-k", "2",
                                                "--variants", "extractive,generated,chunks",
                                                "--max-new-tokens", "8"])
    assert answered.exit_code == 0, answered.output
    record = json.loads(out.read_text())
    scored = record["metrics"]["answers"]
    assert list(scored) == ["extractive", "generated", "chunks"]
    assert scored["extractive"]["n_answers"] == 1 and "cites" in scored["extractive"]
    assert all(0 <= v["first_source_right"] <= 1 for v in scored.values())
    # the one document of three that says "break" is shown, and quoting it answers
    assert scored["extractive"]["keys_shown"] == 1.0 and scored["extractive"]["key_correct"] == 1.0
    first = record["per_question"][0]["answers"]
    assert first["extractive"]["answer"].startswith("“") and "answers" not in record["per_question"][1]
    assert "| extractive | 1 |" in answered.output
    # a variant that ranks its own way (here: no rerank, dense) is answered from its own ranking
    own = runner.invoke(eval_app, args + ["--answers", "1", "--answer-top-k", "1",
                                          "--variants", "default,rerank=0+retrieval=dense", "--max-new-tokens", "8"])
    assert own.exit_code == 0, own.output
    scored = json.loads(out.read_text())["metrics"]["answers"]
    assert list(scored) == ["default", "rerank=0+retrieval=dense"]
    assert all(v["n_answers"] == 1 for v in scored.values())


def test_reference_minilm_ranks_the_same_chunks(tiny_model_dir, tmp_path):
    """--reference minilm: all-MiniLM-L6-v2 over the very chunks of the collection, in the same run."""
    docs = write_tiny_docs(tmp_path / "docs")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"q": "Which city is the capital of France?", "files": ["paris.md"]}\n')
    out = tmp_path / "rag.json"
    result = runner.invoke(eval_app, ["rag", "--docs", str(docs), "--questions", str(questions), "--db",
                                      str(tmp_path / "db"), "--model", str(tiny_model_dir), "--no-progress",
                                      "--reference", "minilm", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert "all-MiniLM-L6-v2 (same chunks, dense)" in result.output
    ref = json.loads(out.read_text())["reference"]
    assert ref["metrics"]["hit@1"] == 1.0  # a real encoder finds Paris among three one-line files
    assert {r["source"] for r in ref["per_question"][0]["retrieved"]} == {"loops.md", "cats.md", "sub/paris.md"}
    bad = runner.invoke(eval_app, ["rag", "--docs", str(docs), "--questions", str(questions), "--reference", "bge"])
    assert bad.exit_code == 1 and "unknown --reference 'bge'" in str(bad.exception)


def test_eval_rag_warns_about_answer_files_not_in_docs(tiny_model_dir, tmp_path):
    docs = write_tiny_docs(tmp_path / "docs")
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"q": "Where?", "files": ["nowhere.md"]}\n')
    result = runner.invoke(eval_app, ["rag", "--docs", str(docs), "--questions", str(questions), "--db",
                                      str(tmp_path / "db"), "--model", str(tiny_model_dir), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "1 answer file(s) are not under" in result.output and "nowhere.md" in result.output
    assert "| 1 | 0.0 | 0.0 | 0.0 | 0.0 |" in result.output
