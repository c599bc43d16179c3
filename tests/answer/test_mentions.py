"""Names a question gives that the documents never mention: the ask flow says so instead of quoting."""

from __future__ import annotations

from pathlib import Path

import pytest

from unirag.retrieval import lexical

from unirag.retrieval import store
from unirag.answer.ask import NO_ANSWER, AskSettings, answer_hits, ask, never_mentioned
from unirag.retrieval.chunking import ChunkSettings
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.answer.mentions import names
from unirag.answer.mentions import never_mentioned as names_never_mentioned


@pytest.mark.parametrize("question, expected", [
    ("How do I train a neural network with PyTorch?", ["PyTorch"]),          # code-shaped
    ("Which Django setting turns on debug mode?", ["Django"]),              # capitalised inside
    ("Django settings: which one turns on debug mode?", []),                # a sentence's first word
    ("How do I use SIMD intrinsics? Is AVX faster?", ["SIMD", "AVX"]),      # acronyms, in each sentence
    ("What is a utf8 string?", ["utf8"]),                                   # a digit in a word
    ("What does store_true do?", ["store_true"]),                           # snake_case
    ("When is `if let` more convenient than `match`?", ["let", "match"]),   # backticks; "if" is too short
    ("Can I name it like MyProj::core in the build?", []),                  # the user's own example
    ("Is there a variable called CMAKE_FOO for it?", []),
    ("With prefix DEPLOY, what is the variable for it?", []),               # after the kind it is
    ("Does the subcommand PushImage see the variable MY_FLAG?", []),
    ("How do I parse numbers like 0x1F or 2e5?", []),                       # numbers, not names
    ("Does 0x1F parse in Python?", ["Python"]),
    ("Which is the key Django setting for it?", ["Django"]),                # "key" is no kind here
    ("Looking up 'Europe/Berlin' fails on Windows.", ["Windows"]),          # quoted: an example value
    ("How do I read a file?", []),
    ("Can I run it on a PC?", []),                                          # two letters: too short to tell
])
def test_names_of_a_question(question, expected):
    assert names(question) == expected


@pytest.mark.parametrize("question, known, expected", [
    ("How do I train a model with PyTorch?", {"python"}, ("PyTorch",)),
    ("How do I load my Rust library from Python?", {"rust"}, ()),      # one name mentioned is enough
    ("How do I use SIMD with AVX and SIMD?", set(), ("SIMD", "AVX")),  # each name once
    ("How do I read a file?", set(), ()),                              # no names: nothing to tell
    ("How do I read a file in NodeJS?", {"node", "js"}, ()),          # mentioned in parts ("Node.js")
    ("How do I train a model with PyTorch?", {"py"}, ("PyTorch",)),    # one part is not enough
    ("Does GPLv3 allow it?", {"gpl"}, ()),                             # a version after the name
    ("Is Python3 faster?", {"python"}, ()),
    ("Does GPLv3 allow it?", {"v3"}, ("GPLv3",)),                      # the version alone is no name
])
def test_never_mentioned_only_when_the_documents_hold_none_of_the_names(question, known, expected):
    assert names_never_mentioned(question, lambda word: word.lower() in known) == expected


def test_the_bm25_vocabulary_says_what_the_documents_mention():
    index = lexical.LexicalIndex.build(["a"], ["Makefiles and PyTorch models."])
    assert index.mentions("Makefile") and index.mentions("pytorch")  # stemmed, any case
    assert not index.mentions("Django")
    assert index.mentions("the")  # a stopword is not indexed: no telling
    assert not lexical.LexicalIndex.build([], []).mentions("Django")


def test_an_acronym_is_mentioned_where_the_documents_spell_it_out():
    index = lexical.LexicalIndex.build(["a", "b"], ["the GNU Lesser General Public License, version 3",
                                                    "TERMS AND CONDITIONS OF USE"])
    assert index.mentions("LGPL") and index.mentions("GLGPL") and index.mentions("TACOU")
    assert not index.mentions("GPL")  # three letters: capitalised words spell those by chance
    assert not index.mentions("MPL")
    assert not index.mentions("Lgpl")  # written as a word, not an acronym: BM25's vocabulary only
    assert lexical.spelled_out_acronyms(["Portable Document\nFormat Files"]) == frozenset()  # one line


def test_ask_abstains_naming_what_the_documents_never_mention(tiny, tmp_path: Path, monkeypatch):
    from unirag.answer import ask as ask_module

    for threshold in ("ABSTAIN_BELOW", "ABSTAIN_ANSWER_BELOW", "ABSTAIN_SIMILARITY_BELOW"):
        monkeypatch.setattr(ask_module, threshold, float("-inf"))  # the tiny model's scores are noise
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "loops.md").write_text("# Loops\n\nLoops in Rust can return values with break.\n")
    run_ingest(tiny, collection, docs, settings=ChunkSettings(chunk_size=32, overlap=8), progress=False)
    quiet = AskSettings()  # only the names can make it abstain

    answer = ask(tiny, collection, "How do Django and PyTorch loops return values?", quiet)
    text = answer.read()
    assert answer.abstained and text.startswith(f"{NO_ANSWER} They never mention “Django” or “PyTorch”.")
    assert text.endswith("[1]")  # the closest quote is still shown

    assert not ask(tiny, collection, "How do Rust loops return values?", quiet).abstained  # "Rust" is mentioned
    off = AskSettings(abstain=False)
    assert never_mentioned(collection, "Does PyTorch loop?", off) == ()
    assert not ask(tiny, collection, "How do PyTorch loops return values?", off).abstained
    # names handed in (as eval does, once for every variant) are abstained on only where the setting says
    hits = answer.hits
    assert answer_hits(tiny, "Do PyTorch loops return?", hits, quiet, unmentioned=("PyTorch",)).abstained
    assert not answer_hits(tiny, "Do PyTorch loops return?", hits, off, unmentioned=("PyTorch",)).abstained
