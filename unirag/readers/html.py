"""An HTML page -> Markdown-style text: its main content, without the furniture it shares with its site.

Navigation, sidebars, site headers and footers repeat on every page of a site, so their chunks
would be retrieved for any question and answer none. What is main content and what is page
furniture is decided by the HTML5 / ARIA landmarks that page generators emit (Sphinx, MkDocs,
Docusaurus, GitHub, hand-written pages): <main>, role="main", <article>; <nav>, <aside>,
role="navigation", ... Generators older than landmarks (DocBook XSL, Texinfo) mark their
navigation in other terms HTML defines, rel="next" links and accesskeys, and their tables of
contents and indexes by a class or by being lists (or tables) of links to the page's own anchors;
a few rules below read those. No site-specific rules and no scoring of content, so what is
dropped is predictable.
Main-content extractors (trafilatura, readability) were measured against this on real
documentation: research/html_reading.py.

Uses only the standard library's parser: the page becomes a flat list of events, each flagged with
what its ancestors are; `_main_content` keeps what a reader reads, and `_Markdown` writes it with
`#` headings and fenced code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import NamedTuple

from unirag.readers.base import Reader, SourceFile, decode, register
from unirag.readers.markdown import fence_for, text_reader

_BLOCKS = {"p", "div", "br", "li", "tr", "section", "article", "header", "footer", "main", "pre",
           "table", "ul", "ol", "blockquote", "hr", "dt", "dd", "nav", "aside", "figure"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
         "track", "wbr"}
_NEVER_TEXT = {"script", "style", "noscript", "template", "svg", "head", "button", "select"}
# "doc-toc": DPUB-ARIA's table of contents (docutils writes `.. contents::` so)
_NAVIGATION_ROLES = {"navigation", "search", "complementary", "banner", "contentinfo", "doc-toc"}
# A page's own table of contents lists its headings as links; indexed, it matches any question's
# words and answers none. Besides the role above, one class name marks it across generators that
# predate landmarks: "toc" (DocBook XSL, MediaWiki, Doxygen)
_CONTENTS_CLASS = "toc"
# <header> and <aside> are the page's banner and sidebar only outside sectioning content, as ARIA
# maps them; inside an article or section they are its own: its title block, an abstract, footnotes
# (Sphinx writes topics and footnotes as <aside>). A <footer> anywhere holds links and metadata
# ("Edit this page", tags, copyright), not text to answer from.
_LANDMARK_AT_PAGE_LEVEL = {"header", "aside"}
_SECTIONING = {"main", "article", "section"}
# a start tag that closes the open element before it, as HTML does (`<p>a<p>b`, `<li>a<li>b`)
_IMPLIED_END = {"p": {"p"}, "li": {"li"}, "dt": {"dt", "dd"}, "dd": {"dt", "dd"}, "tr": {"tr", "td", "th"},
                "td": {"td", "th"}, "th": {"td", "th"}, "option": {"option"}}
# the whole text of a permalink next to a heading or definition (Sphinx, MkDocs: "¶"; Docusaurus: a
# zero-width space; others "#", "§" or an icon), or of a footnote's link back to where it is cited
# (mdBook, Python-Markdown, Pandoc: "↩", with or without a variation selector), or an icon that opens
# a tooltip (rustdoc's "ⓘ" after a signature whose return type has notable traits): a same-page link
# saying only this is a mark (`_marks`), no content
_MARK_TEXT = {"", "¶", "#", "§", "🔗", "⚓", "\u200b", "↩", "↩\ufe0e", "↩\ufe0f", "↑", "ⓘ"}

# flags an element passes on to everything inside it
_HIDDEN, _NAV, _MAIN, _ARTICLE, _SECTION = 1, 2, 4, 8, 16


class _Event(NamedTuple):  # a tuple: pages make tens of thousands of these
    kind: str  # "start", "end" or "text"
    tag: str  # "" for text
    data: str | dict  # the text, or a start tag's attributes
    flags: int  # of the element (start/end) or of the element holding the text


class _Events(HTMLParser):
    """The page as a flat list of events, each flagged with what its ancestors are.

    Kept flat so that no recursion depth limits what pages can be read; end tags close the
    matching open element (and any left open inside it), stray end tags are ignored.
    """

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.events: list[_Event] = []
        self.title = ""
        self._tags: list[str] = []  # the open elements, outermost first
        self._flags: list[int] = []  # their flags, each including its ancestors'

    def handle_starttag(self, tag, attrs):
        if self._tags and self._tags[-1] in _IMPLIED_END.get(tag, ()):
            self._close_top()
        attrs = {k: v or "" for k, v in attrs}
        parent = self._flags[-1] if self._flags else 0
        flags = parent | _own_flags(tag, attrs, parent)
        self.events.append(_Event("start", tag, attrs, flags))
        if tag not in _VOID:
            self._tags.append(tag)
            self._flags.append(flags)

    def handle_endtag(self, tag):
        if tag in self._tags:
            while self._close_top() != tag:
                pass

    def handle_data(self, data):
        tag, flags = (self._tags[-1], self._flags[-1]) if self._tags else ("", 0)
        if tag == "title" and not self.title and "svg" not in self._tags:
            self.title = data.strip()
        self.events.append(_Event("text", "", data, flags))

    def close(self):
        super().close()
        while self._tags:
            self._close_top()

    def _close_top(self) -> str:
        tag, flags = self._tags.pop(), self._flags.pop()
        self.events.append(_Event("end", tag, {}, flags))
        return tag


def _own_flags(tag: str, attrs: dict, parent: int) -> int:
    """What an element is, from its tag, ARIA role and (for a table of contents) class; `parent`: the
    flags of the element holding it."""
    role = attrs.get("role", "").strip().lower()
    in_section = bool(parent & (_MAIN | _ARTICLE | _SECTION))
    flags = 0
    if tag in _NEVER_TEXT or attrs.get("hidden", "until-found").lower() != "until-found":
        flags |= _HIDDEN  # hidden="until-found" is collapsed text the browser's search opens: content
    if (tag in ("nav", "footer") or role in _NAVIGATION_ROLES or (tag in _LANDMARK_AT_PAGE_LEVEL and not in_section)
            or _CONTENTS_CLASS in attrs.get("class", "").split()):
        flags |= _NAV
    if tag == "main" or role == "main":
        flags |= _MAIN
    if tag == "article" or role == "article":
        flags |= _ARTICLE
    if tag in _SECTIONING:
        flags |= _SECTION
    return flags


# Generators older than HTML5 landmarks (DocBook XSL, Texinfo's makeinfo, ...) still mark their
# sequential navigation in terms HTML itself defines: links whose rel is "prev", "next", "up", ...
# or that carry an accesskey ("<< 1. Introduction | Up | 3. ... >>", "Next: Memory Usage,
# Previous: What is libffi?, Up: libffi [Index]"). A block whose links are all such, at least two
# of them, with a few words besides (the book's title, "Next:"), is navigation: on every page,
# it matches any question's words and answers none.
_SEQUENTIAL_RELS = {"prev", "previous", "next", "up", "first", "last", "start", "home", "index", "contents", "toc"}
NAV_OTHER_WORDS = 6  # words beside a navigation block's links, at most
_NAV_BLOCKS = {"div", "p", "table", "ul", "ol", "dl", "center"}  # a block that holds a heading is never one
_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
_WORDS = re.compile(r"\w+")


def _sequential(attrs: dict) -> bool:
    """Whether a link is sequential navigation: rel "prev", "next", "up", ... or an accesskey."""
    return bool(set(attrs.get("rel", "").lower().split()) & _SEQUENTIAL_RELS or attrs.get("accesskey"))


def _sequential_navigation(events: list[_Event]) -> list[tuple[int, int]]:
    """(start, end) event indices of every block of sequential navigation (see above)."""
    spans: list[tuple[int, int]] = []  # (start, end) event indices of the outermost such blocks
    open_: list[_Tally] = []  # the open elements' tallies, outermost first
    links: list[bool] = []  # the open <a> elements: sequential or not
    for i, event in enumerate(events):
        if event.kind == "start" and event.tag not in _VOID:
            tally = _Tally(event.tag, i)
            if event.tag == "a":
                links.append(_sequential(event.data))
                tally.sequential, tally.other = int(links[-1]), int(not links[-1])
            tally.headings = int(event.tag in _HEADINGS)
            open_.append(tally)
        elif event.kind == "text" and open_:
            n = len(_WORDS.findall(event.data))
            open_[-1].words += n
            open_[-1].linked += n if links and links[-1] else 0
        elif event.kind == "end" and open_:
            tally = open_.pop()
            if tally.tag == "a" and links:
                links.pop()
            if (tally.tag in _NAV_BLOCKS and tally.sequential >= 2 and not tally.other and not tally.headings
                    and tally.words - tally.linked <= NAV_OTHER_WORDS):
                # an outer block replaces the inner ones it holds
                spans = [span for span in spans if span[0] < tally.start] + [(tally.start, i)]
            if open_:
                open_[-1].add(tally)
    return spans


class _Tally:
    """What one element holds: words (those inside sequential links apart), links, headings."""

    __slots__ = ("tag", "start", "words", "linked", "sequential", "other", "headings")

    def __init__(self, tag: str, start: int):
        self.tag, self.start = tag, start
        self.words = self.linked = self.sequential = self.other = self.headings = 0

    def add(self, inner: "_Tally") -> None:
        self.words += inner.words
        self.linked += inner.linked
        self.sequential += inner.sequential
        self.other += inner.other
        self.headings += inner.headings


# A page's own table of contents, where no role or class says so (a FAQ's list of its questions, a
# hand-written "contents" list, a block of one link per line): a list or block in the page's lead,
# before its second heading, of at least TOC_ITEMS items (a block: links) whose words are nearly
# all links to anchors on the page itself; a block, unlike a list, also holds no more than
# NAV_OTHER_WORDS words besides (its "Table of Contents" label), so that one holding the page's
# title or lead with its contents is not taken whole. Further down, a short such list is content:
# the flags a parameter accepts, the lints of a level, each defined below it. A long one anywhere,
# list or table, is an index or a table of contents (Texinfo writes its contents and its indexes
# of hundreds of entries so, by a class no other generator shares): indexed, its chunks match any
# question's words and answer none; each entry's text is where it points to.
# Before the page's first heading, a list or block of at least MENU_LINKS links to anywhere, with
# no more than NAV_OTHER_WORDS words besides, is the site's menu (hand-written sites older than
# landmarks: "Home About Documentation Download ..."), on every page and answering nothing.
TOC_ITEMS = 2
TOC_LINKED = 0.9  # share of the list's words inside links to the page's own anchors
INDEX_LINKS = 20  # links to the page's own anchors that make a list or table anywhere an index
MENU_LINKS = 3
# a word of two characters or more with a letter in it: "2.1." numbers an entry, an index's
# letter rows ("A", "B") group its entries; the entries' words are the links
_LETTERED = re.compile(r"\w*[^\W\d_]\w*")
_LISTS = {"ul": ("li",), "ol": ("li",), "dl": ("dt", "dd"), "table": ("tr",), "div": ()}


class _LinkTally:
    """What an open list or block holds: items, words, and the words and links that point to the
    page's own anchors (`own`) or anywhere (`any`)."""

    __slots__ = ("tag", "start", "items", "words", "own_words", "own_links", "any_words", "any_links")

    def __init__(self, tag: str, start: int):
        self.tag, self.start = tag, start
        self.items = self.words = self.own_words = self.own_links = self.any_words = self.any_links = 0

    def add(self, inner: "_LinkTally") -> None:  # a nested list counts in the list holding it
        for name in self.__slots__[2:]:
            setattr(self, name, getattr(self, name) + getattr(inner, name))

    def contents(self, in_lead: bool) -> bool:
        """Whether it is the page's table of contents or an index (see above)."""
        own_unlinked = self.words - self.own_words
        # an index is a list or table: a block around one also holds what surrounds it (the page's
        # title, its contents' label), and the 10% of other words a long one allows would take those
        if self.own_links >= INDEX_LINKS and self.tag != "div" and \
                own_unlinked <= max(NAV_OTHER_WORDS, (1 - TOC_LINKED) * self.words):
            return True  # an index's jump bar ("Jump to: A B C ...") links letters, with a label besides
        items = self.own_links if self.tag == "div" else self.items
        return (in_lead and self.tag != "table" and items >= TOC_ITEMS and self.words > 0
                and self.own_words >= TOC_LINKED * self.words
                and (self.tag != "div" or own_unlinked <= NAV_OTHER_WORDS))

    def menu(self) -> bool:
        """Whether, before the page's first heading, it is the site's menu (see above)."""
        return self.any_links >= MENU_LINKS and self.words - self.any_words <= NAV_OTHER_WORDS


