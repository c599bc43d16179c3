"""Whole thoughts: what a unit of a chunk needs around it to be read alone, and which units say
nothing alone.

Why: evidence selection quotes units (sentences, code lines: `sentences.py`) cut out of their
passage, and many do not stand alone. A definition's body never names what it defines ("Return
the argument with ~ replaced ..."), nor does a sentence in a section headed by the function's
name ("## `os.homedir()`"); a section's first sentence may leave its subject to the heading,
"That means ..." points back to the sentence before it, a code line opening with a name leaves
out what the name is, a code line inside a call opened lines before ("stdio: 'pipe',") is a
statement's tail, a unit ending in ":" promises what comes next, and a signpost ("Next,
we'll ...") only says what the text goes on to say. Each function here finds, from a chunk's
text and its units, the unit such a unit is quoted with (`term_of`, `defined_by`, `title_of`,
`sentence_before`, `binding_of`, `statement_of`; `block_after`: the lines an announced example
goes on with) or says which kind it is (`points_back`, `points_ahead`, `announces`;
`names_code` and `section_name` say which headings name code); `quotable`, `asks`,
`says_something`, `starts_mid_sentence` and `closes_unopened` say which units are not worth
quoting at all. `evidence.py` builds its candidates and joins its quotes with them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from unirag.answer.attribution import content_words
from unirag.readers.markdown import FENCE
from unirag.answer.sentences import HEADING, LIST_ITEM, Unit, word_count

# markup that says nothing by itself: HTML tags (a quoted attribute value may hold ">", as an mdBook
# listing's caption="... `Vec<T>` ..." does), template includes ({{#include ...}}), link reference
# definitions ([name]: url), file paths
_MARKUP = re.compile(r"<[A-Za-z/](?:\"[^\"\n]*\"|'[^'\n]*'|[^>\"'\n])*>|<[^>]*>|\{\{.*?(?:\}\}|$)|^.*?\}\}"
                     r"|^\s*\[[^\]]+\]:\s*\S+\s*$|\S*/\S*", re.MULTILINE)
_WORD_OF_LETTERS = re.compile(r"[A-Za-z]{2,}")
_LETTER = re.compile(r"[A-Za-z]")
MIN_WORDS = 2  # a unit with fewer words of letters once markup is removed is not quoted


# a version note with nothing after it, as Sphinx renders `versionadded` without text
_VERSION_ALONE = re.compile(r"\s*(?:New|Added|Changed|Deprecated|Removed) (?:in|since) version [\w.]+\.?\s*")


def quotable(text: str) -> bool:
    """Whether a unit says something in words: at least MIN_WORDS words of letters remain once
    markup (tags, includes, link definitions, paths) is taken out, and it is more than a version
    note ("New in version 20.1.", which says when, not what). A tag is markup whatever its
    attributes say: an mdBook listing's caption names the code below it ("Listing 1-1: A program
    that prints `Hello, world!`") and answers nothing."""
    return (len(_WORD_OF_LETTERS.findall(_MARKUP.sub(" ", text))) >= MIN_WORDS
            and not _VERSION_ALONE.fullmatch(text))


_ASKS = re.compile(r"\?[\"'”’)\]*_`]*\s*$")  # a question mark, then at most closing marks


def asks(text: str) -> bool:
    """Whether a prose unit is a question ("Does Valgrind handle such programs?", a FAQ's entry,
    a heading-like "What's happening?"): it restates what the user asks and answers nothing, so
    it is never quoted as evidence."""
    return bool(_ASKS.search(text))


# what may stand before a sentence's first letter: code spans, emphasis, links, quotes, brackets
_LEADING_MARKUP = re.compile(r"^[`*_\[(\"“‘']+")


def says_something(code: str) -> bool:
    """Whether a code line holds code once markup is taken out: a template include
    ("{{#rustdoc_include ../listings/...}}") names a file, it shows none of it."""
    return bool(_MARKUP.sub(" ", code).strip())


