"""Issue 7, reliability and security: bad input, crashes, load, safe defaults (tiny model).

Each test here backs one or more rows of the table in docs/RELIABILITY.md. User errors go
through the real entry point, `unirag.cli.commands.main`, in-process (no model load for most): they must
print one line on stderr, `unirag: error: ...`, exit non-zero, and never a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from net import free_port

from unirag.errors import UniragError
from unirag.retrieval import store
REPO = Path(__file__).resolve().parents[1]
TINY_ARGS = ["--precision", "fp32"]


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `unirag ARGS...` through `unirag.cli.commands.main` in this process: (exit code, stdout, stderr)."""
    from unirag.cli.commands import main

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


@pytest.fixture
def one_torch_thread():
    """One intra-op thread for in-process model work. On a shared 2-core machine, OpenMP threads
    spinning against another busy process make steps up to ~50x slower; results are the same."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    "empty-folder": (lambda t: ["ingest", _empty_folder(t)], 1, "no .adoc, .asciidoc, .htm, .html, .ipynb, .markdown, .md, .mdx, .pdf, .rst, .txt"),
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


@pytest.mark.slow  # a child process
def test_unknown_option_in_a_real_process(tmp_path):
    """The same through the installed entry point in a child process: status 2, one line."""
    script = Path(sys.executable).parent / "unirag"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "unirag.cli.commands"]
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


def test_ingest_skips_bad_files_and_lists_them(cli, tiny_model_dir, tmp_path, unreadable, caplog):
    docs = bad_folder(tmp_path / "docs")
    unreadable(docs)
    started = time.perf_counter()
    status, out, err = cli("ingest", docs, "--db", tmp_path / "db", "--model", tiny_model_dir, *TINY_ARGS,
                           "--chunk-size", "64", "--chunk-overlap", "8", "--no-progress")
    assert status == 0 and "Traceback" not in err, err
    assert time.perf_counter() - started < 120
    assert not [r for r in caplog.records if r.levelname == "WARNING"]  # e.g. pypdf's, without a file name
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
    from unirag.readers.registry import read_bytes, walk

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
    from unirag.app import RagChat

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


@pytest.mark.slow  # a child process holds the lock
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


# ---------------------------------------------------------------------- model cache, adapters, remote code
@pytest.fixture
def fake_registry_model(tmp_path, monkeypatch, tiny_model_dir):
    """A registry entry whose "GGUF" de-quantizes to the tiny model: the cache code runs for real."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unirag.model import registry as models_mod
    monkeypatch.setenv("UNIRAG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(models_mod.REGISTRY, "fake-model", models_mod.WheelGGUF("fake-dist", "1.0", "fake.gguf"))
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(models_mod, "find_wheel_gguf", lambda entry: gguf)
    load_model, load_tokenizer = AutoModelForCausalLM.from_pretrained, AutoTokenizer.from_pretrained
    calls = []

    def model_from(source, *args, gguf_file=None, **kwargs):
        if gguf_file is None:
            return load_model(source, *args, **kwargs)
        calls.append(gguf_file)
        model = load_model(tiny_model_dir)
        model.config.quantization_config = {}  # as a GGUF load leaves it
        return model

    def tokenizer_from(source, *args, gguf_file=None, **kwargs):
        return load_tokenizer(tiny_model_dir if gguf_file else source, *args, **kwargs)

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", model_from)
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", tokenizer_from)
    return tmp_path / "cache" / "models" / "fake-model", calls


def test_model_cache_crash_never_leaves_a_loadable_half(fake_registry_model, monkeypatch, cli):
    from transformers import PreTrainedTokenizerFast

    from unirag import UniModel
    from unirag.model.registry import CACHE_MARKER

    target, calls = fake_registry_model
    save = PreTrainedTokenizerFast.save_pretrained

    def crash(*args, **kwargs):  # the weights are written, then the process "dies"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", crash)
    with pytest.raises(OSError):
        UniModel.load("fake-model", precision="fp32")
    assert not target.exists() and not list(target.parent.glob(".fake-model.*"))  # nothing half-written
    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", save)

    # What SIGKILL leaves: a temporary folder (never looked at) and, from an older copy, a target
    # folder without the completion marker (never trusted): the next load rebuilds the cache.
    (target.parent / ".fake-model.x1y2z3").mkdir(parents=True)
    (target.parent / ".fake-model.x1y2z3" / "model.safetensors").write_bytes(b"half")
    target.mkdir()
    (target / "model.safetensors").write_bytes(b"half")
    model = UniModel.load("fake-model", precision="fp32")
    assert (target / CACHE_MARKER).is_file() and len(calls) == 2 and model.embed(["a cat"]).shape == (1, 32)

    weights = target / "model.safetensors"  # damaged after it was complete: a clear error, how to fix it
    weights.write_bytes(weights.read_bytes()[:1000])
    status, out, err = cli("embed", "a cat", "--model", "fake-model")
    line = one_error_line(err)
    assert status == 1 and line.startswith("unirag: error: cannot load model 'fake-model': ")
    assert line.endswith(f"; delete the cache folder {target} to rebuild it")


@pytest.mark.slow  # a child process
def test_half_written_adapter_is_one_line_in_a_real_process(tiny_model_dir, tmp_path):
    """The whole stderr of `unirag embed --adapter <half-written adapter>`: one line, no library noise."""
    from test_loading import make_adapter

    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter")
    weights = adapter / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # cut short while being written
    result = subprocess.run([sys.executable, "-m", "unirag.cli.commands", "embed", "x", "--model", str(tiny_model_dir),
                             "--adapter", str(adapter)], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [f"unirag: error: adapter {adapter} does not fit this model: Error while "
                                          "deserializing header: incomplete metadata, file not fully covered"]


def test_adapter_output_is_replaced_atomically(tmp_path):
    """Training writes the adapter to a temporary folder and renames it into place."""
    from types import SimpleNamespace

    from unirag.training.trainer import write_output

    out = tmp_path / "adapter"
    out.mkdir()
    (out / "adapter_model.safetensors").write_bytes(b"the previous, complete adapter")

    class CrashingSave:
        def save_pretrained(self, folder, **kwargs):
            (Path(folder) / "adapter_model.safetensors").write_bytes(b"half")
            raise OSError(28, "No space left on device")

    module = SimpleNamespace(llm=CrashingSave(), config=SimpleNamespace(full_finetune=False))
    with pytest.raises(OSError):
        write_output(module, None, out, {})
    assert (out / "adapter_model.safetensors").read_bytes() == b"the previous, complete adapter"
    assert [p.name for p in tmp_path.iterdir()] == ["adapter"]  # no temporary folder left behind


def test_remote_code_in_a_model_folder_is_never_run(tmp_path, tiny_model_dir):
    import json
    import shutil

    from unirag import UniModel
    marker = tmp_path / "remote-code-ran"
    for model_type in ("llama", "unirag-custom"):  # a known architecture, and one only the custom code has
        folder = tmp_path / model_type
        shutil.copytree(tiny_model_dir, folder)
        (folder / "custom.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
        config = json.loads((folder / "config.json").read_text())
        config.update(model_type=model_type, auto_map={"AutoConfig": "custom.Config",
                                                       "AutoModelForCausalLM": "custom.Model"})
        (folder / "config.json").write_text(json.dumps(config))
        if model_type == "llama":
            assert UniModel.load(str(folder), precision="fp32").embed(["a cat"]).shape == (1, 32)
        else:
            with pytest.raises(UniragError, match=r"needs its own Python code to load \(auto_map\)"):
                UniModel.load(str(folder), precision="fp32")
    assert not marker.exists()


# ---------------------------------------------------------------------- training: Ctrl-C, SIGKILL, --resume
CORPUS_LINES = ["The cat sat on the mat near the door.", "A dog ran in the park all day long.",
                "Paris is the capital of France and a big city.", "Rust has ownership and borrowing rules."]


def _wait_for(predicate, proc, what: str, timeout: float = 180):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        if proc.poll() is not None:
            raise AssertionError(f"training ended (status {proc.returncode}) before {what}: "
                                 f"{proc.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.05)
    return found


def _complete_checkpoints(folder: Path) -> list[int]:
    """Steps of checkpoints whose trainer_state.json (written last by Trainer) exists."""
    return sorted(int(p.name.split("-")[1]) for p in folder.glob("checkpoint-*")
                  if (p / "trainer_state.json").is_file())


@pytest.mark.slow  # three `unirag train` processes, SIGINT and SIGKILL
@pytest.mark.timeout(300)
def test_training_survives_ctrl_c_and_sigkill_then_resumes_exactly(tiny_model_dir, tmp_path, one_torch_thread):
    """Ctrl-C stops after the step with a checkpoint; SIGKILL loses at most the steps since the
    last checkpoint; `--resume` then finishes with the same weights as one uninterrupted run."""
    import numpy as np
    from safetensors.torch import load_file

    from unirag.training.config import load_config
    from unirag.training.trainer import train

    # A step takes ~0.05 s here: 40 steps between checkpoints leave seconds of margin for the signals.
    STEPS, SAVE = 150, 40
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 4) + "\n")
    out, checkpoints = tmp_path / "run", tmp_path / "run" / "checkpoints"
    command = [sys.executable, "-m", "unirag.cli.commands", "train", "--recipe", "test-tiny", "--data", str(corpus),
               "--output", str(out), "--model", str(tiny_model_dir), "--steps", str(STEPS), "--save_steps", str(SAVE)]
    # one thread (see one_torch_thread), in the child processes and in the comparison run below
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}

    def start(*extra):
        return subprocess.Popen([*command, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=env, cwd=tmp_path)

    proc = start()  # 1. Ctrl-C once the first checkpoint is there
    try:
        _wait_for(lambda: _complete_checkpoints(checkpoints), proc, "a first checkpoint")
        proc.send_signal(signal.SIGINT)
        output = proc.communicate(timeout=180)[0]
    finally:
        proc.kill()
    assert proc.returncode == 1 and "Traceback" not in output, output
    stopped = int(output.split("training stopped at step ")[1].split(";")[0])
    assert ("unirag: error: training stopped at step "
            f"{stopped}; continue with the same command plus --resume") in output
    assert SAVE <= stopped < STEPS and stopped in _complete_checkpoints(checkpoints)

    proc = start("--resume")  # 2. SIGKILL once a later checkpoint is complete
    try:
        killed_after = _wait_for(lambda: [s for s in _complete_checkpoints(checkpoints) if s > stopped], proc,
                                 "a checkpoint after the resume")[-1]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL and killed_after < STEPS and not (out / "unirag.json").exists()

    finished = subprocess.run([*command, "--resume"], capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=300)  # 3. resume to the end
    assert finished.returncode == 0 and f"unirag: adapter written to {out}" in finished.stdout, finished.stderr
    whole = train(load_config("test-tiny", {"steps": str(STEPS), "save_steps": str(SAVE)}), str(tiny_model_dir),
                  str(corpus), str(tmp_path / "whole"))  # one thread, as the runs above
    a, b = load_file(whole / "adapter_model.safetensors"), load_file(out / "adapter_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), atol=1e-5, err_msg=key)


def test_resume_skips_a_checkpoint_cut_short_by_sigkill(tiny_model_dir, tmp_path, one_torch_thread):
    import shutil

    from unirag.training.config import load_config
    from unirag.training.trainer import train

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS_LINES * 4) + "\n")
    out = train(load_config("test-tiny", {"steps": "3"}), str(tiny_model_dir), str(corpus), str(tmp_path / "run"))
    checkpoints = out / "checkpoints"
    # SIGKILL while Trainer was saving checkpoint-6: its tensors are written, trainer_state.json is not yet
    shutil.copytree(checkpoints / "checkpoint-3", checkpoints / "checkpoint-6")
    (checkpoints / "checkpoint-6" / "trainer_state.json").unlink()
    resumed = train(load_config("test-tiny", {"steps": "6"}), str(tiny_model_dir), str(corpus), str(out),
                    resume=True)
    assert (resumed / "checkpoints" / "checkpoint-6" / "trainer_state.json").is_file()


# ---------------------------------------------------------------------- under load
SECTIONS = {"Cats": "The cat sat on the mat and purred all afternoon.",
            "Dogs": "A dog ran in the park after a red ball.",
            "Paris": "Paris is the capital of France, on the river Seine.",
            "Rust": "Rust has ownership and borrowing instead of a garbage collector.",
            "Loops": "Loops can return values with break in Rust.",
            "Vectors": "Embeddings map text to vectors of numbers."}
QUESTIONS = ["Where did the cat sit?", "What did the dog chase?", "What is the capital of France?",
             "How does Rust manage memory?", "Can a loop return a value?", "What do embeddings do?",
             "Which river runs through Paris?", "Who purred all afternoon?"]
LOAD = dict(top_k=2, max_new_tokens=24)  # app settings for these tests


def corpus_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "handbook.md"
    path.write_text("# Handbook\n\n" + "".join(f"## {title}\n\n{text}\n\n" for title, text in SECTIONS.items()))
    return path



def text_of(message) -> str:
    """A chat message's text, as gradio_client returns it or as RagChat yields it."""
    content = message["content"]
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


@pytest.mark.slow  # a live server, 8 clients
@pytest.mark.timeout(300)
def test_eight_simultaneous_questions_through_the_app_api(tiny, tmp_path, one_torch_thread):
    """8 clients ask at once over HTTP on loopback; each gets its own complete answer, the one its
    question gets alone (greedy decoding), with its own sources: nothing mixed between requests."""
    from concurrent.futures import ThreadPoolExecutor

    from gradio_client import Client

    from unirag.app import launch
    from unirag.retrieval.chunking import ChunkSettings

    demo = launch(tiny, port=free_port(), prevent_thread_lock=True, quiet=True, db=tmp_path / "db",
                  upload_dir=tmp_path / "uploads", **LOAD, chunk_settings=ChunkSettings(32, 0))
    try:
        rag = demo.unirag
        assert rag.add_files([str(corpus_file(tmp_path / "in"))], "docs")[0].startswith("`handbook.md`: **added**")

        def ask(question):  # a new user (client, session) per question
            job = Client(demo.local_url, verbose=False).submit(question, "docs", api_name="/ask")
            chat, sources, box = job.result(timeout=240)
            streamed = [text_of(out[0][-1]) for out in job.outputs() if out[0] and out[0][-1]["role"] == "assistant"]
            return chat, sources, box, streamed

        alone = {q: ask(q) for q in QUESTIONS}  # each question alone, one after the other
        assert len({text_of(chat[-1]) for chat, *_ in alone.values()}) > len(QUESTIONS) // 2  # answers differ
        started = time.monotonic()
        with ThreadPoolExecutor(len(QUESTIONS)) as pool:  # then all 8 at once
            together = dict(zip(QUESTIONS, pool.map(ask, QUESTIONS)))
        elapsed = time.monotonic() - started
        for question, (chat, sources, box, streamed) in together.items():
            answer, alone_sources = text_of(alone[question][0][-1]), alone[question][1]
            assert [m["role"] for m in chat] == ["user", "assistant"] and text_of(chat[0]) == question
            assert (text_of(chat[1]), sources) == (answer, alone_sources), question  # complete, its own
            assert all(answer.startswith(piece) for piece in streamed)  # its stream never had another's text
            assert box == ""
        assert elapsed < 240
    finally:
        demo.close()


@pytest.mark.slow  # a live server
@pytest.mark.timeout(120)
def test_busy_message_past_the_queue_limit_over_http(tiny, tmp_path, monkeypatch):
    """What a plain HTTP client gets when the queue is full: 503 and a one-line reason.
    (gradio_client raises QueueError("Queue is full! Please try again."), see test_app.py; the page
    shows "This application is currently busy. Please try again.")"""
    import json
    import urllib.error
    import urllib.request

    import unirag.answer.ask
    from gradio_client import Client
    from gradio_client.utils import Status

    from unirag.app import launch

    def slow_answer(*args, **kwargs):
        for word in ("slow ", "answer"):
            time.sleep(1.0)
            yield word

    monkeypatch.setattr(unirag.answer.ask, "_pieces", slow_answer)  # the answer text the ask flow streams
    demo = launch(tiny, port=free_port(), prevent_thread_lock=True, quiet=True, db=tmp_path / "db",
                  upload_dir=tmp_path / "uploads", max_queue=1, **LOAD)
    try:
        demo.unirag.add_files([str(corpus_file(tmp_path / "in"))], "docs")
        first = Client(demo.local_url, verbose=False).submit(QUESTIONS[0], "docs", api_name="/ask")
        deadline = time.time() + 60
        while first.status().code not in (Status.PROCESSING, Status.ITERATING) and time.time() < deadline:
            time.sleep(0.05)
        second = Client(demo.local_url, verbose=False).submit(QUESTIONS[1], "docs", api_name="/ask")
        while second.status().code != Status.IN_QUEUE and not second.done() and time.time() < deadline:
            time.sleep(0.05)
        fn_index = next(i for i, fn in demo.fns.items() if fn.api_name == "ask")
        body = json.dumps({"data": [QUESTIONS[2], "docs"], "fn_index": fn_index, "session_hash": "third",
                           "event_data": None, "trigger_id": None}).encode()
        request = urllib.request.Request(demo.local_url.rstrip("/") + "/gradio_api/queue/join", data=body,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 503
        assert json.loads(refused.value.read()) == {"detail": "Queue is full. Max size is 1 and size is 1."}
        assert text_of(first.result(timeout=60)[0][-1]) == text_of(second.result(timeout=60)[0][-1]) == "slow answer"
    finally:
        demo.close()


def test_python_api_serves_concurrent_threads(tiny, tmp_path, one_torch_thread):
    """The Python API under 8 threads: embeddings, streamed generations and whole RAG answers
    (RagChat.respond, which the app's handlers call) each equal what the same call gives alone."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from unirag.app import RagChat
    from unirag.retrieval.chunking import ChunkSettings

    rag = RagChat(tiny, db=tmp_path / "db", upload_dir=tmp_path / "uploads",
                  **LOAD, chunk_settings=ChunkSettings(32, 0))
    rag.add_files([str(corpus_file(tmp_path / "in"))], "docs")

    def generate(q):
        return "".join(tiny.generate(q, max_new_tokens=16, stream=True))

    def respond(q):
        chat, session, sources, _ = list(rag.respond(q, None, "docs"))[-1]
        return chat[-1]["content"], sources, session["turns"]

    alone = {q: (tiny.embed([q])[0], generate(q), respond(q)) for q in QUESTIONS}
    with ThreadPoolExecutor(len(QUESTIONS)) as pool:
        vectors = list(pool.map(lambda q: tiny.embed([q])[0], QUESTIONS))
        texts = list(pool.map(generate, QUESTIONS))
        answers = list(pool.map(respond, QUESTIONS))
    for q, vector, text, answer in zip(QUESTIONS, vectors, texts, answers):
        np.testing.assert_allclose(vector, alone[q][0], atol=1e-5)
        assert text == alone[q][1] and answer == alone[q][2], q


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow  # a soak: repeated ingest and ask
@pytest.mark.timeout(300)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmRSS from /proc")
def test_soak_repeated_ingest_and_ask_does_not_grow_memory(tiny, tmp_path, one_torch_thread):
    """20 rounds: change a file, ingest the folder (Python API), answer a question as a new app
    session (RagChat.respond). Memory after warm-up stays flat.

    The bound: compare the median RSS of rounds 15-19 with rounds 5-9 (medians, so one noisy
    sample cannot decide). Measured on the tiny model: +1.4 to +1.6 MB (Chroma's HNSW index and
    SQLite page cache grow a little while the collection churns), and +11.8 to +12.6 MB when each
    round keeps 1 MB alive (a deliberate leak, tried by hand). 6 MB sits between the two with room
    either side.
    """
    import gc
    import statistics

    from unirag.app import RagChat
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(3):
        (docs / f"f{i}.md").write_text(f"# File {i}\n\n" + "The cat sat on the mat. A dog ran in the park. " * 20)
    rag = RagChat(tiny, db=tmp_path / "db", upload_dir=tmp_path / "uploads", top_k=3, max_new_tokens=16,
                  chunk_settings=ChunkSettings(64, 8))
    collection = store.open_collection(rag.client, "docs", tiny, create=True)
    rss, started = [], time.monotonic()
    for round_ in range(20):
        (docs / "f0.md").write_text(f"# Round {round_}\n\n" + f"The cat sat on mat number {round_}. " * 30)
        summary = ingest(tiny, collection, docs, settings=rag.settings)
        assert summary.changed == (["f0.md"] if round_ else []) and not summary.skipped
        question = f"Where did the cat sit in round {round_}?"
        chat, session, sources, _ = list(rag.respond(question, None, "docs"))[-1]  # a new session each time
        assert chat[-1]["content"] and "[1] " in sources and len(session["turns"]) == 1
        gc.collect()
        rss.append(_rss_mb())
    assert time.monotonic() - started < 240
    growth = statistics.median(rss[15:20]) - statistics.median(rss[5:10])
    assert growth < 6.0, f"RSS grew {growth:.1f} MB between rounds 5-9 and 15-19: {[round(r) for r in rss]}"


@pytest.mark.slow  # a live server
@pytest.mark.timeout(120)
def test_login_is_required_when_auth_is_set(tiny, tmp_path):
    import urllib.error
    import urllib.request

    from gradio_client import Client

    from unirag.app import launch

    demo = launch(tiny, port=free_port(), prevent_thread_lock=True, quiet=True, db=tmp_path / "db",
                  upload_dir=tmp_path / "uploads", auth="ann:s3cret pass", **LOAD)
    try:
        assert demo.server_name == "127.0.0.1"
        with pytest.raises(urllib.error.HTTPError) as denied:
            urllib.request.urlopen(demo.local_url.rstrip("/") + "/config", timeout=30)
        assert denied.value.code == 401
        with pytest.raises(Exception):
            Client(demo.local_url, verbose=False, auth=("ann", "wrong"))
        client = Client(demo.local_url, verbose=False, auth=("ann", "s3cret pass"))
        chat, _, _ = client.predict(QUESTIONS[0], "docs", api_name="/ask")
        assert "is empty" in text_of(chat[-1])  # logged in; the collection is empty
    finally:
        demo.close()


# ---------------------------------------------------------------------- safe defaults
def test_app_binds_to_loopback_unless_told(tiny, tmp_path, monkeypatch, capsys):
    import gradio as gr

    from unirag.app import MAX_UPLOAD_MB, launch

    calls = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: calls.append(kwargs))
    folders = dict(db=tmp_path / "db", upload_dir=tmp_path / "uploads")
    launch(tiny, **folders)
    options = calls[-1]
    assert options["server_name"] == "127.0.0.1" and options["share"] is False and options["auth"] is None
    assert options["max_file_size"] == int(MAX_UPLOAD_MB * 2**20)  # Gradio refuses bigger uploads itself
    assert set(options["blocked_paths"]) == {str(tmp_path / "uploads"), str(tmp_path / "db")}  # never served
    assert capsys.readouterr().err == ""
    launch(tiny, host="0.0.0.0", **folders)
    assert calls[-1]["server_name"] == "0.0.0.0"
    assert capsys.readouterr().err == ("unirag app: warning: serving on 0.0.0.0 without --auth; anyone who can "
                                       "reach this port can use the app\n")
    launch(tiny, host="0.0.0.0", auth="ann:secret", **folders)
    assert calls[-1]["auth"] == ("ann", "secret") and capsys.readouterr().err == ""


def test_terminal_output_has_no_control_characters_from_documents(cli, tiny_model_dir, tmp_path):
    """A document (or its name) with terminal escapes cannot recolour, retitle or rewrite the terminal."""
    import re

    docs = tmp_path / "docs"
    docs.mkdir()
    nasty = "\x1b]0;owned\x07\x1b[2J\r\x08"  # set the window title, clear the screen, rewrite the line
    (docs / f"esc{nasty}.md").write_text(f"# Head{nasty}ing\n\nThe cat{nasty} sat on the mat.\n")
    common = ["--db", tmp_path / "db", "--model", tiny_model_dir, *TINY_ARGS]
    outputs = [cli("ingest", docs, *common, "--chunk-size", "64", "--no-progress"),
               cli("retrieve", "cat", *common), cli("ask", "cat?", *common, "--max-new-tokens", "8")]
    for status, out, err in outputs:
        assert status == 0, err
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", out), repr(out)
    assert "esc\ufffd]0;owned\ufffd" in outputs[1][1]  # shown, harmless
