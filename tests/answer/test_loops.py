"""answer/loops.py: an answer stops where it starts repeating itself, or after its first sentence
when one was asked for; nothing else changes."""

from unirag.answer.loops import first_sentence, until_repeat


def chars(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


def test_text_without_repeats_passes_unchanged_in_any_pieces():
    text = ("Use `break` with a value to return it from a loop. The value follows the keyword, "
            "like `break counter * 2;`, and the loop expression evaluates to it.\n\n- one\n- two\n")
    for size in (1, 3, 50, len(text)):
        assert "".join(until_repeat(chars(text, size))) == text


def test_a_repeated_sentence_is_cut_before_it_repeats():
    first = "The loop returns the value 20 to main [1]. "
    loop = "The example you provided is a classic example of a loop returning a value. "
    out = "".join(until_repeat(chars(first + loop * 6)))
    assert out.rstrip() == (first + loop).rstrip()


def test_a_loop_inside_one_sentence_is_cut():
    text = "The pattern is defined by a pattern" + " that is defined by a pattern" * 20
    out = "".join(until_repeat(chars(text)))
    # the run "is defined by a pattern that is defined by a" recurs from the 9th word on
    assert out.rstrip() == "The pattern is defined by a pattern that"


def test_new_words_stream_at_once():
    received = []

    def source():
        for i in range(40):
            received.append(i)
            yield f"w{i} "

    for piece in until_repeat(source(), n=10):
        assert piece == f"w{len(received) - 1} "  # nothing held: no word repeats an earlier one


def test_words_that_repeat_earlier_ones_wait_until_they_stop_repeating():
    pieces = ["the cat sat on the mat ", "and then ", "the cat ", "ran "]
    out = list(until_repeat(pieces, n=4))
    assert out == ["the cat sat on the mat ", "and then ", "the cat ran "]


def test_closing_early_stops_the_source():
    pulled = []

    def source():
        for i in range(1000):
            pulled.append(i)
            yield "again and again and again and again and again "

    "".join(until_repeat(source()))
    assert len(pulled) < 10


def test_text_with_few_spaces_still_streams():
    text = "x" * 500
    out = list(until_repeat(chars(text, 10)))
    assert "".join(out) == text and len(out) > 10


FIRST_SENTENCE_CASES = [
    # (generated text, what the answer keeps)
    ("The answer is:\n\nShadowing reuses a name with `let` [1]. It also hides the old value [2].",
     "Shadowing reuses a name with `let` [1]."),
    ("Use `break` with a value, e.g. `break 5;`, to return it. More.",
     "Use `break` with a value, e.g. `break 5;`, to return it."),
    ("The value is 3.14 in Python. Next.", "The value is 3.14 in Python."),
    ("Titles (Mr. and Dr., etc.) stay whole. More.", "Titles (Mr. and Dr., etc.) stay whole."),
    ("Yes.", "Yes."),
    ("  \n\nWords with no end", "Words with no end"),
    ("First paragraph without a mark\n\nSecond paragraph.", "First paragraph without a mark"),
    ("Run it like this:\n```sh\ncargo run\n```\nThen more.", "```sh\ncargo run\n```"),
    ("Text before code ```x()``` after.", "Text before code"),
    ("The answer is:", "The answer is:"),  # nothing follows the announcing line: it stays
    ("", ""),
]


def test_first_sentence_keeps_the_first_sentence_after_an_announcing_line_in_any_pieces():
    for text, kept in FIRST_SENTENCE_CASES:
        for size in (1, 3, 7, len(text) or 1):
            assert "".join(first_sentence(chars(text, size))) == kept, (text, size)


def test_first_sentence_stops_reading_the_stream_at_the_sentence_end():
    pulled = []

    def source():
        for piece in ["One sentence", " here.", " Then", " more", " and more."]:
            pulled.append(piece)
            yield piece

    assert "".join(first_sentence(source())) == "One sentence here."
    assert pulled == ["One sentence", " here.", " Then"]  # generation stops once the end shows
