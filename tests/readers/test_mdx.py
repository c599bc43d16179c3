"""MDX pages read as the Markdown they render (mdx.py)."""

from pathlib import Path

import pytest

from unirag.readers.markdown import split_sections
from unirag.readers.mdx import mdx_to_markdown
from unirag.readers.registry import SourceFile, parse


@pytest.mark.parametrize("mdx, markdown", [
    # module statements are blocks of their own, one line or several
    ("import Tabs from '@theme/Tabs';\nimport TabItem from '@theme/TabItem';\n\n# Install",
     "# Install"),
    ("export const meta = {\n  section: 1,\n};\n\nText.", "Text."),
    # a component's tag lines go, the Markdown inside stays, in blocks of its own
    ('<Tabs groupId="pm">\n  <TabItem value="npm" label="npm">\n\nRun `npm i`.\n\n  </TabItem>\n</Tabs>',
     "Run `npm i`."),
    ("<Tabs><TabItem value={1}>\nInside.\n</TabItem></Tabs>", "Inside."),
    # a component inside a line of text gives up its tags, lower-case HTML stays
    ("Use <Badge type=\"tip\">beta</Badge> with <code>--beta</code>.", "Use beta with <code>--beta</code>."),
    # comments, on one line or several
    ("Before. {/* TODO:\nmention yarn */} After.", "Before.  After."),
    # admonitions read as their label, so the sentence after them is quoted with it
    (":::note\nRequires Node 18.\n:::", "Note:\nRequires Node 18."),
    (":::warning Breaking change\nThe flag is gone.\n:::", "Warning: Breaking change\nThe flag is gone."),
    # code is left as it is, imports and tags included
    ("```jsx\nimport Tabs from '@theme/Tabs';\n\n\n<Tabs>{/* x */}</Tabs>\n```",
     "```jsx\nimport Tabs from '@theme/Tabs';\n\n\n<Tabs>{/* x */}</Tabs>\n```"),
    # "import" in a sentence's first word of a paragraph's later line is prose
    ("You can\nimport the module.", "You can\nimport the module."),
])
def test_mdx_becomes_the_markdown_it_renders(mdx, markdown):
    assert mdx_to_markdown(mdx) == markdown


def test_an_mdx_file_is_ingested_with_its_front_matter_and_headings():
    page = ("---\ntitle: Installation\ndescription: Get the CLI\n---\n\nimport Tabs from '@theme/Tabs';\n\n"
            "## With npm\n\n<Tabs>\n<TabItem value=\"npm\">\n\nRun `npm install -g tool`.\n\n</TabItem>\n</Tabs>\n")
    doc = parse(SourceFile(Path("install.mdx"), "docs/install.mdx", "mdx"), page.encode())
    assert doc.title == "Installation"
    assert doc.text == "# Installation\n\nGet the CLI\n\n## With npm\n\nRun `npm install -g tool`."
    assert [" > ".join(t for _, t in path) for path, _ in split_sections(doc.text)] == \
        ["Installation", "Installation > With npm"]
