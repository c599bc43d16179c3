"""reStructuredText (Sphinx's dialect) as the Markdown-style text the chunker and evidence read.

Why: Sphinx manuals are written in RST, and read raw they put markup in every chunk and quote:
":prop_tgt:`OUTPUT_NAME`", "``<name>``", ".. versionadded:: 3.1", option lists as directives, and
code blocks indented under ".. code-block::" that the sentence splitter reads as prose (or, at
four spaces, prose indented under a note as code). This is not a full RST parser (docutils does
not know Sphinx's directives and roles without Sphinx); it rewrites the constructs manuals use:

- section titles (underlined, optionally overlined) -> `#` headings; the first adornment style
  seen is level 1, and so on;
- code: `.. code-block:: lang` (and `code`, `sourcecode`, `parsed-literal`, `doctest`, ...) and
  literal blocks after "::" -> fenced code;
- admonitions (`.. note::`, `warning`, `seealso`, ...) -> "Note: ..." paragraphs; version notes
  -> "New in version 3.1: ..." as Sphinx renders them;
- object descriptions (`.. function:: name(args)`, `.. option:: -G <generator>`, any directive
  not named here) -> the signature as a paragraph of its own in a code span, then its body: the
  layout of a term and its definition that the evidence quotes together (`whole_thoughts.term_of`);
- directives that show nothing by themselves (`toctree`, `index`, `raw`, `image`, comments, link
  targets, substitution definitions) are dropped, as is an `include` or `literalinclude` that
  the reader could not read in place (`includes.py` replaces the others by the text they name);
  a list item that is a directive ("*   .. autoclass:: Choice") reads as that directive;
- `only` and other containers (sphinx-design's tab sets and grids among them) keep their body,
  a tab, tab item, dropdown or card shows its title as the label of its first paragraph ("MacOS:
  ..."), and a `list-table` shows its rows as table rows; pallets-sphinx-themes' `click:example`
  is code, and `click:run`, whose output Sphinx makes by running it, is dropped;
- indented bodies are dedented (definition lists, block quotes, directive bodies);
- inline: ``literal`` and code-like roles (:func:`x`, :command:`x`, ...) -> `x`, text roles
  (:ref:`Title <target>`, :doc:, :term:, ...) -> their text, :pep:`8` -> PEP 8, `text <url>`_
  links -> text, footnote references and backslash escapes dropped.
"""

from __future__ import annotations

import re
import textwrap

from unirag.readers import includes
from unirag.readers.base import Reader, register
from unirag.readers.markdown import text_reader

_ADORN = re.compile(r"^([=\-~^\"'`#*+<>:._])\1+\s*$")
_DIRECTIVE = re.compile(r"^\.\.\s+([\w:.+-]+)::(?:\s+(.*))?$")
# a list item that is a directive ("*   .. autoclass:: Choice"), as Click's docs list their types
_LISTED_DIRECTIVE = re.compile(r"^([-*+]|\d+[.)]|#\.)\s+(\.\.\s+[\w:.+-]+::(?:\s+.*)?)$")
_OPTION_LINE = re.compile(r"^:[\w -]+:(?:\s|$)")
# a grid or simple table's rule line ("+----+----+", "====  ====") or a transition ("----")
_TABLE_RULE = re.compile(r"^\s*(?=[-=+| ]*[-=]{3})[-=+| ]+$")
_LIST_ITEM = re.compile(r"^(?:[-*+•]|\d+[.)]|#\.|\(?[a-zA-Z0-9]\))\s+")

CODE = {"code-block", "code", "sourcecode", "parsed-literal", "doctest", "testcode", "testoutput",
        "productionlist"}
DROPPED = {"toctree", "index", "include", "literalinclude", "image", "figure", "raw", "meta",
           "highlight", "default-role", "default-domain", "currentmodule", "module", "program",
           "sectionauthor", "moduleauthor", "codeauthor", "tabularcolumns", "contents", "autosummary",
           "automodule", "autoclass", "autofunction", "automethod", "autoattribute", "autodata",
           "autoexception", "cmake-module", "graphviz", "plot", "role", "sectnum", "header", "footer",
           "target-notes", "title", "spelling:word-list"}
