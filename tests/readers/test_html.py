"""The HTML reader (unirag.readers.html): the main content kept and page furniture dropped (landmarks,
and what generators older than HTML5 landmarks mark in other ways), code kept verbatim, footnote
marks, pages that ask not to be indexed."""

from pathlib import Path

import pytest
from reader_skips import check_skip

from unirag.readers.markdown import split_sections
from unirag.answer.sentences import plain
from unirag.readers.html import html_to_markdown
from unirag.readers.registry import SourceFile
from unirag.readers.rst import rst_to_markdown

BODY = "<h2>2.1 Getting started</h2><p>Compile your program with -g first.</p>"
# DocBook XSL: a navigation table of image and text links with accesskeys, around the book's title
DOCBOOK_HEADER = ('<div><table summary="Navigation header"><tr><td><a accesskey="p" href="intro.html">'
                  '<img alt="Prev" src="prev.png"></a></td><td><a accesskey="u" href="manual.html">'
                  '<img alt="Up" src="up.png"></a></td><th>Valgrind User Manual</th><td>'
                  '<a accesskey="n" href="next.html"><img alt="Next" src="next.png"></a></td></tr></table></div>')
DOCBOOK_FOOTER = ('<div><table summary="Navigation footer"><tr><td><a accesskey="p" href="intro.html">'
                  '&lt;&lt; 1. Introduction</a></td><td><a accesskey="u" href="manual.html">Up</a></td>'
                  '<td><a accesskey="n" href="next.html">3. Advanced Topics &gt;&gt;</a></td></tr>'
                  '<tr><td><a accesskey="h" href="index.html">Home</a></td></tr></table></div>')
# Texinfo (makeinfo): a paragraph of rel links with their labels, and a menu of child pages
TEXINFO_HEADER = ('<div class="header"><p>Next: <a href="Memory.html" accesskey="n" rel="next">Memory Usage</a>, '
                  'Previous: <a href="Intro.html" accesskey="p" rel="prev">What is libffi?</a>, '
                  'Up: <a href="index.html" accesskey="u" rel="up">libffi</a> &nbsp; '
                  '[<a href="Index.html" title="Index" rel="index">Index</a>]</p></div>')
TEXINFO_MENU = ('<ul class="section-toc"><li><a href="Basics.html" accesskey="1">The Basics</a></li>'
                '<li><a href="Types.html" accesskey="2">Types</a></li></ul>')
DOCBOOK_TOC = ('<div class="toc"><p><b>Table of Contents</b></p><dl class="toc"><dt><span class="sect1">'
               '<a href="core.html#started">2.1 Getting started</a></span></dt></dl></div>')


@pytest.mark.parametrize("furniture", [
    DOCBOOK_HEADER + DOCBOOK_TOC,
    DOCBOOK_FOOTER,
    TEXINFO_HEADER + TEXINFO_MENU,
    '<nav class="contents" role="doc-toc"><p>Contents</p><ul><li><a href="#started">Getting started</a></li></ul></nav>',
    '<div class="contents" role="doc-toc"><ul><li><a href="#started">Getting started</a></li></ul></div>',
])
def test_sequential_navigation_and_the_pages_own_contents_are_dropped(furniture):
    assert html_to_markdown(f"<html><body>{furniture}{BODY}{furniture}</body></html>")[0] == \
        "## 2.1 Getting started\n\nCompile your program with -g first."


@pytest.mark.parametrize("content, kept", [
    # one sequential link is a reference in the text, not a navigation bar
    ('<p>Read <a rel="next" href="next.html">the next chapter</a> first.</p>', "Read the next chapter first."),
    # a list of links without rel or accesskey is content: what a parameter accepts, related pages
    ('<p>Writable streams include:</p><ul><li><a href="http.html#req">HTTP requests</a></li>'
     '<li><a href="fs.html#ws">fs write streams</a></li></ul>', "- HTTP requests\n\n- fs write streams"),
    # sequential links inside prose longer than a navigation label stay with the prose
    ('<p>Go <a rel="prev" href="a.html">back</a> or <a rel="next" href="b.html">on</a> once you have '
     'built the program with debugging information.</p>', "once you have built the program"),
])
def test_links_that_are_content_are_kept(content, kept):
    assert kept in html_to_markdown(f"<body>{BODY}{content}</body>")[0]


def test_a_block_holding_a_heading_is_never_navigation():
    # a chapter page that is its heading and a menu of child pages keeps the heading
    page = f'<div class="chapter">{TEXINFO_HEADER}<h2>2 Using libffi</h2>{TEXINFO_MENU}</div>'
    assert html_to_markdown(f"<body>{page}</body>")[0] == "## 2 Using libffi"


