"""MDX (Markdown with JSX, as Docusaurus, Nextra and Storybook write their docs) -> Markdown.

An .mdx page is Markdown whose blocks may also be ES module statements (`import Tabs from
'@theme/Tabs';`), JSX components around Markdown (`<Tabs>`, `<TabItem value="npm">`,
`<Admonition type="note">`) and `{/* comments */}`. The rendered page shows the Markdown, so that
is what is read: module statements, component tags and comments are dropped, the text inside the
components is kept, and code blocks stay as they are.
"""

from __future__ import annotations

import re

from unirag.readers.base import Reader, register
from unirag.readers.markdown import FENCE, markdown_prose, read_front_matter, text_reader

_ESM = re.compile(r"^(?:import|export)\s")
_ATTRIBUTES = r"(?:\s+(?:[^<>{}\"']|\"[^\"]*\"|'[^']*'|\{[^{}]*\})*)?"
_TAG = rf"</?[A-Za-z][\w.:-]*{_ATTRIBUTES}/?>"
_TAGS_ONLY = re.compile(rf"^\s*(?:{_TAG}\s*)+$")  # a line of tags and nothing else
_COMPONENT = re.compile(rf"</?[A-Z][\w.]*{_ATTRIBUTES}/?>")  # a component's tag within a line of text
_COMMENT = re.compile(r"\{/\*.*?\*/\}", re.DOTALL)
# Docusaurus's admonitions: ":::note Title" ... ":::". The opening line reads as the label it
# renders ("Note: Title"), so that the sentence after it is quoted with it; the closing one goes
_ADMONITION = re.compile(r"^\s*:::(\w+)[ \t]*(.*?)\s*$")
_ADMONITION_END = re.compile(r"^\s*:::\s*$")


def mdx_to_markdown(text: str) -> str:
    """The Markdown of an MDX page."""
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        match = FENCE.match(line)
        if fence is None and match:
            out += _prose(prose)
            prose, fence = [], match.group(1)
            out.append(line)
        elif fence is not None:
            out.append(line)
            if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
                fence = None
        else:
            prose.append(line)
    out += _prose(prose)
    return "\n".join(out).strip()


def _prose(lines: list[str]) -> list[str]:
    """Lines outside code: comments out, module statement blocks (they run to a blank line) out,
    tag-only lines as blank lines (they part blocks), components' tags out of lines of text,
    admonitions as their label."""
    out: list[str] = []
    in_module = False
    for line in _COMMENT.sub("", "\n".join(lines)).split("\n"):
        if in_module or (_ESM.match(line) and (not out or not out[-1].strip())):
            in_module = bool(line.strip())
            continue
        if _TAGS_ONLY.match(line) or _ADMONITION_END.match(line):
            line = ""
        elif admonition := _ADMONITION.match(line):
            kind, title = admonition.groups()
            line = f"{kind.capitalize()}: {title}".rstrip()
        else:
            line = _COMPONENT.sub("", line)
        if line.strip() or (out and out[-1].strip()):  # one blank line where dropped lines leave several
            out.append(line)
    return out


def _read(text: str, file) -> tuple[str, str]:
    """The front matter first: its fields are no module statements or tags."""
    text, title = read_front_matter(text)
    return markdown_prose(mdx_to_markdown(text)), title


# 1: footnote marks dropped; 2: comments and footnote marks as markdown-it-py reads them
# (`markdown.markdown_prose`)
READER = register(Reader("mdx", (".mdx",), 2, text_reader(_read)))
