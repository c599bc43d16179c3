"""The names a question gives that the documents never mention.

Why: a question can name a thing the documents do not cover ("How do I train a neural network with
PyTorch?" asked of the Python documentation). Its retrieved passages still explain some of its
words and hold units it makes likelier, so the evidence tests of the ask flow let it through
(docs/RESULTS.md, "Where to abstain"), and the answer quotes whatever came closest. When the
question names things (a proper noun, a word shaped like code) and the collection's own words
hold none of them, the documents cannot answer it, and saying which names they never mention is
both honest and checkable.

A name is a word of the question that is capitalised past its sentence's first word ("Django"),
shaped like code or an acronym ("DataFrame", "SIMD", "utf8", "store_true"), or inside backticks;
words of three letters or more only, each starting where a token does ("0x1F" is a number). A name
right after "like", "such as", "e.g.", "named" or "called", after the kind of thing it is ("with
prefix DEPLOY", "the variable MY_FLAG": `_KINDS`), or inside quotes, is the user's own example ("a
namespaced name like MyProj::core", "'Europe/Berlin'"): the documents need not hold it. Whether
the documents mention a name is read from the collection's BM25 vocabulary
(`lexical.LexicalIndex.mentions`: stemmed, so "Makefiles" finds "Makefile"); a name written as one
word counts as mentioned where each of its parts is ("NodeJS" in documents that write "Node.js"),
and a name with a version after it where the name without it is ("GPLv3", "Python3": documents
write "version 3 of the GPL"); an acronym counts where the documents spell it out
(`lexical.LexicalIndex.mentions`: "LGPL" in a licence that only says "Lesser General Public License").
One mentioned name is enough to keep answering: "load my Rust library from Python" is answered by
a Rust manual that never says "Python".
"""

from __future__ import annotations

import re

_SENTENCE = re.compile(r"(?<=[.?!])\s+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|“[^”]*”|‘[^’]*’")
_BACKTICKED = re.compile(r"`([^`]+)`")
# a word starts where a token does: "0x1F" and "2e5" are numbers, not the names "x1F" and "e5"
_WORD = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z][A-Za-z0-9_]*")
_CODE_SHAPED = re.compile(r"[a-z][A-Z]|[A-Z]{2}|\d|[A-Za-z0-9]_[A-Za-z0-9]")
# what introduces the user's own example: "like", "such as", "named", or the kind of thing it is
# ("with prefix DEPLOY", "a variable MY_FLAG", "the subcommand push-image")
# (not "key": "the key Django setting" is an adjective's)
_KINDS = ("prefix", "variable", "value", "option", "flag", "argument", "parameter", "file", "folder",
          "directory", "command", "subcommand", "field", "column", "table", "branch", "tag")
_EXAMPLE_CUE = re.compile(r"(?:\blike|\bsuch as|\be\.g\.|\bnamed|\bcalled|\b(?:%s)s?)[\s,:(]*$"
                          % "|".join(_KINDS), re.IGNORECASE)
MIN_LETTERS = 3


def names(question: str) -> list[str]:
    """The names `question` gives, in order (see the module's docstring)."""
    found = []
    for sentence in _SENTENCE.split(question.strip()):
        coded = {m.group(0) for span in _BACKTICKED.finditer(sentence) for m in _WORD.finditer(span.group(1))}
        text = _QUOTED.sub(lambda m: " " * len(m.group(0)), sentence)
        for k, m in enumerate(_WORD.finditer(text)):
            word = m.group(0)
            if len(word) < MIN_LETTERS or _EXAMPLE_CUE.search(text[:m.start()]):
                continue
            if word in coded or (word[0].isupper() and k > 0) or _CODE_SHAPED.search(word):
                found.append(word)
    return found


def never_mentioned(question: str, mentions) -> tuple[str, ...]:
    """The question's names when the documents mention none of them, else (): also () for a
    question that gives no names. `mentions(word) -> bool` says whether the documents hold a word
    (`lexical.LexicalIndex.mentions`)."""
    given = list(dict.fromkeys(names(question)))
    if not given or any(mentions(name) or _parts_mentioned(name, mentions) or _unversioned_mentioned(name, mentions)
                        for name in given):
        return ()
    return tuple(given)


_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")  # "NodeJS" -> Node, JS; "utf8" -> utf, 8


def _parts_mentioned(name: str, mentions) -> bool:
    """Whether a name written as one word is mentioned in parts: "NodeJS" by documents that write
    "Node.js", "VSCode" by "VS Code". Every part of two letters or more must be mentioned."""
    parts = [part for part in _PART.findall(name) if len(part) >= 2 and not part.isdigit()]
    return len(parts) > 1 and all(mentions(part) for part in parts)


# a name and the version it is at: "GPLv3", "Python3", "OAuth2", "ES2015"
_VERSIONED = re.compile(r"([A-Za-z]{3,}?)[-_]?v?\d+")


def _unversioned_mentioned(name: str, mentions) -> bool:
    """Whether a name with its version after it is mentioned without it: "GPLv3" by a licence
    that says "GPL" and "Version 3" apart, "Python3" by documents about Python."""
    versioned = _VERSIONED.fullmatch(name)
    return bool(versioned) and mentions(versioned.group(1))
