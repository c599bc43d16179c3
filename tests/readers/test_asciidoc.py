"""AsciiDoc pages read as the Markdown they render, with their sections (asciidoc.py)."""

from pathlib import Path

import pytest

from unirag.readers.asciidoc import asciidoc_to_markdown
from unirag.readers.markdown import split_sections
from unirag.readers.registry import SourceFile, parse, walk


@pytest.mark.parametrize("asciidoc, markdown", [
    # section titles, one "#" per "=", a closing run of "=" allowed
    ("== Install\n\nRun it.\n\n=== On Linux ===\n\nUse apt.", "## Install\n\nRun it.\n\n### On Linux\n\nUse apt."),
    # the two-line form: a title over a line as long as it, give or take two
    ("Options\n-------\n\nText.\n\nMore\n~~~~~\nHere.", "## Options\n\nText.\n\n### More\n\nHere."),
    # the header: author and revision lines and attribute entries go; references read their values
    ("= Guide\nJane Doe <jane@example.org>\nv2.1, 2024-01-01\n:version: 2.1\n:toc: left\n\nFor {version}, not {other}.",
     "# Guide\n\nFor 2.1, not {other}."),
    # listings and literals become fenced code, in the language the source line names; callouts go
    ("[source,python]\n----\nprint(1)  # <1>\n----\n<1> prints one", "```python\nprint(1)\n```\n\n1. prints one"),
    ("....\n$ tool --help\n....", "```\n$ tool --help\n```"),
    ("[source,sh]\necho hi\necho there\n\nText.", "```sh\necho hi\necho there\n```\n\nText."),
    ("[,js]\n--\nlet a = 1\n--", "```js\nlet a = 1\n```"),
    ("Run:\n\n  tool --all\n  tool --none\n\nDone.", "Run:\n\n```\ntool --all\ntool --none\n```\n\nDone."),
    ("----\nsays ```hi```\n----", "~~~\nsays ```hi```\n~~~"),
    # comments, passthroughs, anchors and preprocessor lines are no text of the page
    ("Before.\n\n////\nhidden\n////\n// a note to editors\n[[anchor]]\ninclude::part.adoc[]\n\n++++\n<b>raw</b>\n++++\n\nAfter.",
     "Before.\n\nAfter."),
    # other blocks keep their text; admonitions and block titles read as labels
    (".An example\n====\nExample text.\n====", "An example:\n\nExample text."),
    ("[WARNING]\n====\nBack up first.\n====\n\nNOTE: You need root.", "Warning:\n\nBack up first.\n\nNote: You need root."),
    ("____\nA quote.\n____", "A quote."),
    # a labelled list item: its term as a paragraph of its own, then its text
    ("--verbose::\n\tPrint more.\n\tEven more.\n-q, --quiet:: Print less.",
     "--verbose\n\nPrint more. Even more.\n\n-q, --quiet\n\nPrint less."),
    # lists, nested and numbered
    ("* first\n** nested\n. step\n.. substep", "- first\n  - nested\n1. step\n  1. substep"),
    # a table: a row has as many cells as its first line
    ("|===\n|Name |Value\n\n|a |1\n|b\n|2 and\nmore\n|===", "Name | Value\na | 1\nb | 2 and more"),
    # inline: links and cross references read as their text, macros as what they hold
    ("See https://example.org[the site], <<install,Installing>>, <<setup>>, xref:a.adoc[A] and link:b.html[].",
     "See the site, Installing, setup, A and b.html."),
    ("Press kbd:[Ctrl+C] for `+{x}+`, pass:[<u>this</u>] footnote:[A note.] too.",
     "Press Ctrl+C for `{x}`, <u>this</u> too."),
])
def test_asciidoc_becomes_the_markdown_it_renders(asciidoc, markdown):
    assert asciidoc_to_markdown(asciidoc) == markdown


def test_an_asciidoc_file_is_found_and_read_with_its_title_and_sections(tmp_path):
    page = "= Backups\n:icons: font\n\nKeep copies.\n\n== Restoring\n\n[source,sh]\n----\nrestore --all\n----\n"
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "backups.adoc").write_text(page)
    files, skipped, ignored = walk(tmp_path)
    assert [(f.source, f.kind) for f in files] == [("guide/backups.adoc", "asciidoc")] and not skipped and not ignored
    doc = parse(files[0], page.encode())
    assert doc.title == "Backups" and doc.markdown
    assert doc.text == "# Backups\n\nKeep copies.\n\n## Restoring\n\n```sh\nrestore --all\n```"
    assert [" > ".join(t for _, t in path) for path, _ in split_sections(doc.text)] == \
        ["Backups", "Backups > Restoring"]
    assert parse(SourceFile(Path("x.asciidoc"), "x.asciidoc", "asciidoc"), b"// only a comment\n").reason.startswith("no text")
