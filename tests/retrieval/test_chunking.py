"""Chunking (unirag.retrieval.chunking): heading-aware token windows with overlap, code blocks cut
and reopened, cuts at sentence ends, and the text each chunk is embedded as."""

from __future__ import annotations

import pytest
from rag_docs import SENTENCES, SMALL

from unirag.errors import UniragError
from unirag.readers.markdown import FENCE, block_at, code_blocks, outside_code, split_sections
from unirag.retrieval.chunking import CHUNK_FORMAT, ChunkSettings, chunk_text, embed_text, embed_texts


def test_chunking_follows_headings_with_token_overlap(tiny):
    text = ("# Book\n\n## Ch 1\n\n" + " ".join(SENTENCES * 6) + "\n\n```sh\n# a comment, not a heading\n```\n\n"
            "### Part\n\nShort part.\n\n# Other\n\nLast words.")
    sections = split_sections(text)
    assert [[t for _, t in path] for path, _ in sections] == [["Book", "Ch 1"], ["Book", "Ch 1", "Part"], ["Other"]]
    chunks = chunk_text(text, tiny.tokenizer, SMALL)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert all(c.n_tokens <= 32 for c in chunks if "```" not in c.text)  # (fence lines that close and reopen a cut block come on top)
    long = [c for c in chunks if c.heading == "Book > Ch 1"]
    assert len(long) > 3 and "not a heading" in long[-1].text  # a `#` line in a code fence is no heading
    assert not long[0].text.endswith("Ch 1")  # no chunk ends on a heading line
    prose = [c for c in long if "```" not in c.text]  # (fence lines close and reopen cut code blocks)
    assert len(prose) > 3
    for a, b in zip(prose, prose[1:]):  # consecutive windows share text (the overlap)
        shared = max(k for k in range(len(b.text) + 1) if a.text.endswith(b.text[:k]))
        assert shared >= 5, (a.text, b.text)
    assert {c.heading for c in chunks} == {"Book > Ch 1", "Book > Ch 1 > Part", "Other"}
    assert "Last words." in chunks[-1].text and "Short part." not in chunks[-1].text
    headed = ChunkSettings(32, 8, embed_headings=True)
    assert embed_text(long[0], "Book", headed).startswith("Book > Ch 1\n\n")
    assert embed_text(long[0], "Book", SMALL) == embed_text(long[0], "Book", headed)  # the default
    assert embed_text(long[0], "Book", ChunkSettings(32, 8, embed_headings=False)) == long[0].text
    with pytest.raises(UniragError):
        ChunkSettings(chunk_size=32, overlap=20)


def test_a_cut_inside_a_code_block_closes_it_and_the_next_chunk_reopens_it():
    code = "\n".join(f"let x{i} = {i};" for i in range(40))
    page = f"## Listing\n\nThe code below sets forty variables.\n\n```rust\n{code}\n```\n\nAfter the code, prose.\n\n~~~~\nshort\n~~~~"
    chunks = chunk_text(page, None, ChunkSettings(32, 8))
    assert len(chunks) > 3
    fence_lines = lambda text: [line for line in text.split("\n") if FENCE.match(line)]  # noqa: E731
    for chunk in chunks:
        lines = fence_lines(chunk.text)
        assert len(lines) % 2 == 0, chunk.text  # every block the chunk opens, it closes
        assert outside_code(chunk.text, lambda prose: "").count("let x") == chunk.text.count("let x")
        assert "After the code" not in outside_code(chunk.text, lambda prose: ""), chunk.text  # prose is prose
        assert chunk.n_tokens <= 32 + 2  # the window, and an opening and a closing fence line on top
    inside = [c for c in chunks if c.text.startswith("```rust\nlet")]
    assert inside and all(c.text.endswith("```") or "After the code" in c.text for c in inside)
    # the page's own text, fence lines aside, is what the chunks hold
    assert all(line in page for c in chunks for line in c.text.split("\n") if not FENCE.match(line))
    blocks = code_blocks(page)
    assert [b.opening for b in blocks] == ["```rust", "~~~~"] and page[blocks[-1].end - 4:blocks[-1].end] == "~~~~"
    assert block_at(blocks, page.index("let x5")).opening == "```rust"
    assert block_at(blocks, page.index("After the code")) is None
    assert block_at(blocks, page.index("short")).opening == "~~~~"
    assert block_at(blocks, blocks[0].close) is blocks[0] and block_at(blocks, blocks[0].start) is None
    # plain text is cut as it is, and Markdown at the same places: only the fence lines differ
    plain = chunk_text(page, None, ChunkSettings(32, 8), markdown=False)
    assert len(plain) == len(chunks) and all(c.text in page for c in plain)
    for fenced, cut in zip(chunks, plain):
        assert cut.text in fenced.text
        assert set(fenced.text.replace(cut.text, "", 1).split("\n")) <= {"", "```rust", "```", "~~~~"}


def test_wrapped_prose_is_cut_at_a_sentence_end_not_at_a_line_break_inside_a_sentence():
    # Markdown wrapped at a fixed width: most line breaks fall inside a sentence
    sentence = "When your code performs an operation that could put a user at risk, it should check the values first."
    words, lines, line = (sentence + " ") * 12, [], ""
    for word in words.split():
        if len(line) + len(word) > 40:
            lines.append(line)
            line = ""
        line = f"{line} {word}".strip()
    page = "## Safety\n\n" + "\n".join(lines + [line])
    chunks = chunk_text(page, None, ChunkSettings(40, 8))
    assert len(chunks) > 2
    for chunk in chunks[:-1]:
        assert chunk.text.endswith("first."), chunk.text  # never "When your code"
    # in a code block a line break is still the better cut, whatever the line holds
    lines = [line for i in range(30) for line in (f"step{i} = go. then", f"run{i} more")]
    cut = chunk_text("## Code\n\n```\n" + "\n".join(lines) + "\n```", None, ChunkSettings(32, 8))
    assert len(cut) > 2
    for chunk in cut[:-1]:
        assert chunk.text.split("\n")[-2] in lines, chunk.text  # (the last line closes the cut block)


def test_context_words_put_the_previous_chunks_tail_before_each_chunk():
    page = "## Loops\n\n" + " ".join(f"w{i}" for i in range(60)) + "\n\n## Next\n\nShort end."
    chunks = chunk_text(page, None, ChunkSettings(32, 8))
    assert len(chunks) > 2
    plain = ChunkSettings(32, 8)
    assert embed_texts(chunks, "Loops", plain) == [embed_text(c, "Loops", plain) for c in chunks]
    context = ChunkSettings(32, 8, context_words=3)
    texts = embed_texts(chunks, "Loops", context)
    assert texts[0] == embed_text(chunks[0], "Loops", context)  # nothing before the first chunk
    for before, chunk, text in zip(chunks, chunks[1:], texts[1:]):  # crossing headings too, in file order
        tail = " ".join(before.text.split()[-3:])
        assert text == f"{tail}\n\n{embed_text(chunk, 'Loops', context)}"
    assert context.signature() != plain.signature()  # changing it re-embeds
    assert plain.signature() == f"size=32;overlap=8;headings=2;format={CHUNK_FORMAT}"  # no context: as without the option
    with pytest.raises(UniragError):
        ChunkSettings(context_words=-1)