def _contents(events: list[_Event], main: list[int]) -> set[int]:
    """The indices of the events, among the main content's (`main`), of the lists and blocks that
    are the page's table of contents, an index or the site's menu (see above)."""
    anchors = {e.data.get(key, "") for e in events if e.kind == "start" for key in ("id", "name")} - {""}
    headings = [i for i in main if events[i].kind == "start" and events[i].tag in _HEADINGS]
    lead_end = headings[1] if len(headings) > 1 else len(events)
    first_heading = headings[0] if headings else -1
    contents: set[int] = set()
    open_: list[_LinkTally] = []
    links: list[tuple[bool, bool]] = []  # the open <a> elements: (a link at all, to an anchor of this page)
    for i in main:
        event = events[i]
        if event.kind == "start":
            if event.tag in _LISTS:
                open_.append(_LinkTally(event.tag, i))
            elif open_ and event.tag in _LISTS[open_[-1].tag]:
                open_[-1].items += 1
            elif event.tag == "a":
                href = event.data.get("href", "")
                links.append((bool(href), "#" in href and href.split("#", 1)[1] in anchors))
                if open_:
                    open_[-1].any_links += links[-1][0]
                    open_[-1].own_links += links[-1][1]
        elif event.kind == "end":
            if event.tag == "a" and links:
                links.pop()
            elif event.tag in _LISTS and open_ and open_[-1].tag == event.tag:
                tally = open_.pop()
                if tally.contents(tally.start < lead_end) or (i < first_heading and tally.menu()):
                    contents.update(range(tally.start, i + 1))
                if open_:
                    open_[-1].add(tally)
        elif open_:
            n = sum(len(word) > 1 for word in _LETTERED.findall(event.data))
            open_[-1].words += n
            if links:
                open_[-1].any_words += n * links[-1][0]
                open_[-1].own_words += n * links[-1][1]
    return contents


