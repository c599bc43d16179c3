"""Markdown syntax shared by the readers (unirag.readers.markdown): titles, front matter, comments,
footnote marks, and an mdBook's SUMMARY.md skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from reader_skips import check_skip

from unirag.readers.markdown import markdown_title, split_sections
from unirag.readers.registry import SourceFile, parse
from unirag.retrieval.chunking import ChunkSettings, chunk_text, embed_text


def test_markdown_title_is_the_first_top_level_heading():
    assert markdown_title("intro\n\n# Book\n\n## Ch 1\n\ntext") == "Book"
    # mdBook pages (the Rust book) start at `##`: the first `##` is the title, not the file name
    page = "## Control Flow\n\nText.\n\n### Loops\n\nMore.\n\n## Summary\n\nEnd."
    assert markdown_title(page) == "Control Flow"
    assert markdown_title("### Deep\n\ntext\n\n# Top\n\ntext") == "Top"
    assert markdown_title("```\n# not a heading\n```\nplain") == ""
    assert markdown_title("no headings") == ""
    loops = next(c for c in chunk_text(page, None, ChunkSettings(32, 8)) if c.heading.endswith("Loops"))
    headed = ChunkSettings(32, 8, embed_headings=True)
    assert embed_text(loops, markdown_title(page), headed) == "Control Flow > Loops\n\n### Loops\n\nMore."
    plain = ChunkSettings(32, 8, embed_headings=False)
    assert headed.signature() != plain.signature()  # changing what is embedded re-embeds


def test_front_matter_gives_the_page_its_title_and_lede():
    from unirag.readers.markdown import front_matter, read_front_matter
    from unirag.readers.registry import SourceFile

    page = ('---\ntitle: "npm-ci"\nsection: 1\ntags:\n  - install\nnotes: >-\n  folded\naliases: [ic, ci]\n'
            'description: Clean install a project\n---\n\n### Synopsis\n\nnpm ci\n\n### Description\n\nText.')
    fields, body = front_matter(page)
    # (YAML as PyYAML reads it: a folded scalar is one line; lists are no field)
    assert fields == {"title": "npm-ci", "section": "1", "notes": "folded", "description": "Clean install a project"}
    assert body.lstrip("\n").startswith("### Synopsis")
    doc = parse(SourceFile(Path("npm-ci.md"), "commands/npm-ci.md", "markdown"), page.encode())
    assert doc.title == "npm-ci"
    assert doc.text.startswith("# npm-ci\n\nClean install a project\n\n### Synopsis")
    # the page's sections now carry its title, and the block is no chunk of its own
    assert [" > ".join(t for _, t in path) for path, _ in split_sections(doc.text)] == \
        ["npm-ci", "npm-ci > Synopsis", "npm-ci > Description"]
    # TOML front matter; a body that opens with the same title keeps one heading
    assert read_front_matter('+++\ntitle = "Guide"\n+++\n# Guide\n\nBody') == ("# Guide\n\nBody", "Guide")
    # a horizontal rule and prose, or no block at all, are text
    for text in ("---\nJust a rule, then prose.\n---\nMore.", "# T\n\ntitle: x", "---\n---\nBody"):
        assert read_front_matter(text) == (text, "")


def test_markdown_comments_are_dropped_outside_code():
    from unirag.readers.markdown import markdown_prose as strip_markdown_comments

    text = ("# T\n\n<!-- Do not remove or links may break.\n-->\nText one.\n\n```html\n<!-- kept -->\n\n\nx\n```\n\n"
            "More <!-- x --> here.")
    assert strip_markdown_comments(text) == "# T\n\nText one.\n\n```html\n<!-- kept -->\n\n\nx\n```\n\nMore  here."
    # an inline comment never closed is text in CommonMark; a comment block runs to the end
    assert strip_markdown_comments("a <!-- never closed\nb") == "a <!-- never closed\nb"
    assert strip_markdown_comments("a\n\n<!-- never closed\nb") == "a\n\n"


def test_markdown_footnote_marks_are_dropped_outside_code_and_notes_kept():
    from unirag.readers.markdown import markdown_prose

    text = ("It uses SipHash for hash tables[^siphash]<!-- ignore -->. Done [^1], then more.\n\n"
            "Match with `[^abc]`.\n\n```\nlet x = v[^1];\n```\n\n[^siphash]: See the SipHash paper.\n[^1]: The note.\n")
    assert markdown_prose(text) == ("It uses SipHash for hash tables. Done, then more.\n\nMatch with `[^abc]`.\n\n"
                                    "```\nlet x = v[^1];\n```\n\nSee the SipHash paper.\nThe note.\n")


@pytest.mark.parametrize("name, text, skipped", [
    ("SUMMARY.md", "# Summary\n\n[Introduction](intro.md)\n\n# Guide\n\n- [Install](guide/install.md)\n"
     "  - [On Linux](guide/linux.md#apt)\n- [Draft]()\n\n---\n\n1. [Appendix](appendix.md)\n", True),
    ("SUMMARY.md", "# Summary\n\nThis project is a parser. See [the guide](guide.md).\n", False),  # a page about it
    ("summary.md", "- [Install](install.md)\n", False),  # mdBook reads SUMMARY.md only
])
def test_an_mdbook_summary_is_skipped(tmp_path, name, text, skipped):
    check_skip(SourceFile(tmp_path / name, f"src/{name}", "markdown"), text.encode(), skipped, "table of contents")


def test_sections_are_cut_where_commonmark_sees_headings():
    # setext headings are headings; `#` lines in code, quotes and list items and a bare `#` are not
    text = ("Guide\n=====\n\nIntro.\n\nInstall\n-------\n\nRun it.\n\n> # quoted\n\n- # in a list\n\n#\n\n"
            "```\n# code\n```\n\n## C#\n\nSharp.")
    sections = split_sections(text)
    assert [[t for _, t in path] for path, _ in sections] == [["Guide"], ["Guide", "Install"], ["Guide", "C#"]]
    assert "".join(body for _, body in sections).replace("\n", "") == text.replace("\n", "")
    # a run of body-less headings is folded into the section they lead to: no bare-heading chunk
    chain = "## Chapter 3\n\n# Typesetting\n\n# Formulae\n\nNow you are ready.\n\n## 3.1 Spaces\n\nText."
    assert [(path[-1][1], body.split("\n")[0]) for path, body in split_sections(chain)] == \
        [("Formulae", "## Chapter 3"), ("3.1 Spaces", "## 3.1 Spaces")]
    # lines end where markdown-it ends them ("\r" too): sections stay runs of the text itself
    crlf = "# A\r\n\r\nOne.\r\n\r\n# B\rTwo."
    assert [body for _, body in split_sections(crlf)] == ["# A\r\n\r\nOne.\r\n", "# B\rTwo."]
    assert markdown_title("Setext Title\n============\n\nBody") == "Setext Title"


def test_text_readers_escape_what_would_read_as_a_heading():
    from unirag.readers.markdown import escaped

    assert escaped("# not a title") == "\\# not a title" and escaped("#") == "\\#"
    assert escaped("-----") == "\\-----" and escaped("===") == "\\==="  # a heading's underline
    assert escaped("- item") == "- item" and escaped("#hashtag") == "#hashtag"
    page = parse(SourceFile(Path("notes.txt"), "notes.txt", "text"),
                 b"Some words of a long paragraph line that is not a title at all.\n---------\nMore words.\n")
    assert split_sections(page.text)[0][0] == []
