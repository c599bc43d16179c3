"""How much of an HTML page the reader keeps: the main text only, or the site's navigation too.

Why: chunks made of a page's navigation ("Previous topic", "Show Source", the sidebar's table of
contents, the footer) repeat on every page of a site, so retrieval returns them for any question;
permalink marks ("¶") end up in every heading path that citations show. This reads the same
pages with several readers and counts, per reader, what ingest would store from them:

- chunks: `chunk_text` with the default `ChunkSettings()`, counting the default model's tokens
  (its tokenizer only; `--words` counts words instead), as `unirag ingest` cuts them;
- nav chunks: chunks holding one of NAV_STRINGS; ¶ headings: distinct heading paths with "¶";
- words of the text read; reading seconds for all pages;
- code blocks kept: every <pre> of the page, lines right-stripped, found verbatim (indentation
  included) in the text read; main paragraphs kept: every <p> inside the page's role="main"
  element (Sphinx marks its body so) found in the text, spacing and Markdown marks aside; main
  headings kept: every h1-h6 in it found among the headings the chunker sees in the text (a
  `#` comment of code left unfenced, or a broken fence, shows up here). These references are read
  with lxml, independently of the readers measured.

Readers: `before` (`html_to_markdown` at git revision `--baseline`, the whole page), `unirag`
(the working tree's `html_to_markdown`), trafilatura's Markdown output (its default, and with
`favor_recall`), and readability-lxml's article selection rendered by the working tree's reader.

    pip install trafilatura readability-lxml   # the extractors compared (they bring lxml)
    python research/html_reading.py [--docs ../shared/data/docs/python-docs] [--words]
        [--baseline a618ec1] [--output runs/bench/html_reading.json]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import ROOT, machine_info, markdown_table, write_json  # noqa: E402

DEFAULT_HTML = ROOT.parent / "shared" / "data" / "docs" / "python-docs"
BASELINE = "a618ec1"  # the last commit whose reader kept the whole page
NAV_STRINGS = ("Previous topic", "Next topic", "This Page", "Show Source", "Report a bug", "Navigation")
HEADERS = ("reader", "chunks", "nav chunks", "¶ headings", "words", "code blocks kept", "main paragraphs kept",
           "main headings kept", "read s")

Reader = Callable[[str], str]  # HTML -> Markdown-style text


def baseline_reader(revision: str) -> Reader:
    """`html_to_markdown` as it was at a git revision, loaded beside the current one."""
    source = subprocess.run(["git", "show", f"{revision}:unirag/readers/registry.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("unirag.rag._readers_baseline")
    module.__package__ = "unirag.rag"  # its relative imports resolve against the installed package
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{revision}:unirag/readers/registry.py", "exec"), module.__dict__)
    return lambda html: module.html_to_markdown(html)[0]


def unirag_reader(html: str) -> str:
    from unirag.readers.html import html_to_markdown

    return html_to_markdown(html)[0]


def trafilatura_reader(favor_recall: bool) -> Reader:
    import trafilatura

    def read(html: str) -> str:
        return trafilatura.extract(html, output_format="markdown", include_formatting=True, include_tables=True,
                                   include_comments=False, include_links=False, include_images=False,
                                   favor_recall=favor_recall) or ""
    return read


def readability_reader(html: str) -> str:
    from readability import Document

    return unirag_reader(Document(html).summary(html_partial=True))


def readers(baseline: str) -> dict[str, Reader]:
    """The readers to compare; extractors that are not installed are left out with a note."""
    found = {"before": baseline_reader(baseline), "unirag (landmarks)": unirag_reader}
    try:
        import trafilatura  # noqa: F401

        found["trafilatura"] = trafilatura_reader(favor_recall=False)
        found["trafilatura favor_recall"] = trafilatura_reader(favor_recall=True)
    except ImportError:
        print("trafilatura not installed: left out", file=sys.stderr)
    try:
        import readability  # noqa: F401

        found["readability-lxml"] = readability_reader
    except ImportError:
        print("readability-lxml not installed: left out", file=sys.stderr)
    return found


# ---------------------------------------------------------------------- references, read with lxml
def flat(text: str) -> str:
    """Text compared loosely: Markdown emphasis/code marks, permalink marks and spacing ignored."""
    return " ".join(re.sub(r"[*`\\¶]", "", text).split())


def code_text(pre) -> str:
    """A <pre>'s text as the reader should keep it: lines right-stripped, no blank edges."""
    lines = [line.rstrip() for line in pre.text_content().split("\n")]
    return "\n".join(lines).strip("\n")


