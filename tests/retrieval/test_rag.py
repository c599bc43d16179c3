"""RAG half on the tiny model: readers, chunking, incremental ingest, crash safety, retrieve/ask/chat,
and a real Chroma server on loopback."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from chroma_server import chroma_server

from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.readers.markdown import FENCE, block_at, code_blocks, markdown_title, outside_code, split_sections
from unirag.retrieval.chunking import CHUNK_FORMAT, ChunkSettings, chunk_text, embed_text, embed_texts
from unirag.cli.collection_commands import collections, forget
from unirag.cli.rag_commands import ask, chat, ingest, retrieve
from unirag.retrieval.ingest import PAUSE_ENV
from unirag.retrieval.ingest import ingest as run_ingest
from unirag.answer.generate import answer, build_prompt, citations, fit
from unirag.retrieval.search import retrieve as run_retrieve
from unirag.readers.html import html_to_markdown
from unirag.readers.registry import Skipped, SourceFile, parse, read_bytes, walk
from unirag.readers.rst import rst_to_markdown

REPO = Path(__file__).resolve().parents[2]
SMALL = ChunkSettings(chunk_size=32, overlap=8)
SENTENCES = ["The cat sat on the mat.", "A dog ran in the park.", "Paris is the capital of France.",
             "Rust has ownership and borrowing.", "Loops can return values with break."]

app = typer.Typer()
for command in (ingest, retrieve, ask, chat, collections, forget):
    app.command()(command)
runner = CliRunner()


def write_docs(root: Path) -> Path:
    (root / "sub").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nIntro about the cat.\n\n## Install\n\n" + " ".join(SENTENCES * 3)
                                   + "\n\n## Use\n\nParis is the capital of France.\n")
    (root / "notes.txt").write_text("Rust has ownership and borrowing. " * 4)
    (root / "sub" / "page.html").write_text(
        "<html><head><title>Page</title><style>p{}</style></head><body><h1>Embeddings</h1>"
        "<p>Embeddings map text to vectors.</p><script>alert(1)</script></body></html>")
    (root / "sub" / "intro.rst").write_text("Loops\n=====\n\nLoops can return values with break.\n")
    (root / "image.png").write_bytes(b"\x89PNG")  # other extension: ignored, not skipped
    return root


def collection_state(collection) -> dict:
    got = collection.get(include=["documents", "metadatas", "embeddings"])
    return {i: (d, m, np.asarray(e)) for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"])}


def open_db(model, path: Path, name: str = "docs"):
    return store.open_collection(store.connect(path), name, model, create=True)


def invoke(*args: str):
    result = runner.invoke(app, list(args), catch_exceptions=True)
    if result.exception and not isinstance(result.exception, (SystemExit, UniragError)):
        raise result.exception
    return result


# ---------------------------------------------------------------------- chunking and readers
def test_chunking_follows_headings_with_token_overlap(tiny):
    text = ("# Book\n\n## Ch 1\n\n" + " ".join(SENTENCES * 6) + "\n\n```sh\n# a comment, not a heading\n```\n\n"
            "### Part\n\nShort part.\n\n# Other\n\nLast words.")
    sections = split_sections(text)
    assert [[t for _, t in path] for path, _ in sections] == [["Book", "Ch 1"], ["Book", "Ch 1", "Part"], ["Other"]]
    chunks = chunk_text(text, tiny.tokenizer, SMALL)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(c.n_tokens <= 32 for c in chunks if "```" not in c.text)  # (fence lines that close and reopen a cut block come on top)
    long = [c for c in chunks if c.heading == "Book > Ch 1"]
    assert len(long) > 3 and "not a heading" in long[-1].text  # a `#` line in a code fence is no heading
    assert not long[0].text.endswith("Ch 1")  # no chunk ends on a heading line
    prose = [c for c in long if "```" not in c.text]  # (fence lines close and reopen cut code blocks)
    assert len(prose) > 3
    for a, b in zip(prose, prose[1:]):  # consecutive windows share text (the overlap)
        shared = max(k for k in range(len(b.text) + 1) if a.text.endswith(b.text[:k]))
        assert shared >= 5, (a.text, b.text)
    assert {c.heading for c in chunks} == {"Book > Ch 1", "Book > Ch 1 > Part", "Other"}
    assert "Last words." in chunks[-1].text and "Short part." not in chunks[-1].text
    headed = ChunkSettings(32, 8, embed_headings=True)
    assert embed_text(long[0], "Book", headed).startswith("Book > Ch 1\n\n")
    assert embed_text(long[0], "Book", SMALL) == embed_text(long[0], "Book", headed)  # the default
    assert embed_text(long[0], "Book", ChunkSettings(32, 8, embed_headings=False)) == long[0].text
    with pytest.raises(UniragError):
        ChunkSettings(chunk_size=32, overlap=20)


def test_a_cut_inside_a_code_block_closes_it_and_the_next_chunk_reopens_it():
    code = "\n".join(f"let x{i} = {i};" for i in range(40))
    page = f"## Listing\n\nThe code below sets forty variables.\n\n```rust\n{code}\n```\n\nAfter the code, prose.\n\n~~~~\nshort\n~~~~"
    chunks = chunk_text(page, None, ChunkSettings(32, 8))
    assert len(chunks) > 3
    fence_lines = lambda text: [line for line in text.split("\n") if FENCE.match(line)]  # noqa: E731
    for chunk in chunks:
        lines = fence_lines(chunk.text)
        assert len(lines) % 2 == 0, chunk.text  # every block the chunk opens, it closes
        assert outside_code(chunk.text, lambda prose: "").count("let x") == chunk.text.count("let x")
        assert "After the code" not in outside_code(chunk.text, lambda prose: ""), chunk.text  # prose is prose
        assert chunk.n_tokens <= 32 + 2  # the window, and an opening and a closing fence line on top
    inside = [c for c in chunks if c.text.startswith("```rust\nlet")]
    assert inside and all(c.text.endswith("```") or "After the code" in c.text for c in inside)
    # the page's own text, fence lines aside, is what the chunks hold
    assert all(line in page for c in chunks for line in c.text.split("\n") if not FENCE.match(line))
    blocks = code_blocks(page)
    assert [b.opening for b in blocks] == ["```rust", "~~~~"] and page[blocks[-1].end - 4:blocks[-1].end] == "~~~~"
    assert block_at(blocks, page.index("let x5")).opening == "```rust"
    assert block_at(blocks, page.index("After the code")) is None
    assert block_at(blocks, page.index("short")).opening == "~~~~"
    assert block_at(blocks, blocks[0].close) is blocks[0] and block_at(blocks, blocks[0].start) is None
    # plain text is cut as it is, and Markdown at the same places: only the fence lines differ
    plain = chunk_text(page, None, ChunkSettings(32, 8), markdown=False)
    assert len(plain) == len(chunks) and all(c.text in page for c in plain)
    for fenced, cut in zip(chunks, plain):
        assert cut.text in fenced.text
        assert set(fenced.text.replace(cut.text, "", 1).split("\n")) <= {"", "```rust", "```", "~~~~"}


def test_wrapped_prose_is_cut_at_a_sentence_end_not_at_a_line_break_inside_a_sentence():
    # Markdown wrapped at a fixed width: most line breaks fall inside a sentence
    sentence = "When your code performs an operation that could put a user at risk, it should check the values first."
    words, lines, line = (sentence + " ") * 12, [], ""
    for word in words.split():
        if len(line) + len(word) > 40:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    page = "## Safety\n\n" + "\n".join(lines + [line])
    chunks = chunk_text(page, None, ChunkSettings(40, 8))
    assert len(chunks) > 2
    for chunk in chunks[:-1]:
        assert chunk.text.endswith("first."), chunk.text  # never "When your code"
    # in a code block a line break is still the better cut, whatever the line holds
    lines = [line for i in range(30) for line in (f"step{i} = go. then", f"run{i} more")]
    cut = chunk_text("## Code\n\n```\n" + "\n".join(lines) + "\n```", None, ChunkSettings(32, 8))
    assert len(cut) > 2
    for chunk in cut[:-1]:
        assert chunk.text.split("\n")[-2] in lines, chunk.text  # (the last line closes the cut block)


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


def test_context_words_put_the_previous_chunks_tail_before_each_chunk():
    page = "## Loops\n\n" + " ".join(f"w{i}" for i in range(60)) + "\n\n## Next\n\nShort end."
    chunks = chunk_text(page, None, ChunkSettings(32, 8))
    assert len(chunks) > 2
    plain = ChunkSettings(32, 8)
    assert embed_texts(chunks, "Loops", plain) == [embed_text(c, "Loops", plain) for c in chunks]
    context = ChunkSettings(32, 8, context_words=3)
    texts = embed_texts(chunks, "Loops", context)
    assert texts[0] == embed_text(chunks[0], "Loops", context)  # nothing before the first chunk
    for before, chunk, text in zip(chunks, chunks[1:], texts[1:]):  # crossing headings too, in file order
        tail = " ".join(before.text.split()[-3:])
        assert text == f"{tail}\n\n{embed_text(chunk, 'Loops', context)}"
    assert context.signature() != plain.signature()  # changing it re-embeds
    assert plain.signature() == f"size=32;overlap=8;headings=2;format={CHUNK_FORMAT}"  # no context: as without the option
    with pytest.raises(UniragError):
        ChunkSettings(context_words=-1)


def test_ingest_with_context_words_embeds_each_chunk_after_its_predecessor(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, docs, settings=SMALL)
    plain = collection_state(collection)
    context = ChunkSettings(32, 8, context_words=5)
    summary = run_ingest(tiny, collection, docs, settings=context)
    assert sorted(summary.changed) == ["guide.md", "notes.txt", "sub/intro.rst", "sub/page.html"]
    state = collection_state(collection)
    assert not state.keys() & plain.keys() and len(state) == len(plain)  # new ids, the old ones gone
    guide = sorted((m["chunk_index"], d, e) for d, m, e in state.values() if m["source"] == "guide.md")
    chunks = chunk_text((docs / "guide.md").read_text(), tiny.tokenizer, context)
    assert [d for _, d, _ in guide] == [c.text for c in chunks]  # the stored text is the chunk alone
    expected = tiny.embed(embed_texts(chunks, "Guide", context))
    np.testing.assert_allclose(np.stack([e for _, _, e in guide]), expected, atol=1e-5)


def test_html_and_rst_become_markdown_headings():
    text, title = html_to_markdown("<html><head><title>T</title><script>x()</script></head><body>"
                                   "<h2>Sec</h2><p>a  b\n c</p><style>.x{}</style><pre># code\n  x</pre></body></html>")
    assert title == "T" and "x()" not in text and ".x{}" not in text
    assert "## Sec\n\na b c" in text and "```\n# code\n  x\n```" in text
    assert rst_to_markdown("=====\nTop\n=====\n\nA\n---\n\nb\n\nB\n---\n") == "# Top\n\n## A\n\nb\n\n## B\n"


def test_html_keeps_the_main_content_and_drops_page_furniture():
    text, title = html_to_markdown(
        "<html><head><title>Guide</title></head><body>"
        "<header><a href='/'>Site name</a></header><nav><a href='/a'>Other page</a></nav>"
        "<main><h1>Guide</h1><p>Main text.</p><nav aria-label='breadcrumbs'>Home / Guide</nav>"
        "<div role='navigation'>Next topic</div><aside role='complementary'>Related links</aside>"
        "<footer>Edit this page</footer></main>"
        "<aside><h3>Sidebar</h3></aside><footer><p>Copyright 2026</p></footer></body></html>")
    assert title == "Guide" and text == "# Guide\n\nMain text."


def test_html_keeps_content_that_uses_header_aside_and_hidden_until_found():
    # inside an article, <header> is its title block and <aside> an abstract or a footnote
    text, _ = html_to_markdown(
        "<body><header>Blog name</header><article><header><h1>Post</h1></header><p>Body.</p>"
        "<aside class='footnote'><p>A footnote.</p></aside><div hidden>Dialog text</div>"
        "<details><div hidden='until-found'>Folded answer.</div></details></article>"
        "<aside>Recent posts</aside></body>")
    assert text == "# Post\n\nBody.\n\nA footnote.\n\nFolded answer."


def test_html_drops_permalink_marks_but_keeps_other_links():
    text, _ = html_to_markdown(
        "<main><h1>Intro<a class='headerlink' href='#intro' title='Permalink to this heading'>¶</a></h1>"
        "<h2 id='use'>Use<a class='hash-link' href='#use' aria-label='Direct link'>&#8203;</a></h2>"
        "<dl><dt>f(x)<a class='headerlink' href='#f'>¶</a></dt><dd>Calls it.</dd></dl>"
        "<p>See <a href='#use'>Use</a> and <a href='other.html'>¶ other</a>.</p></main>")
    assert "¶" not in text.replace("¶ other", "")
    assert [path for path, _ in split_sections(text)][-1] == [(1, "Intro"), (2, "Use")]
    assert "f(x)\n\nCalls it." in text and "See Use and ¶ other." in text


@pytest.mark.parametrize("head, skipped", [
    ('<meta name="robots" content="noindex">', True),  # mdBook's print.html and toc.html
    ('<META CONTENT="noindex, follow" NAME="robots"/>', True),  # attributes in either order
    ("<meta name=robots content=none>", True),  # "none": noindex and nofollow
    ('<meta name="robots" content="index, nofollow">', False),
    ('<meta name="description" content="noindex pages explained">', False),
])
def test_an_html_page_that_asks_not_to_be_indexed_is_skipped(head, skipped):
    from unirag.readers.registry import READER_FORMATS, SKIPPED_FORMAT, reader_format

    data = f"<html><head>{head}</head><body><main><p>Every chapter again.</p></main></body></html>".encode()
    file = SourceFile(Path("print.html"), "print.html", "html")
    doc = parse(file, data)
    assert isinstance(doc, Skipped) == skipped
    if skipped:
        assert "asks not to be indexed" in doc.reason
    # only such pages are read anew (their old chunks dropped); every other page keeps its ids
    assert reader_format(file, data) == (SKIPPED_FORMAT if skipped else READER_FORMATS["html"])


def test_html_code_blocks_stay_verbatim_and_fenced():
    code = "def f():\n    if x:\n\n\n        return 1  # indented, with blank lines\n# not a heading"
    markdown_code = "# Title\n```\nfenced\n```"
    text, _ = html_to_markdown(f"<main><p>Code:</p><pre><span>{code}</span>\n</pre>"
                               f"<pre>{markdown_code}</pre><table><tr><th>Flag</th><th>Use</th></tr>"
                               "<tr><td><p>-v</p></td><td><p>verbose,</p><p>chatty</p></td></tr></table></main>")
    assert f"```\n{code}\n```" in text
    assert f"~~~\n{markdown_code}\n~~~" in text  # code that holds ``` lines is fenced with ~~~
    assert [path for path, _ in split_sections(text)] == [[]]  # no `#` line in code became a heading
    assert "Flag | Use\n\n-v | verbose, chatty" in text  # a row on one line, its cells apart


def test_html_without_main_or_article_falls_back_to_the_body():
    text, title = html_to_markdown("<html><head><title>Plain</title></head><body><h1>Notes</h1>"
                                   "<p>One.<p>Two.<ul><li>a<li>b</ul><nav>Menu</nav></body></html>")
    assert title == "Plain" and text == "# Notes\n\nOne.\n\nTwo.\n\n- a\n\n- b"
    # a page that is all furniture keeps its text rather than coming out empty
    assert html_to_markdown("<body><header><h1>Landing</h1><p>Welcome.</p></header></body>")[0] == \
        "# Landing\n\nWelcome."


def test_front_matter_gives_the_page_its_title_and_lede():
    from unirag.readers.markdown import front_matter, read_front_matter
    from unirag.readers.registry import SourceFile

    page = ('---\ntitle: "npm-ci"\nsection: 1\ntags:\n  - install\nnotes: >-\n  folded\naliases: [ic, ci]\n'
            'description: Clean install a project\n---\n\n### Synopsis\n\nnpm ci\n\n### Description\n\nText.')
    fields, body = front_matter(page)
    assert fields == {"title": "npm-ci", "section": "1", "description": "Clean install a project"}
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


def test_a_new_reader_format_gives_its_files_new_chunk_ids():
    from unirag.retrieval.ingest import doc_version
    from unirag.readers.registry import READER_FORMATS

    # ids of kinds read as before stay as they were (nothing re-embedded); html's changed once
    assert doc_version("h", SMALL, 0) == doc_version("h", SMALL)
    assert doc_version("h", SMALL, READER_FORMATS["html"]) != doc_version("h", SMALL)
    assert doc_version("h", SMALL, READER_FORMATS["markdown"]) != doc_version("h", SMALL, 1)  # front matter read


def test_sphinx_page_keeps_only_its_role_main_body():
    sphinx = ("<html><head><title>re &#8212; Python docs</title></head><body>"
              "<div class='related' role='navigation'><h3>Navigation</h3><ul><li><a href='x'>index</a></li>"
              "<li><a href='m'>modules</a> |</li></ul></div>"
              "<div class='document'><div class='documentwrapper'><div class='bodywrapper'>"
              "<div class='body' role='main'><section id='re'><h1>re<a class='headerlink' href='#re'>¶</a></h1>"
              "<p>Regular expressions.</p><section id='syntax'><h2>Syntax<a class='headerlink' href='#syntax'>¶</a>"
              "</h2><div class='highlight'><pre><span class='gp'>&gt;&gt;&gt; </span>re.match('a', 'a')\n</pre></div>"
              "</section></section></div></div></div>"
              "<div class='sphinxsidebar' role='navigation'><h3>Table of Contents</h3><h4>Previous topic</h4>"
              "<div role='note'><h3>This Page</h3><a href='src'>Show Source</a></div></div></div>"
              "<div class='footer'>&copy; Copyright 2001-2026.</div></body></html>")
    text, title = html_to_markdown(sphinx)
    assert title == "re — Python docs"
    assert text == "# re\n\nRegular expressions.\n\n## Syntax\n\n```\n>>> re.match('a', 'a')\n```"


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


def test_missing_path_and_empty_folder_are_user_errors(tiny, tmp_path):
    collection = open_db(tiny, tmp_path / "db")
    with pytest.raises(UniragError, match="no such file or folder"):
        run_ingest(tiny, collection, tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.bin").write_bytes(b"1")
    with pytest.raises(UniragError, match="no .* files under"):
        run_ingest(tiny, collection, tmp_path / "empty")
    result = invoke("ingest", str(tmp_path / "nope"), "--db", str(tmp_path / "db"))
    assert isinstance(result.exception, UniragError)


# ---------------------------------------------------------------------- ingest
def test_ingest_is_incremental_and_idempotent(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    (docs / "empty.md").write_text("")
    collection = open_db(tiny, tmp_path / "db")
    assert collection.configuration["hnsw"]["space"] == "cosine"
    assert collection.metadata[store.MODEL_KEY] == tiny.name

    first = run_ingest(tiny, collection, docs, settings=SMALL)
    assert sorted(first.added) == ["guide.md", "notes.txt", "sub/intro.rst", "sub/page.html"]
    assert [(s.source, s.reason) for s in first.skipped] == [("empty.md", "empty file")]
    assert first.ignored == 1 and "skipped empty.md: empty file" in first.report()
    state = collection_state(collection)
    assert len(state) == first.chunks_written == collection.count()
    metas = [m for _, m, _ in state.values()]
    assert {m["source"] for m in metas} == set(first.added)
    assert all(m["model"] == tiny.name and len(m["content_hash"]) == 64 for m in metas)
    assert {m["heading"] for m in metas if m["source"] == "guide.md"} == {"Guide", "Guide > Install", "Guide > Use"}
    assert {m["heading"] for m in metas if m["source"] == "sub/page.html"} == {"Embeddings"}

    second = run_ingest(tiny, collection, docs, settings=SMALL)
    assert (second.added, second.changed, second.removed, second.chunks_written, second.unchanged) == ([], [], [], 0, 4)
    assert collection_state(collection).keys() == state.keys()

    (docs / "notes.txt").write_text("Completely new notes about Paris.")
    (docs / "sub" / "page.html").unlink()
    third = run_ingest(tiny, collection, docs, settings=SMALL)
    assert (third.changed, third.removed, third.unchanged) == (["notes.txt"], ["sub/page.html"], 2)
    after = collection_state(collection)
    assert {m["source"] for _, m, _ in after.values()} == {"guide.md", "notes.txt", "sub/intro.rst"}
    kept = {i for i, (_, m, _) in state.items() if m["source"] in ("guide.md", "sub/intro.rst")}
    assert kept <= after.keys()  # untouched files keep their ids and vectors
    assert [d for d, m, _ in after.values() if m["source"] == "notes.txt"] == ["Completely new notes about Paris."]

    (docs / "notes.txt").write_text("")  # now empty: skipped, and its old chunks go
    fourth = run_ingest(tiny, collection, docs, settings=SMALL)
    assert any(s.source == "notes.txt" and "old chunks were removed" in s.reason for s in fourth.skipped)
    assert "notes.txt" not in {m["source"] for m in collection.get()["metadatas"]}


def test_a_changed_file_embeds_only_its_new_chunks(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    first = run_ingest(tiny, collection, docs, settings=SMALL)
    assert first.chunks_reused == 0
    guide = docs / "guide.md"
    guide.write_text(guide.read_text().replace("## Use\n\nParis is the capital", "## Use\n\nLyon is not the capital"))
    second = run_ingest(tiny, collection, docs, settings=SMALL)
    assert second.changed == ["guide.md"]
    # the Install section's chunks are the same text: they keep their vectors; the Use section is new
    assert second.chunks_written - second.chunks_reused == 1 and second.chunks_reused >= 2
    assert "with their stored vectors" in second.line()
    # the same collection as one clean run over the edited folder
    clean = open_db(tiny, tmp_path / "db2")
    run_ingest(tiny, clean, docs, settings=SMALL)
    after, fresh = collection_state(collection), collection_state(clean)
    assert after.keys() == fresh.keys()
    for id_, (text, meta, vector) in fresh.items():
        assert after[id_][:2] == (text, meta)
        np.testing.assert_allclose(after[id_][2], vector, atol=1e-4)


def test_ingest_progress_counts_bytes_and_files(tiny, tmp_path, capsys):
    docs = write_docs(tmp_path / "docs")
    total = sum(p.stat().st_size for p in docs.rglob("*") if p.is_file() and p.suffix != ".png")
    run_ingest(tiny, open_db(tiny, tmp_path / "db"), docs, settings=SMALL, progress=True)
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    # a large file moves the bar as its chunks are embedded: the bar counts bytes, not files
    assert f"{total}/{total}" in bar.replace("B", "") and "files=4/4" in bar


def test_other_model_is_refused(tiny, tmp_path):
    docs = write_docs(tmp_path / "docs")
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, docs, settings=SMALL)
    tiny.name = "some-other-model+adapter"
    with pytest.raises(UniragError, match="holds vectors from model .* but the loaded model is 'some-other-model"):
        run_retrieve(tiny, collection, "cat")
    with pytest.raises(UniragError, match="holds vectors from model"):
        run_ingest(tiny, collection, docs, settings=SMALL)
    with pytest.raises(UniragError, match="holds vectors from model"):
        store.open_collection(store.connect(tmp_path / "db"), "docs", tiny)


def test_bad_collection_name_is_a_user_error(tiny, tmp_path):
    client = store.connect(tmp_path / "db")
    for name in ("t", "no spaces!"):  # chromadb's InvalidArgumentError, not a traceback
        with pytest.raises(UniragError, match="bad collection name"):
            store.open_collection(client, name, tiny, create=True)


# ---------------------------------------------------------------------- retrieve / ask / chat
def test_retrieve_prompt_and_streamed_answer(tiny, tmp_path):
    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, write_docs(tmp_path / "docs"), settings=SMALL)
    hits = run_retrieve(tiny, collection, "What is the capital of France?", top_k=3)
    assert len(hits) == 3 and hits[0].score >= hits[1].score >= hits[2].score
    assert all(h.source and h.text and -1.0 <= h.score <= 1.0001 for h in hits)
    messages = build_prompt("Where?", hits[:2])
    assert "does not contain" in messages[0]["content"]
    assert messages[-1]["content"].startswith(f"Context:\n[1] {hits[0].label}\n{hits[0].text}\n\n[2] {hits[1].label}")
    assert citations(hits[:2]) == [f"[1] {hits[0].label}", f"[2] {hits[1].label}"]
    shown, _ = fit(tiny, "Where?", hits * 20, max_new_tokens=16)  # the tiny model has 256 positions
    assert 0 < len(shown) < 60 and len(tiny.prompt_ids(build_prompt("Where?", shown))) <= 240
    pieces = answer(tiny, "Where?", shown, max_new_tokens=6, stream=True)
    assert isinstance(pieces, types.GeneratorType)
    assert all(isinstance(p, str) for p in pieces)


def test_retrieve_with_rerank_reorders_the_candidates(tiny, tmp_path):
    """rerank=N: the first N of the hybrid ranking, reordered by query likelihood (fused with
    their retrieval order), then cut to top_k."""
    from unirag.retrieval.rerank import rerank

    collection = open_db(tiny, tmp_path / "db")
    run_ingest(tiny, collection, write_docs(tmp_path / "docs"), settings=SMALL)
    question = "What is the capital of France?"
    plain = run_retrieve(tiny, collection, question, top_k=4)
    reranked = run_retrieve(tiny, collection, question, top_k=2, rerank=4)
    best = rerank(tiny, question, plain, 4)[:2]
    assert [h.id for h in reranked] == [h.id for h in best]
    assert [h.score for h in reranked] == pytest.approx([h.score for h in best], abs=1e-5)
    with pytest.raises(UniragError, match="--rerank"):
        run_retrieve(tiny, collection, question, top_k=2, rerank=-1)


def test_cli_ingest_retrieve_ask_chat(tiny_model_dir, tmp_path):
    docs = write_docs(tmp_path / "docs")
    common = ["--model", str(tiny_model_dir), "--db", str(tmp_path / "db"), "--precision", "fp32"]
    result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "4 added, 0 changed, 0 removed, 0 unchanged, 0 skipped" in result.output

    result = invoke("retrieve", "capital of France", "--top-k", "2", *common)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[1] ") and lines[2].startswith("[2] ") and len(lines) == 4

    result = invoke("retrieve", "capital of France", "--top-k", "1", "--rerank", "3", *common)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("[1] 0.06")  # a fused reciprocal-rank score, about (3 + 1) / (60 + r)

    result = invoke("retrieve", "capital of France", "--top-k", "1", "--retrieval", "lexical", *common)
    assert result.exit_code == 0, result.output
    assert "France" in result.stdout  # BM25 alone finds the one chunk that names France

    # dense: two chunks that fit the tiny model's 256 positions together (hybrid may pick longer ones)
    result = invoke("ask", "capital of France?", "-k", "2", "--max-new-tokens", "5", "--retrieval", "dense", *common)
    assert result.exit_code == 0, result.output
    assert "\nSources:\n[1] " in result.stdout and "\n[2] " in result.stdout

    result = runner.invoke(app, ["chat", "-k", "1", "--max-new-tokens", "4", *common],
                           input="cats?\nand dogs?\n/exit\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("unirag> ") == 2 and result.stdout.count("Sources:") == 2

    # another embedded text re-embeds every file
    result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress",
                    "--context-words", "8")
    assert result.exit_code == 0, result.output
    assert "0 added, 4 changed, 0 removed, 0 unchanged" in result.output

    result = invoke("retrieve", "x", *common[:2], "--db", str(tmp_path / "nodb"))
    assert isinstance(result.exception, UniragError) and "no Chroma database" in str(result.exception)
    result = invoke("retrieve", "x", *common, "--collection", "other")
    assert isinstance(result.exception, UniragError) and "no collection 'other'" in str(result.exception)


# ---------------------------------------------------------------------- crash safety
KILLABLE = "import typer; from unirag.cli.rag_commands import ingest, retrieve; app = typer.Typer(); " \
           "app.command()(ingest); app.command()(retrieve); app()"


def _wait_for_lines(proc, marker: str, count: int, deadline: float) -> list[str]:
    """Read proc.stderr until `count` lines contain marker (bounded by deadline)."""
    seen, buffer = [], b""
    selector = selectors.DefaultSelector()
    selector.register(proc.stderr, selectors.EVENT_READ)
    while len(seen) < count:
        if time.monotonic() > deadline or proc.poll() is not None:
            raise AssertionError(f"ingest ended or stalled before {count} upserts: {buffer.decode()[-2000:]}")
        if selector.select(timeout=0.5):
            chunk = os.read(proc.stderr.fileno(), 65536)
            buffer += chunk
            seen = [ln for ln in buffer.decode(errors="replace").splitlines() if marker in ln]
    return seen


@pytest.mark.slow  # a child process, killed
def test_sigkill_mid_ingest_then_rerun_equals_one_clean_run(tiny, tiny_model_dir, tmp_path):
    from chromadb.api.client import SharedSystemClient

    docs = tmp_path / "docs"
    docs.mkdir()
    for i in range(10):
        (docs / f"f{i:02d}.md").write_text(f"# File {i}\n\n" + " ".join(SENTENCES[i % 5:] + SENTENCES) + "\n")
    db, clean_db = tmp_path / "db", tmp_path / "clean"
    args = ["--model", str(tiny_model_dir), "--precision", "fp32", "--chunk-size", "32", "--chunk-overlap", "8",
            "--batch-size", "4", "--no-progress"]
    assert invoke("ingest", str(docs), "--db", str(db), *args).exit_code == 0  # version A
    SharedSystemClient.clear_system_cache()  # the subprocess writes this db next

    for i in range(7):  # version B: 7 changed, one removed, one added
        (docs / f"f{i:02d}.md").write_text(f"# File {i} v2\n\n" + " ".join(SENTENCES[::-1]) + f" Number {i}.\n")
    (docs / "f09.md").unlink()
    (docs / "new.md").write_text("# New\n\nA new file about the park.\n")

    env = {**os.environ, PAUSE_ENV: "3", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", KILLABLE, "ingest", str(docs), "--db", str(db), *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:  # kill it while it sleeps between upserting a file's new chunks and deleting its old ones
        upserted = _wait_for_lines(proc, "unirag-test: upserted", 2, time.monotonic() + 120)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    killed_at = upserted[-1].split("upserted ", 1)[1].strip()

    result = invoke("ingest", str(docs), "--db", str(db), *args)
    assert result.exit_code == 0, result.output
    assert "1 repaired" in result.output and "1 removed" in result.output, result.output
    assert killed_at in [f"f{i:02d}.md" for i in range(7)]
    assert invoke("ingest", str(docs), "--db", str(clean_db), *args).exit_code == 0

    model = tiny
    recovered = collection_state(store.open_collection(store.connect(db), "docs", model))
    clean = collection_state(store.open_collection(store.connect(clean_db), "docs", model))
    assert recovered.keys() == clean.keys()
    for id_ in clean:
        assert recovered[id_][:2] == clean[id_][:2]
        np.testing.assert_allclose(recovered[id_][2], clean[id_][2], atol=1e-5)
    again = invoke("ingest", str(docs), "--db", str(db), *args)
    assert "0 added, 0 changed, 0 removed, 10 unchanged" in again.output


# ---------------------------------------------------------------------- Chroma server
@pytest.mark.slow  # a Chroma server process
def test_chroma_server_over_http(tiny_model_dir, tmp_path):
    with chroma_server(tmp_path / "server") as url:
        common = ["--model", str(tiny_model_dir), "--chroma-url", url, "--precision", "fp32"]
        docs = write_docs(tmp_path / "docs")
        result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
        assert result.exit_code == 0, result.output
        assert "4 added" in result.output and url in result.output
        result = invoke("ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8", "--no-progress")
        assert "4 unchanged" in result.output, result.output
        result = invoke("retrieve", "capital of France", "-k", "3", *common)
        assert result.exit_code == 0 and result.stdout.startswith("[1] "), result.output
        # the server filters by source, lists its collections, forgets a file
        result = invoke("retrieve", "capital of France", "-k", "3", "--source", "sub/*", "--rerank", "0", *common)
        assert result.exit_code == 0, result.output
        assert "sub/" in result.stdout and "guide.md" not in result.stdout and "notes.txt" not in result.stdout
        result = invoke("collections", "--chroma-url", url)
        assert result.exit_code == 0 and f"1 collection in {url}" in result.stdout and "on disk" not in result.stdout
        assert "4 files" in result.stdout
        assert invoke("forget", "sub/intro.rst", "--chroma-url", url).exit_code == 0
        result = invoke("retrieve", "loops", "-k", "3", "--source", "sub/intro.rst", *common)
        assert isinstance(result.exception, UniragError) and "matches --source sub/intro.rst" in str(result.exception)
        assert not (tmp_path / ".unirag").exists()


def test_markdown_comments_are_dropped_outside_code():
    from unirag.readers.markdown import strip_markdown_comments

    text = ("# T\n\n<!-- Do not remove or links may break.\n-->\nText one.\n\n```html\n<!-- kept -->\n\n\nx\n```\n\n"
            "More <!-- x --> here.")
    assert strip_markdown_comments(text) == "# T\n\nText one.\n\n```html\n<!-- kept -->\n\n\nx\n```\n\nMore  here."
    assert strip_markdown_comments("a <!-- never closed\nb") == "a "


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
    from unirag.readers.registry import READER_FORMATS, SKIPPED_FORMAT, reader_format

    file = SourceFile(tmp_path / name, f"src/{name}", "markdown")
    data = text.encode()
    doc = parse(file, data)
    assert isinstance(doc, Skipped) == skipped
    if skipped:
        assert "table of contents" in doc.reason
    # only such a file is read anew (its old chunks dropped); every other page keeps its ids
    assert reader_format(file, data) == (SKIPPED_FORMAT if skipped else READER_FORMATS["markdown"])