def starts_mid_sentence(text: str, unit: Unit, first: bool) -> bool:
    """Whether a chunk's first unit is the tail of a sentence its chunk's edge cut: it opens the
    chunk's text (a unit after the section's heading line starts the section) and its first
    letter, after any markup ("`max` in the corresponding arm."), is lower-case. A fragment such
    as "read for a reply." says nothing alone."""
    if not first or unit.code or text[:unit.start].strip():
        return False
    return _LEADING_MARKUP.sub("", text[unit.start:unit.end])[:1].islower()


MAX_TERM_WORDS = 12
_ENDS_LIKE_PROSE = re.compile(r"[.!?:;,]\s*$")


def _term_line(text: str, units: Sequence[Unit], k: int, alias: bool = False) -> bool:
    """Whether units[k] can be a term: a paragraph of its own (units[k + 1] after a paragraph
    break), short, not a sentence, list item or "label: value" line, its brackets
    balanced and a word of letters in it once markup is taken out (`alias`, another name above
    a term: a letter, as in "-d")."""
    term = units[k]
    words = text[term.start:term.end]
    standalone = (term.start == 0 or text[:term.start].endswith("\n\n")) and \
        text[term.end:units[k + 1].start].count("\n") >= 2
    return not (term.code or not standalone or _ENDS_LIKE_PROSE.search(words) or ": " in words
                or LIST_ITEM.match(words) or word_count(words) > MAX_TERM_WORDS
                or words.count("(") != words.count(")")
                or not (_LETTER if alias else _WORD_OF_LETTERS).search(_MARKUP.sub(" ", words)))


def term_of(text: str, units: Sequence[Unit], j: int) -> Unit | None:
    """The term whose definition units[j] opens, if any: the unit before it when that is a
    paragraph of its own, short (at most MAX_TERM_WORDS words), not a sentence, list item or
    "label: value" line, with its brackets balanced (a signature the chunk's edge cut is not a
    term) and a word of letters once markup is taken out. Reference pages put the name being
    defined there ("os.path.expanduser(path)", "list.append(x)", "Warning") and start its body
    with a sentence that never names it ("Return the argument with ~ replaced ..."):
    quoted alone, that sentence does not say what it is about. Such paragraphs right before it
    are the same term's other names ("-d" above "--delete", a second signature): the term takes
    them in while it stays within MAX_TERM_WORDS words."""
    if (j == 0 or units[j].code or not text[units[j].start:units[j].start + 1].isalnum()
            or LIST_ITEM.match(text[units[j].start:units[j].end])):  # "1. Run it." is a step, no body
        return None
    if not _term_line(text, units, j - 1):
        return None
    first = j - 1
    while (first > 0 and _term_line(text, units, first - 1, alias=True)
           and word_count(text[units[first - 1].start:units[j - 1].end]) <= MAX_TERM_WORDS):
        first -= 1
    return Unit(units[first].start, units[j - 1].end)


# a term that names code: a call signature, a dotted or snake_case name ("os.path.expanduser(path)",
# "str.join", "max_age") or a code span alone ("`BOOL`", "`--force`", as reference pages list a
# command's values and options), not a word of prose ("Note", "Footnotes")
_NAMES_CODE = re.compile(r"[(._]|^`[^`\n]+`$")


# a heading whose title names code: a code span with at most one other word ("`os.homedir()`",
# "Class: `Timeout`", "Event: `'exit'`"), not a title in words that mentions code ("Concise Control
# Flow with `if let`"). Markdown API references (Node.js, many JavaScript and Go projects) head each
# function's section so, and its sentences never name it ("Returns the string path of ...").
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_HEADING_TITLE = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)


def names_code(title: str) -> bool:
    """Whether a heading's title names code (a code span with at most one other word)."""
    return bool(_CODE_SPAN.search(title)) and len(_WORD_OF_LETTERS.findall(_CODE_SPAN.sub(" ", title))) <= 1


def _code_heading(text: str, start: int, end: int) -> Unit | None:
    """The title of the last heading line in text[start:end], if it names code."""
    titles = list(_HEADING_TITLE.finditer(text, start, end))
    if not titles or not names_code(titles[-1].group(1)):
        return None
    return Unit(titles[-1].start(1), titles[-1].end(1))