def references(html: str) -> dict[str, list[str]]:
    """The page's code blocks, and the paragraphs and headings of its role="main" element."""
    import lxml.html

    page = lxml.html.fromstring(html)
    for link in page.xpath("//a[contains(concat(' ', @class, ' '), ' headerlink ')]"):
        link.drop_tree()
    main = page.xpath("//*[@role='main']")
    headings = "|".join(f"self::h{i}" for i in range(1, 7))
    return {
        "code": [t for t in map(code_text, page.xpath("//pre")) if t.strip()],
        "paragraphs": [t for t in (flat(p.text_content()) for p in main[0].xpath(".//p")) if t] if main else [],
        "headings": [t for t in (flat(h.text_content()) for h in main[0].xpath(f".//*[{headings}]")) if t]
        if main else [],
    }


# ---------------------------------------------------------------------- measuring
def measure(read: Reader, pages: list[tuple[str, str, dict]], tokenizer) -> dict:
    """Totals for one reader over all pages, plus what it missed (first few of each kind)."""
    from unirag.retrieval.chunking import ChunkSettings, chunk_text, split_sections

    totals = dict.fromkeys(("chunks", "nav_chunks", "pilcrow_headings", "words", "code", "code_kept", "paragraphs",
                            "paragraphs_kept", "headings", "headings_kept"), 0)
    missed: dict[str, list[str]] = {"code": [], "paragraphs": [], "headings": []}
    seconds = 0.0
    for name, html, ref in pages:
        start = time.perf_counter()
        text = read(html)
        seconds += time.perf_counter() - start
        chunks = chunk_text(text, tokenizer, ChunkSettings(), markdown=True)
        totals["chunks"] += len(chunks)
        totals["nav_chunks"] += sum(any(s in c.text for s in NAV_STRINGS) for c in chunks)
        totals["pilcrow_headings"] += len({c.heading for c in chunks if "¶" in c.heading})
        totals["words"] += len(text.split())
        flat_text = flat(text)
        titles = {flat(title) for path, _ in split_sections(text) for _, title in path}
        kept = {"code": lambda t: t in text, "paragraphs": lambda t: t in flat_text, "headings": lambda t: t in titles}
        for kind, check in kept.items():
            totals[kind] += len(ref[kind])
            lost = [t for t in ref[kind] if not check(t)]
            totals[f"{kind}_kept"] += len(ref[kind]) - len(lost)
            missed[kind] += [f"{name}: {t[:120]!r}" for t in lost]
    return {**totals, "read_s": seconds, "missed": {k: v[:20] for k, v in missed.items()},
            "missed_count": {k: len(v) for k, v in missed.items()}}


def row(name: str, r: dict) -> list:
    def share(kind: str) -> str:
        return f"{r[f'{kind}_kept']}/{r[kind]}"

    return [name, r["chunks"], r["nav_chunks"], r["pilcrow_headings"], f"{r['words']:,}", share("code"),
            share("paragraphs"), share("headings"), round(r["read_s"], 1)]


def load_tokenizer(words: bool):
    """The default model's tokenizer (the model itself is not loaded), or None to count words."""
    if words:
        return None
    from transformers import AutoTokenizer

    from unirag.model.registry import DEFAULT_MODEL, resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(DEFAULT_MODEL))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=DEFAULT_HTML, help="a folder of .html pages")
    parser.add_argument("--baseline", default=BASELINE, help="git revision of the `before` reader")
    parser.add_argument("--words", action="store_true", help="count words instead of the model's tokens")
    parser.add_argument("--output", default="runs/bench/html_reading.json")
    args = parser.parse_args()

    files = sorted(args.docs.glob("*.htm*"))
    if not files:
        raise SystemExit(f"no .html files under {args.docs}")
    pages = []
    for path in files:
        html = path.read_text(encoding="utf-8")
        pages.append((path.name, html, references(html)))
    tokenizer = load_tokenizer(args.words)
    results = {}
    for name, read in readers(args.baseline).items():
        results[name] = measure(read, pages, tokenizer)
        print(f"{name}: done", file=sys.stderr)
    print(f"{len(pages)} pages from {args.docs}; chunks of {'words' if args.words else 'tokens'}, default size\n")
    print(markdown_table(HEADERS, [row(name, r) for name, r in results.items()]))
    out = write_json(args.output, {"machine": machine_info(), "docs": str(args.docs), "pages": len(pages),
                                   "baseline": args.baseline, "count": "words" if args.words else "tokens",
                                   "nav_strings": NAV_STRINGS, "readers": results})
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
