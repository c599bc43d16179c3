"""AsciiDoc (.adoc, .asciidoc: Asciidoctor and Antora sites, many Java and Git-family manuals) ->
Markdown, the text its rendered page shows, with its sections.

- Section titles ("== Install", up to six "=", a closing run of "=" allowed; the two-line form,
  a title over a line of "=", "-", "~", "^" or "+" as long as it, give or take two) -> `#`
  headings, one "#" per "=" (the document title, "= Guide", is the page's `#` title).
- The header's attribute entries (":toc:", ":version: 2.1") are dropped, and "{version}" in the
  text reads as the value an entry gave it.
- Listing and literal blocks ("----", "....", a paragraph indented outside a list, or one under
  "[source]") -> fenced code, in the language a "[source,python]" line above names. Comment
  blocks ("////"), line comments ("// ..."), passthrough blocks ("++++", raw HTML) and
  preprocessor lines ("ifdef::"; an "include::" whose file is not in the ingested folder, since
  those that are were read in place before: `includes.expand_asciidoc`) are dropped.
- Other delimited blocks (example "====", sidebar "****", quote "____", open "--") keep their
  text; a table ("|===") keeps each cell's text, a row's cells on one line joined by " | ".
- Block attribute lines ("[source,java]", "[[install]]") are dropped; an admonition's ("[NOTE]")
  and a block title (".Example") read as a label ("Note:", "Example:"), as does a paragraph's
  "NOTE: " ("Note: ..."), so that the sentence after it is quoted with it.
- A labelled list item ("--verbose::", then its text on the same or the next lines) -> its term
  as a paragraph of its own, then its text: the layout of a term and its definition that the
  evidence quotes together (`whole_thoughts.term_of`).
- Inline: a link or cross reference reads as its text ("https://x.org[the site]" -> "the site",
  "<<install,Installing>>" -> "Installing", "xref:a.adoc[A]" -> "A"), "kbd:[Ctrl+C]" and
  "pass:[...]" as what they hold, "`+literal+`" as "`literal`"; footnotes are dropped.
"""

from __future__ import annotations

import re
import textwrap

from unirag.readers import includes
from unirag.readers.base import Reader, register
from unirag.readers.markdown import fence_for, text_reader

_SECTION = re.compile(r"^(={1,6})[ \t]+(\S.*?)(?:[ \t]+=+)?[ \t]*$")
_UNDERLINES = {"=": 1, "-": 2, "~": 3, "^": 4, "+": 5}
_UNDERLINE = re.compile(r"^([=\-~^+])\1+[ \t]*$")
_DELIMITER = re.compile(r"^(-{4,}|\.{4,}|={4,}|\*{4,}|_{4,}|\+{4,}|/{4,}|--)[ \t]*$")
_TABLE = re.compile(r"^[|,:!]={3,}[ \t]*$")
_ATTRIBUTE_ENTRY = re.compile(r"^:(!?[\w-]+!?):(?:[ \t]+(.*?))?[ \t]*$")
_BLOCK_ATTRIBUTES = re.compile(r"^\[([^\[\]]*)\][ \t]*$")
_ANCHOR = re.compile(r"^\[\[[^\]]*\]\][ \t]*$")  # "[[install]]": a name to link to, no text
_BLOCK_TITLE = re.compile(r"^\.([^.\s].*)$")
_PREPROCESSOR = re.compile(r"^(?:include|ifdef|ifndef|ifeval|endif)::")
_LINE_COMMENT = re.compile(r"^//(?!//)")
_LABELLED = re.compile(r"^(\S.*?)(?::{2,4}|;;)(?:[ \t]+(.*))?$")
_ADMONITIONS = ("NOTE", "TIP", "IMPORTANT", "CAUTION", "WARNING")
_ADMONITION_PARAGRAPH = re.compile(rf"^({'|'.join(_ADMONITIONS)}):[ \t]+")
_LIST_ITEM = re.compile(r"^[ \t]*(\*{1,5}|-|\.{1,5})[ \t]+(.*)$")
_CODE_STYLES = ("source", "listing", "literal")

