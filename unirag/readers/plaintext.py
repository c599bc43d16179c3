"""Plain text -> Markdown-style text: its title lines read as headings, its prose as prose.

Why: a plain-text manual, licence or RFC marks its sections by layout alone: a title on a line of
its own ("4. Combined Works.", "TERMS AND CONDITIONS", "Preamble") or underlined with "=" or "-".
Read as one run of text, those titles were cut into evidence units of their own and quoted as
answers ("Conveying Modified Versions."), and no chunk carried its section's name. Read as
headings, they label their sections as a Markdown file's do (`chunking.split_sections`).

And its paragraphs are often indented for layout ("      "License" shall mean ..."), which
Markdown reads as code: a paragraph that reads as prose (words, not symbols) loses its indent.
Lines that open with "#", or underline the line above with "=" or "-", are escaped, so that only the
titles found here are headings.

Rules for a title line: a line with blank lines (or the file's start or end) around it, of at most
`MAX_TITLE_WORDS` words with a letter, that is numbered and in title case ("0. Definitions.", "3.1.
Distribution of Source Form"; not "1. Download the file.", a list item), written in capitals ("GNU
GENERAL PUBLIC LICENSE"), or in title case with no end punctuation ("Statement of Purpose"); or any
short line underlined with "=" (level 1) or "-" (2); or the title a numbered paragraph opens with,
as licences write their sections ("2. Grant of Copyright License. Subject to ...", in a paragraph
of MIN_SECTION_WORDS or more). A capitals title is level 1, a numbered one a level below it per
number ("1." 2, "1.1." 3), and a title-case one level 2.
"""

from __future__ import annotations

import re

from pathlib import Path

from unirag.readers import includes
from unirag.readers.base import Reader, register
from unirag.readers.markdown import escaped, text_reader

MAX_TITLE_WORDS = 10
_UNDERLINE = re.compile(r"[ \t]*(=+|-+)[ \t]*")
_NUMBERED = re.compile(r"((?:\d+\.)+\d*)[ \t]+[A-Z\"'(]")  # "4. Combined", "3.1. Distribution", "2.1 Scope"
# "2. Grant of Copyright License. Subject to ...": a number, a title, a period, the section's text
_TITLED = re.compile(r"((?:\d+\.)+\d*)[ \t]+([A-Z][^.:;]*?)\.[ \t]+(\S.*)")
MAX_TITLED_WORDS = 6
# words of a paragraph that opens with a title: a section's body ("2. Grant of Copyright License.
# Subject to ..." goes on for lines), not a numbered step ("1. Install Python. Then run it.")
MIN_SECTION_WORDS = 30
_END_PUNCTUATION = re.compile(r"[.,;:!?]$")
_SMALL_WORDS = {"a", "an", "and", "as", "at", "but", "by", "for", "from", "in", "into", "its", "nor", "of", "on",
                "or", "per", "than", "that", "the", "this", "to", "with", "vs", "via"}
_SYMBOLS = set("{}()[];=<>&|*/\\_$#@")
MAX_SYMBOL_SHARE = 0.06  # of a paragraph's non-space characters: prose holds a few, code many


def text_to_markdown(text: str) -> str:
    """The plain text with its title lines as `#` headings and its prose paragraphs unindented."""
    lines = text.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    paragraph: list[str] = []

    def flush():
        if paragraph:
            out.extend(escaped(line) for line in (_dedented(paragraph) if _prose(paragraph) else paragraph))
            paragraph.clear()

    k = 0
    while k < len(lines):
        line, stripped = lines[k], lines[k].strip()
        before_blank = k == 0 or not lines[k - 1].strip()
        following = lines[k + 1] if k + 1 < len(lines) else ""
        underline = _UNDERLINE.fullmatch(following) if stripped and before_blank else None
        if underline and len(underline.group(1)) >= max(3, len(stripped) // 2) and _words(stripped) <= MAX_TITLE_WORDS:
            flush()
            out.append("#" * (1 if underline.group(1)[0] == "=" else 2) + " " + stripped)
            k += 2
            continue
        after_blank = not following.strip()
        level = _title_level(stripped) if stripped and before_blank and after_blank else 0
        titled = (_titled_paragraph(line) if stripped and before_blank and not level
                  and _paragraph_words(lines, k) >= MIN_SECTION_WORDS else None)
        if level:
            flush()
            out.append("#" * level + " " + stripped)
        elif titled:
            flush()
            out += ["#" * _numbered_level(_NUMBERED.match(titled[0]).group(1)) + " " + titled[0], ""]
            paragraph.append(titled[1])
        elif not stripped:
            flush()
            out.append(line)
        else:
            paragraph.append(line)
        k += 1
    flush()
    return "\n".join(out)


def _words(line: str) -> int:
    return len(line.split())


def _title_level(line: str) -> int:
    """The heading level of a line standing alone, 0 if it reads as no title (module docstring)."""
    if _words(line) > MAX_TITLE_WORDS or not re.search(r"[A-Za-z]{2}", line):
        return 0
    numbered = _NUMBERED.match(line)
    if numbered:
        rest = line[numbered.end() - 1:]
        # a numbered title is in title case ("4. Combined Works."); a numbered sentence ("1. Download
        # the file.") is a list item, which a blank line may set apart from the next
        if not _title_case(rest) or rest.rstrip(".").count(".") or "," in rest:
            return 0
        return _numbered_level(numbered.group(1))
    letters = [c for c in line if c.isalpha()]
    if all(c.isupper() for c in letters) and len(letters) >= 4:
        return 1
    return 2 if not _END_PUNCTUATION.search(line) and _title_case(line) else 0


def _numbered_level(number: str) -> int:
    return 1 + len([n for n in number.split(".") if n])


def _title_case(text: str) -> bool:
    """Whether every word of a text is capitalised but the small ones ("Statement of Purpose")."""
    words = re.findall(r"[A-Za-z][\w'-]*", text)
    return bool(words) and words[0][0].isupper() and all(w[0].isupper() or w.lower() in _SMALL_WORDS for w in words)


def _paragraph_words(lines: list[str], k: int) -> int:
    """Words of the paragraph that starts at line k (up to the next blank line)."""
    words = 0
    while k < len(lines) and lines[k].strip():
        words, k = words + _words(lines[k]), k + 1
    return words


def _titled_paragraph(line: str) -> tuple[str, str] | None:
    """(title, the rest) of a numbered paragraph that opens with its title, as licences and policies
    write their sections ("2. Grant of Copyright License. Subject to the terms ..."); else None."""
    opened = _TITLED.match(line.strip())
    if not opened or _words(opened.group(2)) > MAX_TITLED_WORDS or not _title_case(opened.group(2)):
        return None
    return f"{opened.group(1)} {opened.group(2)}.", opened.group(3)


def _prose(paragraph: list[str]) -> bool:
    """Whether a paragraph reads as prose: mostly words, few of code's symbols."""
    chars = [c for line in paragraph for c in line if not c.isspace()]
    return bool(chars) and sum(c in _SYMBOLS for c in chars) / len(chars) <= MAX_SYMBOL_SHARE


def _dedented(paragraph: list[str]) -> list[str]:
    return [line.strip() for line in paragraph]


# 1: title lines read as headings, prose paragraphs unindented; the file's name stays its title;
# 2: a line of "=" or "-" left under a paragraph escaped (CommonMark reads it as a heading's underline)
READER = register(Reader("text", (".txt",), 2,
                         text_reader(lambda text, file: (text_to_markdown(text), Path(file.source).stem)),
                         expand=includes.expand, include_marker=b"include::"))
