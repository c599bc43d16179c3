"""PDF reading (`unirag/readers/pdf.py`) on PDFs written here: lines of Helvetica (Courier for code) at chosen sizes."""

from pathlib import Path

import pytest

pytest.importorskip("pypdf")

from unirag.retrieval.chunking import ChunkSettings, chunk_text  # noqa: E402
from unirag.readers.pdf import _HYPHEN_BREAK, _monospace, _rewrite, _unbroken, pdf_to_markdown  # noqa: E402
from unirag.readers.registry import SourceFile, parse  # noqa: E402

BODY = 11


def make_pdf(pages: list[list[tuple]], title: str = "", differences: str = "") -> bytes:
    """A PDF whose pages hold these (font size, text) lines, top to bottom (ASCII text), in
    Helvetica, or in Courier where a line is (font size, text, MONO). A line of size 0 is an
    empty line's space (a body line's). `differences`: glyph names for Helvetica's codes from 128
    on ("/fi /fl"), which a line's text then writes as chr(128), chr(129), ..."""
    encoding = f" /Encoding << /Type /Encoding /Differences [128 {differences}] >>" if differences else ""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "",
               f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica{encoding} >>",
               "<< /Type /Font /Subtype /Type1 /BaseFont /Courier >>"]
    kids = []
    for lines in pages:
        y, ops = 760, []
        for size, text, *font in lines:
            if not size:
                y -= int(BODY * 1.6)
                continue
            escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"BT /{'F2' if font else 'F1'} {size} Tf 72 {y} Td ({escaped}) Tj ET")
            y -= int(size * 1.6)
        stream = "\n".join(ops)
        objects.append(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
                       f"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents {len(objects)} 0 R >>")
        kids.append(len(objects))
    objects[1] = f"<< /Type /Pages /Kids [{' '.join(f'{k} 0 R' for k in kids)}] /Count {len(kids)} >>"
    if title:
        objects.append(f"<< /Title ({title}) >>")
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    info = f" /Info {len(objects)} 0 R" if title else ""
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def body(*lines: str) -> list[tuple[float, str]]:
    return [(BODY, line) for line in lines]


MONO = "mono"
GAP = (0, "")


def code(*lines: str) -> list[tuple[float, str, str]]:
    return [(BODY, line, MONO) for line in lines]


def manual() -> list[list[tuple[float, str]]]:
    """Four pages with a running header, page numbers, headings and a paragraph the page break cuts."""
    return [
        [(9, "Cache Guide"), (18, "1 Storing files"), *body("Files are stored once and shared.",
                                                           "The cache is kept in the"), (9, "1")],
        [(9, "Cache Guide"), *body("data folder until it expires.", "Nothing else is written."),
         (14, "1.1 Expiry"), *body("Entries expire after a week."), (9, "2")],
        [(9, "Cache Guide"), (18, "2 Clearing the cache"), *body("Run the clean command to empty it."), (9, "3")],
        [(9, "Cache Guide"), *body("A cleared cache fills again on the next install."), (9, "4")],
    ]


def test_furniture_is_dropped_and_a_paragraph_cut_by_the_page_break_joined():
    text, _ = pdf_to_markdown(make_pdf(manual()))
    assert "Cache Guide" not in text
    assert not [line for line in text.splitlines() if line.strip().isdigit()]
    assert "The cache is kept in the\ndata folder until it expires." in text


def test_headings_are_found_by_type_size_with_levels_by_size():
    text, title = pdf_to_markdown(make_pdf(manual()))
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["# 1 Storing files", "## 1.1 Expiry", "# 2 Clearing the cache"]
    assert title == "1 Storing files"  # no title of its own: the first page's largest heading


def test_the_documents_own_title_wins_unless_it_only_names_a_file():
    assert pdf_to_markdown(make_pdf(manual(), title="Cache Guide"))[1] == "Cache Guide"
    for title in ("Microsoft Word - guide.docx", "guide.tex", "Untitled"):
        assert pdf_to_markdown(make_pdf(manual(), title=title))[1] == "1 Storing files"


@pytest.mark.parametrize("lines, present, absent", [
    # a word hyphenated at a line's end is joined; a hyphen before a capital is kept
    (body("the data struc-", "ture holds it; self-", "Tests run"), ["structure", "self-\nTests"], ["struc-"]),
    # table-of-contents entries (dot leaders and a page number) say nothing to answer from
    (body("Contents", "Storing files . . . . . . . . 3", "Clearing . . . . . . . . . . iv"), ["Contents"],
     ["Storing files", "Clearing"]),
    # a sentence set large is emphasis, not a heading
    ([(16, "Back up your data first."), *body("Then upgrade.")], ["Back up your data first."], ["# Back"]),
    # a body line that would read as a Markdown heading (a shell comment) is escaped
    (body("Run it like this:", "# remove old files", "rm -rf build"), ["\\# remove old files"], ["\n# remove"]),
    # ... and only such a line: C's "#include" is code as it stands
    (body("Start with:", "#include <stdio.h>"), ["\n#include <stdio.h>"], ["\\#include"]),
])
def test_lines(lines, present, absent):
    text, _ = pdf_to_markdown(make_pdf([lines]))
    for part in present:
        assert part in text
    for part in absent:
        assert part not in text


