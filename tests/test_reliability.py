"""Issue 7, reliability and security: bad input, crashes, load, safe defaults (tiny model).

Each test here backs one or more rows of the table in docs/RELIABILITY.md. User errors go
through the real entry point, `unirag.cli.main`, in-process (no model load for most): they must
print one line on stderr, `unirag: error: ...`, exit non-zero, and never a traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from unirag.errors import UniragError
from unirag.rag import store

REPO = Path(__file__).resolve().parents[1]
TINY_ARGS = ["--precision", "fp32"]


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `unirag ARGS...` through `unirag.cli.main` in this process: (exit code, stdout, stderr)."""
    from unirag.cli import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr(sys, "argv", ["unirag", *map(str, args)])
        try:
            main()
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


def one_error_line(err: str) -> str:
    """The single `unirag: error: ...` line a user error prints (and nothing else, no traceback)."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("unirag: warning:")]
    assert len(lines) == 1 and lines[0].startswith("unirag: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ---------------------------------------------------------------------- bad input: the CLI
def _symlink_loop(tmp: Path) -> Path:
    (tmp / "loop").symlink_to(tmp / "loop")
    return tmp / "loop"


def _empty_folder(tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    return tmp / "empty"


def _a_file(tmp: Path) -> Path:
    (tmp / "db-file").write_text("not a folder")
    return tmp / "db-file"


USER_ERRORS = {  # id: (arguments, given tmp_path; exit code; what the line must say)
    "missing-path": (lambda t: ["ingest", t / "nope"], 1, "no such file or folder"),
    "empty-folder": (lambda t: ["ingest", _empty_folder(t)], 1, "no .htm, .html, .markdown, .md, .pdf, .rst, .txt files"),
    "symlink-loop": (lambda t: ["ingest", _symlink_loop(t)], 1, "is a symlink loop or points to nothing"),
    "empty-question-ask": (lambda t: ["ask", "  "], 1, "the question is empty"),
    "empty-question-retrieve": (lambda t: ["retrieve", ""], 1, "the question is empty"),
    "unknown-option": (lambda t: ["ingest", t, "--bogus"], 2, "No such option: --bogus (see `unirag ingest --help`)"),
    "misspelt-option": (lambda t: ["ingest", t, "--batch_size", "3"], 2, "Possible options: --batch-size"),
    "missing-argument": (lambda t: ["ask"], 2, "Missing argument 'question'"),
    "bad-option-value": (lambda t: ["ingest", t, "--batch-size", "0"], 2, "Invalid value for '--batch-size'"),
    "unknown-command": (lambda t: ["frobnicate"], 2, "No such command 'frobnicate'"),
    "db-is-a-file": (lambda t: ["ingest", REPO / "docs", "--db", _a_file(t), "--model", "/nonexistent"], 1,
                     "is a file; pass a folder for the Chroma database"),
}


@pytest.mark.parametrize("case", list(USER_ERRORS))
def test_user_error_is_one_line(cli, tmp_path, case):
    """These fail before any model loads: one line, status 1 (user error) or 2 (usage)."""
    make_args, code, says = USER_ERRORS[case]
    status, out, err = cli(*make_args(tmp_path))
    line = one_error_line(err)
    assert status == code and says in line, (status, line)


def test_unknown_option_in_a_real_process(tmp_path):
    """The same through the installed entry point in a child process: status 2, one line."""
    script = Path(sys.executable).parent / "unirag"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "unirag.cli"]
    result = subprocess.run([*command, "retrieve", "x", "--top-k", "2", "--bogus"], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 2
    assert one_error_line(result.stderr) == "unirag: error: No such option: --bogus (see `unirag retrieve --help`)"


# ---------------------------------------------------------------------- bad input: files
SPARSE_100MB = 100 * 2**20


def bad_folder(root: Path) -> Path:
    """One good file, one very long line, and every kind of file ingest must skip with a reason."""
    root.mkdir()
    (root / "good.md").write_text("# Good\n\nThe cat sat on the mat.\n")
    (root / "long-line.txt").write_text("The quick brown fox jumps over the lazy dog. " * 2000)  # 90 KB, no newline
    (root / "empty.md").write_text("")
    (root / "binary.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    (root / "latin1.txt").write_bytes("Caf\xe9 cr\xe8me".encode("latin-1"))
    (root / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ngarbage, no xref\n")
    with open(root / "huge.txt", "wb") as f:  # 100 MB, sparse: created instantly, never read
        f.truncate(SPARSE_100MB)
    (root / "loop").symlink_to(root, target_is_directory=True)  # a folder loop
    (root / "ring-a.md").symlink_to(root / "ring-b.md")  # a file loop: a -> b -> a
    (root / "ring-b.md").symlink_to(root / "ring-a.md")
    (root / "secret.md").write_text("# Secret\n\nno one may read this\n")
    (root / "private").mkdir()
    (root / "private" / "inside.md").write_text("# Inside\n\ntext\n")
    return root


@pytest.fixture
def unreadable(monkeypatch):
    """Make `secret.md` and the folder `private` unreadable: chmod 000, or (root reads anyway) an
    injected EACCES at the same calls the readers make."""
    paths: list[Path] = []

    def apply(root: Path) -> None:
        secret, private = root / "secret.md", root / "private"
        if os.geteuid() != 0:
            for p in (secret, private):
                p.chmod(0)
                paths.append(p)
            return
        read_bytes, scandir = Path.read_bytes, os.scandir

        def denied_read(self):
            if self == secret:
                raise PermissionError(13, "Permission denied", str(self))
            return read_bytes(self)

        def denied_scandir(path="."):
            if Path(path) == private:
                raise PermissionError(13, "Permission denied", str(path))
            return scandir(path)

        monkeypatch.setattr(Path, "read_bytes", denied_read)
        monkeypatch.setattr(os, "scandir", denied_scandir)

    yield apply
    for p in paths:
        p.chmod(0o755)


def test_ingest_skips_bad_files_and_lists_them(cli, tiny_model_dir, tmp_path, unreadable):
    docs = bad_folder(tmp_path / "docs")
    unreadable(docs)
    started = time.perf_counter()
    status, out, err = cli("ingest", docs, "--db", tmp_path / "db", "--model", tiny_model_dir, *TINY_ARGS,
                           "--chunk-size", "64", "--chunk-overlap", "8", "--no-progress")
    assert status == 0 and "Traceback" not in err, err
    assert time.perf_counter() - started < 120
    report = out.split("\n", 1)[1]
    summary = report.splitlines()[0]
    assert summary.startswith("2 added, 0 changed, 0 removed, 0 unchanged, 10 skipped;"), summary
    skipped = dict(ln.removeprefix("  skipped ").split(": ", 1) for ln in report.splitlines()
                   if ln.startswith("  skipped "))
    pdf = skipped.pop("broken.pdf")
    assert pdf.startswith(("PDF failed to parse: ", "pypdf not installed")), pdf
    assert skipped == {
        "binary.txt": "binary content (NUL bytes) despite a text extension",
        "empty.md": "empty file",
        "huge.txt": "too large (100.0 MB > 20 MB limit)",
        "latin1.txt": "not UTF-8 (bad byte at offset 3) and no BOM; convert it to UTF-8",
        "loop": "symlinked folder (not followed)",
        "private": "unreadable folder: Permission denied",
        "ring-a.md": "symlink (not followed)",
        "ring-b.md": "symlink (not followed)",
        "secret.md": "unreadable: Permission denied",
    }
    chunks = store.records(store.open_collection(store.connect(tmp_path / "db"), "docs"),
                           {"source": "long-line.txt"})
    assert len(chunks) > 100 and max(m["n_tokens"] for m in chunks.values()) <= 64  # the long line was cut


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway; "
                    "test_ingest_skips_bad_files_and_lists_them injects the same EACCES instead")
def test_chmod_000_file_is_skipped_as_unreadable(tmp_path):
    from unirag.rag.readers import read_bytes, walk

    (tmp_path / "secret.md").write_text("# Secret\n")
    (tmp_path / "secret.md").chmod(0)
    try:
        files, _, _ = walk(tmp_path)
        assert read_bytes(files[0]).reason == "unreadable: Permission denied"
    finally:
        (tmp_path / "secret.md").chmod(0o644)


# ---------------------------------------------------------------------- bad input: questions
LONG_QUESTION = "Where does the cat sit when the dog runs in the park? " * 300  # ~4000 tokens, window 256


def small_db(cli, model_dir: Path, tmp_path: Path) -> Path:
    docs = tmp_path / "small-docs"
    docs.mkdir()
    (docs / "cats.md").write_text("# Cats\n\nThe cat sat on the mat.\n\n## Dogs\n\nA dog ran in the park.\n")
    status, out, err = cli("ingest", docs, "--db", tmp_path / "db", "--model", model_dir, *TINY_ARGS,
                           "--chunk-size", "64", "--chunk-overlap", "8", "--no-progress")
    assert status == 0, err
    return tmp_path / "db"


def test_question_longer_than_the_context_window(cli, tiny, tiny_model_dir, tmp_path, caplog):
    from apps.gradio_app import RagChat

    db = small_db(cli, tiny_model_dir, tmp_path)
    common = ["--db", db, "--model", tiny_model_dir, *TINY_ARGS]
    status, out, err = cli("ask", LONG_QUESTION, *common, "--max-new-tokens", "16")
    assert status == 1 and out == ""
    assert one_error_line(err) == ("unirag: error: the question leaves no room for context in the model's "
                                   "256-token window with max_new_tokens=16; shorten it or lower --max-new-tokens")
    caplog.clear()
    status, out, err = cli("retrieve", LONG_QUESTION, *common)  # search only: cut to max_length, with a warning
    assert status == 0 and out.startswith("[1] "), err
    assert "1 of 1 texts were longer than max_length=512 tokens and were truncated" in caplog.text

    rag = RagChat(tiny, db=db, max_new_tokens=16)
    chat, session, _, _ = list(rag.respond(LONG_QUESTION, None, "docs"))[-1]
    assert chat[-1]["content"].startswith("**Error:** the question leaves no room for context")
    assert session["turns"] == []
    chat, session, _, box = list(rag.respond("", None, "docs"))[-1]  # an empty question: nothing happens
    assert chat == [] and session["turns"] == [] and box == ""


# ---------------------------------------------------------------------- bad input: Chroma
def test_collection_made_with_another_model(cli, tiny_model_dir, tmp_path):
    from tiny import save_tiny_model

    db = small_db(cli, tiny_model_dir, tmp_path)
    other = save_tiny_model(tmp_path / "other-model", seed=1)
    for command in (["retrieve", "cats"], ["ask", "cats?"], ["ingest", tmp_path / "small-docs"]):
        status, out, err = cli(*command, "--db", db, "--model", other, *TINY_ARGS)
        line = one_error_line(err)
        assert status == 1 and f"holds vectors from model '{tiny_model_dir}', but the loaded model is " \
            f"'{other}'; load the same --model/--adapter, use another --collection, or rebuild it" in line


def test_corrupt_chroma_database(cli, tiny, tiny_model_dir, tmp_path):
    import shutil

    import numpy as np
    from chromadb.api.client import SharedSystemClient

    db = tmp_path / "db"
    coll = store.open_collection(store.connect(db), "docs", tiny, create=True)
    n = 1500  # past Chroma's flush threshold, so the vectors land in its HNSW files on disk
    vectors = np.random.default_rng(0).normal(size=(n, 32)).astype(np.float32)
    store.upsert(coll, [f"id{i}" for i in range(n)], vectors, [f"text {i}" for i in range(n)],
                 [{"source": f"f{i}.md", "heading": ""} for i in range(n)])
    SharedSystemClient.clear_system_cache()  # close it, as a finished process would
    common = ["--model", tiny_model_dir, *TINY_ARGS]
    assert cli("retrieve", "text", "--db", db, *common)[0] == 0

    garbage, half, index = tmp_path / "garbage", tmp_path / "half", tmp_path / "index"
    for copy in (garbage, half, index):
        shutil.copytree(db, copy)
    (garbage / "chroma.sqlite3").write_bytes(os.urandom(8192))
    sqlite = half / "chroma.sqlite3"
    with open(sqlite, "r+b") as f:  # a half-written file: cut in the middle
        f.truncate(sqlite.stat().st_size // 2)
    for copy, why in ((garbage, "file is not a database"), (half, "database disk image is malformed")):
        status, out, err = cli("retrieve", "text", "--db", copy, *common)
        assert status == 1 and one_error_line(err) == (
            f"unirag: error: the Chroma database at {copy} is damaged or not a Chroma database ({why}); "
            f"move the folder away and rebuild it with `unirag ingest FOLDER --db {copy}`")
    status, _, err = cli("ingest", REPO / "docs", "--db", garbage, *common)
    assert status == 1 and "is damaged or not a Chroma database" in one_error_line(err)

    bins = sorted(index.glob("*/*.bin"))
    assert bins, "expected Chroma's HNSW files"
    for file in bins:  # the vector index damaged, the SQLite file intact
        file.write_bytes(os.urandom(file.stat().st_size))
    status, out, err = cli("retrieve", "text", "--db", index, *common)
    line = one_error_line(err)
    assert status == 1 and line.startswith("unirag: error: the Chroma database failed (InternalError: ")
    assert line.endswith("if it is damaged, move its folder away and run `unirag ingest` again")


LOCK_HOLDER = """
import sqlite3, sys, time
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(120)
"""


def test_locked_chroma_database(cli, tiny, tiny_model_dir, tmp_path, monkeypatch):
    db = small_db(cli, tiny_model_dir, tmp_path)
    monkeypatch.setattr(store, "LOCK_WAIT_S", 1.0)  # 10 s by default
    holder = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(db / "chroma.sqlite3")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for command in (["retrieve", "cats"], ["ingest", tmp_path / "small-docs"]):
            started = time.monotonic()
            status, out, err = cli(*command, "--db", db, "--model", tiny_model_dir, *TINY_ARGS)
            assert status == 1 and one_error_line(err) == (
                f"unirag: error: the Chroma database at {db} is locked by another process (an ingest or app "
                "using it?); wait for it to finish or stop it, then try again")
            assert time.monotonic() - started < 30  # refused in about LOCK_WAIT_S, not a hang
        with pytest.raises(UniragError, match="is locked by another process"):
            store.connect(db)  # the app opens the database the same way
    finally:
        holder.kill()
        holder.wait(timeout=30)
    status, out, err = cli("retrieve", "cats", "--db", db, "--model", tiny_model_dir, *TINY_ARGS)
    assert status == 0 and out.startswith("[1] "), err