# Marks: links that say nothing by themselves. Permalinks (`_MARK_TEXT`), and footnote marks: the
# "[1]" or superscript "1" that points to a footnote, and the "[1]" or "↩" that points back from
# it. In a quote a footnote mark reads as a citation of the answer's own numbered passages
# ("... through the User-Agent header [3]." [1]); the notes' text stays. DPUB-ARIA names both
# footnote links (Sphinx, Pandoc); other generators put the mark's number in a <sup> that links to
# an anchor on the page (mdBook, Python-Markdown, DocBook XSL).
_MARK = re.compile(r"[\[\](),\s]*")  # what a mark's element may hold besides its link: brackets
_NUMBER = re.compile(r"[\[(]?\s*\d{1,3}\s*[\])]?")
_CLOSING = (".", ",", ";", ":", "!", "?", ")")  # punctuation that follows a word without a space


def _footnote(attrs: dict) -> bool:
    """Whether an element holds a footnote (docutils, mdBook, DPUB-ARIA)."""
    return (attrs.get("role", "").strip().lower() in ("doc-footnote", "doc-endnote")
            or any(name.startswith("footnote") for name in attrs.get("class", "").split()))


def _label(attrs: dict) -> bool:
    """Whether an element is a label by its class ("label", mdBook's "footnote-definition-label")."""
    return any(name == "label" or name.endswith("-label") for name in attrs.get("class", "").split())


