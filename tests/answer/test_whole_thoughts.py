"""Whole thoughts (unirag.answer.whole_thoughts): which units say something, and the unit a quote
needs before it (a term, a statement's head, the sentence pointed back to, the block announced)."""

from __future__ import annotations

import pytest

from unirag.answer.sentences import split_units
from unirag.retrieval.search import Hit


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