@dataclass(frozen=True)
class Name:
    """What a unit describes where the unit does not say: a definition's term or a code heading's
    title in the chunk (`where`: its place in the chunk's text), or the code name of the section
    the chunk opens in, from its heading path (`where` None: the chunk's text does not hold it)."""

    text: str
    where: Unit | None = None


def section_name(heading_path: str) -> str | None:
    """The last heading of a chunk's heading path ("Util > `util.format(format[, ...args])`"), if it
    names code."""
    last = heading_path.rsplit(" > ", 1)[-1].strip()
    return last if names_code(last) else None


def defined_by(text: str, units: Sequence[Unit], terms: Sequence[Unit | None],
               section: str | None = None) -> list[Name | None]:
    """Per unit, what names the API it describes, or None: the term of the definition whose body it
    goes on (a sentence after the body's first, in its first paragraph or a later one), or the
    title of the section it is in when that heading names code (`names_code`; `section`, the
    chunk's heading path's name (`section_name`), for the section the chunk opens in, before its
    first heading).
    `terms` is `term_of` per unit. Read in one pass: a unit that opens a definition's body opens
    the definition, if its term names code (`_NAMES_CODE`); a heading, a code line, a table row or
    another term line closes it. A section goes on past code lines and tables, to the next heading.
    A definition's first sentence is `term_of`'s. Reference pages go on about the function they
    define for paragraphs ("If the expansion fails ..., the path is returned unchanged."), and
    quoted alone such a sentence does not say what it is about either."""
    def stops(k: int) -> bool:
        unit = text[units[k].start:units[k].end]
        return units[k].code or " | " in unit or (k + 1 < len(units) and _term_line(text, units, k))

    def name(unit: Unit | None) -> Name | None:
        return None if unit is None else Name(text[unit.start:unit.end], unit)

    out: list[Name | None] = [None] * len(units)
    if not units:
        return out
    # what names the API of the units that follow, and whether a heading's section names it
    current = name(_code_heading(text, 0, units[0].start))
    if (current is None and section is not None
            and not any(HEADING.match(line) for line in text[:units[0].start].split("\n"))):
        current = Name(section)
    in_section = current is not None
    for j in range(len(units)):
        sentence = text[units[j].start:units[j].end]
        if (j or in_section) and not stops(j) and sentence[:1].isalnum() and not LIST_ITEM.match(sentence):
            out[j] = current
        if j + 1 == len(units):
            break
        gap = text[units[j].end:units[j + 1].start]
        if any(HEADING.match(line) for line in gap.split("\n")):
            current = name(_code_heading(text, units[j].end, units[j + 1].start))
            in_section = current is not None
        elif terms[j] is not None:
            current = name(terms[j]) if _NAMES_CODE.search(text[terms[j].start:terms[j].end]) else None
            in_section = False
        elif stops(j) and not in_section:
            current = None
    return out


def title_of(text: str, units: Sequence[Unit], j: int) -> Unit | None:
    """The heading of the section units[j] opens, if any: the line before it is a heading (only
    blank lines between), short (at most MAX_TERM_WORDS words), and the sentence shares no content
    word with it. Such a sentence often leaves its subject to the heading ("### X-Frame-Options"
    then "Prevents external sites from embedding your site in an `iframe`."): quoted alone, it
    does not say what it is about. A sentence that names the heading's words needs no heading."""
    if units[j].code or not text[units[j].start:units[j].start + 1].isalnum() \
            or LIST_ITEM.match(text[units[j].start:units[j].end]):
        return None
    gap_start = units[j - 1].end if j else 0
    lines = [line for line in text[gap_start:units[j].start].split("\n") if line.strip()]
    if not lines or not HEADING.match(lines[-1]):
        return None
    heading = list(_HEADING_TITLE.finditer(text, gap_start, units[j].start))[-1]
    title = heading.group(1)
    words = content_words(title)
    if (not words or word_count(title) > MAX_TERM_WORDS
            or words & content_words(text[units[j].start:units[j].end])):
        return None
    return Unit(heading.start(1), heading.end(1))