def test_a_running_header_that_changes_with_the_chapter_is_dropped():
    words = ("alpha", "beta", "gamma", "delta")
    pages = [[(BODY, f"Chapter {chapter}: {name} {number}"), *body(f"The {words[number - 1]} page opens.",
                                                                    f"The {words[number - 1]} page ends.")]
             for chapter, name, numbers in ((1, "Basics", (1, 2)), (2, "More", (3, 4)))
             for number in numbers]
    text, _ = pdf_to_markdown(make_pdf(pages))
    assert "Chapter" not in text
    assert all(f"The {word} page opens.\nThe {word} page ends." in text for word in words)


def test_a_line_repeated_once_at_a_page_edge_without_a_page_number_is_kept():
    pages = [body("See the notes below.", "First page text."), body("See the notes below.", "Second page text.")]
    assert pdf_to_markdown(make_pdf(pages))[0].count("See the notes below.") == 2


def test_no_headings_where_much_of_the_text_is_set_larger_than_the_most_common_size():
    code = [(8, f"value_{i} = compute(a, b)") for i in range(20)]
    prose = body("This paragraph wraps over", "several lines of its text", "and it is set larger",
                 "than the many code lines", "around it on the page", "so nothing here is a heading.")
    text, title = pdf_to_markdown(make_pdf([code[:10] + prose + code[10:]]))
    assert not [line for line in text.splitlines() if line.startswith("#")] and title == ""


def test_a_pdf_is_read_as_markdown_so_chunks_carry_its_headings():
    doc = parse(SourceFile(Path("guide.pdf"), "guide.pdf", "pdf"), make_pdf(manual(), title="Cache Guide"))
    assert doc.markdown and doc.title == "Cache Guide"
    chunks = chunk_text(doc.text, None, ChunkSettings(chunk_size=64, overlap=0), doc.markdown)
    assert ("1 Storing files > 1.1 Expiry", "Entries expire after a week.") in \
        [(c.heading, c.text.splitlines()[-1]) for c in chunks]


def test_paragraphs_are_found_by_their_spacing_but_a_sentence_left_open_goes_on():
    text, _ = pdf_to_markdown(make_pdf([[
        *body("Files are stored once.", "They are shared by every project.", "Nothing is copied."), GAP,
        *body("The cache is kept until it expires.", "It expires after a week."), GAP,
        *body("Entries are removed by the clean command after a week, or when the"), GAP,
        *body("cache is full."),
    ]]))
    assert text == ("Files are stored once.\nThey are shared by every project.\nNothing is copied.\n\n"
                    "The cache is kept until it expires.\nIt expires after a week.\n\n"
                    "Entries are removed by the clean command after a week, or when the\ncache is full.")


def test_lines_in_a_monospace_font_are_fenced_as_code():
    text, _ = pdf_to_markdown(make_pdf([[
        *body("Install it with:"), *code("$ make install", "# then check it", "$ make check"),
        *body("The check takes a minute."),
    ]]))
    assert text == ("Install it with:\n\n```\n$ make install\n# then check it\n$ make check\n```\n\n"
                    "The check takes a minute.")


@pytest.mark.parametrize("name, monospace", [
    ("/Courier-Bold", True), ("/AKEQKS+CMTT10", True), ("/SMDJOQ+CMSLTT10", True), ("/JNNPWA+NimbusMonL-Regu", True),
    ("/DejaVuSansMono", True), ("/Consolas", True), ("/PWNLKT+CMR10", False), ("/Helvetica", False),
    ("/OLMHVN+NimbusRomNo9L-Regu", False), ("/Times-Roman", False)])
def test_monospace_fonts_are_known_by_name(name, monospace):
    assert _monospace({"/BaseFont": name}) is monospace


def test_a_listing_the_page_break_cut_stays_one_code_block():
    text, _ = pdf_to_markdown(make_pdf([[*body("The dump:"), *code("0000 4d 49", "0010 74 65")],
                                        [*code("0020 00 05"), *body("That is all.")]]))
    assert text == "The dump:\n\n```\n0000 4d 49\n0010 74 65\n0020 00 05\n```\n\nThat is all."


