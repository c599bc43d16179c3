"""Synthetic questions: the filters, the round trip and a resumable run on a tiny random Llama."""

import json

from unirag import UniModel
from unirag.training.queries import passage_of, plausible, round_trip, synthesize, with_negatives


def test_plausible_questions_are_about_the_subject():
    assert plausible("What year did the Roman Empire fall?")
    assert not plausible("What is the text above about?")        # about the passage
    assert not plausible("The Roman Empire fell in 476.")         # not a question
    assert not plausible("Why?")                                  # too short


def test_passage_of_cuts_after_a_sentence():
    text = "First sentence is here. " * 50
    cut = passage_of(text, 300)
    assert len(cut) <= 300 and cut.endswith(".")
    assert passage_of("x" * 400, 300) == "x" * 300  # no sentence end: cut where the characters run out
    assert passage_of("  short text here ") == "short text here"


def test_round_trip_keeps_questions_that_find_their_passage(tiny_model_dir):
    model = UniModel.load(str(tiny_model_dir), "none", precision="fp32", decode_copy=None)
    texts = ["The cat sat on the mat.", "Paris is the capital of France.", "Rust has ownership rules."]
    pairs = [{"query": t, "passage": t} for t in texts]  # a question identical to its passage finds it first
    assert round_trip(model, pairs, depth=1) == [True, True, True]
    swapped = [{"query": texts[0], "passage": texts[1]}, {"query": texts[1], "passage": texts[0]}]
    assert round_trip(model, swapped, depth=1) == [False, False]
    negatives = with_negatives(model, pairs)
    assert all(n["negative"] != n["passage"] and n["negative"] in texts for n in negatives)


def test_synthesize_appends_and_resumes(tiny_model_dir, tmp_path):
    model = UniModel.load(str(tiny_model_dir), "none", precision="fp32", decode_copy=None)
    out = tmp_path / "pairs.jsonl"
    counts = synthesize(model, ["One text here.", "Another text there."], out, show_progress=False)
    assert counts["passages"] == 2 and out.exists()
    raw = tmp_path / "pairs.unfiltered.jsonl"
    assert len(raw.read_text().splitlines()) == 2
    with raw.open("a") as f:
        f.write('{"query": "cut by a cra')  # a crash mid-line
    again = synthesize(model, ["One text here.", "A third text."], out, show_progress=False)
    assert again["passages"] == 3  # the first text was not asked again; the cut line is gone
    assert len(raw.read_text().splitlines()) == 3
    assert all({"query", "passage"} <= set(json.loads(line)) for line in out.read_text().splitlines())