CONTAINERS = {"only", "container", "rst-class", "class", "ifconfig", "tabs",
              "glossary", "list-table", "table", "csv-table", "centered", "hlist", "compound",
              "epigraph", "highlights", "pull-quote", "line-block",
              "tab-set", "tab-set-code", "grid", "grid-item"}  # sphinx-design's layout boxes
TITLED = {"topic", "sidebar", "rubric"}  # their argument is a title, shown as a paragraph
# boxes whose title labels what they hold, read as "MacOS: ~/Library/Caches/pip" (`box_line`):
# sphinx-tabs' and sphinx-inline-tabs' tabs, sphinx-design's tab items, dropdowns and cards
BOXES = {"tab", "group-tab", "tab-item", "dropdown", "card", "grid-item-card"}
# directives known by their full name, whose last part alone says too little ("example", "run"):
# pallets-sphinx-themes' `click:example` shows its body as code, `click:run` the output of running
# an example, which the source does not hold (its body is the Python call that makes it)
CODE_BY_NAME = {"click:example"}
DROPPED_BY_NAME = {"click:run"}
ADMONITIONS = {"note": "Note", "warning": "Warning", "tip": "Tip", "important": "Important",
               "caution": "Caution", "attention": "Attention", "danger": "Danger", "error": "Error",
               "hint": "Hint", "seealso": "See also", "todo": "To do", "impl-detail": "CPython implementation detail"}
VERSIONS = {"versionadded": "New in version", "versionchanged": "Changed in version",
            "deprecated": "Deprecated since version", "versionremoved": "Removed in version",
            "deprecated-removed": "Deprecated since version"}
NOTES = set(VERSIONS) | set(ADMONITIONS) | {"admonition"}  # read as "Label: what it says"
# roles whose text is prose, not a name in code: shown without backticks
TEXT_ROLES = {"ref", "doc", "term", "manual", "abbr", "guilabel", "menuselection", "dfn", "emphasis",
              "strong", "title-reference", "math", "sub", "sup", "numref", "download", "kbd", "any",
              "cite", "index", "pep", "rfc", "source", "issue", "gh", "bpo"}


def rst_to_markdown(text: str) -> str:
    """The RST text rewritten as Markdown-style text (see the module docstring)."""
    lines = _titles(text.expandtabs(8).split("\n"))
    out, prose, in_fence = [], [], False
    for line in _blocks(lines):
        if line.startswith("```"):
            in_fence = not in_fence
        if in_fence or line.startswith("```"):
            # inline markup is read over a run of prose lines: a literal or role may wrap
            out += [inline("\n".join(prose)), line] if prose else [line]
            prose = []
        elif not _TABLE_RULE.match(line):  # a table's rules or a transition: no text
            prose.append(line)
    out += [inline("\n".join(prose))] if prose else []
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip("\n") + "\n"


def _titles(lines: list[str]) -> list[str]:
    """Section titles as `#` headings; titles start in the first column."""
    styles: list[tuple[str, bool]] = []
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        over = bool(_ADORN.match(line)) and i + 2 < len(lines) and _ADORN.match(lines[i + 2] or "x") is not None
        if over and lines[i + 1].strip() and lines[i + 2][:1] == line[:1]:
            title, style, step = lines[i + 1].strip(), (line[0], True), 3
        elif (line.strip() and not line[0].isspace() and not _ADORN.match(line) and _ADORN.match(nxt)
              and len(nxt.rstrip()) >= len(line.rstrip())):
            title, style, step = line.strip(), (nxt[0], False), 2
        else:
            out.append(line)
            i += 1
            continue
        if style not in styles:
            styles.append(style)
        out += ["", "#" * min(styles.index(style) + 1, 6) + " " + title, ""]
        i += step
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _indented_block(lines: list[str], i: int, base: int = 0) -> tuple[list[str], int]:
    """The lines from i on that are blank or indented more than `base`, trailing blanks left out,
    and the index after them."""
    j = i
    while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) > base):
        j += 1
    while j > i and not lines[j - 1].strip():
        j -= 1
    return lines[i:j], j