def test_two_listings_in_one_block_come_on_lines_of_their_own():
    # Node.js: each example as CommonJS and as an ES module, one shown at a time
    page = ('<main><pre><input type="checkbox"><code class="cjs">const path = require(\'node:path\');</code>'
            '<code class="mjs">import path from \'node:path\';</code></pre>'
            '<pre>$ <code>ls</code> -l</pre></main>')
    assert html_to_markdown(page)[0] == ("```\nconst path = require('node:path');\nimport path from 'node:path';\n```"
                                         "\n\n```\n$ ls -l\n```")


FAQ_INDEX = ('<dl><dt>1. <a href="faq.html#bg">Background</a></dt>'
             '<dd>1.1. <a href="faq.html#say">How do you say the name?</a></dd></dl>')
FAQ_BODY = ('<h3 id="bg">1. Background</h3><p><a name="say"></a>1.1. How do you say the name?</p>'
            '<p>Like the word value.</p>')


def test_a_list_of_the_pages_own_anchors_in_its_lead_is_its_table_of_contents():
    # a FAQ's list of its questions, a hand-written contents list: no role or class says so
    text = html_to_markdown(f"<main><h1>FAQ</h1>{FAQ_INDEX}{FAQ_BODY}</main>")[0]
    assert text == "# FAQ\n\n### 1. Background\n\n1.1. How do you say the name?\n\nLike the word value."
    # further down, such a list is content: the flags a parameter accepts, each defined below it
    flags = ('<p>The flags may be:</p><ul><li><a href="#new">NEW_CONSOLE</a></li>'
             '<li><a href="#detached">DETACHED</a></li></ul><dl><dt id="new">NEW_CONSOLE</dt><dd>A new console.</dd>'
             '<dt id="detached">DETACHED</dt><dd>No console.</dd></dl>')
    text = html_to_markdown(f"<main><h1>Process</h1><p>Intro.</p><h2>Flags</h2>{flags}</main>")[0]
    assert "- NEW_CONSOLE\n\n- DETACHED" in text
    # and in the lead, links to other pages are content too
    related = '<ul><li><a href="tutorial.html">The tutorial</a></li><li><a href="ref.html#x">The reference</a></li></ul>'
    assert "- The tutorial\n\n- The reference" in html_to_markdown(f"<main><h1>Guide</h1>{related}{FAQ_BODY}</main>")[0]


def test_a_line_of_text_opening_with_a_number_sign_is_no_heading():
    page = "<body><h1>T</h1><table><tr><th>#</th><th>Name</th></tr><tr><td>1</td><td>Ann</td></tr></table></body>"
    assert html_to_markdown(page)[0] == "# T\n\n| # | Name\n\n1 | Ann"
    # a paragraph too: escaped as Markdown escapes it, and quoted without the escape
    text = html_to_markdown("<body><h1>T</h1><p># of retries is set by <code>--retries</code>.</p>"
                            "<ul><li># stays in a list item</li></ul></body>")[0]
    assert text == "# T\n\n\\# of retries is set by --retries.\n\n- # stays in a list item"
    assert [heading for heading, _ in split_sections(text)] == [[(1, "T")]]
    assert plain(text.split("\n\n")[1]) == "# of retries is set by --retries."


def test_a_long_list_or_table_of_the_pages_own_anchors_anywhere_is_an_index():
    # Texinfo's one-page manuals end with indexes: a jump bar of letters, then a table of entries
    names = [f"builtin{i}" for i in range(12)]
    body = "".join(f'<dt id="{n}">{n}</dt><dd>What {n} does.</dd>' for n in names)
    letters = "".join(f'<a class="summary-letter" href="#{n}"><b>{chr(65 + i)}</b></a> '
                      for i, n in enumerate(names * 2))
    jump = f"<table><tr><th>Jump to:</th><td>{letters}</td></tr></table>"
    rows = "".join(f'<tr><th>{chr(65 + i)}</th></tr><tr><td><a href="#{n}"><code>{n}</code></a>:</td>'
                   f'<td><a href="#{n}">Shell Builtin Commands</a></td></tr>' for i, n in enumerate(names))
    index = f'<table class="index-bt"><tr><th>Index Entry</th><th>Section</th></tr>{rows}</table>'
    text = html_to_markdown(f"<body><h1>Manual</h1><p>Intro.</p><h2>Builtins</h2><dl>{body}</dl>"
                            f"<h2>Index</h2>{jump}{index}</body>")[0]
    assert text.endswith("## Index") and "Jump to" not in text and "What builtin11 does." in text
    # the same entries as a short list further down stay: a few names, each defined below
    short = "".join(f'<tr><td><a href="#{n}">{n}</a></td></tr>' for n in names[:3])
    assert "builtin2" in html_to_markdown(f"<body><h1>M</h1><p>I.</p><h2>B</h2><table>{short}</table>"
                                          f"<dl>{body}</dl></body>")[0].split("What builtin0")[0]


