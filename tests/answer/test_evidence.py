"""Evidence units, their selection with the (tiny) model, and the one ask flow on top of them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from unirag.errors import UniragError
from unirag.answer.ask import NO_ANSWER, AskSettings, answer_hits, focused_hits, quote, quotes
from unirag.answer.evidence import (SCORERS, Evidence, Span, choose, fuse, offer_order, passage_order, reading_order,
                                 score, select)
from unirag.retrieval.search import Hit
from unirag.answer.sentences import split_units, word_count
from unirag.answer.whole_thoughts import Name

CHUNK = ("Loops can return values with break. The cat sat on the mat, e.g. on the red one.\n\n"
         "- A list item here.\n- Another item.\n\n```rust\nlet x = loop { break 5; };\n```\n\n"
         "## A heading\n\nParis is the capital of France.")


def texts(text):
    return [(text[u.start:u.end], u.code) for u in split_units(text)]


@pytest.mark.parametrize("text, expected", [
    ("One. Two words here.", [("One.", False), ("Two words here.", False)]),
    ("Use e.g. this one. Next.", [("Use e.g. this one.", False), ("Next.", False)]),
    ("It runs slower (eg. 20 times), ie. less. Next.", [("It runs slower (eg. 20 times), ie. less.", False),
                                                        ("Next.", False)]),
    # a period standing alone, or in a word that opens brackets closed later, ends no sentence
    ("A script run with . or source ends. Its key (M-. or M-_) too. (v2.) Next.",
     [("A script run with . or source ends.", False), ("Its key (M-. or M-_) too.", False), ("(v2.)", False),
      ("Next.", False)]),
    # ... or one inside brackets the sentence opened, with a lower-case word after it
    ("Yank it (see M-. or M-_) here. (It works.) Next.",
     [("Yank it (see M-. or M-_) here.", False), ("(It works.)", False), ("Next.", False)]),
    # a "!" or "?" ending a name, with a lower-case word after it: a macro or method, not an end
    ("Do not use the cfg! macro or a #[cfg] attribute. Is it set? Then go! Use empty? here. Done!",
     [("Do not use the cfg! macro or a #[cfg] attribute.", False), ("Is it set?", False), ("Then go!", False),
      ("Use empty? here.", False), ("Done!", False)]),
    ("a hard-wrapped\nsentence goes on. End", [("a hard-wrapped\nsentence goes on.", False), ("End", False)]),
    ("# Title\n\nBody.", [("Body.", False)]),
    ("```\nfoo();\n\nbar();\n```\nAfter.", [("foo();", True), ("bar();", True), ("After.", False)]),
    # a chunk cut from inside a code block: the side that looks like code is the fenced one
    ("x = f(y); // z\n```\nProse follows here, as usual.", [("x = f(y); // z", True),
                                                            ("Prose follows here, as usual.", False)]),
    # a chunk that begins with a fence line and a blank line: the fence closes a code block
    ("```\n\nProse goes on\nover lines. More.", [("Prose goes on\nover lines.", False), ("More.", False)]),
    # the same with another block after it, which the chunk's end cuts
    ("```\n\nSay it here.\n\n```\nx = 1", [("Say it here.", False), ("x = 1", True)]),
    # one that begins with a fence line and code: the fence opens a block the chunk's end cuts
    ("```\nfoo();\nbar();", [("foo();", True), ("bar();", True)]),
    # a fence with an info string opens a block, whatever the text on either side looks like
    ("Call f(&x); see [g] {a}.\n\n```rust\nlet y = 6;\n```\n\nIt prints:\n\n```\nhello world",
     [("Call f(&x); see [g] {a}.", False), ("let y = 6;", True), ("It prints:", False), ("hello world", True)]),
    # a list item's number ends no sentence; a number opening a paragraph's line is no list item
    ("1. Install it. Then run.", [("1. Install it.", False), ("Then run.", False)]),
    ("It listens on port\n5000. Change it.", [("It listens on port\n5000.", False), ("Change it.", False)]),
    # table rows are units of their own, whatever their cells' sentences; a pipe in prose is prose
    ("| Flag | Meaning |\n| --- | :-: |\n| `-v` | Verbose. Prints more. |\n| `-q` | Quiet. |",
     [("| `-v` | Verbose. Prints more. |", False), ("| `-q` | Quiet. |", False)]),  # the header labels
    ("%a | Weekday. Short. | Sun, Mon\n\nUse `int | str` here. Or X | Y. Done.",
     [("%a | Weekday. Short. | Sun, Mon", False), ("Use `int | str` here.", False), ("Or X | Y.", False),
      ("Done.", False)]),
    # a blockquote reads as a page: its headings, blank lines and fences break it, markers aside
    ("> ### Notation\n>\n> We show commands. You\n> type them.\n>\n> ```console\n> $ cargo run\n> ```\nAfter.",
     [("We show commands.", False), ("You\n> type them.", False), ("$ cargo run", True), ("After.", False)]),
    # a chunk cut inside a quoted code block
    ("> let x = 1;\n> ```\n>\n> It binds x.", [("let x = 1;", True), ("It binds x.", False)]),
    # a list item's and an admonition's indented body is prose; code is fenced or indented past it
    ("1. Install it:\n\n    ```bash\n    pip install foo\n    ```\n\n    Then run it. It\n    works.\n\n"
     "        indented();\n\nBack out.\n\n    top_level();",
     [("1. Install it:", False), ("pip install foo", True), ("Then run it.", False), ("It\n    works.", False),
      ("indented();", True), ("Back out.", False), ("top_level();", True)]),
    # a list item may open with its fenced block (CommonMark): the fence after the marker opens it,
    # the item's indented body goes on after it, and a chunk holding one is not read as cut in code
    ("Set it so:\n\n- `X=1` is `-x`\n- ```\n  X_LINKS=\"a b\"\n  ```\n\n  is the same as\n\n  ```\n"
     "  --links=a --links=b\n  ```\n\nRepeat it: three times.\n\n1. ~~~bash\n   run.sh\n   ~~~",
     [("Set it so:", False), ("- `X=1` is `-x`", False), ('X_LINKS="a b"', True), ("is the same as", False),
      ("--links=a --links=b", True), ("Repeat it: three times.", False), ("run.sh", True)]),
    ('!!! note "Caching"\n    The cache is kept. It is\n    cleared on build.\n\n:::tip\nA tip.\n:::\n\n> [!NOTE]\n> An alert.',
     [("The cache is kept.", False), ("It is\n    cleared on build.", False), ("A tip.", False),
      ("An alert.", False)]),
    ("", []),
])
def test_split_units_table(text, expected):
    assert texts(text) == expected


def test_units_are_offsets_into_the_chunk_and_capped():
    units = split_units(CHUNK)
    assert [CHUNK[u.start:u.end] for u in units][:2] == ["Loops can return values with break.",
                                                         "The cat sat on the mat, e.g. on the red one."]
    assert ("let x = loop { break 5; };", True) in texts(CHUNK)
    assert "A heading" not in " ".join(CHUNK[u.start:u.end] for u in units)
    long = " ".join(["word"] * 90) + "."
    pieces = split_units(long, max_words=40)
    assert [word_count(long[u.start:u.end]) for u in pieces] == [30, 30, 30]
    assert [(u.cut_before, u.cut_after) for u in pieces] == [(False, True), (True, True), (True, False)]
    assert not any(u.cut_before or u.cut_after for u in units)  # whole sentences and code lines


def ranked(chunks, first, budget):
    """`choose` over the chunks' candidates ranked by a made-up likelihood: the units whose text
    starts with each of `first` in that order, then the rest."""
    from unirag.answer.evidence import candidates

    cands = candidates(chunks)
    likelihood = [0.0] * len(cands)
    for rank, start in enumerate(first):
        for i, c in enumerate(cands):
            if c.text.startswith(start) and not likelihood[i]:
                likelihood[i] = float(len(first) - rank)
    return choose(chunks, cands, {"likelihood": likelihood}, 0.0, budget, ("likelihood",))


def test_a_quote_of_a_long_sentences_piece_shows_where_it_goes_on():
    long = "Sockets " + " ".join(["send"] * 50) + " bytes."
    ev = ranked([Hit("a", 1.0, long, "a.md")], ["Sockets"], 30)
    first = ev.spans[0]
    assert first.cut_after and not first.cut_before
    assert quote(first).startswith("“Sockets send") and quote(first).endswith("send…” [1]")
    from unirag.answer.evidence import Span

    assert quote(Span(0, 0, 5, "bytes.", cut_before=True)) == "“…bytes.” [1]"


def hits():
    return [Hit("a", 0.9, CHUNK, "loops.md", "Loops"), Hit("b", 0.5, "The quick brown fox jumps over the lazy dog.",
                                                               "fox.md", "")]


def test_select_returns_spans_of_the_hits_within_the_budget(tiny):
    ev = select(tiny, "How does a loop return a value?", hits(), max_words=12)
    assert ev.spans and ev.words <= 12 or len(ev.spans) == 1
    for span in ev.spans:
        assert hits()[span.hit].text[span.start:span.end] == span.text
    assert isinstance(ev.relevance, float)


@pytest.mark.parametrize("scorers", [("likelihood",), ("embedding",), ("answer",), SCORERS])
def test_choose_fuses_the_scorers_it_is_given(tiny, scorers):
    cands, scores, null = score(tiny, "How does a loop return a value?", hits())
    assert set(scores) == set(SCORERS) and all(len(v) == len(cands) for v in scores.values())
    ev = choose(hits(), cands, scores, null, 12, scorers)
    assert ev.spans and ev.words <= 12 or len(ev.spans) == 1
    if scorers == ("embedding",):  # one ranking, no leader: offered best fused first
        assert [s.score for s in ev.spans] == sorted((s.score for s in ev.spans), reverse=True)


def test_focused_hits_keep_numbering_and_neighbours():
    h = hits()
    ev_span = next(u for u in split_units(CHUNK) if CHUNK[u.start:u.end].startswith("The cat"))
    from unirag.answer.evidence import Span

    focused = focused_hits(h, [Span(0, ev_span.start, ev_span.end, CHUNK[ev_span.start:ev_span.end])])
    assert len(focused) == 2 and focused[1].text == ""
    assert focused[0].text.startswith("Loops can return values with break. … The cat sat")
    assert "Paris" not in focused[0].text


@pytest.mark.parametrize("mode", ["extractive", "generated", "both"])
def test_answer_modes(tiny, mode):
    result = answer_hits(tiny, "How does a loop return a value?", hits(),
                         AskSettings(answer=mode, max_new_tokens=4, evidence_words=10, abstain=False))
    assert result.evidence.words <= 10 or len(result.evidence.spans) == 1
    text = result.read()
    assert result.hits and result.citations[0].startswith(f"[1] {result.hits[0].label}")
    first = quote(reading_order(result.evidence.spans)[0])
    assert (text.startswith(first)) == (mode != "generated")
    assert ("In short:" in text) == (mode == "both")


def test_quotes_are_shown_in_reading_order_led_by_the_best_explaining_one(tiny):
    chunks = hits()
    def span(hit, start, end, score, likelihood):
        return Span(hit, start, end, chunks[hit].text[start:end], score, likelihood)
    # best first by the fused score; the second explains the question best (highest likelihood)
    best_first = [span(1, 0, 20, 0.9, -3.0), span(0, 20, 40, 0.8, -1.0), span(0, 0, 15, 0.7, -2.0)]
    evidence = Evidence(best_first, relevance=0.0)
    assert reading_order(best_first) == [best_first[1], best_first[2], best_first[0]]
    result = answer_hits(tiny, "How does a loop return a value?", chunks, AskSettings(abstain=False), evidence=evidence)
    assert result.read() == "\n".join(quote(s) for s in reading_order(best_first))
    assert result.evidence.spans == best_first  # the evidence itself stays best first


def test_abstains_below_the_threshold_and_still_shows_the_closest_quote(tiny, monkeypatch):
    from unirag.answer import ask

    monkeypatch.setattr(ask, "ABSTAIN_BELOW", 1e9)
    result = answer_hits(tiny, "How does a loop return a value?", hits(), AskSettings(max_new_tokens=8))
    text = result.read()
    assert result.abstained and text.startswith(NO_ANSWER) and ("[1]" in text or "[2]" in text)
    assert text.endswith(quote(reading_order(result.evidence.spans)[0]))  # the quote an answer would lead with


@pytest.mark.parametrize("relevance, answer_gain, similarity, settings, abstains", [
    (1.0, 1.0, 0.9, AskSettings(), False),
    (0.1, 1.0, 0.9, AskSettings(), True),            # explains the question too weakly
    (1.0, 0.1, 0.9, AskSettings(), True),            # no unit reads as an answer to it
    (1.0, 1.0, 0.3, AskSettings(), True),            # no unit is about what it asks
    (1.0, None, None, AskSettings(), False),         # no answer gain or similarity: relevance decides
    (0.1, 0.1, 0.3, AskSettings(abstain=False), False),
])
def test_abstains_on_weak_relevance_answer_gain_or_similarity(relevance, answer_gain, similarity, settings, abstains):
    assert settings.abstains(Evidence([], relevance, answer_gain, similarity=similarity)) is abstains


@pytest.mark.parametrize("scored", [("likelihood", "answer"), ("likelihood", "embedding")])
def test_evidence_carries_the_best_answer_score_and_similarity_where_they_were_scored(tiny, scored):
    cands, scores, null = score(tiny, "How does a loop return a value?", hits())
    scores = {name: scores[name] for name in scored}
    ev = choose(hits(), cands, scores, null, scorers=scored)
    assert (ev.answer_gain == max(scores["answer"])) if "answer" in scored else ev.answer_gain is None
    assert (ev.similarity == pytest.approx(max(scores["embedding"]))) if "embedding" in scored else ev.similarity is None


def test_abstains_when_no_unit_reads_as_an_answer(tiny, monkeypatch):
    from unirag.answer import ask

    monkeypatch.setattr(ask, "ABSTAIN_BELOW", float("-inf"))
    monkeypatch.setattr(ask, "ABSTAIN_ANSWER_BELOW", 1e9)
    result = answer_hits(tiny, "How does a loop return a value?", hits(), AskSettings(max_new_tokens=8))
    assert result.abstained and result.read().startswith(NO_ANSWER)


def test_no_hits_says_so(tiny):
    assert answer_hits(tiny, "Anything?", [], AskSettings(max_new_tokens=8)).read().startswith(NO_ANSWER)


@pytest.mark.parametrize("kwargs, message", [({"answer": "poem"}, "unknown answer mode"),
                                             ({"top_k": 0}, "--top-k"), ({"retrieval": "x"}, "unknown retrieval"),
                                             ({"evidence_words": 0}, "evidence_words")])
def test_bad_settings_are_user_errors(kwargs, message):
    with pytest.raises(UniragError, match=message):
        AskSettings(**kwargs)


@pytest.mark.parametrize("text, expected", [
    ("You can also return from inside a loop.", True), ("Use venv.", True), ("let x = loop { break 5; };", True),
    ("{{#rustdoc_include ../listings/ch03/src/main.rs}}", False), ("../listings/ch03/src/main.rs}}", False),
    ('<span class="filename">Filename: src/main.rs</span>', False), ("[pub]: ch07-03.html#paths", False),
    ("}", False), ('<Listing number="1-1" file-name="main.rs" caption="A program that prints `Hello, world!`">', False),
    ('<Listing file-name="src/main.rs" caption="A `Vec<T>` of closures">', False),
    ('<Listing number="1-2" file-name="src/main.rs">', False), ("</Listing>", False),
    ('<div title="Arrows -> point here">', False), ("Is a < b and c > d here?", True),
    ("New in version 20.1.", False), ("Added in version 3.12", False),
    ("New in version 3.6: The target is cross-compiled.", True),
])
def test_quotable_units_say_something_in_words(text, expected):
    from unirag.answer.whole_thoughts import quotable

    assert quotable(text) is expected


@pytest.mark.parametrize("text, expected", [
    ("Does Valgrind handle such programs?", True), ("What's happening?", True),
    ('Why is it called "Valgrind?"', True), ("Is it `Option<T>`?", True),
    ("Valgrind handles such programs.", False), ("Use `x?` to pass the error on.", False),
])
def test_a_question_is_never_quoted_as_evidence(text, expected):
    from unirag.answer.evidence import candidates
    from unirag.answer.whole_thoughts import asks

    assert asks(text) is expected
    hit = Hit("a", 1.0, f"Run it under the tool. {text}", "faq.md")
    assert (text in [c.text for c in candidates([hit])]) is not expected
    # a code line that ends in "?" (Rust's error propagation) is code, not a question
    code = Hit("b", 1.0, "Read the file:\n\n```rust\nlet f = File::open(path)?\n```", "io.md")
    assert "let f = File::open(path)?" in [c.text for c in candidates([code])]


def test_candidates_skip_units_repeated_by_overlapping_chunks():
    from unirag.answer.evidence import candidates

    first = Hit("a", 1.0, "Loops run code again. You can also return from inside a loop.", "a.md")
    second = Hit("b", 0.9, "also return from inside a loop. Then the loop ends here.", "a.md")
    texts = [c.text for c in candidates([first, second])]
    assert texts == ["Loops run code again.", "You can also return from inside a loop.", "Then the loop ends here."]


@pytest.mark.parametrize("tail", ["read for a reply.", "`max` in the arm.", "_reply_ comes back.", "[links] go on."])
def test_a_sentence_tail_at_a_chunk_start_is_no_candidate(tail):
    from unirag.answer.evidence import candidates

    hit = Hit("a", 1.0, f"{tail} Sockets send and receive bytes. more words follow here.", "a.md")
    assert [c.text for c in candidates([hit])] == ["Sockets send and receive bytes.", "more words follow here."]


@pytest.mark.parametrize("text", ["`Rc<T>` counts references. It frees the value at zero.",
                                  "# Counting\n\n`rc` counts references. It frees the value at zero."])
def test_a_chunk_may_start_with_code_markup(text):
    from unirag.answer.evidence import candidates

    # a capital after the code span, or a section's first sentence (the chunk holds its heading)
    assert [c.text for c in candidates([Hit("a", 1.0, text, "a.md")])][0].endswith("counts references.")


def test_a_unit_announcing_what_follows_is_quoted_with_it():
    text = "Shadow a variable by repeating let as follows:\n\n```rust\nlet x = x + 1;\n```\n\nThe end is here."
    hit = Hit("a", 1.0, text, "a.md", "Shadowing")
    ev = ranked([hit], ["Shadow a variable"], 30)
    first = ev.spans[0]
    assert first.text.startswith("Shadow a variable") and first.text.endswith("let x = x + 1;")
    assert first.text == text[first.start:first.end]
    assert all(s.start != text.index("let x") for s in ev.spans[1:])  # not quoted twice


def test_a_unit_of_a_span_that_did_not_fit_is_still_quoted_alone():
    from unirag.answer.evidence import candidates

    text = ("Variables are immutable by default in this language.\n\n## Shadowing\n\n"
            "Repeat the keyword as follows:\n\n```rust\nlet spaces = spaces.len();\n```")
    hit = Hit("a", 1.0, text, "a.md", "Variables")
    cands = candidates([hit])
    likelihood = [3.0, 2.0, 1.0]  # the first sentence, the announcing unit, the code line
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 21, ("likelihood",))
    # after the first quote, the heading, the announcing unit and its code line together miss the
    # budget by the dash after the heading; the code line, offered next, fits alone
    assert [s.text for s in ev.spans] == ["Variables are immutable by default in this language.",
                                         "let spaces = spaces.len();"]


@pytest.mark.parametrize("similarities, quoted", [  # against OFF_TOPIC_BELOW (0.4)
    ([0.7, 0.6, 0.2, 0.3], {0}),         # the second passage is about something else: not quoted
    ([0.7, 0.6, 0.55, 0.3], {0, 1}),     # one unit about the question is enough
    ([0.3, 0.2, 0.2, 0.1], {0, 1}),      # none is about it: abstention's closest quote still shows
])
def test_a_passage_with_no_unit_about_the_question_is_not_quoted(similarities, quoted):
    from unirag.answer.evidence import candidates

    hits = [Hit("a", 1.0, "Rabat is the capital. It lies on the coast.", "a.md", "Morocco"),
            Hit("b", 0.9, "Coffee is a beverage. There are substitutes.", "b.md", "Coffee")]
    cands = candidates(hits)
    scores = {"likelihood": [4.0, 3.0, 2.0, 1.0], "embedding": similarities}
    ev = choose(hits, cands, scores, 0.0, 40, ("likelihood",))
    assert {s.hit for s in ev.spans} == quoted
    # what abstention reads is over every unit, quoted or not
    assert ev.similarity == pytest.approx(max(similarities)) and ev.passage_likelihood == (4.0, 2.0)


def test_an_announcing_unit_is_not_quoted_with_markup():
    from unirag.answer.evidence import candidates

    text = 'Shadow it as follows:\n\n<span class="filename">Filename: src/main.rs</span>\n\nThe end is here.'
    first = candidates([Hit("a", 1.0, text, "a.md")])[0]
    assert first.text == "Shadow it as follows:" and first.following is None


def test_an_announcing_unit_is_not_quoted_with_a_template_include():
    from unirag.answer.evidence import candidates

    text = "Here is an example:\n\n```rust\n{{#rustdoc_include ../listings/ch10/src/main.rs:here}}\n```\n\nThe end."
    first = candidates([Hit("a", 1.0, text, "a.md")])[0]
    assert first.text == "Here is an example:" and first.following is None


def test_quotes_show_markdown_links_as_their_text():
    from unirag.answer.evidence import Span

    text = ("You can make them mutable as in [Chapter 2][storing-values], see [the guide](https://x.org/a) "
            "or [intro](../ch01.md); x[i][j] and v[0](1) stay.")
    assert quote(Span(0, 0, len(text), text)) == (
        "“You can make them mutable as in Chapter 2, see the guide or intro; x[i][j] and v[0](1) stay.” [1]")


def test_quotes_leave_blockquote_markers_out_but_keep_prompts():
    from unirag.answer.evidence import Span

    text = "> This could get\n> more repetitive than\n> > this."
    assert quote(Span(0, 0, len(text), text)) == "“This could get more repetitive than this.” [1]"
    assert quote(Span(0, 0, 14, ">>> len(a) > 2")) == "“>>> len(a) > 2” [1]"


def test_quotes_leave_a_list_items_bullet_out_but_keep_options():
    from unirag.answer.evidence import Span

    for text, quoted in (("- Run it once.", "Run it once."), ("• Thread-safety.", "Thread-safety."),
                         ("2. Run it once.", "Run it once."), ("2.5 s at most.", "2.5 s at most."),
                         ("| `-q` | Quiet. |", "`-q` | Quiet."),  # a table row's outer pipes
                         ("| It crashes only natively.", "It crashes only natively."),  # a table cell's separator
                         ("-h, --help show help", "-h, --help show help"), ("a | b", "a | b")):
        assert quote(Span(0, 0, len(text), text)) == f"“{quoted}” [1]"


def test_quotes_leave_code_fence_lines_out():
    from unirag.answer.evidence import Span

    text = "Shadow it as follows:\n\n```rust\nlet x = x + 1;"
    assert quote(Span(0, 0, len(text), text)) == "“Shadow it as follows: let x = x + 1;” [1]"


# what whole thoughts quote before a unit (here the text's last): the term a definition opens
# with, or the sentence that a unit pointing back refers to
@pytest.mark.parametrize("finder, text, expected", [
    ("term_of", "os.path.expanduser(path)\n\nOn Unix, return the argument with ~ replaced.", "os.path.expanduser(path)"),
    ("term_of", "Warning\n\nThe shlex module is only designed for Unix shells.", "Warning"),
    # the term's other names right before it (an option's short form, a second signature)
    ("term_of", "Options follow.\n\n-d\n\n--delete\n\nDelete a branch.", "-d\n\n--delete"),
    ("term_of", "Loops run code again.\n\nYou can also return from a loop.", None),        # a sentence, not a term
    ("term_of", "Source code: Lib/csv.py\n\nThe CSV format is common.", None),            # a "label: value" line
    ("term_of", "- first item\n\nThe list ends here.", None),                             # a list item
    ("term_of", "</Listing>\n\nAs a result, s will contain lol.", None),                  # markup says nothing
    ("term_of", "list.append(x)\nAdd an item to the end of the list.", None),             # not a paragraph of its own
    ("term_of", "Table 3-2\n\n| Number | Example |", None),                               # the body is no sentence
    ("term_of", "Install steps\n\n1. Run the installer.", None),                        # a step is no body
    ("term_of", "suffix=None, dir=None)\n\nReturn a file-like object.", None),            # a signature cut by the edge
    # a later sentence of an API definition's body, in its first paragraph or a later one
    ("defined_by", "os.path.expanduser(path)\n\nReturn it with ~ replaced. On Unix, HOME is used.",
     "os.path.expanduser(path)"),
    ("defined_by", "os.path.expanduser(path)\n\nReturn it with ~ replaced.\n\nChanged in 3.8: no HOME.\n\n"
     "If the expansion fails, the path is returned unchanged.", "os.path.expanduser(path)"),
    ("defined_by", "os.path.expanduser(path)\n\nReturn it with ~ replaced.", None),        # the first: term_of's
    ("defined_by", "Warning\n\nThe module is for Unix. It fails elsewhere.", None),       # a word of prose
    # a code span alone names code: a command's values and options, as reference pages list them
    ("defined_by", "`BOOL`\n\nBoolean value. The GUI offers a checkbox.", "`BOOL`"),
    ("defined_by", "`--force`\n\nOverwrite files. Use it with care.", "`--force`"),
    ("defined_by", "The `BOOL` type\n\nBoolean value. The GUI offers a checkbox.", None),  # words around it
    ("defined_by", "str.join(xs)\n\nJoin them.\n\n## Other\n\nIt goes on.", None),        # past a heading
    ("defined_by", "str.join(xs)\n\nJoin them.\n\n```\n>>> x\n```\n\nIt goes on.", None),  # past code
    ("defined_by", "str.join(xs)\n\nJoin them.\n\nstr.split(x)\n\n`x` is a separator.", None),  # past a term
    # a sentence of a section whose heading names code (Markdown API references), past code lines
    ("defined_by", "## `os.homedir()`\n\n* Returns: {string}\n\nReturns the home directory.", "`os.homedir()`"),
    ("defined_by", "### Class: `Timeout`\n\nIt is returned.\n\n```js\nt.unref();\n```\n\nIt can be passed on.",
     "Class: `Timeout`"),
    ("defined_by", "## Using `if let` for enums\n\nIt matches one pattern.", None),   # a title in words
    ("defined_by", "## `os.homedir()`\n\nReturns the home.\n\n## Notes\n\nIt reads HOME.", None),  # the next heading
    # a code line inside a bracket an earlier line of its block opens
    ("statement_of", "```js\nconst ls = spawn('ls', ['-l'], {\n  stdio: 'pipe',\n```", "const ls = spawn('ls', ['-l'], {"),
    ("statement_of", "```python\nt = f(d.year,\n      d.day, \"(\")\n```", "t = f(d.year,"),  # a string's bracket is text
    ("statement_of", "```js\nls.on('data', (data) => {\n  console.log(data);\n```", None),  # a callback's statement
    ("statement_of", "```rust\nfn f<'a>(s: &'a str) -> Vec<&'a str> {\n    vec![s],\n```", None),  # a lifetime's '
    ("statement_of", "```js\nspawn('ls', [\n```\n\n```js\n  stdio: 'pipe',\n```", None),  # another block
    ("sentence_before", "Sorts are stable. That means order is kept.", "Sorts are stable."),
    ("sentence_before", "Sorts are stable.\n\nThat means order is kept.", "Sorts are stable."),  # the paragraph before
    ("sentence_before", "It fails:\n\n* It did not link.", "It fails:"),                 # a list item after it
    ("sentence_before", "Sorts are stable.\n\n\nThat means order is kept.", None),        # more than one blank line
    ("sentence_before", "Sorts are stable.\n\n## Order\n\nThat means order is kept.", None),  # a heading between
    ("sentence_before", "> Sorts are stable.\n>\n> That means order is kept.", None),    # another quoted one
    ("sentence_before", "```\nsorted(x)\n```\nThat means order is kept.", None),          # code, not a sentence
    ("sentence_before", "order is kept. That means the sort is stable.", None),           # a tail the chunk's edge cut
    ("sentence_before", "That means order is kept.", None),                               # nothing before
])
def test_whole_thoughts_find_the_unit_quoted_before_one(finder, text, expected):
    from unirag.answer import whole_thoughts
    from unirag.answer.sentences import split_units

    units = split_units(text)
    if finder == "defined_by":  # read in one pass over the chunk's units
        terms = [whole_thoughts.term_of(text, units, k) for k in range(len(units))]
        name = whole_thoughts.defined_by(text, units, terms)[-1]
        assert name is None or text[name.where.start:name.where.end] == name.text
        found = name and name.where
    else:
        found = getattr(whole_thoughts, finder)(text, units, len(units) - 1)
    assert (found and text[found.start:found.end]) == expected


def test_a_statements_lines_cut_off_from_its_start_are_no_candidates():
    from unirag.answer.evidence import candidates

    # the chunk's edge cut "time.struct_time((d.year, d.month," off; the callback's own statement
    # inside a call opened before the edge stays
    text = ("```python\n    d.day, d.hour,\n    d.weekday(), yday, dst))\n```\n\nThe tuple holds the fields.\n\n"
            "```js\n  emitter.setMaxListeners(10);\n});\n```")
    texts = [c.text for c in candidates([Hit("a", 1.0, text, "a.md")])]
    assert texts == ["The tuple holds the fields.", "emitter.setMaxListeners(10);"]


def test_a_statements_later_line_is_quoted_from_its_first_or_not_at_all():
    from unirag.answer.evidence import candidates

    text = ("Run a command with its output piped:\n\n```js\nconst ls = spawn('ls', ['-lh'], {\n"
            "  stdio: 'pipe',\n  shell: true,\n});\n```")
    hit = Hit("a", 1.0, text, "child_process.md", "child_process")
    cands = candidates([hit])
    likelihood = [3.0 if c.text == "stdio: 'pipe'," else 0.0 for c in cands]
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 20, ("likelihood",))
    assert quote(ev.spans[0]) == "“const ls = spawn('ls', ['-lh'], { stdio: 'pipe',” [1]"
    # where the statement's first line does not fit after a first quote, the tail is not quoted
    # (alone, "stdio: 'pipe'," would fit)
    text = "Pipes carry the output.\n\n```js\nconst ls = spawn('ls', ['-lh'], {\n  stdio: 'pipe',\n});\n```"
    hit = Hit("a", 1.0, text, "child_process.md", "child_process")
    cands = candidates([hit])
    likelihood = [3.0 if c.text.startswith("Pipes") else 2.0 if c.text == "stdio: 'pipe'," else 0.0 for c in cands]
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 9, ("likelihood",))
    assert [s.text for s in ev.spans] == ["Pipes carry the output."]


def test_a_definitions_first_sentence_is_quoted_with_its_term():
    text = ("os.path.exists(path)\n\nReturn True if path exists.\n\n"
            "os.path.expanduser(path)\n\nOn Unix, return the argument with ~ replaced by the home directory.")
    hit = Hit("a", 1.0, text, "os.path.html", "os.path")
    ev = ranked([hit], ["On Unix"], 20)
    first = ev.spans[0]
    assert first.text == text[first.start:first.end] and first.text.startswith("os.path.expanduser(path)")
    assert quote(first) == ("“os.path.expanduser(path) — On Unix, return the argument with ~ replaced by the "
                            "home directory.” [1]")
    assert all("expanduser" not in s.text for s in ev.spans[1:])  # the term is not quoted twice


def test_a_definitions_first_sentence_is_not_quoted_without_its_term():
    from unirag.answer.evidence import candidates

    text = ("Many config files give paths that start with a tilde.\n\nos.path.expanduser(path)\n\n"
            "On Unix, return the argument with ~ replaced.")
    hit = Hit("a", 1.0, text, "os.path.html", "os.path")
    cands = candidates([hit])
    by_text = {c.text: i for i, c in enumerate(cands)}
    likelihood = [0.0] * len(cands)
    likelihood[by_text["Many config files give paths that start with a tilde."]] = 3.0
    likelihood[by_text["On Unix, return the argument with ~ replaced."]] = 2.0  # offered second
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 20, ("likelihood",))
    # the sentence and its term do not both fit after the first quote: the sentence, which alone
    # never says what it is about, is left out; the term, offered after it, still fits
    assert [s.text for s in ev.spans] == ["Many config files give paths that start with a tilde.",
                                         "os.path.expanduser(path)"]
    roomy = choose([hit], cands, {"likelihood": likelihood}, 0.0, 26, ("likelihood",))
    assert roomy.spans[1].text.startswith("os.path.expanduser(path)\n\nOn Unix")


def test_a_first_quote_runs_past_the_budget_only_where_no_other_fits():
    from unirag.answer.evidence import FIRST_QUOTE_OVERRUN, candidates

    long = ("Cargo forwards the path of the tool it was started as to every build script and every "
            "external subcommand that it runs for the package.")
    text = f"CARGO\n\n{long} This value should point at a command that behaves like cargo.\n\nShort fact here."
    hit = Hit("a", 1.0, text, "env.md", "Environment")
    cands = candidates([hit])
    by_text = {c.text: i for i, c in enumerate(cands)}
    likelihood = [0.0] * len(cands)
    likelihood[by_text["This value should point at a command that behaves like cargo."]] = 3.0  # points back
    likelihood[by_text["Short fact here."]] = 2.0
    budget = 20
    whole = choose([hit], cands, {"likelihood": likelihood}, 0.0, 60, ("likelihood",))
    assert whole.spans[0].text.startswith("CARGO") and whole.words > budget + FIRST_QUOTE_OVERRUN
    # within a budget of 20 words, the quote that points back (with its sentence and term) would run
    # past the budget by more than the overrun a first quote may take: the next one leads instead
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, budget, ("likelihood",))
    assert ev.spans[0].text == "Short fact here."
    # where no quote fits so, the first is quoted still, however long
    alone = [i for i, c in enumerate(cands) if c.text != "Short fact here."]
    only = choose([hit], [cands[i] for i in alone], {"likelihood": [likelihood[i] for i in alone]}, 0.0, budget,
                  ("likelihood",))
    assert only.spans and only.spans[0].text.startswith("CARGO")


def test_a_later_sentence_of_a_definition_is_quoted_after_its_term():
    from unirag.answer.evidence import candidates

    text = ("Path functions follow.\n\nos.path.expanduser(path)\n\nOn Unix, return the argument with ~ "
            "replaced.\n\nIf the expansion fails, the path is returned unchanged.\n\nos.path.expandvars(path)\n\n"
            "Return the argument with environment variables expanded.")
    hit = Hit("a", 1.0, text, "os.path.html", "os.path")
    cands = candidates([hit])
    by_text = {c.text: i for i, c in enumerate(cands)}
    likelihood = [0.0] * len(cands)
    likelihood[by_text["If the expansion fails, the path is returned unchanged."]] = 3.0
    likelihood[by_text["os.path.expanduser(path)"]] = 2.0
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 30, ("likelihood",))
    first = ev.spans[0]
    assert first.text == text[first.start:first.end] == "If the expansion fails, the path is returned unchanged."
    assert quote(first) == ("“os.path.expanduser(path) — …If the expansion fails, the path is returned "
                            "unchanged.” [1]")
    assert all("expanduser" not in s.text for s in ev.spans[1:])  # the term is not quoted again
    # the sentence and its term do not fit after an earlier quote: the sentence is left out
    likelihood[by_text["Return the argument with environment variables expanded."]] = 4.0
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 16, ("likelihood",))
    assert "If the expansion fails, the path is returned unchanged." not in [s.text for s in ev.spans]


def test_a_sentence_of_a_code_section_is_quoted_after_its_name():
    """A chunk that opens in the middle of a section headed by code ("`os.homedir()`") is named by
    its heading path; a heading inside the chunk names the units after it."""
    from unirag.answer.evidence import candidates

    text = ("It falls back to the operating system.\n\n## `os.hostname()`\n\nReturns the host name of the "
            "operating system.\n\n## Notes\n\nThe operating system decides.")
    hit = Hit("a", 1.0, text, "os.md", "OS > `os.homedir()`")
    cands = candidates([hit])
    scores = {"likelihood": [1.0 if c.text.startswith("It falls") else 0.0 for c in cands]}
    ev = choose([hit], cands, scores, 0.0, 40, ("likelihood",))
    assert [quote(s) for s in ev.spans] == [
        "“`os.homedir()` — …It falls back to the operating system.” [1]",
        "“`os.hostname()` — Returns the host name of the operating system.” [1]",  # the section's first
        "“Notes — The operating system decides.” [1]"]  # `title_of`: a heading in words
    assert ev.spans[0].text == "It falls back to the operating system."  # the name is no part of the quote
    plain = Hit("a", 1.0, text, "os.md", "OS > Using the module")  # a heading in words names nothing
    assert candidates([plain])[0].defined is None


def test_a_name_is_not_repeated_before_the_next_quote_of_its_passage():
    name = "`os.homedir()`"
    first = Span(0, 0, 5, "Returns the home.", name=Name(name))
    second = Span(0, 9, 14, "It reads HOME.", name=Name(name))
    other = Span(1, 0, 5, "Hosts have names.", name=Name("`os.hostname()`"))
    assert quotes([first, second]) == ["“`os.homedir()` — …Returns the home.” [1]", "“It reads HOME.” [1]"]
    # with another passage's quote between, the name is said again
    assert quotes([first, other, second])[2] == "“`os.homedir()` — …It reads HOME.” [1]"
    assert quotes([first, replace(second, hit=2)])[1] == "“`os.homedir()` — …It reads HOME.” [3]"


def test_a_term_is_quoted_with_the_definition_it_heads():
    text = "`--log-level`\n\nSet how many messages are printed.\n\n`--debug-output`\n\nShow the call stack."
    hit = Hit("a", 1.0, text, "cmake.1.rst", "Options")
    ev = ranked([hit], ["`--log-level`"], 20)  # the term ranks first
    assert quote(ev.spans[0]) == "“`--log-level` — Set how many messages are printed.” [1]"
    assert all("messages" not in s.text for s in ev.spans[1:])  # the definition is not quoted twice


def test_a_term_is_quoted_with_its_other_names():
    from unirag.answer.evidence import candidates

    text = "Options follow.\n\n-d\n\n--delete-branch\n\nDelete a branch.\n\n-m\n\n--move\n\nMove a branch."
    hit = Hit("a", 1.0, text, "git-branch.html", "OPTIONS")
    cands = candidates([hit])
    by_text = {c.text: i for i, c in enumerate(cands)}
    for first in ("Delete a branch.", "--delete-branch"):  # the definition offered first, or its term
        likelihood = [0.0] * len(cands)
        likelihood[by_text[first]] = 3.0
        ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 30, ("likelihood",))
        assert quote(ev.spans[0]) == "“-d, --delete-branch — Delete a branch.” [1]"
        assert all("-d" not in s.text.split() for s in ev.spans[1:])  # not quoted twice
    # where the definition does not fit after an earlier quote, the term is quoted alone
    likelihood = [0.0] * len(cands)
    likelihood[by_text["Options follow."]], likelihood[by_text["--delete-branch"]] = 3.0, 2.0
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 5, ("likelihood",))
    assert [quote(s) for s in ev.spans] == ["“Options follow.” [1]", "“--delete-branch” [1]"]


def test_a_sentence_that_opens_a_section_is_quoted_with_a_heading_it_leaves_its_subject_to():
    from unirag.answer.evidence import candidates

    text = ("### X-Frame-Options\n\nPrevents external sites from embedding your site in an `iframe`. "
            "This is known as clickjacking.\n\n## Hash Maps\n\nThe last collection is the hash map.\n\n"
            "## Tags\n\n- A list item is no sentence that opens a section.\n\n## Threads\n\n"
            "coroutine to_thread(func)\n\nRun func in a separate thread.")
    hit = Hit("a", 1.0, text, "security.md", "Security")
    cands = candidates([hit])
    titles = {c.text: c.title and text[c.title.start:c.title.end] for c in cands}
    assert titles == {"Prevents external sites from embedding your site in an `iframe`.": "X-Frame-Options",
                      "This is known as clickjacking.": None,  # no section's first sentence
                      "The last collection is the hash map.": None,  # it names the heading's words
                      "- A list item is no sentence that opens a section.": None,
                      "coroutine to_thread(func)": None,  # a term names what it defines
                      "Run func in a separate thread.": None}
    by_text = {c.text: i for i, c in enumerate(cands)}
    likelihood = [0.0] * len(cands)
    likelihood[by_text["The last collection is the hash map."]] = 3.0
    likelihood[by_text["Prevents external sites from embedding your site in an `iframe`."]] = 2.0
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 24, ("likelihood",))
    assert [quote(s) for s in ev.spans][:2] == [
        "“The last collection is the hash map.” [1]",
        "“X-Frame-Options — Prevents external sites from embedding your site in an `iframe`.” [1]"]
    # where the heading does not fit beside the first quote, the sentence is quoted alone
    tight = choose([hit], cands, {"likelihood": likelihood}, 0.0, 20, ("likelihood",))
    assert [s.text for s in tight.spans][1].startswith("Prevents")


@pytest.mark.parametrize("text, expected", [
    ("That means their original order is preserved.", True),
    ("So, although it looks like a copy, it is a move.", True),
    ("- It returns None when the key is missing.", True),
    ("Also note that the values are references.", True),
    ("Thats all.", False),                                  # a word that only starts like one
    ("Sorts are guaranteed to be stable.", False),
    ("The item after this one is empty.", False),
])
def test_points_back_reads_the_opening_words(text, expected):
    from unirag.answer.whole_thoughts import points_back

    assert points_back(text) is expected


def test_a_unit_that_points_back_is_quoted_with_the_sentence_before_it():
    text = ("Records are sorted by key. Sorts are guaranteed to be stable. That means records with the "
            "same key keep their original order.\n\nThe end is here.")
    hit = Hit("a", 1.0, text, "sorting.html", "Sorting")
    ev = ranked([hit], ["That means"], 30)
    first = ev.spans[0]
    assert first.text == ("Sorts are guaranteed to be stable. That means records with the same key keep their "
                          "original order.")
    assert first.text == text[first.start:first.end]
    assert all("stable" not in s.text for s in ev.spans[1:])  # not quoted twice


def test_a_unit_that_points_back_to_a_definitions_first_sentence_is_quoted_with_its_term():
    from unirag.answer.evidence import candidates

    text = ("`VERBOSE`\n\nDetails for project users.\n\n`DEBUG`\n\nDetails for developers of the project. "
            "These messages are of no interest to other users.")
    hit = Hit("a", 1.0, text, "message.rst", "message")
    cands = candidates([hit])
    # the first definition's sentence first, then the one that points back
    likelihood = [3.0 if "project users" in c.text else 2.0 if "These" in c.text else 1.0 for c in cands]
    first = "“`VERBOSE` — Details for project users.” [1]"
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 25, ("likelihood",))
    assert [quote(s) for s in ev.spans] == [first, "“`DEBUG` — Details for developers of the project. These "
                                                   "messages are of no interest to other users.” [1]"]
    # one word short: the sentence pointed to is not quoted without its term, and the unit comes
    # after the term it goes on defining (`defined_by`)
    tight = choose([hit], cands, {"likelihood": likelihood}, 0.0, 24, ("likelihood",))
    assert [quote(s) for s in tight.spans] == [first, "“`DEBUG` — …These messages are of no interest to other "
                                                      "users.” [1]"]


def test_a_definitions_first_sentence_is_named_by_its_term_when_a_later_one_took_it_as_its_name():
    from unirag.answer.evidence import candidates

    text = "`BOOL`\n\nBoolean value. The GUI offers a checkbox."
    hit = Hit("a", 1.0, text, "set.rst", "set")
    cands = candidates([hit])
    likelihood = [1.0, 2.0]  # the later sentence first: it is quoted after the term, "`BOOL` — …"
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 30, ("likelihood",))
    assert [s.name.text for s in ev.spans] == ["`BOOL`", "`BOOL`"]
    # in reading order the first sentence comes first, with its term; the later one then needs it
    # no more
    assert quotes(sorted(ev.spans, key=lambda s: s.start)) == ["“`BOOL` — Boolean value.” [1]",
                                                           "“The GUI offers a checkbox.” [1]"]


@pytest.mark.parametrize("text, expected", [
    ("Next, we’ll extract the `hosting` module to its own file.", True),
    ("Listing 4-2 shows an example using an integer.", True),
    ("Let's look at the `String` version:", True),
    ("Consider what happens if you write code like that shown in Listing 20-33.", True),
    ("In this chapter, we cover closures.", True),
    ("The following methods are available on every list.", True),
    ("If a type implements the `Copy` trait, its values are copied.", False),
    ("Considering the cost, the loop is unrolled.", False),   # a word that only starts like one
    ("We'd rather not.", False),
])
def test_points_ahead_finds_signposts(text, expected):
    from unirag.answer.whole_thoughts import points_ahead

    assert points_ahead(text) is expected


def test_a_signposts_turn_goes_to_the_unit_after_it():
    from unirag.answer.evidence import candidates, passed_on

    text = ("Our server must listen for connections. Let's start with that. The `bind` function returns a new "
            "`TcpListener`.\n\nThe end of the section is here.")
    hit = Hit("a", 1.0, text, "server.md", "Server")
    cands = candidates([hit])
    assert [c.text for c in cands][1] == "Let's start with that."
    # the signpost ranks first: its turn goes to the sentence after it, and it is never quoted
    likelihood = [2.0, 4.0, 1.0, 3.0]
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 30, ("likelihood",))
    assert [s.text for s in ev.spans] == ["The `bind` function returns a new `TcpListener`.",
                                          "The end of the section is here.",
                                          "Our server must listen for connections."]
    assert passed_on([1, 2, 0, 3], cands) == [2, 0, 3]
    assert passed_on([2, 1, 0, 3], cands) == [2, 0, 3]  # the unit after it came first: dropped
    # a signpost that announces keeps its turn: it is quoted with what it announces
    announcing = candidates([Hit("c", 1.0, "Let's start with this:\n\nThe `bind` function returns.", "s.md")])
    assert passed_on([0, 1], announcing) == [0, 1]
    # a signpost that ends its chunk keeps its turn
    assert passed_on([0], candidates([Hit("b", 1.0, "Let's start with that.", "s.md")])) == [0]


# four units: the likelihood ranks b first, the embedding a, the answer score a then d; the
# fusion ranks a, b, c, d
TURNS = {"likelihood": [1.0, 4.0, 3.0, 2.0], "embedding": [4.0, 3.0, 2.0, 1.0], "answer": [4.0, 1.0, 2.0, 3.0]}


@pytest.mark.parametrize("scorers, expected", [
    # the fusion's a, the likelihood's b, the answer's best not yet offered (d), the fusion's c
    (("likelihood", "embedding", "answer"), [0, 1, 3, 2]),
    # no answer scorer: the fusion (b, a, c, d) and the likelihood (b, c, d, a) take turns
    (("likelihood", "embedding"), [1, 2, 0, 3]),
    (("embedding",), [0, 1, 2, 3]),              # no leading scorer chosen: the fusion's order
])
def test_units_are_offered_in_turns_by_the_fusion_and_each_leading_scorer(scorers, expected):
    order = offer_order(fuse(TURNS, scorers), TURNS, scorers)
    assert order == expected and sorted(order) == [0, 1, 2, 3]


NEG = float("-inf")


@pytest.mark.parametrize("likelihoods, expected", [
    ((-1.0, -2.0, -3.0), [0, 1, 2]),   # both orders agree
    ((-2.0, -1.0, -3.0), [0, 1, 2]),   # ranks 1+2 and 2+1 tie: the retrieval order keeps its first
    ((-3.0, -1.0, -2.0), [1, 0, 2]),   # the second passage's unit is best, the first's is worst: 2+1 < 1+3
    ((-3.0, -2.0, -1.0), [0, 2, 1]),   # 3+1 ties 1+3: the retrieval order settles it; 2+2 sits between
    ((NEG, -1.0, -2.0), [1, 0, 2]),    # a passage with no quotable unit ranks last on its units
    ((-1.0,), [0]),
])
def test_passage_order_fuses_retrieval_and_the_best_units_likelihood(likelihoods, expected):
    assert passage_order(Evidence([], 0.0, passage_likelihood=likelihoods)) == expected


def test_renumbered_evidence_points_at_the_same_text():
    chunks = hits()
    spans = [Span(1, 0, 9, chunks[1].text[0:9]), Span(0, 0, 5, chunks[0].text[0:5])]
    evidence = Evidence(spans, 0.5, 1.0, passage_likelihood=(-2.0, -1.0))
    moved = evidence.renumbered([1, 0])
    shown = [chunks[1], chunks[0]]
    assert [s.hit for s in moved.spans] == [0, 1] and moved.passage_likelihood == (-1.0, -2.0)
    assert all(shown[s.hit].text[s.start:s.end] == s.text for s in moved.spans)
    assert (moved.relevance, moved.answer_gain) == (0.5, 1.0)


def test_answers_show_passages_in_passage_order(tiny):
    question = "How does a loop return a value?"
    chunks = [Hit("c", 0.9, "Loops return values with break. Paris is the capital of France.", "loops.md", ""),
              Hit("b", 0.5, "The quick brown fox jumps over the lazy dog.", "fox.md", ""),
              Hit("a", 0.1, "The cat sat on the mat. It was red.", "cat.md", "")]
    selected = select(tiny, question, chunks)
    assert len(selected.passage_likelihood) == 3
    assert passage_order(selected) != [0, 1, 2]  # the tiny model's likelihoods do move a passage
    settings = AskSettings(max_new_tokens=1, abstain=False)
    result = answer_hits(tiny, question, chunks, settings)
    assert [h.id for h in result.hits] == [chunks[i].id for i in passage_order(selected)]
    assert all(result.hits[s.hit].text[s.start:s.end] == s.text for s in result.evidence.spans)
    # an earlier answer's hits and evidence give the same answer again (evaluation reuses them)
    again = answer_hits(tiny, question, result.hits, settings, evidence=result.evidence)
    assert (again.hits, again.read()) == (result.hits, result.read())


def test_quotes_leave_inline_html_out_of_prose_only():
    from unirag.answer.evidence import Span

    for text, code, quoted in (
            ('<span class="caption">Table 3-1: Integer Types</span>', False, "Table 3-1: Integer Types"),
            ('Press <kbd>Ctrl</kbd>-<kbd>C</kbd> to stop.<!-- note -->', False, "Press Ctrl-C to stop."),
            ("The match runs from the '<' in '<html>' to the '>'.", False,
             "The match runs from the '<' in '<html>' to the '>'."),  # prose about tags
            ("Write `<span>` or <em>x</em>.", False, "Write `<span>` or x."),  # a code span is code
            ('<a href="/">home</a>', True, '<a href="/">home</a>'),  # a code line
            ('Link it as follows:\n\n```html\n<a href="/">home</a>', False,
             'Link it as follows: <a href="/">home</a>'),
            ("def f(path):\n    return []\n\ncopytree(f)", True, "def f(path): return [] copytree(f)"),  # no term
            ("> Shadow it:\n>\n> ```rust\n> let x = 1;\n> ```", False, "Shadow it: let x = 1;"),  # a quoted fence
            # mdBook's listing tag, as the page shows it (its caption may hold ">")
            ('<Listing number="20-33" file-name="src/main.rs" caption="Creating a `Vec<T>` of closures">', False,
             "Listing 20-33: Creating a `Vec<T>` of closures"),
            ("<Listing caption='Two closures'>", False, "Two closures"),
            ('It runs as shown:\n\n<Listing file-name="src/main.rs">\n\n```rust\nfn main() {}', False,
             "It runs as shown: fn main() {}")):
        assert quote(Span(0, 0, len(text), text, code=code)) == f"“{quoted}” [1]"


def test_a_code_line_is_quoted_from_the_line_that_binds_the_name_it_opens_with():
    from unirag.answer.evidence import candidates

    text = ("Make the options conflict:\n\n```\nimport argparse\n\nparser = argparse.ArgumentParser()\n"
            "group = parser.add_mutually_exclusive_group()\ngroup.add_argument('-v', action='store_true')\n"
            "```\n\n```\ngroup.add_argument('-q', action='store_true')\n```\n")
    hit = Hit("a", 1.0, text, "argparse.html", "argparse")
    cands = candidates([hit])
    bindings = {c.text: c.binding and text[c.binding.start:c.binding.end] for c in cands}
    assert bindings["group.add_argument('-v', action='store_true')"] == \
        "group = parser.add_mutually_exclusive_group()"
    assert bindings["group.add_argument('-q', action='store_true')"] is None  # another block
    assert bindings["group = parser.add_mutually_exclusive_group()"] is None  # it binds, uses no name first
    by_text = {c.text: i for i, c in enumerate(cands)}
    likelihood = [0.0] * len(cands)
    likelihood[by_text["group.add_argument('-v', action='store_true')"]] = 3.0
    likelihood[by_text["group = parser.add_mutually_exclusive_group()"]] = 2.0
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 20, ("likelihood",))
    assert quote(ev.spans[0]) == ("“group = parser.add_mutually_exclusive_group() "
                                  "group.add_argument('-v', action='store_true')” [1]")
    assert all("parser.add_mutually" not in s.text for s in ev.spans[1:])  # not quoted twice


@pytest.mark.parametrize("budget, last_line", [(8, "  $<INSTALL_INTERFACE:include>)"), (7, "  $<BUILD_INTERFACE:inc>"),
                                               (6, "target_include_directories(mylib PUBLIC")])
def test_an_announced_example_comes_with_as_many_of_its_lines_as_fit(budget, last_line):
    from unirag.answer.evidence import candidates

    text = ("For example:\n\n```cmake\ntarget_include_directories(mylib PUBLIC\n  $<BUILD_INTERFACE:inc>\n"
            "  $<INSTALL_INTERFACE:include>)\n```\n\nThe end is here.")
    hit = Hit("a", 1.0, text, "a.md", "target_include_directories")
    cands = candidates([hit])
    likelihood = [3.0 if c.text == "For example:" else 0.0 for c in cands]
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, budget, ("likelihood",))
    first = ev.spans[0]
    # "For example:" (2 words), the fence line (1), the code lines (2, 1, 1) and the "[n]": the
    # first line always (a first quote), the others where they fit
    assert first.start == 0 and first.text.endswith(last_line.strip())
    assert len(ev.spans) == 1  # the budget is spent


def test_block_after_stops_at_the_blocks_end():
    from unirag.answer.whole_thoughts import block_after

    text = "Run:\n\n```sh\nmake\nmake install\n```\n\nThen:\n\n```sh\nmake test\n```"
    units = split_units(text)
    assert [text[u.start:u.end] for u in block_after(text, units, 1)] == ["make install"]
    assert block_after(text, units, 2) == () and block_after(text, units, 0) == ()


@pytest.mark.parametrize("line, code, expected", [
    ("fn main() {", True, True),                       # a brace opens the block its lines go on
    ("let v = vec![", True, True),                     # a bracket left open at the line's end
    ("parser.add_argument('--verbose',", True, True),  # a call that its next lines go on
    ("let x = loop { break 5; };", True, False),       # opens and closes on one line
    ("println!(\"{\");", True, False),                 # a brace inside a string literal
    ("}", True, False),
    ("Call it like this (see below) {", False, False),  # prose is no code line
])
def test_opens_block_finds_a_statements_head(line, code, expected):
    from unirag.answer.sentences import Unit
    from unirag.answer.whole_thoughts import opens_block

    assert opens_block(line, Unit(0, len(line), code)) is expected


def test_a_blocks_head_is_quoted_with_its_lines_or_not_at_all():
    from unirag.answer.evidence import candidates

    text = 'Print a greeting.\n\n```rust\nfn main() {\n    println!("Hello, world!");\n}\n```'
    hit = Hit("a", 1.0, text, "main.md", "Hello")
    cands = candidates([hit])
    likelihood = [3.0 if c.text == "fn main() {" else 0.0 for c in cands]
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 20, ("likelihood",))
    assert quote(ev.spans[0]) == "“fn main() { println!(\"Hello, world!\"); }” [1]"
    # after a first quote, where its next line does not fit, the head is not quoted alone: the
    # next unit offered takes its place
    likelihood = [3.0 if c.text.startswith("Print") else 2.0 if c.text == "fn main() {" else 0.0 for c in cands]
    ev = choose([hit], cands, {"likelihood": likelihood}, 0.0, 8, ("likelihood",))
    assert [s.text for s in ev.spans] == ["Print a greeting.", 'println!("Hello, world!");']
