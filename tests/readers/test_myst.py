"""MyST Markdown (Sphinx's Markdown) read as plain Markdown: one row per construct pages use."""

import pytest

from unirag.readers.myst import looks_like_myst, myst_to_markdown
from unirag.readers.registry import READER_FORMATS, SourceFile, parse, reader_format

CASES = [
    ("roles: code-like in a code span, text roles as their title, a domain prefix read",
     "Use {func}`option` with {py:class}`~click.Option`, see {ref}`types <parameter-types>`.\n",
     "Use `option` with `Option`, see types.\n"),
    ("a role that wraps onto the next line of its paragraph",
     "Or be {ref}`documented in the\n  docstring <documenting>`. Done.\n",
     "Or be documented in the\n  docstring. Done.\n"),
    ("code spans that are no role stay as written",
     "Set `{FOO_BAR}` and `` `${name}` ``.\n",
     "Set `{FOO_BAR}` and `` `${name}` ``.\n"),
    ("an admonition: its first paragraph after the label, options dropped, the body dedented",
     "```{admonition} Note on required arguments\n:class: note\n\n   It is possible.\n   Not advised.\n```\n",
     "Note on required arguments: It is possible. Not advised.\n"),
    ("a note and a version note, the colon fence too",
     ":::{note}\nPaths are relative.\n:::\n\n```{versionadded} 8.0\nThe `lazy` flag.\n```\n",
     "Note: Paths are relative.\n\nNew in version 8.0: The `lazy` flag.\n"),
    ("a code-block with its language and options; plain fences as written",
     "```{code-block} python\n:caption: app.py\n\nimport click\n```\n\n```toml\n[x]\n```\n",
     "```python\nimport click\n```\n\n```toml\n[x]\n```\n"),
    ("eval-rst read as RST",
     "```{eval-rst}\n.. currentmodule:: click\n\n.. click:example::\n\n    @click.command()\n"
     "    def hi():\n        pass\n```\n",
     "```\n@click.command()\ndef hi():\n    pass\n```\n"),
    ("what shows nothing by itself: contents, toctree, targets, comments, block breaks",
     "(options)=\n\n# Options\n\n```{contents}\n:depth: 2\n```\n\n% a note to authors\nText.\n\n+++\n\n"
     "```{toctree}\nintro\n```\n",
     "# Options\n\nText.\n"),
    ("directives nest when the outer fence is longer",
     "````{warning}\nBe careful:\n\n```{code-block} sh\nrm -rf build\n```\n````\n",
     "Warning: Be careful:\n\n```sh\nrm -rf build\n```\n"),
    ("a directive inside a list item keeps the item's indentation",
     "- First.\n\n  ```{tip}\n  Use it.\n  ```\n",
     "- First.\n\n  Tip: Use it.\n"),
    ("an object description shows its signature in a code span, then its text",
     "```{py:function} echo(message=None)\nPrints a message.\n```\n",
     "`echo(message=None)`\n\nPrints a message.\n"),
    ("a tab shows its title: the answer may be under it",
     "````{tab} MacOS\n```\n~/Library/Caches/pip\n```\n````\n",
     "MacOS:\n\n```\n~/Library/Caches/pip\n```\n"),
    ("sphinx-design boxes: containers keep their body, titled ones show the title",
     "::::{tab-set}\n:::{tab-item} pip\nRun pip.\n:::\n::::\n",
     "pip: Run pip.\n"),
]


@pytest.mark.parametrize("myst, markdown", [(m, md) for _, m, md in CASES], ids=[name for name, _, _ in CASES])
def test_myst_reads_as_markdown(myst, markdown):
    assert myst_to_markdown(myst) == markdown


@pytest.mark.parametrize("text", ["Use {func}`option`.\n", "(options)=\n\n# Options\n", "```{note}\nA.\n```\n",
                                  "  :::{tip}\n  B.\n  :::\n"])
def test_myst_is_told_by_a_role_a_target_or_a_directive(text):
    assert looks_like_myst(text)


@pytest.mark.parametrize("text", [
    "# Plain\n\nA `${pid}` template, `{x}` in code, 50 % of it.\n\n```rust\nlet v = {x};\n```\n",
    "Node's `` `${name}` `` and {name} in braces.\n",
])
def test_plain_markdown_is_not_taken_for_myst(text):
    assert not looks_like_myst(text)


def test_a_myst_page_is_read_through_the_markdown_reader(tmp_path):
    page = tmp_path / "prompts.md"
    page.write_text("(prompts)=\n\n# Prompts\n\n```{eval-rst}\n.. currentmodule:: click\n```\n\n"
                    "Use {func}`prompt` to ask.\n\n```{note}\nIt echoes.\n```\n")
    read = parse(SourceFile(page, "prompts.md", "markdown"), page.read_bytes())
    assert read.markdown and read.title == "Prompts"
    assert read.text == "# Prompts\n\nUse `prompt` to ask.\n\nNote: It echoes.\n"
    # a MyST page gets its own reading number, plain Markdown keeps its own (and its chunk ids)
    assert reader_format(SourceFile(page, "prompts.md", "markdown"), page.read_bytes()) == READER_FORMATS["myst"]
    plain = tmp_path / "plain.md"
    plain.write_text("# Plain\n\nText with `code`.\n")
    assert reader_format(SourceFile(plain, "plain.md", "markdown"), plain.read_bytes()) == READER_FORMATS["markdown"]
    assert READER_FORMATS["myst"] != READER_FORMATS["markdown"]