_FOOTNOTE = re.compile(r"[ \t]*footnote:[\w-]*\[[^\]]*\]")
_CALLOUT_ITEM = re.compile(r"^<(\d+)>[ \t]+")  # "<1> what line 1 does", below a listing
_MACRO = re.compile(r"\b(?:kbd|btn|pass|menu:[^\[\s]*):?\[([^\]]*)\]")
_LINK = re.compile(r"\b(?:(?:https?|ftp|irc|mailto):[^\s\[\]]+|(?:link|xref):[^\s\[\]]*)\[([^\]]*)\]")
_XREF = re.compile(r"<<([^,>]+)(?:,\s*([^>]+))?>>")
_PLUS_LITERAL = re.compile(r"`\+(.+?)\+`")
_ATTRIBUTE_REFERENCE = re.compile(r"\{([\w-]+)\}")
_HARD_BREAK = re.compile(r"[ \t]\+$")
_CALLOUT = re.compile(r"(?:[ \t]*(?://|#|--|;;)?[ \t]*<(?:\d+|\.)>)+[ \t]*$")


def asciidoc_to_markdown(text: str) -> str:
    """The Markdown of an AsciiDoc page."""
    markdown = "\n".join(_blocks(text.replace("\r\n", "\n").split("\n"), {}))
    return re.sub(r"\n{3,}", "\n\n", markdown).strip("\n")


def _blocks(lines: list[str], attributes: dict[str, str]) -> list[str]:
    """The Markdown lines of `lines`; `attributes` gathers the attribute entries met on the way."""
    out: list[str] = []
    style = language = ""  # what the last block attribute line asked for ("source", "python")
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        entry = _ATTRIBUTE_ENTRY.match(line)
        if entry:
            if entry.group(2) is not None and not entry.group(1).startswith("!"):
                attributes[entry.group(1)] = entry.group(2)
            i += 1
            continue
        if _PREPROCESSOR.match(line) or _LINE_COMMENT.match(line) or _ANCHOR.match(line) or stripped == "+":
            i += 1  # ("+" alone joins the next block to a list item: nothing to read)
            continue
        block = _BLOCK_ATTRIBUTES.match(line)
        if block:
            parts = [p.strip() for p in block.group(1).split(",")]
            style, language = parts[0], ""
            if parts[0] in _CODE_STYLES or (parts[0] == "" and len(parts) > 1):  # "[,python]" too
                style, language = "source", parts[1] if len(parts) > 1 else ""
            elif parts[0] in _ADMONITIONS:
                out += ["", f"{parts[0].capitalize()}:"]
            i += 1
            continue
        title = _BLOCK_TITLE.match(line)
        if title:
            out += ["", f"{_inline(title.group(1), attributes)}:"]
            i += 1
            continue
        section = _SECTION.match(line)
        if section:
            document_title = len(section.group(1)) == 1 and not any(ln.strip() for ln in out)
            out += ["", f"{'#' * len(section.group(1))} {_inline(section.group(2), attributes)}", ""]
            style, i = "", i + 1
            while document_title and i < len(lines) and lines[i].strip() and not _ATTRIBUTE_ENTRY.match(lines[i]):
                i += 1  # the header's author and revision lines: no text of the page
            continue
        if i + 1 < len(lines) and _is_underlined(line, lines[i + 1]):
            out += ["", f"{'#' * _UNDERLINES[lines[i + 1].strip()[0]]} {_inline(stripped, attributes)}", ""]
            style, i = "", i + 2
            continue
        if _TABLE.match(line):
            end = _closing(lines, i, stripped)
            out += ["", *_table(lines[i + 1:end], attributes), ""]
            style, i = "", end + 1
            continue
        delimiter = _DELIMITER.match(line)
        if delimiter:
            mark = delimiter.group(1)
            end = _closing(lines, i, mark)
            body = lines[i + 1:end]
            if style == "source" or (mark[0] in "-." and mark != "--"):
                out += ["", *_fenced(body, language), ""]
            elif mark[0] not in "/+":  # a comment or a passthrough block is no text of the page
                out += ["", *_blocks(body, attributes), ""]
            style, language, i = "", "", end + 1
            continue
        if style == "source" and stripped:  # a paragraph styled as source is a listing too
            end = _paragraph_end(lines, i)
            out += ["", *_fenced(lines[i:end], language), ""]
            style, language, i = "", "", end
            continue
        labelled = _LABELLED.match(line)
        if labelled:
            out += ["", _inline(labelled.group(1), attributes), ""]
            text = [labelled.group(2)] if labelled.group(2) else []
            i += 1
            while i < len(lines) and lines[i].strip() and not _LABELLED.match(lines[i]):
                text.append(lines[i].strip())
                i += 1
            if text:
                out += [_inline(" ".join(text), attributes), ""]
            style = ""
            continue
        if line[:1].isspace() and stripped and (not out or not out[-1].strip()):
            end = _paragraph_end(lines, i)  # an indented paragraph outside a list item is a literal block
            out += [*_fenced(textwrap.dedent("\n".join(lines[i:end])).split("\n"), language), ""]
            style, language, i = "", "", end
            continue
        item = _LIST_ITEM.match(line)
        if item:
            marks, rest = item.groups()
            depth = 0 if marks == "-" else len(marks) - 1
            out.append(f"{'  ' * depth}{'1.' if marks[0] == '.' else '-'} {_inline(rest, attributes)}")
        else:
            stripped = _CALLOUT_ITEM.sub(r"\1. ", stripped)
            admonition = _ADMONITION_PARAGRAPH.match(stripped)
            if admonition:
                stripped = f"{admonition.group(1).capitalize()}: {stripped[admonition.end():]}"
            out.append(_inline(stripped, attributes))
            if not stripped:
                style = ""
        i += 1
    return out