# a code line that opens with a name it calls a method of or indexes ("group.add_argument(...)",
# ">>> queue.popleft()", "v.push(5);"), and a line that binds a name ("group = ...", "let mut v = ...")
_USES_NAME = re.compile(r"^\s*(?:(?:>>>|\.\.\.)\s+)?([A-Za-z_]\w*)\s*[.\[]")
_BINDS = r"^\s*(?:(?:>>>|\.\.\.)\s+)?(?:(?:let|const|var|auto)\s+(?:mut\s+)?)?{}\s*(?::[^=\n]+)?=(?!=)"
_FENCE_IN = re.compile(FENCE.pattern, re.MULTILINE)  # a fence line anywhere in a stretch of text


def one_block(text: str, units: Sequence[Unit], k: int) -> bool:
    """Whether units[k] and units[k + 1] are lines of one code block (no prose or fence between)."""
    return units[k].code and units[k + 1].code and not _FENCE_IN.search(text, units[k].end, units[k + 1].start)


def binding_of(text: str, units: Sequence[Unit], j: int) -> Unit | None:
    """The line that binds the name a code line opens with, if that is an earlier line of the same
    code block ("group = parser.add_mutually_exclusive_group()" for
    "group.add_argument('-v', action='store_true')"): quoted alone, the line leaves out what the
    name is, which is often what the question asks for."""
    if not units[j].code:
        return None
    used = _USES_NAME.match(text[units[j].start:units[j].end])
    if used is None:
        return None
    binds = re.compile(_BINDS.format(re.escape(used.group(1))))
    for k in range(j - 1, -1, -1):
        if not one_block(text, units, k):
            return None  # the block starts after it
        if binds.match(text[units[k].start:units[k].end]):
            return units[k]
    return None


# string literals and comments, whose brackets are text, not code
# (a single quote after a letter, "&" or "<" is an apostrophe or a Rust lifetime: "&'a str")
_LITERAL_OR_COMMENT = re.compile(r"\"(?:[^\"\\\n]|\\.)*\"|(?<![\w&<])'(?:[^'\\\n]|\\.)*'(?!\w)|`[^`\n]*`"
                                 r"|(?:^|(?<=\s))(?://|#).*$", re.MULTILINE)
_OPENS, _CLOSES = "([", ")]"


def _bracket_balance(code: str) -> int:
    """Round and square brackets opened minus closed, outside string literals and comments
    (braces open blocks as often as values, so they are not counted)."""
    code = _LITERAL_OR_COMMENT.sub(" ", code)
    return sum(code.count(c) for c in _OPENS) - sum(code.count(c) for c in _CLOSES)


def _tail(text: str, unit: Unit) -> bool:
    """Whether a code line goes on a statement begun on an earlier line: it closes more brackets
    than it opens or ends with a comma. (A line ending in ";" or "{" inside a call is a
    callback's own statement.)"""
    if not unit.code:
        return False
    own = _LITERAL_OR_COMMENT.sub(" ", text[unit.start:unit.end]).rstrip()
    return _bracket_balance(own) < 0 or own.endswith(",")


def opens_block(text: str, unit: Unit) -> bool:
    """Whether a code line opens what its next lines go on: it ends with an opening brace or
    bracket, or opens more round or square brackets than it closes ("fn main() {", "let v =
    vec![", "parser.add_argument("). Quoted alone it is a statement's head, as a line that closes
    them is its tail (`_tail`), and says nothing of what the block does."""
    if not unit.code:
        return False
    own = _LITERAL_OR_COMMENT.sub(" ", text[unit.start:unit.end]).rstrip()
    return own.endswith(("{", "(", "[")) or _bracket_balance(own) > 0


def closes_unopened(text: str, units: Sequence[Unit], j: int) -> bool:
    """Whether a code line that goes on a statement (`_tail`) belongs to one whose first line the
    chunk's edge cut off: it comes at or before the line where its block (in this chunk) first
    closes a bracket that the block never opened ("d.hour, d.minute, d.second," and
    "d.weekday(), yday, dst))" after a cut "time.struct_time((d.year, d.month,"). Such a line
    says nothing alone, as a sentence's tail does not."""
    if not _tail(text, units[j]):
        return False
    first = j
    while first > 0 and one_block(text, units, first - 1):
        first -= 1
    balance = 0
    for k in range(first, len(units)):
        if k > first and not one_block(text, units, k - 1):
            return False  # the block ends with every bracket it closes opened
        balance += _bracket_balance(text[units[k].start:units[k].end])
        if balance < 0:
            return j <= k
    return False


