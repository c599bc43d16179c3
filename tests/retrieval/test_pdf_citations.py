"""A PDF's chunks record their pages, and every citation of them names the pages."""

import re

import pytest
import typer
from typer.testing import CliRunner

pytest.importorskip("pypdf")

from test_pdf import body, make_pdf  # noqa: E402

from unirag.cli.rag_commands import ask, ingest  # noqa: E402
from unirag.retrieval import store  # noqa: E402
from unirag.retrieval.chunking import ChunkSettings  # noqa: E402
from unirag.retrieval.ingest import ingest as run_ingest  # noqa: E402
from unirag.retrieval.search import Hit, pages_label, retrieve  # noqa: E402

SMALL = ChunkSettings(chunk_size=32, overlap=8)
TOPICS = ("apples grow on trees in the orchard", "pears ripen slowly in a cool cellar",
          "plums are dried to make prunes", "figs need a warm and dry summer")


@pytest.mark.parametrize("metadata, label", [
    ({"page_start": 12, "page_end": 12}, "p. 12"),
    ({"page_start": 12, "page_end": 13}, "pp. 12-13"),
    ({"page_start": 3}, "p. 3"),
    ({}, ""),                                      # other formats, and chunks stored before pages were
    ({"page_start": "12", "page_end": 13}, ""),    # not a page number
    ({"page_start": True, "page_end": True}, ""),
])
def test_pages_label(metadata, label):
    assert pages_label(metadata) == label


@pytest.mark.parametrize("source, heading, metadata, label", [
    ("guide.pdf", "Intro > Setup", {"page_start": 4, "page_end": 5}, "guide.pdf pp. 4-5 > Intro > Setup"),
    ("guide.pdf", "", {"page_start": 4, "page_end": 4}, "guide.pdf p. 4"),
    ("guide.md", "Intro", {}, "guide.md > Intro"),
    ("old.pdf", "Intro", {"source": "old.pdf"}, "old.pdf > Intro"),
])
def test_hit_label_names_the_pages(source, heading, metadata, label):
    assert Hit("id", 1.0, "text", source, heading, metadata).label == label


def orchard_pdf(path):
    pages = [[(18, f"{n} Chapter {n}") if n == 1 else (11, ""), *body(f"Page {n}: {topic}.", f"More on {topic}.")]
             for n, topic in enumerate(TOPICS, 1)]
    path.write_bytes(make_pdf([[line for line in page if line[0]] for page in pages]))
    return path


def test_ingested_pdf_chunks_carry_their_pages_and_hits_cite_them(tiny, tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    orchard_pdf(docs / "orchard.pdf")
    (docs / "notes.md").write_text("# Notes\n\nNothing about fruit here, only notes.\n")
    collection = store.open_collection(store.connect(tmp_path / "db"), "docs", tiny, create=True)
    run_ingest(tiny, collection, docs, settings=SMALL)
    metas = collection.get(include=["metadatas"])["metadatas"]
    pdf = [m for m in metas if m["source"] == "orchard.pdf"]
    assert pdf and all(1 <= m["page_start"] <= m["page_end"] <= 4 for m in pdf)
    assert {m["page_start"] for m in pdf} == {1, 2, 3, 4}
    assert all("page_start" not in m for m in metas if m["source"] == "notes.md")
    hits = retrieve(tiny, collection, "figs warm dry summer", top_k=10, mode="lexical")
    figs = next(hit for hit in hits if "figs" in hit.text)
    assert figs.label.startswith("orchard.pdf p. 4")


def test_unirag_ask_cites_a_pdfs_pages(tiny_model_dir, tmp_path):
    app = typer.Typer()
    for command in (ingest, ask):
        app.command()(command)
    docs = tmp_path / "docs"
    docs.mkdir()
    orchard_pdf(docs / "orchard.pdf")
    common = ["--model", str(tiny_model_dir), "--db", str(tmp_path / "db"), "--precision", "fp32"]
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", str(docs), *common, "--chunk-size", "32", "--chunk-overlap", "8",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["ask", "Where do plums go?", "-k", "2", "--max-new-tokens", "4",
                                 "--retrieval", "lexical", *common])
    assert result.exit_code == 0, result.output
    sources = result.stdout.split("\nSources:\n", 1)[1]
    # the chunk that tells of plums: page 3, or a chunk running over into it
    assert re.match(r"\[1\] orchard\.pdf (p\. 3|pp\. [1-3]-[3-4]) > ", sources), sources