# a footnote's mark and its link back, as generators write them; the note's text stays
@pytest.mark.parametrize("page", [
    # Sphinx (docutils): DPUB-ARIA roles, brackets in spans
    '<p>It sends a User-Agent header <a class="footnote-reference brackets" href="#id8" id="id1" '
    'role="doc-noteref"><span class="fn-bracket">[</span>3<span class="fn-bracket">]</span></a>. Next.</p>'
    '<aside class="footnote brackets" id="id8" role="note"><span class="label"><span class="fn-bracket">[</span>'
    '<a role="doc-backlink" href="#id1">3</a><span class="fn-bracket">]</span></span><p>The note.</p></aside>',
    # Sphinx, a note cited twice: its label holds no link, its links back follow it
    '<p>It sends a User-Agent header <a class="footnote-reference brackets" href="#id8" id="id1" '
    'role="doc-noteref"><span class="fn-bracket">[</span>3<span class="fn-bracket">]</span></a>. Next.</p>'
    '<aside class="footnote brackets" id="id8" role="note"><span class="label"><span class="fn-bracket">[</span>'
    '3<span class="fn-bracket">]</span></span><span class="backrefs">(<a role="doc-backlink" href="#id1">1</a>,'
    '<a role="doc-backlink" href="#id2">2</a>)</span><p>The note.</p></aside>',
    # mdBook, a note's label in a superscript of its own
    '<p>It sends a User-Agent header<sup class="footnote-reference"><a href="#footnote-a">1</a></sup>. Next.</p>'
    '<div class="footnote-definition" id="footnote-a"><sup class="footnote-definition-label">1</sup>'
    '<p>The note.</p></div>',
    # mdBook
    '<p>It sends a User-Agent header<sup class="footnote-reference" id="fr-a-1"><a href="#footnote-a">1</a></sup>. '
    'Next.</p><div class="footnote-definition" id="footnote-a"><p>The note. <a href="#fr-a-1">↩</a></p></div>',
    # Python-Markdown (MkDocs)
    '<p>It sends a User-Agent header<sup id="fnref:1"><a class="footnote-ref" href="#fn:1">1</a></sup>. Next.</p>'
    '<div class="footnote"><p>The note.&#160;<a class="footnote-backref" href="#fnref:1">&#8617;</a></p></div>',
    # Pandoc
    '<p>It sends a User-Agent header<a href="#fn1" class="footnote-ref" id="fnref1" role="doc-noteref"><sup>1</sup>'
    '</a>. Next.</p><section class="footnotes" role="doc-endnotes"><p>The note.<a href="#fnref1" '
    'class="footnote-back" role="doc-backlink">↩︎</a></p></section>',
    # DocBook XSL
    '<p>It sends a User-Agent header<sup>[<a name="id1" href="#ftn.id1" class="footnote">1</a>]</sup>. Next.</p>'
    '<div class="footnote"><p><sup>[<a id="ftn.id1" href="#id1" class="para">1</a>] </sup>The note.</p></div>',
])
def test_footnote_marks_are_dropped_and_notes_kept(page):
    # left in, "[3]" reads as a citation of the answer's third passage, and "header1" as a word
    assert html_to_markdown(f"<body><main>{page}</main></body>")[0] == \
        "It sends a User-Agent header. Next.\n\nThe note."


def test_superscripts_and_links_that_are_no_footnote_marks_are_kept():
    page = ('<h2><a class="toc-backref" href="#id1" role="doc-backlink">Coroutines</a></h2>'
            '<p>E = mc<sup>2</sup>, see section <a href="#sec">2</a> and <sup><a href="#n">the note</a></sup>.</p>')
    assert html_to_markdown(f"<body><main>{page}</main></body>")[0] == \
        "## Coroutines\n\nE = mc2, see section 2 and the note."


def test_a_list_items_paragraph_opens_on_its_bullets_line():
    # Sphinx and loose Markdown lists write <li><p>; a bullet on a line of its own reads as an empty item
    page = ("<main><p>Components:</p><ul><li><p>Loggers expose the interface.</p></li>"
            "<li><div><p>Handlers send records.</p></div></li></ul></main>")
    assert html_to_markdown(page)[0] == "Components:\n\n- Loggers expose the interface.\n\n- Handlers send records."


