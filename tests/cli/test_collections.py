"""`unirag collections`, `forget`, `--source`, `--version`, the UNIRAG_* defaults and the declared
dependencies, on the tiny model and a real Chroma in a temporary folder."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from unirag.cli.commands import app
from unirag.errors import UniragError

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, env: dict | None = None, input: str | None = None):
    result = runner.invoke(app, list(args), env=env, input=input)
    if result.exception and not isinstance(result.exception, (SystemExit, UniragError)):
        raise result.exception
    return result


def write_docs(root: Path) -> Path:
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "loops.md").write_text("# Loops\n\nA loop can return a value with break.\n")
    (root / "guide" / "cats.md").write_text("# Cats\n\nThe cat sat on the mat.\n")
    (root / "api.md").write_text("# API\n\nThe loop function returns values from each call.\n")
    return root


@pytest.fixture
def ingested(tiny_model_dir, tmp_path):
    """(docs folder, common options) after `unirag ingest` of three files into `docs`."""
    docs = write_docs(tmp_path / "docs")
    common = ["--model", str(tiny_model_dir), "--db", str(tmp_path / "db")]
    result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress",
                    "--precision", "fp32")
    assert result.exit_code == 0, result.output
    return docs, common


def test_version():
    from unirag import __version__

    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout == f"unirag {__version__}\n"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == __version__


def test_collections_lists_and_deletes(ingested, tiny_model_dir, tmp_path):
    docs, common = ingested
    db = ["--db", str(tmp_path / "db")]
    invoke("ingest", str(docs / "api.md"), *common, "--collection", "other", "--no-progress")
    result = invoke("collections", *db)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"unirag: 2 collections in {tmp_path / 'db'} (") and "on disk)" in lines[0]
    docs_line = next(line for line in lines if line.strip().startswith("docs "))
    chunks = chunk_counts(tmp_path / "db")
    assert f"{sum(chunks.values())} chunks, 3 files, model {tiny_model_dir} (eos pooling, layer 2), index " in docs_line
    assert re.search(r"index \d+(\.\d)? [KM]?B", docs_line) and "index 0 B" not in docs_line
    assert any(line.strip().startswith("other ") and "1 chunk, 1 file," in line for line in lines)
    assert "chroma.sqlite3" in lines[-1]
    result = invoke("collections", "docs", *db)  # one collection's files
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [f"  {source}  ({n} chunk{'s' if n > 1 else ''})"
                                              for source, n in sorted(chunks.items())]

    result = invoke("collections", *db, "--delete", "other", input="n\n")
    assert result.exit_code == 1 and "Delete collection 'other' (1 chunk)" in result.output
    assert "other " in invoke("collections", *db).stdout  # kept
    result = invoke("collections", *db, "--delete", "other", input="y\n")
    assert result.exit_code == 0 and "deleted collection 'other' (1 chunk)" in result.stdout
    result = invoke("collections", *db, "--delete", "docs", "--yes")
    assert result.exit_code == 0 and f"deleted collection 'docs' ({sum(chunks.values())} chunks)" in result.stdout
    assert "no collections in" in invoke("collections", *db).stdout
    result = invoke("collections", *db, "--delete", "docs", "--yes")
    assert isinstance(result.exception, UniragError) and "no collection 'docs'" in str(result.exception)
    result = invoke("collections", "--db", str(tmp_path / "nodb"))
    assert isinstance(result.exception, UniragError) and "no Chroma database" in str(result.exception)


def chunk_counts(db: Path, name: str = "docs") -> dict[str, int]:
    from unirag.retrieval import store

    return store.source_counts(store.open_collection(store.connect(db), name))


def _sources(output: str) -> list[str]:
    return re.findall(r"^\[\d+\] \S+\s+(\S+)", output, re.MULTILINE)


def test_forget_drops_a_files_chunks_from_dense_and_bm25_search(ingested, tmp_path):
    docs, common = ingested
    for mode in ("lexical", "dense"):
        result = invoke("retrieve", "loop value", "-k", "3", "--retrieval", mode, "--rerank", "0", *common)
        assert "guide/loops.md" in _sources(result.stdout), result.output
    chunks = chunk_counts(tmp_path / "db")
    result = invoke("forget", "guide/loops.md", *common[2:])
    assert result.exit_code == 0, result.output
    n = chunks["guide/loops.md"]
    assert result.stdout.startswith(f"unirag: forgot guide/loops.md ({n} chunk{'s' if n > 1 else ''}) from "
                                    "collection 'docs';")
    assert chunk_counts(tmp_path / "db") == {s: n for s, n in chunks.items() if s != "guide/loops.md"}
    assert str(docs.resolve()) in result.stdout
    for mode in ("lexical", "dense", "hybrid"):
        result = invoke("retrieve", "loop value", "-k", "3", "--retrieval", mode, "--rerank", "0", *common)
        assert result.exit_code == 0, result.output
        assert "guide/loops.md" not in _sources(result.stdout) and "api.md" in _sources(result.stdout)
    # a path on disk names the file too, wherever the command runs
    result = invoke("forget", str(docs / "guide" / "cats.md"), *common[2:])
    assert result.exit_code == 0 and "forgot" in result.stdout
    assert f"{chunks['api.md']} chunk" in invoke("collections", *common[2:]).stdout
    assert list(chunk_counts(tmp_path / "db")) == ["api.md"]
    result = invoke("forget", "guide/loops.md", *common[2:])
    assert isinstance(result.exception, UniragError) and "holds no file 'guide/loops.md'" in str(result.exception)
    # ingest brings the files back
    result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
    assert "2 added, 0 changed, 0 removed, 1 unchanged" in result.stdout


def test_source_globs_on_retrieve_ask_and_chat(ingested):
    _, common = ingested
    result = invoke("retrieve", "loop value", "-k", "3", "--source", "guide/*", "--rerank", "0", *common)
    assert result.exit_code == 0, result.output
    assert sorted(_sources(result.stdout)) == ["guide/cats.md", "guide/loops.md"]
    result = invoke("retrieve", "loop value", "-k", "5", "--source", "api.md", "--source", "guide/c*", *common)
    assert set(_sources(result.stdout)) == {"api.md", "guide/cats.md"}
    result = invoke("ask", "loop value?", "-k", "3", "--source", "guide/cats.md", "--max-new-tokens", "4", *common)
    assert result.exit_code == 0, result.output
    assert "guide/cats.md" in result.stdout and "api.md" not in result.stdout
    result = invoke("chat", "-k", "2", "--source", "api.md", "--max-new-tokens", "4", *common, input="loop?\n")
    assert result.exit_code == 0, result.output
    assert "files matching api.md" in result.stdout and "guide/" not in result.stdout.split("unirag> ", 1)[1]
    result = invoke("retrieve", "loop", "--source", "nope/*", *common)
    assert isinstance(result.exception, UniragError) and "matches --source nope/*" in str(result.exception)


def test_environment_variables_default_db_collection_and_model(ingested, tiny_model_dir, tmp_path):
    docs, _ = ingested
    env = {"UNIRAG_DB": str(tmp_path / "db"), "UNIRAG_MODEL": str(tiny_model_dir), "UNIRAG_COLLECTION": "notes"}
    result = invoke("ingest", str(docs / "api.md"), "--no-progress", env=env)
    assert result.exit_code == 0, result.output
    assert f"into collection 'notes' at {tmp_path / 'db'}" in result.stdout
    result = invoke("retrieve", "loop", "-k", "1", env=env)
    assert result.exit_code == 0 and _sources(result.stdout) == ["api.md"]
    # an option given wins over the variable
    result = invoke("retrieve", "cat", "-k", "5", "--collection", "docs", "--rerank", "0", env=env)
    assert set(_sources(result.stdout)) == {"api.md", "guide/cats.md", "guide/loops.md"}
    result = invoke("forget", "api.md", env=env)
    assert result.exit_code == 0 and "collection 'notes'" in result.stdout
    assert "UNIRAG_COLLECTION" in invoke("ask", "--help").stdout  # the help names them


def test_every_imported_package_is_declared():
    """Each third-party module unirag (and its tests) imports comes from a distribution that
    pyproject.toml declares, in the dependencies or an extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    name = lambda spec: re.split(r"[<>=!~\[ ;]", spec)[0].lower().replace("_", "-")  # noqa: E731
    declared = {name(d) for d in project["dependencies"]}
    declared |= {name(d) for extra in project["optional-dependencies"].values() for d in extra}
    distributions = importlib.metadata.packages_distributions()
    ours = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"unirag"}
    missing = set()
    for path in [*(ROOT / "unirag").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules = [node.module]
            else:
                continue
            for module in (m.split(".")[0] for m in modules):
                if module in sys.stdlib_module_names or module in ours:
                    continue
                dists = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
                if not dists & declared:
                    missing.add(f"{module} ({path.relative_to(ROOT)})")
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