def _marks(events: list[_Event], main: list[int]) -> set[int]:
    """The indices of the events, among `main`, of marks (see above): a same-page link whose whole
    text is in `_MARK_TEXT`; a link to a note (role "doc-noteref"); a link back from one (role
    "doc-backlink", which docutils also gives a heading's link back to the contents) or a
    same-page link inside a <sup>, whose text is a number; an element (<sup>, a label <span>)
    that holds such a link and only brackets besides; and a footnote's own number label (class
    "label" inside a footnote, "[1]"), which is left where a note has several links back."""
    marks: set[int] = set()
    open_: list[list] = []  # per open element: [tag, start, attributes, text, holds a mark]
    for i in main:
        event = events[i]
        if event.kind == "start" and event.tag not in _VOID:
            open_.append([event.tag, i, event.data, "", False])
        elif event.kind == "text" and open_:
            open_[-1][3] += event.data
        elif event.kind == "end" and open_ and open_[-1][0] == event.tag:
            tag, start, attrs, text, holds = open_.pop()
            in_sup = any(element[0] == "sup" for element in open_)
            role, same_page = attrs.get("role", "").strip().lower(), attrs.get("href", "").startswith("#")
            number = _NUMBER.fullmatch(text.strip()) is not None
            mark = (tag == "a" and (role == "doc-noteref" or same_page and text.strip() in _MARK_TEXT
                                     or ((role == "doc-backlink" or in_sup and same_page) and number))
                    or (holds and tag in ("sup", "span") and _MARK.fullmatch(text) is not None)
                    or (number and _label(attrs) and any(_footnote(element[2]) for element in open_)))
            if mark:
                marks.update(range(start, i + 1))
            elif open_:
                open_[-1][3] += text
            if open_:
                open_[-1][4] = open_[-1][4] or mark or holds
    return marks


