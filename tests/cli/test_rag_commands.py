"""The RAG commands (unirag.cli.rag_commands) through typer: ingest, retrieve, ask and chat."""

from __future__ import annotations

from rag_docs import app, invoke, runner, write_docs

from unirag.errors import UniragError


def test_cli_ingest_retrieve_ask_chat(tiny_model_dir, tmp_path):
    docs = write_docs(tmp_path / "docs")
    common = ["--model", str(tiny_model_dir), "--db", str(tmp_path / "db"), "--precision", "fp32"]
    result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "4 added, 0 changed, 0 removed, 0 unchanged, 0 skipped" in result.output

    result = invoke("retrieve", "capital of France", "--top-k", "2", *common)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[1] ") and lines[2].startswith("[2] ") and len(lines) == 4

    result = invoke("retrieve", "capital of France", "--top-k", "1", "--rerank", "3", *common)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("[1] 0.06")  # a fused reciprocal-rank score, about (3 + 1) / (60 + r)

    result = invoke("retrieve", "capital of France", "--top-k", "1", "--retrieval", "lexical", *common)
    assert result.exit_code == 0, result.output
    assert "France" in result.stdout  # BM25 alone finds the one chunk that names France

    # dense: two chunks that fit the tiny model's 256 positions together (hybrid may pick longer ones)
    result = invoke("ask", "capital of France?", "-k", "2", "--max-new-tokens", "5", "--retrieval", "dense", *common)
    assert result.exit_code == 0, result.output
    assert "\nSources:\n[1] " in result.stdout and "\n[2] " in result.stdout

    result = runner.invoke(app, ["chat", "-k", "1", "--max-new-tokens", "4", *common],
                           input="cats?\nand dogs?\n/exit\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("unirag> ") == 2 and result.stdout.count("Sources:") == 2

    # another embedded text re-embeds every file
    result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress",
                    "--context-words", "8")
    assert result.exit_code == 0, result.output
    assert "0 added, 4 changed, 0 removed, 0 unchanged" in result.output

    result = invoke("retrieve", "x", *common[:2], "--db", str(tmp_path / "nodb"))
    assert isinstance(result.exception, UniragError) and "no Chroma database" in str(result.exception)
    result = invoke("retrieve", "x", *common, "--collection", "other")
    assert isinstance(result.exception, UniragError) and "no collection 'other'" in str(result.exception)
