"""The ask flow (unirag.answer.ask): answer modes, abstention, settings, focused hits, and quotes as
the answer shows them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from evidence_hits import CHUNK, hits, ranked

from unirag.errors import UniragError
from unirag.answer.ask import NO_ANSWER, AskSettings, answer_hits, focused_hits, quote, quotes
from unirag.answer.evidence import Evidence, Span, passage_order, reading_order, select
from unirag.retrieval.search import Hit
from unirag.answer.sentences import split_units
from unirag.answer.whole_thoughts import Name


def test_a_quote_of_a_long_sentences_piece_shows_where_it_goes_on():
    long = "Sockets " + " ".join(["send"] * 50) + " bytes."
    ev = ranked([Hit("a", 1.0, long, "a.md")], ["Sockets"], 30)
    first = ev.spans[0]
    assert first.cut_after and not first.cut_before
    assert quote(first).startswith("“Sockets send") and quote(first).endswith("send…” [1]")
    from unirag.answer.evidence import Span

    assert quote(Span(0, 0, 5, "bytes.", cut_before=True)) == "“…bytes.” [1]"


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


def test_a_name_is_not_repeated_before_the_next_quote_of_its_passage():
    name = "`os.homedir()`"
    first = Span(0, 0, 5, "Returns the home.", name=Name(name))
    second = Span(0, 9, 14, "It reads HOME.", name=Name(name))
    other = Span(1, 0, 5, "Hosts have names.", name=Name("`os.hostname()`"))
    assert quotes([first, second]) == ["“`os.homedir()` — …Returns the home.” [1]", "“It reads HOME.” [1]"]
    # with another passage's quote between, the name is said again
    assert quotes([first, other, second])[2] == "“`os.homedir()` — …It reads HOME.” [1]"
    assert quotes([first, replace(second, hit=2)])[1] == "“`os.homedir()` — …It reads HOME.” [3]"


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
