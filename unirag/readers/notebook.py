"""Jupyter notebook (.ipynb) -> Markdown: its Markdown cells as they are, its code cells fenced in
the notebook's language, and their text output fenced after them.

Why: a project's tutorials and examples are often notebooks. Read as a text file, a notebook is
JSON: every line of prose is a quoted string with "\\n" inside, and its outputs may be kilobytes
of base64 images. Read as the notebook shows it, its prose chunks like any manual's, its
headings give the chunks their heading paths, and its code is code.

Only text output is kept (streams, and the plain-text form of results), at most
MAX_OUTPUT_LINES lines per output: it shows what the code prints, which answers "what does this
return?". Images, HTML tables and error tracebacks are left out.
"""

from __future__ import annotations

import json

from unirag.readers.base import Reader, Unreadable, register
from unirag.readers.markdown import fence_for, markdown_prose, text_reader

MAX_OUTPUT_LINES = 20


class NotANotebook(ValueError):
    """The file is not a notebook this reader can read (why, in one line)."""


def _text(source) -> str:
    """A cell's source or an output's text: a string, or a list of lines (nbformat 4 allows both)."""
    if isinstance(source, list):
        return "".join(part for part in source if isinstance(part, str))
    return source if isinstance(source, str) else ""


def _fenced(text: str, language: str = "") -> str:
    fence = fence_for(text)
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _output_text(output: dict) -> str:
    if output.get("output_type") == "stream":
        text = _text(output.get("text"))
    elif output.get("output_type") in ("execute_result", "display_data"):
        text = _text((output.get("data") or {}).get("text/plain"))
    else:  # "error": a traceback, with terminal colour codes
        return ""
    lines = text.rstrip().splitlines()
    if len(lines) > MAX_OUTPUT_LINES:
        lines = lines[:MAX_OUTPUT_LINES] + ["…"]
    return "\n".join(lines)


def notebook_to_markdown(text: str) -> str:
    """The notebook's cells as Markdown, in order. Raises NotANotebook for other JSON."""
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as err:
        raise NotANotebook(f"not valid JSON (line {err.lineno}: {err.msg})") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        raise NotANotebook("no cells (not a Jupyter notebook of format 4)")
    metadata = notebook.get("metadata") or {}
    language = ((metadata.get("language_info") or {}).get("name")
                or (metadata.get("kernelspec") or {}).get("language") or "")
    blocks = []
    for cell in cells:
        if not isinstance(cell, dict):
            continue
        source = _text(cell.get("source")).strip("\n")
        if cell.get("cell_type") == "markdown" and source.strip():
            blocks.append(source)
        elif cell.get("cell_type") == "code":
            if source.strip():
                blocks.append(_fenced(source, language))
            for output in cell.get("outputs") or []:
                shown = _output_text(output) if isinstance(output, dict) else ""
                if shown.strip():
                    blocks.append(_fenced(shown))
    return "\n\n".join(blocks)


def _read(text: str, file) -> tuple[str, str]:
    try:
        return markdown_prose(notebook_to_markdown(text)), ""
    except NotANotebook as err:
        raise Unreadable(f"notebook {err}") from None


# 1: footnote marks dropped; 2: comments and footnote marks as markdown-it-py reads them
# (`markdown.markdown_prose`)
READER = register(Reader("notebook", (".ipynb",), 2, text_reader(_read)))
