"""Sentence attribution: `[n]` markers added to streamed answers by word overlap with the passages."""

from __future__ import annotations

import pytest

from unirag.answer.attribution import best_passage, cite_stream, content_words

PASSAGES = ["A loop can return a value: put the value after the break expression that stops the loop.",
            "if let is more concise than match when you care about one pattern.",
            "Shadowing declares a new variable with the same name."]


def streamed(text: str, size: int) -> str:
    return "".join(cite_stream([text[i:i + size] for i in range(0, len(text), size)], PASSAGES))


def test_content_words_are_stemmed_without_stopwords():
    assert content_words("The loops are returning values") == {"loop", "return", "valu"}


def test_best_passage_needs_enough_shared_words_and_prefers_the_higher_rank():
    words = [content_words(p) for p in PASSAGES]
    assert best_passage("Return a value from the loop with break", words) == 1
    assert best_passage("It is a pattern.", words) is None  # one shared word is not enough
    assert best_passage("value loop", [words[0], words[0]]) == 1  # tie: the first passage


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
def test_markers_go_before_each_sentence_end_whatever_the_piece_size(size):
    text = "You can return a value from a loop with break. Use if let when one pattern matters!"
    assert streamed(text, size) == ("You can return a value from a loop with break [1]. "
                                    "Use if let when one pattern matters [2]!")


def test_the_models_own_markers_ungrounded_sentences_and_code_are_left_alone():
    text = "Loops return values with break [3]. I am not sure. Here:\n```rust\nlet x = loop { break 5. };\n```\nDone."
    assert streamed(text, 3) == text
    assert streamed("The break expression returns the loop value...", 1) == \
        "The break expression returns the loop value [1]..."


@pytest.mark.parametrize("size", [1, 3, 1000])
def test_an_abbreviations_period_ends_no_sentence(size):
    text = "Return a value from a loop, e.g. with break, etc. and more. Use if let for one pattern."
    assert streamed(text, size) == ("Return a value from a loop, e.g. with break, etc. and more [1]. "
                                    "Use if let for one pattern [2].")


def test_no_passages_no_markers():
    assert "".join(cite_stream(["Loops return values with break."], [])) == "Loops return values with break."


@pytest.mark.parametrize("size", [1, 4, 1000])
def test_hard_wrapped_lines_are_one_sentence_and_list_items_end_one(size):
    text = ("A loop can return a value when you put it\nafter the break expression.\n\n"
            "- if let is more concise than match\n- shadowing declares a new variable\n")
    assert streamed(text, size) == ("A loop can return a value when you put it\nafter the break expression [1].\n\n"
                                    "- if let is more concise than match [2]\n- shadowing declares a new variable [3]\n")
