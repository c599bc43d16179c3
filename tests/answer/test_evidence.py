"""Evidence (unirag.answer.evidence): candidate units, their scores, and the choice of spans within
a word budget: whole thoughts quoted together, units offered in turns, passages ordered."""

from __future__ import annotations

import pytest
from evidence_hits import hits, ranked

from unirag.answer.ask import quote, quotes
from unirag.answer.evidence import (SCORERS, Evidence, Span, choose, fuse, offer_order, passage_order, score,
                                 select)
from unirag.retrieval.search import Hit


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


@pytest.mark.parametrize("scored", [("likelihood", "answer"), ("likelihood", "embedding")])
def test_evidence_carries_the_best_answer_score_and_similarity_where_they_were_scored(tiny, scored):
    cands, scores, null = score(tiny, "How does a loop return a value?", hits())
    scores = {name: scores[name] for name in scored}
    ev = choose(hits(), cands, scores, null, scorers=scored)
    assert (ev.answer_gain == max(scores["answer"])) if "answer" in scored else ev.answer_gain is None
    assert (ev.similarity == pytest.approx(max(scores["embedding"]))) if "embedding" in scored else ev.similarity is None


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