@pytest.mark.parametrize("text, expected", [
    # joined where the document has the joined word elsewhere, whatever its parts
    ("a docu-\nment and a document", "a document and a document"),
    ("the sans-\nserif type", "the sansserif type"),
    # kept a compound where the document has the hyphenated word (and not the joined one)
    ("set in sans-\nserif; sans-serif type", "set in sans-serif; sans-serif type"),
    # ... or both parts as words of their own, four letters or more
    ("a space-\nseparated list: each space is separated", "a space-separated list: each space is separated"),
    # a typesetter's break at a syllable, or parts too short to tell, is joined
    ("the configura-\ntion file", "the configuration file"),
    ("who-\never asks who ever", "whoever asks who ever"),
    # only a break between lower-case letters: a hyphen before a capital, or in a line, stays
    ("self-\nTests and well-known", "self-\nTests and well-known"),
])
def test_a_word_hyphenated_at_a_line_end(text, expected):
    assert _HYPHEN_BREAK.sub(_unbroken(text), text) == expected


@pytest.mark.parametrize("text, offsets, expected_text, expected_offsets", [
    ("ab-\ncd ef", [0, 3, 4, 7], "abcd ef", [0, 2, 2, 5]),  # inside the match: to the replacement's end
    ("x\n\n\n\ny", [0, 1, 5], "x\n\ny", [0, 1, 3]),
    ("no match", [0, 3, 8], "no match", [0, 3, 8]),
])
def test_rewriting_the_text_moves_the_page_offsets_with_it(text, offsets, expected_text, expected_offsets):
    import re

    pattern = re.compile(r"-\n|\n{3,}")
    assert _rewrite(text, offsets, pattern, lambda m: "" if m.group() == "-\n" else "\n\n") == (
        expected_text, expected_offsets)


def test_ligatures_are_read_as_their_letters():
    pages = [body("The \x80rst \x81ag of the \x82ce \x83ce:", "a di\x83cult \x85le, ba\x84ed.")]
    text, _ = pdf_to_markdown(make_pdf(pages, differences="/fi /fl /ff /ffi /ffl /fi"))
    assert text == "The first flag of the ffce ffice:\na difficult file, baffled."


@pytest.mark.parametrize("lines, expected", [
    # T1 (Cork), the encoding of `\\usepackage[T1]{fontenc}`: ligatures at 0x1B-0x1F, quotes, dashes
    (["The \x1crst e\x1bect of a \x1ct,", "\x10quoted\x11 \x15 \x1e\x1dow \x1f.", "ending in a ligature: \x1c"],
     "The first effect of a fit,\n\u201cquoted\u201d \u2013 ffiflow ffl.\nending in a ligature: fi"),
    # OT1, TeX's default: ligatures at 0x0B-0x0F, and 0x1C is a letter there
    (["To de\x0cne the di\x0berence, \x0e\x0d\x0f: \x1c."], "To define the difference, ffiflffl: \u00f8."),
    # no ligature codes at all: nothing says which encoding, so nothing is read into them
    (["A \x10 and \x15 alone."], "A \x10 and \x15 alone."),
])
def test_tex_fonts_control_character_codes_are_read_as_their_glyphs(lines, expected):
    text, _ = pdf_to_markdown(make_pdf([body(*lines)]))
    assert text == expected


def test_running_headers_that_alternate_on_left_and_right_pages_are_dropped():
    """A book set two-sided: "12 CHAPTER 2. NAME" on the left pages, "2.1. SECTION 13" on the
    right ones, so that the page before and after have the other one."""
    words = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
    pages = [[(9, f"{n} CHAPTER 2. THE PAGE" if n % 2 == 0 else f"2.1. THE SHAPE {n}"),
              *body(f"The {word} page opens.", f"It closes on {word}.")] for n, word in zip(range(10, 16), words)]
    text, _ = pdf_to_markdown(make_pdf(pages))
    assert "CHAPTER" not in text and "SHAPE" not in text
    assert all(f"The {word} page opens." in text for word in words)


def test_each_page_starts_at_its_offset_in_the_text_and_a_chunk_names_its_pages(tiny):
    pages = [[*body(f"Page {n} says {word}.", f"More about {word} here.")] for n, word in
             enumerate(("apples", "pears", "plums"), 1)] + [[]] + [body("Page five says figs.")]
    doc = parse(SourceFile(Path("f.pdf"), "f.pdf", "pdf"), make_pdf(pages))
    assert len(doc.pages) == 5 and doc.pages[0] == 0
    for n, page in ((1, "Page 1"), (2, "Page 2"), (3, "Page 3"), (5, "Page five")):
        at = doc.text.index(page)
        assert doc.page_span(at, at + 5) == (n, n)
    assert doc.pages[3] == doc.pages[4]  # the empty fourth page starts where the fifth does
    assert doc.page_span(doc.text.index("apples"), doc.text.index("plums")) == (1, 3)
    chunks = chunk_text(doc.text, tiny.tokenizer, ChunkSettings(chunk_size=16, overlap=0))
    assert [doc.page_span(c.start, c.end) for c in chunks][0][0] == 1
    assert [doc.page_span(c.start, c.end) for c in chunks][-1] == (5, 5)
    assert all(doc.text[c.start:c.end] == c.text for c in chunks)


def test_a_document_without_pages_has_no_page_span():
    from unirag.readers.base import Document

    assert Document("a.md", "text", "a", True).page_span(0, 4) is None
