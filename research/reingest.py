"""Re-ingesting a file after a small edit: the chunks whose text is unchanged keep their vectors.

Why: a documentation folder changes a paragraph at a time, and a reader change touches a few
passages of many pages. Ingest re-chunks a changed file; this measures what embedding only the
chunks whose embedded text is new (`ingest(..., reuse_vectors=True)`, the default) saves against
embedding every chunk of the file again, on one long page, in one run on one loaded model.

The page is copied into a temporary folder and ingested once into a fresh embedded Chroma. Then,
`--rounds` times, one sentence in the middle of the page is changed and the folder ingested
again, alternately with and without reuse (each edit is a different sentence). Timed: the
re-ingest, from the scan to the last vector stored. After the last round the collection is
checked against a clean ingest of the edited page: the same ids and texts, vectors within 1e-4.

    python research/reingest.py [--page ../shared/data/docs/python-docs/library-datetime.html]
        [--rounds 2] [--output runs/bench/reingest.json]
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# its sibling trials, then the benchmarks' shared helpers (bench_common, retrieval, embedding)
sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1] / "benchmarks")]
from bench_common import ROOT, machine_info, markdown_table, write_json  # noqa: E402

DEFAULT_PAGE = ROOT.parent / "shared" / "data" / "docs" / "python-docs" / "library-datetime.html"
HEADERS = ("re-ingest", "chunks of the page", "embedded", "took a stored vector", "seconds (median)", "speed")
_SENTENCE = re.compile(r"(?<=[a-z])\. (?=[A-Z][a-z]+ [a-z]+ [a-z]+)")


def edit(path: Path, k: int) -> None:
    """Change the k-th sentence end after the middle of the file: "x. Next" -> "x, as said. Next"."""
    text = path.read_text(encoding="utf-8")
    ends = [m.start() for m in _SENTENCE.finditer(text, len(text) // 2)]
    if len(ends) <= k:
        raise SystemExit(f"{path} has too few sentences after its middle to edit")
    at = ends[k * 7 % len(ends)]
    path.write_text(text[:at] + ", as said" + text[at:], encoding="utf-8")


def state(collection) -> dict:
    got = collection.get(include=["documents", "embeddings"])
    return {i: (d, np.asarray(e)) for i, d, e in zip(got["ids"], got["documents"], got["embeddings"])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", type=Path, default=DEFAULT_PAGE)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.page.is_file():
        raise SystemExit(f"no page at {args.page}")

    import unirag
    from unirag.retrieval import store
    from unirag.retrieval.ingest import ingest

    model = unirag.load()
    rows: dict[bool, list] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "docs"
        folder.mkdir()
        page = folder / args.page.name
        shutil.copyfile(args.page, page)
        collection = store.open_collection(store.connect(Path(tmp) / "db"), "docs", model, create=True)
        first = ingest(model, collection, folder)
        print(f"first ingest: {first.line()}", file=sys.stderr)
        k = 0
        for _ in range(args.rounds):
            for reuse in (True, False):
                edit(page, k)
                k += 1
                started = time.perf_counter()
                summary = ingest(model, collection, folder, reuse_vectors=reuse)
                rows[reuse].append((time.perf_counter() - started, summary))
                print(f"reuse={reuse}: {summary.line()}", file=sys.stderr)
        clean = store.open_collection(store.connect(Path(tmp) / "db2"), "docs", model, create=True)
        ingest(model, clean, folder)
        mine, fresh = state(collection), state(clean)
        same = mine.keys() == fresh.keys() and all(
            mine[i][0] == d and np.allclose(mine[i][1], v, atol=1e-4) for i, (d, v) in fresh.items())

    base = statistics.median(s for s, _ in rows[False])
    table = []
    for reuse, label in ((True, "default: unchanged chunks keep their vectors"), (False, "every chunk embedded again")):
        seconds = statistics.median(s for s, _ in rows[reuse])
        last = rows[reuse][-1][1]
        table.append((label, last.chunks_written, last.chunks_written - last.chunks_reused, last.chunks_reused,
                      f"{seconds:.1f}", f"{base / seconds:.1f}x"))
    print(markdown_table(HEADERS, table))
    print(f"\nthe collection equals a clean ingest of the edited page: {same}")
    if args.output:
        write_json(args.output, {"machine": machine_info(), "page": str(args.page), "rounds": args.rounds,
                                 "rows": [dict(zip(HEADERS, r)) for r in table], "equals_clean_ingest": same})
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
