"""Include directives (RST's and mdBook's): the named file's text read in place, an RST fragment not as a page."""

import os

import pytest

from unirag.readers.registry import SourceFile, content_hash, parse, read_bytes, walk

PAGE = "Tool\n====\n\nOptions\n-------\n\n"


def write(root, files):
    """The files ({relative name: text}) written under `root`."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)

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
    write(root, {**files, "tool.rst": PAGE + page})
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


LISTING = "fn main() {\n    // ANCHOR: here\n    let x = 5;\n    // ANCHOR_END: here\n    println!(\"{x}\");\n}\n"

MDBOOK_CASES = [
    ("a whole file in a code fence, its anchor lines left out",
     "```rust\n{{#include ../listings/main.rs}}\n```\n",
     "```rust\nfn main() {\n    let x = 5;\n    println!(\"{x}\");\n}\n```\n"),
    ("one line", "```rust\n{{#include ../listings/main.rs:3}}\n```\n", "```rust\n    let x = 5;\n```\n"),
    ("a range of lines", "```rust\n{{#include ../listings/main.rs:5:6}}\n```\n", "```rust\n    println!(\"{x}\");\n}\n```\n"),
    ("up to a line", "```rust\n{{#include ../listings/main.rs::1}}\n```\n", "```rust\nfn main() {\n```\n"),
    ("from a line", "```rust\n{{#include ../listings/main.rs:6:}}\n```\n", "```rust\n}\n```\n"),
    ("rustdoc_include shows the anchor's lines",
     "```rust\n{{#rustdoc_include ../listings/main.rs:here}}\n```\n", "```rust\n    let x = 5;\n```\n"),
    ("a missing file, an unknown anchor and a file outside the folder: the directive stays as written",
     "```rust,ignore\n{{#include ../listings/missing.rs}}\n```\n\n```rust\n{{#include ../listings/main.rs:nowhere}}\n```\n\n"
     "```text\n{{#include ../../outside.txt}}\n```\n",
     "```rust,ignore\n{{#include ../listings/missing.rs}}\n```\n\n```rust\n{{#include ../listings/main.rs:nowhere}}\n```\n\n"
     "```text\n{{#include ../../outside.txt}}\n```\n"),
    ("a listing and the directive's extra words: playground shows the file as Rust",
     "{{#playground ../listings/main.rs editable}}\n",
     "```rust\nfn main() {\n    let x = 5;\n    println!(\"{x}\");\n}\n```\n"),
    ("an escaped directive stays as written", "Write `\\{{#include file.rs}}`.\n", "Write `\\{{#include file.rs}}`.\n"),
    ("an included Markdown file is read as Markdown, its own includes too",
     "{{#include shared/note.md}}\n", "A shared note.\n\n```rust\n    let x = 5;\n```\n"),
]


@pytest.mark.parametrize("page, expected", [c[1:] for c in MDBOOK_CASES], ids=[c[0] for c in MDBOOK_CASES])
def test_mdbook_include_directives_are_read_in_place(tmp_path, page, expected):
    (tmp_path / "outside.txt").write_text("Outside.\n")
    book = tmp_path / "book"
    files = {"listings/main.rs": LISTING, "src/ch01.md": "# Hello\n\n" + page,
             "src/shared/note.md": "A shared note.\n\n```rust\n{{#include ../../listings/main.rs:here}}\n```\n"}
    write(book, files)
    kept, _, _ = walk(book)
    page_file = next(f for f in kept if f.source == "src/ch01.md")
    assert parse(page_file, read_bytes(page_file)).text == "# Hello\n\n" + expected


def test_a_book_page_changes_when_its_listing_does(tmp_path):
    (tmp_path / "main.rs").write_text("fn old() {}\n")
    page = tmp_path / "ch01.md"
    page.write_text("# Code\n\n```rust\n{{#include main.rs}}\n```\n")
    file = SourceFile(page, "ch01.md", "markdown")
    before = content_hash(read_bytes(file))
    (tmp_path / "main.rs").write_text("fn new() {}\n")
    assert content_hash(read_bytes(file)) != before
    assert "fn new() {}" in parse(file, read_bytes(file)).text


APP = "import sys\n\n# tag::main[]\ndef main():\n    print(\"hi\")\n# end::main[]\n\nmain()\n"

ASCIIDOC_CASES = [
    ("a partial read in place, its sections one level deeper",
     "include::partials/setup.adoc[leveloffset=+1]\n",
     "### Setup\n\nInstall it first.\n\n#### From source\n\nBuild it.\n"),
    ("a tagged region of a source file as the listing",
     "[source,python]\n----\ninclude::code/app.py[tag=main]\n----\n",
     "```python\ndef main():\n    print(\"hi\")\n```\n"),
    ("line ranges, the last to the file's end; tag markers left out",
     "----\ninclude::code/app.py[lines=\"1..1;7..-1\"]\n----\n", "```\nimport sys\n\nmain()\n```\n"),
    ("a missing file, an unknown tag and a file outside the folder are dropped, as before",
     "include::missing.adoc[]\n\ninclude::code/app.py[tag=nowhere]\n\ninclude::../../outside.txt[]\n\nEnd.\n", "End.\n"),
]


@pytest.mark.parametrize("page, expected", [c[1:] for c in ASCIIDOC_CASES], ids=[c[0] for c in ASCIIDOC_CASES])
def test_asciidoc_include_directives_are_read_in_place(tmp_path, page, expected):
    (tmp_path / "outside.txt").write_text("Outside.\n")
    docs = tmp_path / "docs"
    files = {"partials/setup.adoc": "== Setup\n\nInstall it first.\n\n=== From source\n\nBuild it.\n",
             "code/app.py": APP, "guide.adoc": "= Guide\n\n== Start\n\n" + page}
    write(docs, files)
    guide = SourceFile(docs / "guide.adoc", "guide.adoc", "asciidoc")
    assert parse(guide, read_bytes(guide)).text == "# Guide\n\n## Start\n\n" + expected.rstrip("\n")


def test_an_asciidoc_partial_is_read_in_its_page_and_a_titled_document_stays_a_page(tmp_path):
    (tmp_path / "partials").mkdir()
    (tmp_path / "partials" / "options.adoc").write_text("--verbose::\n  Say more.\n")  # no title: a partial
    (tmp_path / "intro.adoc").write_text("= Introduction\n\nWhat it is.\n")  # titled: a page of its own
    (tmp_path / "guide.adoc").write_text("= Guide\n\ninclude::partials/options.adoc[]\n\ninclude::intro.adoc[]\n")
    files, skipped, _ = walk(tmp_path)
    assert [f.source for f in files] == ["guide.adoc", "intro.adoc"]
    assert [(s.source, s.reason) for s in skipped] == [
        ("partials/options.adoc", "included by guide.adoc, read as part of it")]
