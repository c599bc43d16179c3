"""Check that every key of a question set occurs in the text of the files that answer it.

Not part of the test suite (it needs the documents): run it after fetching a set's folder,
    python benchmarks/questions/check_keys.py benchmarks/questions/stats_papers.jsonl runs/stats-docs
PDFs are read with pypdf, with poppler's pdftotext (when installed) and with unirag's own PDF
reader (when importable, e.g. PYTHONPATH=.), since a key that only one extractor yields would
measure the reader rather than the answer. Text is
lower-cased and its runs of whitespace collapsed to one space, as a line break inside a
key is no fault of the answer. Exits 1 when any key is missing or appears in its question.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).lower()


def _pypdf_text(path: Path) -> str:
    import pypdf

    return "\n".join(page.extract_text() or "" for page in pypdf.PdfReader(path).pages)


def _pdftotext_text(path: Path) -> str:
    return subprocess.run(
        ["pdftotext", str(path), "-"], check=True, capture_output=True, text=True
    ).stdout


def _unirag_text(path: Path) -> str | None:
    try:
        from unirag.readers.pdf import pdf_to_markdown
    except ImportError:
        return None
    return pdf_to_markdown(path.read_bytes())[0]


def extractions(path: Path) -> dict[str, str]:
    """Each extractor's normalised text of one file."""
    if path.suffix.lower() != ".pdf":
        return {"text": _normalise(path.read_text(encoding="utf-8", errors="replace"))}
    texts = {"pypdf": _normalise(_pypdf_text(path))}
    if shutil.which("pdftotext"):
        texts["pdftotext"] = _normalise(_pdftotext_text(path))
    unirag_text = _unirag_text(path)
    if unirag_text is not None:
        texts["unirag"] = _normalise(unirag_text)
    return texts


def main(questions: Path, docs: Path) -> int:
    rows = [json.loads(line) for line in questions.read_text().splitlines() if line.strip()]
    cache: dict[str, dict[str, str]] = {}
    failures = 0
    for number, row in enumerate(rows, 1):
        for name in row["files"]:
            if name not in cache:
                cache[name] = extractions(docs / name)
        for key in row["keys"]:
            missing = [
                extractor
                for extractor in sorted({e for name in row["files"] for e in cache[name]})
                if not any(key in cache[name].get(extractor, "") for name in row["files"])
            ]
            in_question = key in row["q"].lower()
            status = "ok"
            if missing or in_question:
                failures += 1
                status = "MISSING in " + ",".join(missing) if missing else ""
                status += " IN QUESTION" if in_question else ""
            print(f"{number:3d} {row['files'][0]:28s} {key!r:28s} {status}")
    extractors = sorted({e for texts in cache.values() for e in texts})
    print(f"{len(rows)} questions, {sum(len(r['keys']) for r in rows)} keys, "
          f"{failures} failures; extractors: {', '.join(extractors)}")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: check_keys.py QUESTIONS.jsonl DOCS_FOLDER")
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
