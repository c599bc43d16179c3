"""Jupyter notebooks read as the notebook shows them (`unirag/readers/notebook.py`)."""

import json
from pathlib import Path

import pytest

from unirag.readers.notebook import MAX_OUTPUT_LINES, notebook_to_markdown
from unirag.readers.registry import Skipped, SourceFile, parse


def notebook(*cells, language="python") -> str:
    return json.dumps({"cells": list(cells), "nbformat": 4, "nbformat_minor": 5,
                       "metadata": {"kernelspec": {"language": language, "name": "k"}}})


def markdown(source):
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def code(source, *outputs):
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": list(outputs), "execution_count": 1}


STREAM = {"output_type": "stream", "name": "stdout", "text": ["(3, 576)\n"]}
RESULT = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
          "data": {"text/plain": "42", "text/html": "<b>42</b>"}}
IMAGE = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "iVBORw0KGgo="}}
ERROR = {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": ["\x1b[31mValueError"]}


@pytest.mark.parametrize("cells, expected", [
    # Markdown cells as they are, a list of lines or one string
    ([markdown(["# Title\n", "\n", "Some *prose*."]), markdown("## Part\nMore.")],
     "# Title\n\nSome *prose*.\n\n## Part\nMore."),
    # code fenced in the notebook's language, its text output fenced after it
    ([code(["x = f()\n", "print(x.shape)"], STREAM), code("6 * 7", RESULT)],
     "```python\nx = f()\nprint(x.shape)\n```\n\n```\n(3, 576)\n```\n\n```python\n6 * 7\n```\n\n```\n42\n```"),
    # images and tracebacks are left out, as are empty cells
    ([code("plot()", IMAGE, ERROR), markdown(""), code("")], "```python\nplot()\n```"),
    # code that shows a Markdown fence is fenced with ~~~
    ([code('s = """\n```\n"""')], '~~~python\ns = """\n```\n"""\n~~~'),
])
def test_cells(cells, expected):
    assert notebook_to_markdown(notebook(*cells)) == expected


def test_long_output_is_cut():
    long = {"output_type": "stream", "name": "stdout", "text": "".join(f"line {i}\n" for i in range(100))}
    text = notebook_to_markdown(notebook(code("run()", long)))
    assert f"line {MAX_OUTPUT_LINES - 1}\n…\n```" in text and f"line {MAX_OUTPUT_LINES}\n" not in text


def test_a_notebook_is_read_as_markdown_with_its_first_heading_as_title():
    data = notebook(markdown("# Quickstart\n\nLoad the model."), code("load()")).encode()
    doc = parse(SourceFile(Path("q.ipynb"), "q.ipynb", "notebook"), data)
    assert doc.markdown and doc.title == "Quickstart" and "```python\nload()\n```" in doc.text


@pytest.mark.parametrize("data, reason", [
    (b'{"cells": [', "not valid JSON"),
    (b'{"name": "not a notebook"}', "no cells"),
    (b"[1, 2]", "no cells"),
])
def test_what_is_not_a_notebook_is_skipped_with_why(data, reason):
    skipped = parse(SourceFile(Path("x.ipynb"), "x.ipynb", "notebook"), data)
    assert isinstance(skipped, Skipped) and reason in skipped.reason
