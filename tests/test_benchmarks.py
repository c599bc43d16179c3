"""The speed/memory benchmark scripts' pure helpers, on tiny inputs (no model is loaded)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def common():
    return load("bench_common")


@pytest.fixture(scope="module")
def embedding():
    return load("embedding")


@pytest.fixture(scope="module")
def decode():
    return load("decode")


@pytest.fixture(scope="module")
def memory():
    return load("memory")


def test_markdown_table(common):
    table = common.markdown_table(["a", "b"], [["x|y", 1234.5], [None, 0.012345]]).splitlines()
    assert table[0] == "| a | b |"
    assert table[1] == "|---|---|"
    assert table[2] == "| x\\|y | 1,234 |"  # pipes escaped, big floats without decimals
    assert table[3] == "|  | 0.0123 |"
    with pytest.raises(ValueError):
        common.markdown_table(["a"], [[1, 2]])


def test_timed_median_warms_up_once(common):
    calls = []
    median, times = common.timed_median(lambda: calls.append(1), 3)
    assert len(calls) == 4 and len(times) == 3 and median >= 0
    with pytest.raises(ValueError):
        common.timed_median(lambda: None, 0)


def test_prose_chunks_cut_count_and_repeat(common, tmp_path):
    (tmp_path / "a.md").write_text(" ".join(f"word{i}" for i in range(100)) + ".\n")
    (tmp_path / "b.md").write_text("too short\n")
    (tmp_path / "notes.txt").write_text("ignored " * 100)
    chunks = common.prose_chunks(tmp_path, None, 7, chunk_tokens=40)  # None: words count as tokens
    assert len(chunks) == 7
    assert all(20 <= len(c.split()) <= 40 for c in chunks)
    assert chunks[0].startswith("word0") and chunks[3:6] == chunks[0:3] and "too" not in " ".join(chunks)
    with pytest.raises(FileNotFoundError):
        common.prose_chunks(tmp_path / "missing", None, 1)


def test_machine_info_has_the_basics(common):
    info = common.machine_info()
    assert {"platform", "cpu_model", "cpu_count", "date"} <= info.keys()


def test_embedding_arithmetic(embedding):
    # 100 M matmul params at 500 tokens/s is 100 GFLOP/s: half of a 200 GFLOP/s peak
    assert embedding.share_of_peak(500, 100_000_000, 200.0) == pytest.approx(0.5)
    assert embedding.padded_size([3, 10, 5, 1], 2, sort=False) == 2 * 10 + 2 * 5
    assert embedding.padded_size([3, 10, 5, 1], 2, sort=True) == 2 * 10 + 2 * 3
    row = embedding.make_row("e", "fp32", 10, 2000, 2500, (2.0, [2.0, 2.1]))
    assert row["texts_per_s"] == 5 and row["tokens_per_s"] == 1000
    row["speed_vs_plain_fp32"] = 1.5
    assert embedding.table_rows([row])[0][-1] == "1.50x"


def test_decode_bandwidth_bound(decode):
    # 10 GB/s over 500 MB of weights per token: at most 20 tokens/s
    assert decode.bound_tokens_per_s(500_000_000, 10.0) == pytest.approx(20.0)
    assert decode.decode_rate([1.0, 1.5, 2.0, 3.0]) == pytest.approx(1.5)  # 3 gaps in 2 s
    assert decode.read_bandwidth_gbs(mib=8, repeats=1) > 0
    with pytest.raises(ValueError):
        decode.decode_rate([1.0])
    assert decode.same_greedy_tokens([1, 2, 0, 5], [1, 2, 7, 8], eos_id=0)  # may part after an EOS
    assert not decode.same_greedy_tokens([1, 2, 3], [1, 4, 3], eos_id=0)


def test_decode_runs_compared_alternate_round_by_round(decode):
    """Each run is warmed up once, then the rounds take one run of each in turn."""
    order = []

    def run_named(name):
        def run():
            order.append(name)
            return 0.0, [0.1, 0.2, 0.3], [1, 2, 3]  # start, token times, tokens
        return run

    out = decode.measure_alternating({"a": run_named("a"), "b": run_named("b")}, repeats=2)
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert out["a"]["decode_tokens_per_s"] == pytest.approx(10.0)  # 2 gaps in 0.2 s
    assert out["b"]["ttft_s"] == pytest.approx(0.1) and out["b"]["new_tokens"] == 3
    assert decode.measure(run_named("c"), repeats=1)["decode_tokens_per_s_all"] == pytest.approx([10.0])


def test_decode_streamer_skips_the_prompt(decode):
    class Ids(list):
        def flatten(self):
            return self

        def tolist(self):
            return list(self)

    streamer = decode.TimingStreamer()
    streamer.put(Ids([5, 6, 7]))  # the prompt
    streamer.put(Ids([8]))
    streamer.put(Ids([9]))
    assert streamer.tokens == [8, 9] and len(streamer.times) == 2


def test_decode_table_marks_skipped_engines(decode):
    rows = decode.table_rows([
        {"engine": "a", "weights": "fp32", "decode_tokens_per_s": 10.0, "ttft_s": 0.1, "bound_tokens_per_s": 20.0,
         "share_of_bound": 0.5, "same_tokens_as_unirag": True},
        {"engine": "llama.cpp", "weights": "Q4_1", "skipped": "not installed"},
    ])
    assert rows[0][-2:] == ["50%", "yes"] and rows[1][2] == "not run"


def test_memory_status_parsing(memory):
    text = "Name:\tpython\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
    assert memory.status_kib(text, "VmHWM") == 204800
    assert memory.status_kib(text, "VmSwap") is None
    now = memory.memory_mib()
    assert now["peak_mib"] > 0


def test_memory_ranking_and_table(memory):
    import numpy as np

    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
    assert memory.top_k(vectors, np.array([1.0, 0.1]), 2) == [0, 2]
    row = {"variant": "one", "setup": "s", "peak_mib": 1234.4, "new_tokens": 8, "wall_s": 3.21,
           "stages": {"after load": {"rss_mib": 900.0}}}
    assert memory.table_rows([row])[0] == ["one", "s", "1,234", "", "900", "", "", 8, "3.2"]


def test_ask_latency_percentile_and_summary():
    ask = load("ask_latency")
    assert ask.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert ask.percentile([float(i) for i in range(1, 21)], 95) == 19.0
    assert ask.percentile([7.0], 95) == 7.0
    runs = [{"first_text_s": 2.0, "total_s": 5.0, "answer": "a"}, {"first_text_s": 4.0, "total_s": 9.0, "answer": "b"}]
    row = ask.summarise("extractive", runs, [dict(runs[0], total_s=10.0), dict(runs[1], total_s=4.0)])
    assert row["p50_first_text_s"] == 3.0 and row["p50_total_s"] == 7.0 and row["ratio"] == 1.0


def test_ask_latency_naive_flow_stages_and_keys():
    ask = load("ask_latency")
    naive = ask.naive_settings()
    assert naive.top_k == 3 and naive.max_new_tokens == 64 and naive.rerank == 0
    assert list(ask.variants_for("default,naive")) == ["default", "naive"]
    runs = [{"first_text_s": 1.0, "total_s": 2.0, "answer": "a", "stages": {s: 0.5 for s in ask.STAGES},
             "key_correct": 1},
            {"first_text_s": 3.0, "total_s": 4.0, "answer": "b", "stages": {s: 1.5 for s in ask.STAGES},
             "key_correct": 0}]
    row = ask.summarise("default", runs, runs)
    assert row["keys_right"] == 1 and row["keys_asked"] == 2 and row["p50_stage_s"]["rerank"] == 1.0
    assert len(ask.table_row(row)) == len(ask.HEADERS) and ask.table_row(row)[-1] == "1/2"


def test_ingest_benchmark_reads_the_same_files_for_both_pipelines(tmp_path):
    ingest = load("ingest")
    root = tmp_path / "book"
    (root / "sub").mkdir(parents=True)
    for name in ("b.md", "a.md", "sub/c.md", "notes.txt"):
        (root / name).write_text(f"# {name}\n\ntext\n")
    files = ingest.source_files(root, None)
    assert [f.relative_to(root).as_posix() for f in files] == ["a.md", "b.md", "sub/c.md"]  # .md only, sorted
    subset = ingest.copy_subset(ingest.source_files(root, 2), root, tmp_path / "subset")
    copied = sorted(p.relative_to(subset).as_posix() for p in subset.rglob("*") if p.is_file())
    assert copied == ["a.md", "b.md"] and not any(p.is_symlink() for p in subset.rglob("*"))
    with pytest.raises(SystemExit, match="no .md files"):
        ingest.source_files(tmp_path / "subset" / "nothing-here", None)


def test_decode_linear_kernels_count_every_weight_once(decode):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True))
    ms, nbytes = decode.linear_kernels_ms(model, repeats=1)
    per_layer = 32 * 32 * 2 + 32 * 16 * 2 + 32 * 64 * 3  # q, o; k, v (2 kv heads of 8); gate, up, down
    assert ms > 0 and nbytes == 4 * (2 * per_layer + 100 * 32)  # + the LM head once
    model.model.layers[0].mlp.down_proj.weight.data = model.model.layers[0].mlp.down_proj.weight.data.bfloat16()
    assert decode.linear_kernels_ms(model, repeats=1)[1] == nbytes - 2 * 32 * 64  # bf16 counts 2 bytes


def test_lm_head_kernels_time_every_variant():
    import torch

    lm_head = load("lm_head")
    head = torch.nn.Linear(32, 256, bias=False)
    ms = lm_head.head_kernel_ms(head, repeats=1)
    assert set(ms) == {"fp32 head(vector)", "fp32 split_head.head_logits", "bf16 copy (not used by unirag)"}
    assert all(v > 0 for v in ms.values())


def test_gemv_kernels_count_weight_bytes():
    import torch

    gemv = load("gemv_kernels")
    weights, nbytes = gemv.dense([(4, 8), (2, 8)], torch.bfloat16)
    assert nbytes == (32 + 16) * 2
    weights, nbytes = gemv.int8([(4, 8)])
    assert nbytes == 32 + 4 * 2  # int8 values + one bf16 scale per row
    x = [torch.randn(1, 8, dtype=torch.bfloat16)]
    ms, gbs = gemv.pass_gbs(weights, x, lambda w, x: torch._weight_int8pack_mm(x, w[0], w[1]), nbytes, 1)
    assert ms > 0 and gbs > 0


def test_timed_interleaved_alternates_and_warms_up_each():
    common = load("bench_common")
    calls = []
    results = common.timed_interleaved([lambda: calls.append("a"), lambda: calls.append("b")], 2)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert [len(times) for _, times in results] == [2, 2]


def test_per_token_int8_linear_is_close_to_the_float_linear(embedding):
    import torch

    torch.manual_seed(0)
    linear = torch.nn.Linear(64, 32)
    x = torch.randn(2, 24, 64)
    x[0, 0, 5] = 40.0  # an outlier channel in one token: only that token's scale grows
    got, want = embedding.per_token_int8_linear(linear)(x), linear(x)
    assert got.shape == want.shape
    assert torch.nn.functional.cosine_similarity(got.flatten(0, 1), want.flatten(0, 1)).min() > 0.999


def test_decode_greedy_agreement_counts_the_shared_prefix(decode):
    assert decode.common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert decode.common_prefix([1, 2], [1, 2, 3]) == 2
    assert decode.common_prefix([], [7]) == 0


def test_retrieval_split_by_word_overlap():
    retrieval = load("retrieval")
    words = retrieval.content_words(["Loops and looping in Rust", "the of and"])
    assert "loop" in words[0] and "rust" in words[0] and not words[1]  # stemmed; stopwords dropped
    rows = [{"hit@1": 1, "hit@3": 1, "hit@5": 1, "rr": 1.0}, {"hit@1": 0, "hit@3": 1, "hit@5": 1, "rr": 0.5}]
    assert retrieval.summarize(rows, [0, 1]) == {"hit@1": 50.0, "hit@3": 100.0, "hit@5": 100.0, "rr": 75.0}
    assert retrieval.summarize(rows, [])["hit@1"] is None