def _flagged_as_navigation(events: list[_Event], spans: list[tuple[int, int]]) -> list[_Event]:
    """The events, those within the (start, end) spans flagged as navigation."""
    flagged = list(events)
    for start, end in spans:
        for k in range(start, end + 1):
            flagged[k] = flagged[k]._replace(flags=flagged[k].flags | _NAV)
    return flagged


def _main_content(events: list[_Event]) -> list[int]:
    """The indices of the visible events of the page's main content, widening until some text is
    found.

    In order: inside <main> / role="main" (minus navigation inside it); else inside <article>s;
    else the whole page minus navigation, banner and footer; else everything visible.
    """
    for inside, outside in ((_MAIN, _HIDDEN | _NAV), (_ARTICLE, _HIDDEN | _NAV), (0, _HIDDEN | _NAV),
                            (0, _HIDDEN)):
        kept = [i for i, e in enumerate(events) if e.flags & inside == inside and not e.flags & outside]
        if any(events[i].kind == "text" and events[i].data.strip() for i in kept):
            return kept
    return []


_HEADING_MARK = re.compile(r"#{1,6}(?:\s|$)")  # what opens a Markdown heading line ("#include" does not)


@dataclass
class _DefinitionList:
    """An open <dl>, as `_Markdown` follows it."""

    term_at: int | None = None  # where its last <dt> began in `_Markdown.out`
    term: str = ""  # that term's text
    in_definition: bool = False  # inside the <dd> after it


