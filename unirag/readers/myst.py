"""MyST Markdown (Sphinx's Markdown through myst-parser, Jupyter Book) as plain Markdown.

Why: Click's, Jupyter Book's and many Sphinx projects' pages are .md files whose blocks are Sphinx
directives in fences (```` ```{note} ````, ```` ```{eval-rst} ````, `:::{tip}`) and whose text
holds Sphinx roles (``{func}`option` ``, ``{ref}`parameter type <parameter-types>` ``). Read as
plain Markdown, a note's prose is a code block, a `{contents}` block is a unit reading ":depth: 2",
the RST inside `{eval-rst}` (Click's examples) is code with its directive lines, and every role's
name ("{func}") sits in the quotes and in BM25's words. A rendered page shows none of that.

What is rewritten, as `rst.py` rewrites the same directives and roles in RST:
- a directive's options (`:key: value` lines, or a `---` YAML block) are dropped; code
  directives (`code-block`, `code-cell`, `math`, ...) become fenced code; `eval-rst` is read as
  RST (`rst.rst_to_markdown`); admonitions and version notes become "Note: ..." and "New in
  version 8.0: ..." paragraphs; what shows nothing by itself (`toctree`, `contents`,
  `currentmodule`, images) is dropped; containers keep their body, a tab or card labels its first
  paragraph with its title ("MacOS: ..."), and any other directive (an object description) shows
  its argument in a code span;
  bodies are MyST themselves, so directives nest;
- roles read as `rst.role_text` reads them: code-like roles as code spans, text roles as text;
- target lines (`(label)=`), comments (`% ...`) and block breaks (`+++`) are dropped.
Fenced code without braces, and everything else, stays as written.
"""

from __future__ import annotations

import re

from unirag.readers import rst
from unirag.readers.base import Reader, register
from unirag.readers.markdown import FENCE, markdown_prose, read_front_matter, text_reader

# a directive's opening fence: ```{name} argument, ~~~{name}, or :::{name} (the colon fence)
_OPEN = re.compile(r"^([ \t]*)(`{3,}|~{3,}|:{3,})\{([\w:.+-]+)\}[ \t]*(.*?)[ \t]*$")
_TARGET = re.compile(r"^[ \t]*\([^()\s]+\)=[ \t]*$")
_COMMENT = re.compile(r"^[ \t]*%")
_BLOCK_BREAK = re.compile(r"^[ \t]*\+\+\+")
_OPTION = re.compile(r"^[ \t]*:[\w-]+:(?:[ \t]|$)")
# an inline code span, within one paragraph; a role is one after "{name}" ("{func}`option`")
_SPAN = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.DOTALL)
_ROLE_NAME = re.compile(r"(?<![`$\w])\{(?:[\w-]+:)*([\w-]+)\}$")  # not "${name}" or "`{x}`"
_SIGNS = re.compile(r"^[ \t]*(?:(?:`{3,}|~{3,}|:{3,})\{[\w:.+-]+\}|\([^()\s]+\)=[ \t]*$)"
                    r"|(?<![`$\w])\{[\w:-]+\}`[^`\s]", re.MULTILINE)
# code-cell: MyST-NB's notebook cells; pip-cli: pip's docs show a console session in one
CODE = rst.CODE | {"code-cell", "math", "eval-sh", "pip-cli"}
LANGUAGE_ARGUMENT = {"code-block", "code", "sourcecode", "code-cell"}
MAX_NESTING = 40


def looks_like_myst(text: str) -> bool:
    """Whether a Markdown text uses MyST's syntax: a directive fence, a target line or a role."""
    return bool(_SIGNS.search(text))


def myst_to_markdown(text: str) -> str:
    """The MyST text rewritten as plain Markdown (see the module docstring)."""
    return re.sub(r"\n{3,}", "\n\n", "\n".join(_read(text.split("\n"), 0))).strip("\n") + "\n"


def _roles(text: str) -> str:
    """The text with its roles as they read; code spans that are no role's stay as written
    ("`{FOO_BAR}`"), and a role may wrap onto the next line of its paragraph."""
    out, pos = [], 0
    for span in _SPAN.finditer(text):
        before = text[pos:span.start()]
        name = _ROLE_NAME.search(before)
        if name:
            out += [before[:name.start()], rst.role_text(name.group(1), span.group(2))]
        else:
            out += [before, span.group()]
        pos = span.end()
    return "".join(out + [text[pos:]])