def dedent(lines: list[str]) -> list[str]:
    """Lines without the indentation they all share (a directive's body; MyST's too)."""
    return textwrap.dedent("\n".join(lines)).split("\n")


# blocks nested deeper are kept as their lines, stripped: manuals nest a few levels, and a
# pathological staircase of indents must not exhaust Python's recursion limit
MAX_NESTING = 40


def _blocks(lines: list[str], depth: int = 0) -> list[str]:
    """Directives, literal blocks and indented bodies rewritten; other lines as they are."""
    if depth > MAX_NESTING:
        return [line.strip() for line in lines]
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        listed = _LISTED_DIRECTIVE.match(line)
        directive = _DIRECTIVE.match(listed.group(2) if listed else line)
        if directive:
            body, i = _indented_block(lines, i + 1)
            name, arg = directive.group(1).lower(), (directive.group(2) or "").strip()
            shown = _directive(name, arg, dedent(body), depth + 1)
            first = next((k for k, text in enumerate(shown) if text.strip()), None)
            if listed and first is not None:  # the item keeps its bullet: "* New in version 3.6: ..."
                shown[first] = f"{listed.group(1)} {shown[first]}"
            out += shown
            continue
        if line.startswith("..") and (line.strip() == ".." or line.startswith(".. ")):
            _, i = _indented_block(lines, i + 1)  # a comment, link target or substitution definition
            continue
        if line.strip() and _indent(line) > 0:
            block, i = _indented_block(lines, i, _indent(line) - 1)
            previous = next((k for k in range(len(out) - 1, -1, -1) if out[k].strip()), None)
            if previous is not None and out[previous].rstrip().endswith("::") and not out[-1].strip():
                out[previous] = _literal_intro(out[previous])
                out += _fenced("", dedent(block))
            else:  # a block quote, a definition, or a list item's continuation: the text dedented
                out += _blocks(dedent(block), depth + 1)
            continue
        if (line.strip() and i + 1 < len(lines) and lines[i + 1].strip() and _indent(lines[i + 1]) > 0
                and not _LIST_ITEM.match(line) and not line.startswith(("#", ":", "|"))):
            # a definition list's term: the term, then its definition as a paragraph of its own
            out += [line, ""]
            block, i = _indented_block(lines, i + 1)
            out += _blocks(dedent(block), depth + 1) + [""]
            continue
        out.append(line)
        i += 1
    return out


def _literal_intro(line: str) -> str:
    """A paragraph's last line before a literal block: "Example::" reads "Example:", a "::" after
    a space or alone goes."""
    stripped = line.rstrip()[:-2]
    return stripped + ":" if stripped and not stripped[-1].isspace() else stripped.rstrip()


def _fenced(language: str, body: list[str]) -> list[str]:
    while body and not body[0].strip():
        body = body[1:]
    return ["", f"```{language}", *body, "```", ""] if body else []


def _split_options(body: list[str]) -> tuple[list[str], list[str]]:
    """(the lines before the body's first blank line: the argument's continuation and the
    directive's `:option:` lines, or text that follows the directive at once; the rest)."""
    head = 0
    while head < len(body) and body[head].strip():
        head += 1
    return body[:head], body[head:]


def _directive(name: str, arg: str, body: list[str], depth: int) -> list[str]:
    short = name.split(":")[-1]
    head, rest = _split_options(body)
    options = [line for line in head if _OPTION_LINE.match(line.strip())]
    continued = [line.strip() for line in head if not _OPTION_LINE.match(line.strip())]
    if short in DROPPED or name in DROPPED_BY_NAME:
        return []
    if short in CODE or name in CODE_BY_NAME:
        language = arg.split()[0] if arg and short in ("code-block", "code", "sourcecode") else ""
        return _fenced(language, [line for line in head if not _OPTION_LINE.match(line.strip())] + rest)
    if short in NOTES:
        label, said = note_label(short, arg)
        text = " ".join([said, *continued]).strip()
        if not text:  # the body starts after a blank line: its first paragraph is what the note says
            text, rest = _first_paragraph(rest)
        line = note_line(short, label, text)
        # read with the rest, so that a first paragraph ending in "::" introduces the literal
        # block after it, as anywhere else
        return ["", *_blocks([line, "", *rest], depth), ""]
    if short == "list-table" and (rows := _list_table_rows(rest if options else body)):
        return ["", *rows, ""]
    if short in BOXES and arg:
        text, after = _first_paragraph(rest if options else body)
        return ["", *_blocks([box_line(arg, text), "", *after], depth), ""]
    if short in CONTAINERS or short in BOXES:  # a box without a title holds its text alone
        return ["", *_blocks(rest if options else body, depth), ""]
    if short in TITLED:
        return ["", arg, "", *_blocks(rest if options else body, depth), ""]
    # an object description: each signature a line in a code span, then what it says about it
    signatures = [s for s in [arg, *continued] if s]
    return ["", *(f"`{s}`" for s in signatures), "", *_blocks(rest, depth), ""]


