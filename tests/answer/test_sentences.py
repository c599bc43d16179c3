"""Units (unirag.answer.sentences): sentences, code lines and table rows as offsets into a chunk."""

from __future__ import annotations

import pytest
from evidence_hits import CHUNK

from unirag.answer.sentences import split_units, word_count


def texts(text):
    return [(text[u.start:u.end], u.code) for u in split_units(text)]


@pytest.mark.parametrize("text, expected", [
    ("One. Two words here.", [("One.", False), ("Two words here.", False)]),
    ("Use e.g. this one. Next.", [("Use e.g. this one.", False), ("Next.", False)]),
    ("It runs slower (eg. 20 times), ie. less. Next.", [("It runs slower (eg. 20 times), ie. less.", False),
                                                        ("Next.", False)]),
    # a paper's abbreviations end no sentence
    ("As Cameron et al. (2008) show in Fig. 2, it fails. Next.",
     [("As Cameron et al. (2008) show in Fig. 2, it fails.", False), ("Next.", False)]),
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
