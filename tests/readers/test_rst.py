"""RST (Sphinx's dialect) read as Markdown-style text: one row per construct manuals use."""

import pytest

from unirag.readers.registry import READER_FORMATS, SourceFile, parse, reader_format
from unirag.readers.rst import looks_like_rst, rst_to_markdown

CASES = [
    ("section titles, over- and underlined",
     "=====\nTop\n=====\n\nA\n---\n\nb\n\nB\n---\n",
     "# Top\n\n## A\n\nb\n\n## B\n"),
    ("a code-block with its options left out",
     "Build it:\n\n.. code-block:: cmake\n   :caption: CMakeLists.txt\n\n"
     "   add_executable(hello main.c)\n   target_link_libraries(hello m)\n",
     "Build it:\n\n```cmake\nadd_executable(hello main.c)\ntarget_link_libraries(hello m)\n```\n"),
    ("a literal block after '::'",
     "For example::\n\n    >>> 1 + 1\n    2\n\nDone.\n",
     "For example:\n\n```\n>>> 1 + 1\n2\n```\n\nDone.\n"),
    ("a '::' after a space goes",
     "Run this ::\n\n  make\n",
     "Run this\n\n```\nmake\n```\n"),
    ("roles: code-like in a code span, prose as text, titles kept, '~' shortens",
     "See :func:`open`, :command:`add_library`, :ref:`the guide <guide-label>`, :class:`~a.b.Path`, "
     ":pep:`8`.\n",
     "See `open`, `add_library`, the guide, `Path`, PEP 8.\n"),
    ("a role's '<...>' with no space before it is content, not a target",
     "Use :genex:`$<TARGET_OBJECTS:objlib>` or :ref:`<target-only>`.\n",
     "Use `$<TARGET_OBJECTS:objlib>` or target-only.\n"),
    ("literals, links, footnote references, escapes",
     "Use ``x = 1`` and `the docs <https://example.org>`_ or `Name`_ [#]_ and a\\ b.\n",
     "Use `x = 1` and the docs or Name and ab.\n"),
    ("a literal or role that wraps onto the next line; none spans paragraphs",
     "Run ``pip\n--version`` or see :ref:`the\nguide <g>`.\n\nA stray `` quote.\n\nAnd ``this``.\n",
     "Run `pip\n--version` or see the\nguide.\n\nA stray `` quote.\n\nAnd `this`.\n"),
    ("a list-table's rows as table rows, the header's delimiter written so that it stays",
     ".. list-table:: Examples\n    :header-rows: 1\n\n    * - Arguments\n      - Name\n"
     "    * - ``\"-f\"``\n      - f, the\n        short one\n",
     "| Arguments | Name |\n| :--- | :--- |\n| `\"-f\"` | f, the short one |\n"),
    ("a list item that is a directive keeps its bullet",
     "* Plain.\n* .. versionadded:: 3.6\n  With an emulator.\n",
     "* Plain.\n\n* New in version 3.6: With an emulator.\n"),
    ("a list item that is a directive: a dropped one leaves nothing",
     "Types:\n\n*   .. autoclass:: Choice\n       :noindex:\n\nNext.\n",
     "Types:\n\nNext.\n"),
    ("sphinx-design: a tab set keeps its items, each under its title",
     ".. tab-set::\n\n   .. tab-item:: pip\n\n      Run pip.\n\n   .. tab-item:: conda\n\n      Run conda.\n",
     "pip: Run pip.\n\nconda: Run conda.\n"),
    ("a tab's title labels the code it holds; a box without a title holds its text alone",
     ".. tab:: Linux\n\n   .. code-block:: sh\n\n      ls\n\n.. dropdown::\n   Some text.\n",
     "Linux:\n\n```sh\nls\n```\n\nSome text.\n"),
    ("Click's examples are code; what running one shows is not in the source",
     ".. click:example::\n\n    @click.command()\n    def hello():\n        pass\n\n"
     ".. click:run::\n\n    invoke(hello, args=['--help'])\n\nDone.\n",
     "```\n@click.command()\ndef hello():\n    pass\n```\n\nDone.\n"),
    ("an admonition's first paragraph may introduce a literal block with '::'",
     ".. note::\n\n   The formula is::\n\n       1024 * N\n\n   Done.\n",
     "Note: The formula is:\n\n```\n1024 * N\n```\n\nDone.\n"),
    ("a one-word reference reads as its word; code names with underscores stay",
     "See scrypt_ and PEP_ 8, not __init__, snake_case, x_1 or :prop_tgt:`A_B_<CONFIG>`.\n",
     "See scrypt and PEP 8, not __init__, snake_case, x_1 or `A_B_<CONFIG>`.\n"),
    ("an admonition with its text after a blank line",
     ".. note::\n\n   Paths are relative.\n   Always.\n\nNext.\n",
     "Note: Paths are relative. Always.\n\nNext.\n"),
    ("an admonition with its text on the directive's line",
     ".. warning:: Do not run as root.\n",
     "Warning: Do not run as root.\n"),
    ("version notes as Sphinx renders them",
     ".. versionadded:: 3.1\n  Sources may use generator expressions.\n\n.. versionchanged:: 3.6\n\n"
     ".. deprecated:: 3.2 Use y.\n",
     "New in version 3.1: Sources may use generator expressions.\n\nChanged in version 3.6.\n\n"
     "Deprecated since version 3.2: Use y.\n"),
    ("an object description: its signatures as a term, then its body",
     ".. function:: join(path, *paths)\n              join(path)\n   :noindex:\n\n   Join path segments.\n\n"
     "   .. versionchanged:: 3.6\n      Accepts a path-like object.\n",
     "`join(path, *paths)`\n`join(path)`\n\nJoin path segments.\n\n"
     "Changed in version 3.6: Accepts a path-like object.\n"),
    ("an option directive",
     ".. option:: -G <generator-name>\n\n Specify a build system generator.\n",
     "`-G <generator-name>`\n\nSpecify a build system generator.\n"),
    ("what shows nothing by itself is dropped: toctree, index, comments, targets, substitutions",
     ".. toctree::\n   :maxdepth: 2\n\n   intro\n   usage\n\n.. index:: single: path\n\n.. _label:\n\n"
     ".. a comment\n   on two lines\n\n.. |ver| replace:: 3.1\n\nText.\n",
     "Text.\n"),
    ("containers keep their body",
     ".. only:: html\n\n   Shown in HTML.\n",
     "Shown in HTML.\n"),
    ("a definition list: the term, then its definition as a paragraph",
     "Term\n   Definition that\n   spans two lines.\n",
     "Term\n\nDefinition that\nspans two lines.\n"),
    ("a block quote and a list item's continuation are dedented",
     "Intro.\n\n    Quoted text.\n\n* item one\n  goes on\n",
     "Intro.\n\nQuoted text.\n\n* item one\ngoes on\n"),
    ("table rules and transitions carry no text",
     "+---+---+\n| A | B |\n+===+===+\n\n----\n\n=====  =====\nx      y\n=====  =====\n",
     "| A | B |\n\nx      y\n"),
    ("code keeps its markup",
     ".. code-block:: rst\n\n   :func:`open` and ``x``\n",
     "```rst\n:func:`open` and ``x``\n```\n"),
]