def statement_of(text: str, units: Sequence[Unit], j: int) -> Unit | None:
    """The earlier line of the same code block whose bracket a code line sits inside, if any:
    "stdio: 'pipe'," or "d.weekday(), yday, dst))" goes on a call opened lines before and,
    quoted alone, is a statement's tail, as a sentence's tail is."""
    if not _tail(text, units[j]):
        return None
    balance = 0
    for k in range(j - 1, -1, -1):
        if not one_block(text, units, k):
            return None  # the block starts after it
        balance += _bracket_balance(text[units[k].start:units[k].end])
        if balance > 0:
            return units[k]
    return None


# openers that point back to the sentence before: "That means ...", "So, ...", "It ...", "Also ..."
_POINTS_BACK = re.compile(r"^[\s>*+-]*(?:this|that|these|those|it|its|they|them|their|such|so|thus|hence|"
                          r"therefore|otherwise|however|but|also|instead|then|likewise|similarly|"
                          r"in other words|as a result)\b", re.IGNORECASE)


def points_back(text: str) -> bool:
    """Whether a unit opens by pointing back to what came before ("That means that when multiple
    records have the same key, their original order is preserved."): quoted alone, it leaves out
    what it is about, which the sentence before says ("Sorts are guaranteed to be stable.")."""
    return bool(_POINTS_BACK.match(text))


# what a signpost says: the writer's plan ("we'll", "let's"), what is coming ("Next, we ...",
# "the following", "as follows", "Consider ..."), or what an example "shows"
_POINTS_AHEAD = re.compile(r"\b(?:we[’']ll|we will|we[’']re going to|we are going to|let[’']s|let us|"
                           r"now that you|next, we|in this (?:chapter|section)|shows? (?:how|an example)|"
                           r"shown (?:here|in|below)|as follows|the following|consider)\b", re.IGNORECASE)


def points_ahead(text: str) -> bool:
    """Whether a unit is a signpost that points ahead to what the text goes on to say ("Next,
    we'll extract the `hosting` module to its own file.", "Listing 4-2 shows an example using an
    integer."): it names the question's topic, so every judge ranks it high, and says nothing of
    it; the unit after it does."""
    return bool(_POINTS_AHEAD.search(text))


# what may stand between a sentence and the one before it that it points back to: nothing but
# spaces in one paragraph, or one paragraph break ("... of the library's interface.\n\nThis means
# it may not be possible ..."), the second perhaps a list item ("... not fully supported:\n\n* It
# did not place ..."); not a heading, a blockquote's marker or more than one blank line
_NEXT_TO = re.compile(r"[ \t]*(?:\n[ \t]*){0,2}(?:(?:[-*+]|\d{1,3}[.)])[ \t]+)?")


def sentence_before(text: str, units: Sequence[Unit], j: int) -> Unit | None:
    """The prose unit just before units[j], in its paragraph or ending the one before it
    (`_NEXT_TO`), if any and if it is whole (not a sentence tail that the chunk's edge cut, not a
    piece of a longer sentence)."""
    if j == 0 or units[j].code or units[j].cut_before:
        return None
    before = units[j - 1]
    if (before.code or before.cut_before or not _NEXT_TO.fullmatch(text, before.end, units[j].start)
            or starts_mid_sentence(text, before, j - 1 == 0)
            or not quotable(text[before.start:before.end])):
        return None
    return before


def announces(text: str) -> bool:
    """Whether a unit introduces what comes next ("... as follows:", "For example:"): quoted
    alone it promises an answer it does not hold."""
    return text.rstrip().endswith(":")


def block_after(text: str, units: Sequence[Unit], k: int) -> tuple[Unit, ...]:
    """The lines of units[k]'s code block after it (none for prose): what an announced example
    goes on with after its first line. "For example:" quoted with "target_include_directories(mylib
    PUBLIC" alone leaves out the two lines that are the example."""
    end = k
    while end + 1 < len(units) and one_block(text, units, end):
        end += 1
    return tuple(units[k + 1:end + 1])
