"""RST include directives: the named file's text read in place, the fragment not as a page."""

import os

import pytest

from unirag.rag.readers import SourceFile, content_hash, parse, read_bytes, walk

PAGE = "Tool\n====\n\nOptions\n-------\n\n"

CASES = [
    ("a fragment read where the page includes it",
     {"OPTS.txt": ".. option:: -S <dir>\n\n Source folder.\n"},
     ".. include:: OPTS.txt\n\nDone.\n",
     "`-S <dir>`\n\nSource folder.\n\nDone.\n"),
    ("an indented include takes the directive's indentation",
     {"NOTE.txt": "Paths are relative.\n"},
     ".. note::\n\n   .. include:: NOTE.txt\n",
     "Note: Paths are relative.\n"),
    ("a name relative to the including file, and an include within an include",
     {"inc/A.txt": "From A.\n\n.. include:: B.txt\n", "inc/B.txt": "From B.\n"},
     ".. include:: inc/A.txt\n",
     "From A.\n\nFrom B.\n"),
    ("start-after and end-before select a part",
     {"PART.txt": "Head.\n\n.. start\n\nKept.\n\n.. end\n\nTail.\n"},
     ".. include:: PART.txt\n   :start-after: .. start\n   :end-before: .. end\n",
     "Kept.\n"),
    ("a literal include is shown as code",
     {"hello.txt": "print('hi')\n"},
     ".. include:: hello.txt\n   :literal:\n",
     "```\nprint('hi')\n```\n"),
    ("a literalinclude is shown as code in its language, the lines it names only",
     {"examples/preset.json": '{\n  "version": 6,\n  "cmakeMinimumRequired": {"major": 3}\n}\n'},
     "The file looks like this:\n\n.. literalinclude:: examples/preset.json\n   :language: json\n"
     "   :lines: 1-2,4\n   :caption: CMakePresets.json\n",
     'The file looks like this:\n\n```json\n{\n  "version": 6,\n}\n```\n'),
    ("a missing file, a standard include and a file outside the folder are left out",
     {},
     ".. include:: MISSING.txt\n\n.. include:: <isonum.txt>\n\n.. include:: ../outside.txt\n\nText.\n",
     "Text.\n"),
    ("Windows line ends in the page and the fragment",
     {"WIN.txt": "From a Windows file.\r\n"},
     ".. include:: WIN.txt\r\n\r\nText.\r\n",
     "From a Windows file.\n\nText.\n"),
    ("a file that includes itself is read once",
     {"LOOP.txt": "Loop.\n\n.. include:: LOOP.txt\n"},
     ".. include:: LOOP.txt\n",
     "Loop.\n"),
]


@pytest.mark.parametrize("files, page, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_include_directives_are_read_in_place(tmp_path, files, page, expected):
    root = tmp_path / "docs"
    (tmp_path / "outside.txt").write_text("Outside.\n")
    for name, text in {**files, "tool.rst": PAGE + page}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    kept, _, _ = walk(root)
    tool = next(f for f in kept if f.source == "tool.rst")
    assert parse(tool, read_bytes(tool)).text == "# Tool\n\n## Options\n\n" + expected


def test_a_fragment_is_a_skip_that_names_its_page_and_a_plain_text_file_stays(tmp_path):
    (tmp_path / "man").mkdir()
    (tmp_path / "man" / "tool.rst").write_text(PAGE + ".. include:: OPTS.txt\n")
    (tmp_path / "man" / "OPTS.txt").write_text("Options.\n\n.. include:: MORE.txt\n")
    (tmp_path / "man" / "MORE.txt").write_text("More options.\n")
    (tmp_path / "notes.txt").write_text("Plain notes.\n")
    files, skipped, _ = walk(tmp_path)
    assert [f.source for f in files] == ["man/tool.rst", "notes.txt"]
    assert [(s.source, s.reason) for s in skipped] == [
        ("man/MORE.txt", "included by man/tool.rst, read as part of it"),
        ("man/OPTS.txt", "included by man/tool.rst, read as part of it")]


def test_a_page_changes_when_its_fragment_does(tmp_path):
    page, fragment = tmp_path / "tool.rst", tmp_path / "OPTS.txt"
    page.write_text(PAGE + ".. include:: OPTS.txt\n")
    fragment.write_text("Old.\n")
    file = SourceFile(page, "tool.rst", "rst")
    before = content_hash(read_bytes(file))
    fragment.write_text("New.\n")
    assert content_hash(read_bytes(file)) != before
    assert "New." in parse(file, read_bytes(file)).text


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks here")
def test_a_symlinked_fragment_is_not_read(tmp_path):
    (tmp_path / "secret.txt").write_text("Secret.\n")
    root = tmp_path / "docs"
    root.mkdir()
    (root / "LINK.txt").symlink_to(tmp_path / "secret.txt")
    (root / "tool.rst").write_text(PAGE + ".. include:: LINK.txt\n\nText.\n")
    file = SourceFile(root / "tool.rst", "tool.rst", "rst")
    assert "Secret" not in parse(file, read_bytes(file)).text
