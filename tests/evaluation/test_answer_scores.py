"""Answer scoring for `unirag eval rag --answers` (keys, degenerate, grounded, summary)."""

from __future__ import annotations

import pytest

from unirag.evaluation.answers import (answers_markdown, degenerate, grounded_share, key_correct, score,
                                       summarize)
from unirag.answer.ask import CLOSEST, NO_ANSWER


@pytest.mark.parametrize("text, keys, expected", [
    ("Use a `break` with a value.", ["break"], True),
    ("Use a BREAK.", ["break"], True),                      # case-insensitive
    ("Use a break.", ["break", "loop"], False),             # every key
    ("break " + "word " * 60, ["break"], False),             # over 60 words, quotes included
    ("", ["break"], False),
])
def test_key_correct(text, keys, expected):
    assert key_correct(text, keys) is expected


@pytest.mark.parametrize("text, looped, expected", [
    ("", False, True), ("  [1] ", False, True), ("The answer is:", False, True), ("Answer:", False, True),
    ("The answer is 42.", False, False), ("It loops and loops.", True, True), ("Fine.", False, False),
])
def test_degenerate(text, looped, expected):
    assert degenerate(text, looped) is expected


def test_grounded_share_counts_sentences_by_the_passage_they_cite():
    passages = ["Loops return values with break expressions.", "Cats sit on mats."]
    assert grounded_share("Loops return values with break [1]. Cats sit on mats [2].", passages) == 1.0
    assert grounded_share("Loops return values with break [2].", passages) == 0.0   # wrong passage
    assert grounded_share("Loops return values with break.", passages) == 0.0       # cites nothing
    assert grounded_share(NO_ANSWER, passages) is None                              # abstention not counted
    # "e.g." ends no sentence: the words after it belong to the cited one
    assert grounded_share("Loops return values, e.g. with break [1].", passages) == 1.0


def test_every_sentence_of_a_quote_cites_what_the_quote_cites():
    passages = ["Sorts are stable. That means equal keys keep their order.", "Cats sit on mats."]
    assert grounded_share("“Sorts are stable. That means equal keys keep their order.” [1]", passages) == 1.0
    assert grounded_share("“Sorts are stable. That means equal keys keep their order.” [2]", passages) == 0.0
    two = "“Sorts are stable.” [1]\n“Cats sit on mats.” [2]\nDogs bark loudly."
    assert grounded_share(two, passages) == 2 / 3  # the sentence outside the quotes cites nothing
    closest = f"{NO_ANSWER} {CLOSEST} “Sorts are stable. That means equal keys keep their order.” [1]"
    assert grounded_share(closest, passages) == 1.0  # the abstention's own words are not counted


def test_an_abstention_is_not_right_even_where_its_closest_quote_holds_the_keys():
    answer = f"{NO_ANSWER} {CLOSEST} “Sorts are guaranteed to be stable.” [1]"
    scored = score(answer, ["stable"], ["Sorts are guaranteed to be stable."])
    assert scored["key_correct"] == 0 and scored["abstained"] == 1 and scored["keys_shown"] == 1


def test_score_and_summary_table():
    rows = [dict(score("“Loops return with break.” [1]", ["break"], ["Loops return with break."]),
                 first_text_s=0.5, total_s=1.0),
            dict(score(NO_ANSWER, ["dog"], ["Cats sit."]), first_text_s=0.2, total_s=0.2)]
    assert rows[0]["key_correct"] == 1 and rows[0]["grounded"] == 1.0 and rows[1]["abstained"] == 1
    assert rows[0]["first_line"] == 1 and rows[1]["first_line"] == 0
    m = summarize(rows)
    assert m["key_correct"] == 0.5 and m["keys_shown"] == 0.5 and m["of_ceiling"] == 1.0 and m["abstained"] == 0.5
    assert m["first_line"] == 0.5
    assert m["total_s_p50"] == 0.6
    table = answers_markdown({"extractive": m})
    assert "| extractive | 2 | 50.0 | 50.0 | 50.0 | 100.0 |" in table


def test_first_line_counts_keys_in_the_first_quote_of_a_right_answer():
    two = "“Loops repeat code.” [1]\n“They stop at break.” [1]"
    assert score(two, ["break"], ["Loops repeat code. They stop at break."])["first_line"] == 0
    assert score(two, ["loops"], ["Loops repeat code. They stop at break."])["first_line"] == 1
    # keys in the first line of a wrong (too long) answer do not count
    assert score("break " * 61, ["break"], ["break"])["first_line"] == 0
