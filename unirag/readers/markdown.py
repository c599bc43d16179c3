"""Markdown, the text every reader writes: headings, code fences and sections.

Each reader turns its format into Markdown; chunking cuts that Markdown at its headings. The
syntax both sides need lives here, below them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$")  # an ATX heading line
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # a code fence line


@dataclass(frozen=True)
class CodeBlock:
    """A fenced code block of a text, by character offsets."""

    start: int    # where its opening fence line starts
    close: int    # where its closing fence line starts (the text's length for a block left open)
    end: int      # where its closing fence line ends, before the line break
    opening: str  # the opening fence line, stripped ("```rust")


def code_blocks(text: str) -> list[CodeBlock]:
    """The fenced code blocks of `text`, in order; a block ends at a fence line of its opening
    character at least as long (CommonMark), or at the text's end."""
    blocks: list[CodeBlock] = []
    start, fence, opening = 0, None, ""
    for match in re.finditer(FENCE.pattern, text, re.MULTILINE):
        line_end = text.find("\n", match.end())
        line_end = len(text) if line_end < 0 else line_end
        if fence is None:
            start, fence, opening = match.start(), match.group(1), text[match.start():line_end].strip()
        elif match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence):
            blocks.append(CodeBlock(start, match.start(), line_end, opening))
            fence = None
    if fence is not None:
        blocks.append(CodeBlock(start, len(text), len(text), opening))
    return blocks


def block_at(blocks: Sequence[CodeBlock], pos: int) -> CodeBlock | None:
    """The block (of `code_blocks`) that character `pos` lies in: its opening fence line starts
    before `pos`, its closing one does not."""
    return next((block for block in blocks if block.start < pos <= block.close), None)


def outside_code(text: str, rewrite: Callable[[str], str]) -> str:
    """The text with `rewrite` applied to what lies outside fenced code blocks (`code_blocks`)."""
    out, pos = [], 0
    for block in code_blocks(text):
        out += [rewrite(text[pos:block.start]), text[block.start:block.end]]
        pos = block.end
    out.append(rewrite(text[pos:]))
    return "".join(out)


def fence_for(code: str) -> str:
    """The fence to put around `code` read from a page or notebook: ~~~ if the code itself holds ```
    (Markdown shown as code), so that it cannot close the block early."""
    return "~~~" if "```" in code else "```"


def markdown_title(text: str) -> str:
    """The first heading of the document's top level outside code fences (`#`, else `##`, ...), or "".

    Many books (mdBook chapters such as the Rust book's) start each page at `##`: its first `##`
    is then the page's title, rather than none.
    """
    tops = [path[0] for path, _ in split_sections(text) if path]
    if not tops:
        return ""
    top = min(level for level, _ in tops)
    return next(title for level, title in tops if level == top)


def split_sections(text: str) -> list[tuple[list[tuple[int, str]], str]]:
    """[(heading stack [(level, title), ...], section text incl. its heading line)].

    `#` lines inside ``` / ~~~ fences are code, not headings. A heading with no body of its own
    (e.g. "# Chapter" right before "## Part") is folded into the next section, so no chunk is a
    bare heading.
    """
    sections: list[tuple[list[tuple[int, str]], list[str]]] = [([], [])]
    stack: list[tuple[int, str]] = []
    fence = None
    for line in text.split("\n"):
        match = None
        if fence:
            if line.strip().startswith(fence):
                fence = None
        elif (f := FENCE.match(line)):
            fence = f.group(1)[0] * 3
        else:
            match = HEADING.match(line)
        if match:
            level, title = len(match.group(1)), match.group(2).strip()
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            previous_path, previous_lines = sections[-1]
            if previous_lines and not "".join(previous_lines[1 if previous_path else 0:]).strip():
                sections[-1] = (list(stack), previous_lines + [line])  # fold a body-less heading
            else:
                sections.append((list(stack), [line]))
        else:
            sections[-1][1].append(line)
    return [(path, "\n".join(lines)) for path, lines in sections if "\n".join(lines).strip()]
