"""Plain text read as Markdown-style text: title lines as headings, prose paragraphs unindented."""

from __future__ import annotations

import pytest

from unirag.readers.plaintext import text_to_markdown


@pytest.mark.parametrize("text, expected", [
    ("Some text.\n\n  0. Definitions.\n\n  Text here.", "Some text.\n\n## 0. Definitions.\n\nText here."),  # numbered
    ("x\n\n   3.1. Distribution of Source Form\n\ny", "x\n\n### 3.1. Distribution of Source Form\n\ny"),  # depth
    ("x\n\n      TERMS AND CONDITIONS\n\ny", "x\n\n# TERMS AND CONDITIONS\n\ny"),                   # capitals
    ("x\n\nStatement of Purpose\n\ny", "x\n\n## Statement of Purpose\n\ny"),                      # title case
    ("Mozilla Public License\n======================\n\n1. Definitions\n---------\n\nz",
     "# Mozilla Public License\n\n## 1. Definitions\n\nz"),                                       # underlined
    ("x\n\n2. Grant of License. Subject to the terms\nof this License" + " and more" * 12 + ".\n\ny",
     "x\n\n## 2. Grant of License.\n\nSubject to the terms\nof this License" + " and more" * 12 + ".\n\ny"),  # titled
    ("x\n\n1. Install Python. Then run it.\n\ny", "x\n\n1. Install Python. Then run it.\n\ny"),  # a short step
    ("x\n\n1. You may make and give away verbatim copies of it.\n\ny",
     "x\n\n1. You may make and give away verbatim copies of it.\n\ny"),                           # a numbered sentence
    ("x\n\nThanks for reading this.\n\ny", "x\n\nThanks for reading this.\n\ny"),                 # a sentence alone
    ("Steps:\n\n1. Get the file.\n\n2. Run it.\n", "Steps:\n\n1. Get the file.\n\n2. Run it.\n"),  # list items
    ("Two lines\nTogether\n\ny", "Two lines\nTogether\n\ny"),                                     # not alone
    ("x\n\n      \"License\" shall mean the terms\n      of this document.\n",
     "x\n\n\"License\" shall mean the terms\nof this document.\n"),                               # prose unindented
    ("x\n\n    if (a[i] == b) { return *p; }\n", "x\n\n    if (a[i] == b) { return *p; }\n"),     # code keeps it
    ("x\n\n# not a heading in plain text\nmore words\n", "x\n\n\\# not a heading in plain text\nmore words\n"),
])
def test_plain_text_as_markdown(text, expected):
    assert text_to_markdown(text) == expected