_ROW_START = re.compile(r"^[*-]\s+[*-](?:\s+(.*))?$")  # "* - first cell" opens a row
_CELL_START = re.compile(r"^\s+[*-](?:\s+(.*))?$")      # "  - next cell"


def _list_table_rows(body: list[str]) -> list[str]:
    """A `list-table`'s rows as Markdown table rows (one line each, "| a | b |", a delimiter row
    after the first), as the page shows them; [] when the body is not two-level list."""
    rows: list[list[str]] = []
    for line in body:
        row, cell = _ROW_START.match(line), _CELL_START.match(line)
        if row:
            rows.append([(row.group(1) or "").strip()])
        elif cell and rows:
            rows[-1].append((cell.group(1) or "").strip())
        elif line.strip() and rows:
            rows[-1][-1] = f"{rows[-1][-1]} {line.strip()}".strip()
        elif line.strip():
            return []
    if not rows:
        return []
    lines = ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    # ":---" so that `rst_to_markdown` does not take the delimiter for a grid table's rule line
    return [lines[0], "|" + " :--- |" * len(rows[0]), *lines[1:]]


def note_label(name: str, argument: str) -> tuple[str, str]:
    """(the label Sphinx renders a note or version note with, what its argument says):
    ("New in version 3.1", ""), ("Warning", "Do not run as root."); an `admonition`'s argument
    is its title. MyST's notes (`myst.py`) read the same way."""
    if name in VERSIONS:
        version, _, said = argument.partition(" ")
        return f"{VERSIONS[name]} {version}", said
    return (argument, "") if name == "admonition" else (ADMONITIONS[name], argument)


def box_line(title: str, text: str) -> str:
    """A tab's or card's title with its first paragraph, "A regular install: ...", or alone before
    the code it holds ("MacOS:", then the path), so that the title is quoted with what it labels."""
    title = title.rstrip(":")
    return f"{title}: {text}" if text else f"{title}:"


def note_line(name: str, label: str, text: str) -> str:
    """The note as one paragraph: "Note: ...", or its label alone ("New in version 3.1.")."""
    return f"{label}: {text}" if text else (f"{label}." if name in VERSIONS else f"{label}:")


def _first_paragraph(lines: list[str]) -> tuple[str, list[str]]:
    """The first paragraph of `lines` joined into one line and the lines after it; ("", lines)
    when they start with something other than a paragraph (a directive, list or indented block)."""
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or lines[i].startswith("..") or _LIST_ITEM.match(lines[i]) or _indent(lines[i]):
        return "", lines[i:]
    j = i
    while j < len(lines) and lines[j].strip() and not _indent(lines[j]):
        j += 1
    return " ".join(line.strip() for line in lines[i:j]), lines[j:]


_LITERAL = re.compile(r"(``.+?``)", re.DOTALL)
_ROLE = re.compile(r":(?:[\w-]+:)?([\w-]+):`((?:[^`\\]|\\.)+)`")
_LINK = re.compile(r"`([^`<]*?)\s*<[^`<>]+>`__?")
_NAMED_REFERENCE = re.compile(r"`([^`]+)`__?(?!\w)")
# a one-word reference, "scrypt_" (a link to the target named "scrypt"); not "__init__" or "x_"'s code
_WORD_REFERENCE = re.compile(r"(?<![\w`<])([A-Za-z][\w.-]*[A-Za-z0-9])__?(?=[\s.,;:!?)\]]|$)")
_CODE_SPAN = re.compile(r"(`[^`]*`)")
_FOOTNOTE = re.compile(r"\s?\[(?:#[\w-]*|\d+|\*)\]_")
_ESCAPE = re.compile(r"\\(.)")


