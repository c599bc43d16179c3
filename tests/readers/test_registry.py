"""The readers' register: every format one registered `Reader`, dispatched on by kind and sniffing;
walking a folder and reading its files' bytes, with the reasons bad inputs are skipped."""

from pathlib import Path

import pytest

from unirag.readers.base import READERS, Document, Reader, SourceFile, register
from unirag.readers.markdown import text_reader
from unirag.readers.registry import KINDS, READER_FORMATS, Skipped, parse, read_bytes, reader_format, walk


def test_kinds_and_formats_come_from_the_registered_readers():
    assert KINDS == {suffix: r.name for r in READERS.values() for suffix in r.suffixes}
    assert {".md", ".rst", ".txt", ".html", ".pdf", ".ipynb", ".mdx", ".adoc"} <= set(KINDS)
    # the numbers are part of every chunk id: a reader keeps its number unless its reading changed
    assert {k: READER_FORMATS[k] for k in ("markdown", "myst", "rst", "text")} == {
        "markdown": 4, "myst": 7, "rst": 6, "text": 2}
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


def test_bad_inputs_are_skipped_with_reasons(tmp_path, monkeypatch):
    root = tmp_path / "d"
    root.mkdir()
    (root / "ok.md").write_text("# Hi\n\ntext")
    (root / "empty.md").write_text("")
    (root / "blank.txt").write_text("  \n\n")
    (root / "binary.txt").write_bytes(b"abc\x00\x01def")
    (root / "latin1.txt").write_bytes("café".encode("latin-1"))
    (root / "utf16.txt").write_bytes("hello wörld".encode("utf-16"))  # with BOM: read
    (root / "bom8.md").write_bytes(b"\xef\xbb\xbf# Bom\n\nx")
    (root / "big.txt").write_text("x" * 5000)
    (root / "broken.pdf").write_bytes(b"%PDF-1.4 garbage")
    (root / "loop").symlink_to(root, target_is_directory=True)
    (root / "outside").symlink_to(tmp_path, target_is_directory=True)
    (root / ".hidden.md").write_text("secret")
    files, skipped, ignored = walk(root)
    reasons = {s.source: s.reason for s in skipped}
    assert reasons == {"loop": "symlinked folder (not followed)", "outside": "symlinked folder (not followed)"}
    for f in files:
        data = read_bytes(f, max_bytes=4096)
        result = data if isinstance(data, Skipped) else parse(f, data)
        reasons[f.source] = result.reason if isinstance(result, Skipped) else result.text
    assert ".hidden.md" not in reasons and reasons["ok.md"] == "# Hi\n\ntext"
    assert reasons["empty.md"] == "empty file" and reasons["blank.txt"].startswith("no text")
    assert reasons["binary.txt"].startswith("binary") and reasons["latin1.txt"].startswith("not UTF-8")
    assert reasons["utf16.txt"] == "hello wörld" and reasons["bom8.md"] == "# Bom\n\nx"
    assert reasons["big.txt"].startswith("too large")
    try:
        import pypdf  # noqa: F401
        assert reasons["broken.pdf"].startswith("PDF failed to parse")
    except ImportError:
        assert reasons["broken.pdf"].startswith("pypdf not installed")
    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "read_bytes", denied)  # chmod 000 does not stop root
    assert read_bytes(files[0]).reason == "unreadable: Permission denied"