class _Markdown:
    """Renders events as text: h1-h6 become `#` headings, <pre> a fenced block, block tags line breaks."""

    def __init__(self):
        self.out: list[str] = []
        self._fences: list[int] = []  # where each open <pre>'s opening fence is in `out`
        self._cells = 0  # open table cells
        self._code_ended = -1  # where in `out` the last <code> inside a <pre> ended
        self._cut = False  # something was left out since the last text (`left_out`)
        self._lists: list[_DefinitionList] = []  # the open <dl>s, outermost first
        self._resume = ""  # a term to write again before the next text (`_end_definition_list_item`)

    def start(self, tag: str, attrs: dict) -> None:
        if tag in ("dl", "dt", "dd"):
            self._resume = ""  # what follows is a list or an item of one, not the definition's text
            if tag == "dl":
                self._lists.append(_DefinitionList())
            elif tag == "dt" and self._lists:
                self._lists[-1].term_at = len(self.out)
            elif self._lists:
                self._lists[-1].in_definition = True
        if tag in ("td", "th"):  # a row on one line, cells apart: "-v | verbose", not "-vverbose"
            if not self._at_line_start():
                self.out.append("| " if self.out[-1].endswith(" ") else " | ")
            self._cells += 1
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n" + "#" * int(tag[1]) + " ")
        elif tag == "pre":  # fenced, so `#` lines in code never look like headings
            self._fences.append(len(self.out))
            self.out.append("\n```\n")
        elif tag == "code" and self._fences and self._code_ended == len(self.out):
            # a listing right after another in one block is another version of it (Node.js gives
            # each example as CommonJS and as an ES module, and shows one): on a line of its own
            self.out.append("\n")
        elif tag in _BLOCKS and not (tag != "li" and self._after_list_mark()):
            # a list item's paragraph (`<li><p>`: Sphinx, loose Markdown lists) opens on its bullet's
            # line, "- Loggers expose ...", not under a bullet of its own
            self._break("\n- " if tag == "li" else "\n")

    def end(self, tag: str) -> None:
        if tag in ("dl", "dt", "dd") and self._lists:
            self._end_definition_list_item(tag)
        if tag in ("td", "th"):
            self._cells = max(0, self._cells - 1)
        elif tag == "pre" and self._fences:
            self._close_fence(self._fences.pop())
        elif tag == "code" and self._fences:
            self._code_ended = len(self.out)
        elif re.fullmatch(r"h[1-6]", tag):
            self.out.append("\n\n")
        elif tag == "p":
            self._break("\n\n")
        elif tag in _BLOCKS:
            self._break("\n")

    def _end_definition_list_item(self, tag: str) -> None:
        """Keeps each <dl>'s last term; where a <dl> nested in a definition ends and that definition
        goes on, its term is written again before the text that follows.

        Why: Sphinx writes a class as a term ("class unittest.TestCase(methodName='runTest')") and a
        definition holding its methods, each a term and a definition of its own, then more of the
        class's own text. As flat paragraphs, that text would follow the last method's ("debug()",
        then "The TestCase class provides several assert methods ...") and be read as its."""
        current = self._lists[-1]
        if tag == "dt" and current.term_at is not None:
            current.term = " ".join("".join(self.out[current.term_at:]).split())
        elif tag == "dd":
            current.in_definition = False
        elif tag == "dl":
            self._lists.pop()
            outer = self._lists[-1] if self._lists else None
            # (a list in a table's cell, as docutils writes some, ends inside the row: nothing to resume)
            self._resume = outer.term if outer is not None and outer.in_definition and not self._cells else ""

    def _break(self, text: str) -> None:
        """A line break between blocks; a space inside a table cell (paragraphs, lists), so rows stay whole."""
        if not self._cells:
            self.out.append(text)
        elif self.out and not self.out[-1].endswith((" ", "\n")):
            self.out.append(" ")

    def _close_fence(self, at: int) -> None:
        """End a code block, fenced as `chunking.fence_for` says."""
        code = "".join(self.out[at + 1:])
        fence = fence_for(code)
        self.out[at] = f"\n{fence}\n"
        self.out.append(f"{fence}\n\n" if code.endswith("\n") else f"\n{fence}\n\n")

    def left_out(self) -> None:
        """Something between the text before and the text after is left out: once the mark is out,
        "header [3]." reads "header." and not "header ." """
        self._cut = True

    def text(self, data: str) -> None:
        if self._resume and not self._fences and data.strip():
            self.out.append(f"\n\n{self._resume}\n\n")
            self._resume = ""
        cut, self._cut = self._cut, False
        if cut and not self._fences and data.startswith(_CLOSING) and self.out and self.out[-1].endswith(" "):
            self.out[-1] = self.out[-1].rstrip(" ")
        if self._fences:
            if len(self.out) == self._fences[-1] + 1:  # HTML ignores a newline right after <pre>
                data = data.removeprefix("\n")
            self.out.append(data)
            return
        data = re.sub(r"\s+", " ", data)
        if self.out and self.out[-1].endswith(" ") or self._at_line_start():
            data = data.lstrip()
            # a line of text opening with "#" would read as a Markdown heading, which HTML did not
            # make it ("# of retries ...", a table's number column "# | Name"): a row is opened
            # with its pipe, other text with Markdown's escape (`sentences.plain` drops it)
            line = "".join(self.out[-2:]).rsplit("\n", 1)[-1]
            if _HEADING_MARK.match(data) and not line.strip():
                data = ("| " if self._cells else "\\") + data
        if data:
            self.out.append(data)

    def _after_list_mark(self) -> bool:
        """Whether the current line holds a list item's bullet and nothing else yet."""
        return "".join(self.out[-3:]).rsplit("\n", 1)[-1] == "- "

    def _at_line_start(self) -> bool:
        """Whether the current line holds nothing yet but a heading or list mark."""
        tail = "".join(self.out[-4:])
        if "\n" not in tail and len(self.out) > 4:
            return False
        return re.fullmatch(r"(#{1,6} |- )?\s*", tail.rsplit("\n", 1)[-1]) is not None

    def result(self) -> str:
        """The text without spaces around lines nor repeated blank lines; code keeps its indentation and blanks."""
        lines: list[str] = []
        fence = None
        for line in "".join(self.out).split("\n"):
            line = line.rstrip() if fence else line.strip()
            if fence is None and line in ("```", "~~~"):
                fence = line
            elif line == fence:
                fence = None
            elif fence is None and not line and (not lines or not lines[-1]):
                continue
            lines.append(line)
        return "\n".join(lines).strip()