# a hand-written site without landmarks (SQLite's pages): a menu, a tagline, then the page's title and
# its table of contents as blocks of one link each, a toggle labelling them
SECTIONS = ["Getting Started", "Output Modes", "Reading Files", "Writing Files", "Shell Scripts", "Extensions"]
HAND_WRITTEN_HEADER = (
    '<div class="nosearch"><a href="index.html"><img alt="Logo" src="logo.gif"></a>'
    '<div class="tagline">Small. Fast.<br>Choose any two.</div><div class="menu"><ul>'
    '<li><a href="index.html">Home</a><li><a href="about.html">About</a><li><a href="docs.html">Documentation</a>'
    '<li><a href="javascript:void(0)">Search</a></ul></div></div>'
    '<div class="fancy"><div class="fancy_title">Command Line Shell</div><div class="fancy_toc">'
    '<a onclick="toggle_toc()">► Table Of Contents</a><div id="toc_sub">'
    + "".join(f'<div class="toc1"><a href="#s{i}">{i}. {name}</a></div>' for i, name in enumerate(SECTIONS, 1))
    + '</div></div>')
BODY_SECTIONS = "".join(f'<h2 id="s{i}">{i}. {name}</h2><p>About {name.lower()}.</p>' for i, name in enumerate(SECTIONS, 1))


def test_a_menu_before_the_first_heading_and_a_block_of_the_pages_own_anchors_are_furniture():
    text = html_to_markdown(f"<body>{HAND_WRITTEN_HEADER}{BODY_SECTIONS}</div></body>")[0]
    assert text.startswith("Command Line Shell\n\n## 1. Getting Started\n\nAbout getting started.\n\n## 2. Output")
    assert text.count("Output Modes") == 1 and "Small" not in text and "Home" not in text
    # after the first heading, a list of links to other pages is content: related pages, what to read next
    related = '<ul><li><a href="a.html">Tutorial</a></li><li><a href="b.html">Reference</a></li><li><a href="c.html">FAQ</a></li></ul>'
    assert "- Tutorial\n\n- Reference\n\n- FAQ" in html_to_markdown(f"<body><h1>T</h1><p>See:</p>{related}</body>")[0]
    # and a block that holds the page's words with two of its anchors is no table of contents
    lead = '<div><p>Read <a href="#s1">getting started</a> and <a href="#s2">output modes</a> before you begin.</p></div>'
    assert "before you begin" in html_to_markdown(f"<body>{lead}{BODY_SECTIONS}</body>")[0]


def test_a_definitions_text_after_the_definitions_nested_in_it_comes_after_its_term_again():
    # Sphinx: a class's definition holds its methods' definitions, then more of the class's own text;
    # as flat paragraphs, that text would read as the last method's
    page = ('<main><dl class="py class"><dt>class unittest.TestCase(methodName)</dt><dd><p>A test case.</p>'
            '<dl class="py method"><dt>debug()</dt><dd><p>Run the test.</p></dd></dl>'
            '<p>The class provides assert methods:</p>'
            '<table><tr><td>assertEqual(a, b)</td><td><dl class="simple"><dt>a</dt><dd>equals b</dd></dl></td></tr></table>'
            '<p>Finally, it has attributes.</p></dd></dl></main>')
    assert html_to_markdown(page)[0] == (
        "class unittest.TestCase(methodName)\n\nA test case.\n\ndebug()\n\nRun the test.\n\n"
        "class unittest.TestCase(methodName)\n\nThe class provides assert methods:\n\n"
        "assertEqual(a, b) | a equals b\n\nFinally, it has attributes.")


def test_a_tooltip_icon_after_a_signature_is_a_mark():
    # rustdoc: a method's code header ends in "ⓘ" where its return type has notable traits; left in,
    # quotes name the method "iter(&self) -> Iter<'_, T> ⓘ"
    page = ('<main><h4 class="code-header">pub fn iter(&amp;self) -&gt; <a class="struct" href="struct.Iter.html">'
            'Iter</a>&lt;\'_, T&gt; <a href="#" class="tooltip" data-notable-ty="Iter">ⓘ</a></h4>'
            '<p>Returns an iterator.</p></main>')
    assert html_to_markdown(page)[0] == "#### pub fn iter(&self) -> Iter<'_, T>\n\nReturns an iterator."


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
    data = f"<html><head>{head}</head><body><main><p>Every chapter again.</p></main></body></html>".encode()
    check_skip(SourceFile(Path("print.html"), "print.html", "html"), data, skipped, "asks not to be indexed")


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