def _fenced(body: list[str], language: str) -> list[str]:
    """A code block, its callout marks ("<1>" at a line's end) dropped."""
    fence = fence_for("\n".join(body))
    return [f"{fence}{language}", *(_CALLOUT.sub("", line) for line in body), fence]


def _is_underlined(line: str, under: str) -> bool:
    """Whether `line` is a two-line section title: a line of text over a run of one of the
    underline characters as long as it, give or take two."""
    text = line.strip()
    return (bool(text) and not line[:1].isspace() and _UNDERLINE.match(under) is not None
            and abs(len(under.strip()) - len(text)) <= 2
            and not (_BLOCK_ATTRIBUTES.match(line) or _BLOCK_TITLE.match(line) or _LIST_ITEM.match(line)
                     or _DELIMITER.match(line) or _LINE_COMMENT.match(line) or _ATTRIBUTE_ENTRY.match(line)))


def _paragraph_end(lines: list[str], start: int) -> int:
    """The index of the first blank line at or after `start` (the end if none is)."""
    return next((j for j in range(start, len(lines)) if not lines[j].strip()), len(lines))


def _closing(lines: list[str], start: int, delimiter: str) -> int:
    """The index of the line that closes the block opened at `start` (the end if none does)."""
    return next((j for j in range(start + 1, len(lines)) if lines[j].strip() == delimiter), len(lines))


def _table(rows: list[str], attributes: dict[str, str]) -> list[str]:
    """A table's rows, each as its cells' text joined by " | ". A row has as many cells as the
    table's first line ("|a |b" or "|a" over "|b"), as Asciidoctor counts its columns."""
    cells: list[str] = []
    columns = 0
    for line in rows:
        if not line.strip():
            continue
        parts = [c.strip() for c in re.split(r"(?<!\\)\|", line)]
        if line.lstrip().startswith("|"):
            parts = parts[1:]
            columns = columns or len(parts)
        elif cells:  # a cell's text going on from the line before
            cells[-1] = f"{cells[-1]} {parts.pop(0)}".strip()
        cells += [_inline(c, attributes) for c in parts]
    columns = columns or 1
    return [" | ".join(cells[k:k + columns]) for k in range(0, len(cells), columns)]


def _inline(text: str, attributes: dict[str, str]) -> str:
    text = _FOOTNOTE.sub("", text)
    text = _ATTRIBUTE_REFERENCE.sub(lambda m: attributes.get(m.group(1), m.group(0)), text)
    text = _LINK.sub(_link_text, text)
    text = _XREF.sub(lambda m: (m.group(2) or m.group(1)).strip(), text)
    text = _MACRO.sub(lambda m: m.group(1), text)
    text = _PLUS_LITERAL.sub(r"`\1`", text)
    return _HARD_BREAK.sub("", text)


def _link_text(match: re.Match) -> str:
    """A link's text; where it has none, its target (without "link:" or "xref:")."""
    whole, text = match.group(0), match.group(1)
    target = whole[:whole.index("[")]
    return text or (target.split(":", 1)[1] if target.startswith(("link:", "xref:")) else target)


READER = register(Reader("asciidoc", (".adoc", ".asciidoc"), 0,
                         text_reader(lambda text, file: (asciidoc_to_markdown(text), "")),
                         expand=includes.expand_asciidoc, include_marker=b"include::"))