_META = re.compile(r"<meta\b[^>]*>", re.IGNORECASE)
_HEAD_END = re.compile(r"</head", re.IGNORECASE)
_ROBOTS = re.compile(r"""\bname\s*=\s*["']?robots\b""", re.IGNORECASE)
_NOINDEX = re.compile(r"""\bcontent\s*=\s*["']?[^"'>]*\b(?:noindex|none)\b""", re.IGNORECASE)
NOINDEX_REASON = ('the page asks not to be indexed (<meta name="robots" content="noindex">: '
                  "a print, contents or redirect page)")


def asks_not_to_be_indexed(html: str) -> bool:
    """Whether the page's head says `<meta name="robots" content="noindex">` (or "none").

    Why: documentation generators mark the pages a search engine should skip. mdBook marks
    print.html (the whole book again on one page) and toc.html (every chapter's title as a
    link), and redirect stubs carry it too. Indexed, the first doubles every passage and the
    second matches any question's words. This is the site's own word, not a guess."""
    end = _HEAD_END.search(html)
    return any(_ROBOTS.search(tag) and _NOINDEX.search(tag)
               for tag in _META.findall(html if end is None else html[:end.start()]))


def page_head(data: bytes) -> bytes:
    """The bytes before `</head>` (all of them when there is none). An ASCII "<" never sits
    inside a UTF-8 character, so the cut leaves whole characters."""
    end = re.search(rb"</head", data, re.IGNORECASE)
    return data if end is None else data[:end.start()]


def html_to_markdown(html: str) -> tuple[str, str]:
    """(main content as text with `#` headings, <title>) using only the standard library."""
    parser = _Events()
    parser.feed(html)
    parser.close()
    out = _Markdown()
    events = _flagged_as_navigation(parser.events, _sequential_navigation(parser.events))
    main = _main_content(events)
    left_out = _contents(events, main) | _marks(events, main)  # both read once navigation is out
    for i in main:
        event = events[i]
        if i in left_out:
            out.left_out()
            continue
        if event.kind == "start":
            out.start(event.tag, event.data)
        elif event.kind == "end":
            out.end(event.tag)
        else:
            out.text(event.data)
    return out.result(), parser.title


def _not_a_page(file: SourceFile, data: bytes) -> str | None:
    """A page that asks not to be indexed (only its head is decoded: this is asked of every file)."""
    return NOINDEX_REASON if asks_not_to_be_indexed(decode(page_head(data))[0] or "") else None


# 1: the main content only (navigation, sidebars, header/footer and permalinks dropped);
# 3: sequential navigation and the page's own table of contents dropped too, which DocBook and
# Texinfo pages mark without landmarks, listings side by side in one block on lines of their own,
# and code holding ``` anywhere fenced with ~~~ (`html.py`; 2 was the no-index pages' number);
# 4: footnote marks and their links back dropped; 5: a footnote's own number label too;
# 6: indexes and long tables of contents dropped anywhere on the page, a row opening with a
# "#" cell kept from reading as a heading; 7: any line of text opening with "#" kept so (escaped)
# 8: a list item's paragraph on its bullet's line, a menu and a lead table of contents dropped;
# 9: a definition's text after the definitions nested in it comes after its term again; 10: a
# tooltip's "ⓘ" (rustdoc) dropped as a mark
READER = register(Reader("html", (".html", ".htm"), 10, text_reader(lambda text, file: html_to_markdown(text)),
                         skip=_not_a_page))