@pytest.mark.parametrize("rst, markdown", [(r, m) for _, r, m in CASES], ids=[name for name, _, _ in CASES])
def test_rst_reads_as_markdown(rst, markdown):
    assert rst_to_markdown(rst) == markdown


def test_a_txt_file_is_read_as_rst_only_when_it_is_written_in_rst(tmp_path):
    fragment, plain = tmp_path / "OPTIONS.txt", tmp_path / "notes.txt"
    fragment.write_text(".. option:: -G <name>\n\n Pick a generator.\n")
    plain.write_text("Notes\n=====\n\nPlain text: 1 :: 2, `quoted`.\n")
    assert looks_like_rst(fragment.read_text()) and not looks_like_rst(plain.read_text())
    read = parse(SourceFile(fragment, "OPTIONS.txt", "text"), fragment.read_bytes())
    assert read.markdown and read.text == "`-G <name>`\n\nPick a generator.\n"
    kept = parse(SourceFile(plain, "notes.txt", "text"), plain.read_bytes())  # the plain-text reader's
    assert kept.markdown and kept.text == "# Notes\n\nPlain text: 1 :: 2, `quoted`.\n" and kept.title == "notes"
    # each reading has its own number, so a file read the other way gets new chunk ids
    assert reader_format(SourceFile(plain, "notes.txt", "text"), plain.read_bytes()) == READER_FORMATS["text"]
    assert reader_format(SourceFile(fragment, "OPTIONS.txt", "text"), fragment.read_bytes()) == READER_FORMATS["rst"]


def test_deeply_nested_text_is_read_without_exhausting_the_recursion():
    staircase = "\n".join(" " * i + f"line {i}" for i in range(3000))
    read = rst_to_markdown(staircase)
    assert read.rstrip("\n").split("\n")[-2:] == ["line 2998", "line 2999"]