def _role(match: re.Match) -> str:
    return role_text(match.group(1), match.group(2))


def role_text(role: str, content: str) -> str:
    """A role's text as a page shows it: a code-like role's content in a code span, a text role's
    (`ref`, `doc`, `term`, ...) as prose; "title <target>" shows its title. MyST's
    `{role}`content`` (`myst.py`) reads the same way."""
    role = role.lower()
    # "title <target>" (a space before "<"), or "<target>" alone; "$<TARGET_OBJECTS>" (a CMake
    # generator expression) and "vector<int>" are the content itself
    titled = re.fullmatch(r"(?:(.*?)\s+)?<([^<>]+)>", content, re.DOTALL)
    if titled and titled.group(1):
        content = titled.group(1)
    elif titled:
        content = titled.group(2)
    if role == "pep":
        return f"PEP {content}"
    if role == "rfc":
        return f"RFC {content}"
    if role in TEXT_ROLES:
        return content
    content = content.lstrip("!")
    if content.startswith("~"):
        content = content[1:].rsplit(".", 1)[-1]
    return f"`{content}`"


def inline(text: str) -> str:
    """Inline markup rewritten (roles, literals, links, footnote references, escapes); a literal
    may wrap onto the next line, not across a blank one."""
    if "`" not in text and "\\" not in text and "_" not in text:
        return text
    paragraphs = re.split(r"(\n[ \t]*\n)", text)
    if len(paragraphs) > 1:  # markup never spans paragraphs: an unmatched quote stays in its own
        return "".join(inline(part) if k % 2 == 0 else part for k, part in enumerate(paragraphs))
    pieces = _LITERAL.split(text)  # literals first: their text is never markup
    out = []
    for k, piece in enumerate(pieces):
        if k % 2:
            out.append(f"`{piece[2:-2]}`")
            continue
        piece = _ROLE.sub(_role, piece)
        piece = _LINK.sub(lambda m: m.group(1), piece)
        piece = _NAMED_REFERENCE.sub(lambda m: m.group(1), piece)
        piece = "".join(part if k % 2 else _WORD_REFERENCE.sub(lambda m: m.group(1), part)
                        for k, part in enumerate(_CODE_SPAN.split(piece)))  # not in the roles' code
        piece = _FOOTNOTE.sub("", piece)
        out.append(_ESCAPE.sub(lambda m: "" if m.group(1) == " " else m.group(1), piece))
    return "".join(out)


# what plain text does not hold: a directive, a role, or a double-backquoted literal
_RST_SIGNS = re.compile(r"^\.\.\s+[\w:.+-]+::|:[\w-]+:`[^`\n]+`|``[^`\s][^`\n]*``", re.MULTILINE)


def looks_like_rst(text: str) -> bool:
    """Whether a .txt file is written in RST (Sphinx's include fragments and older Sphinx sources
    are .txt): it has a directive, a role or a double-backquoted literal."""
    return bool(_RST_SIGNS.search(text))


# 1: directives, literal blocks, roles and links read (`rst.py`), not only section titles; a .txt
# file written in RST (Sphinx's include fragments, older Sphinx sources) is read as one (`claims`);
# 2: include directives read in place (`includes.py`); 3: a role's "<...>" read as its target only
# after a space (":ref:`title <target>`"), so ":genex:`$<TARGET_OBJECTS>`" keeps its text;
# 4: a list-table's rows as table rows, a directive as a list item, sphinx-design's boxes, Click's
# examples, one-word references, a note's literal block; 5: a tab's title shown (sphinx-tabs);
# 6: a tab's or card's title as the label of its first paragraph
READER = register(Reader("rst", (".rst",), 6, text_reader(lambda text, file: (rst_to_markdown(text), "")),
                         sniff=looks_like_rst, claims=("text",), expand=includes.expand,
                         include_marker=b"include::"))
