"""The readers' register: every format one registered `Reader`, dispatched on by kind and sniffing."""

import pytest

from unirag.readers.base import READERS, Document, Reader, SourceFile, register
from unirag.readers.markdown import text_reader
from unirag.readers.registry import KINDS, READER_FORMATS, parse, reader_format


def test_kinds_and_formats_come_from_the_registered_readers():
    assert KINDS == {suffix: r.name for r in READERS.values() for suffix in r.suffixes}
    assert {".md", ".rst", ".txt", ".html", ".pdf", ".ipynb", ".mdx", ".adoc"} <= set(KINDS)
    # the numbers are part of every chunk id: a reader keeps its number unless its reading changed
    assert {k: READER_FORMATS[k] for k in ("markdown", "myst", "rst", "text")} == {
        "markdown": 3, "myst": 6, "rst": 6, "text": 1}
    assert "asciidoc" not in READER_FORMATS  # format 0: its ids are those of the first reading


@pytest.mark.parametrize("reader, message", [
    (Reader("markdown", (".zzz",), 1, lambda f, d: None), "registered already"),
    (Reader("zzz", (".md",), 1, lambda f, d: None), "another reader"),
])
def test_a_clashing_reader_is_refused(reader, message):
    with pytest.raises(ValueError, match=message):
        register(reader)


def test_a_new_format_is_one_registered_reader_and_a_variant_sniffs_its_files(tmp_path):
    upper = Reader("shout", (".shout",), 2, text_reader(lambda text, file: (text.upper(), "")))
    quiet = Reader("whisper", (), 7, text_reader(lambda text, file: (text.lower(), "Quiet")),
                   sniff=lambda text: text.startswith("psst"), claims=("shout",))
    register(upper), register(quiet)
    try:
        loud = SourceFile(tmp_path / "a.shout", "a.shout", "shout")
        assert parse(loud, b"# hello\n\nworld") == Document("a.shout", "# HELLO\n\nWORLD", "HELLO", True)
        assert reader_format(loud, b"hello") == 2
        assert parse(loud, b"psst HI") == Document("a.shout", "psst hi", "Quiet", True)
        assert reader_format(loud, b"psst HI") == 7
        assert parse(loud, b"  \n").reason == "no text (only whitespace or markup)"
    finally:
        del READERS["shout"], READERS["whisper"]