def _read(lines: list[str], depth: int) -> list[str]:
    out: list[str] = []
    prose: list[str] = []  # roles are read over a run of prose lines: one may wrap
    i = 0
    while i < len(lines):
        line = lines[i]
        opening = _OPEN.match(line)
        if (opening and depth < MAX_NESTING) or FENCE.match(line):
            out += _roles("\n".join(prose)).split("\n") if prose else []
            prose = []
        if opening and depth < MAX_NESTING:
            indent, fence, name, argument = opening.groups()
            body, i = _body(lines, i + 1, fence)
            block = _directive(name.lower(), argument, _unindent(body, indent), depth + 1)
            out += [indent + text if text.strip() else "" for text in block]
            continue
        if FENCE.match(line):  # plain fenced code: as written, up to its closing fence
            _, end = _body(lines, i + 1, FENCE.match(line).group(1))
            out += lines[i:end]
            i = end
            continue
        if not (_TARGET.match(line) or _COMMENT.match(line) or _BLOCK_BREAK.match(line)):
            prose.append(line)
        i += 1
    return out + (_roles("\n".join(prose)).split("\n") if prose else [])


def _body(lines: list[str], i: int, fence: str) -> tuple[list[str], int]:
    """The lines of a block opened by `fence` from line i on, and the index after its closing line:
    the first line of the same character, at least as long, and nothing else (or the text's end)."""
    closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
    j = i
    while j < len(lines) and not closing.match(lines[j]):
        j += 1
    return lines[i:j], j + 1


def _unindent(body: list[str], indent: str) -> list[str]:
    """A body without the indentation of its directive's fence (a directive inside a list item)."""
    return [line[len(indent):] if line.startswith(indent) else line for line in body]


def _options(body: list[str]) -> list[str]:
    """The body without the directive's options: leading `:key: value` lines or a `---` block."""
    if body and body[0].strip() == "---":
        end = next((k for k in range(1, len(body)) if body[k].strip() == "---"), None)
        if end is not None:
            return body[end + 1:]
    k = 0
    while k < len(body) and _OPTION.match(body[k]):
        k += 1
    return body[k:]


def _first_paragraph(lines: list[str]) -> tuple[str, list[str]]:
    """The first paragraph joined into one line and the lines after it; ("", lines) when the body
    opens with something other than a paragraph (a list, code, a heading or another directive)."""
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or re.match(r"[ \t]|[-*+#>|]|\d+[.)]\s|`{3}|~{3}|:{3}", lines[i]):
        return "", lines[i:]
    j = i
    while j < len(lines) and lines[j].strip() and not _OPEN.match(lines[j]) and not FENCE.match(lines[j]):
        j += 1
    return " ".join(line.strip() for line in lines[i:j]), lines[j:]


def _directive(name: str, argument: str, body: list[str], depth: int) -> list[str]:
    short = name.split(":")[-1]
    if name == "eval-rst":
        return ["", *rst.rst_to_markdown("\n".join(rst.dedent(body))).strip("\n").split("\n"), ""]
    if short in rst.DROPPED or name in rst.DROPPED_BY_NAME:
        return []
    body = rst.dedent(_options(body))  # options may sit at the fence's column, the body deeper
    while body and not body[0].strip():
        body = body[1:]
    if short in CODE or name in rst.CODE_BY_NAME:
        language = argument.split()[0] if argument and short in LANGUAGE_ARGUMENT else ""
        fence = "~~~" if any(line.lstrip().startswith("```") for line in body) else "```"
        return ["", f"{fence}{language}", *body, fence, ""] if body else []
    if short in rst.NOTES:
        label, said = rst.note_label(short, argument)
        text, rest = _first_paragraph(body)
        line = rst.note_line(short, label, _roles(" ".join(part for part in (said, text) if part)))
        return ["", line, "", *_read(rest, depth), ""]
    if short in rst.BOXES and argument:
        text, rest = _first_paragraph(body)
        return ["", _roles(rst.box_line(argument, text)), "", *_read(rest, depth), ""]
    if short in rst.CONTAINERS or short in rst.BOXES:  # a box without a title holds its text alone
        return ["", *_read(body, depth), ""]
    if short in rst.TITLED:
        return ["", argument, "", *_read(body, depth), ""] if argument else ["", *_read(body, depth), ""]
    # an object description (```{py:function} name(args)```): its signature, then what it says
    return ["", *([f"`{argument}`"] if argument else []), "", *_read(body, depth), ""]


# 4: a Markdown file written in MyST, its directives, roles, targets and comments read as the page
# shows them (a number of its own, after markdown's 3, so that plain Markdown files keep their
# reading and MyST ones, which were read as plain Markdown, are read again); 5: a tab's title
# shown; 6: a tab's or card's title as the label of its first paragraph ("MacOS: ..."); 7: comments,
# footnote marks and front matter as markdown-it-py and PyYAML read them (`markdown.markdown_prose`).
READER = register(Reader("myst", (), 7,
                         text_reader(lambda text, file: read_front_matter(markdown_prose(myst_to_markdown(text)))),
                         sniff=looks_like_myst, claims=("markdown",)))
