"""The question sets kept in benchmarks/questions are well formed (no documents needed).

Whether each key is in its document's text is checked by benchmarks/questions/check_keys.py,
which needs the fetched PDFs; here only what the files themselves can show.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from unirag.evaluation.rag import load_questions

QUESTIONS = Path(__file__).resolve().parents[2] / "benchmarks" / "questions"
SETS = sorted(QUESTIONS.glob("*.jsonl"))
# The PDF sets, the fetch script's name for each, and their size, fixed when they were written.
PDF_SETS = {"stats_papers.jsonl": ("stats", 40), "survival_vignettes.jsonl": ("survival", 40)}
# Letter pairs that PDF fonts often set as one ligature glyph, which extractors spell differently.
LIGATURE_PAIRS = ("fi", "fl", "ff")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def fetched_names(set_name: str) -> set[str]:
    """The PDF names fetch_pdf_sets.sh lays out for one set."""
    script = (QUESTIONS / "fetch_pdf_sets.sh").read_text()
    block = re.search(rf'^{set_name}\) files="(.*?)";;', script, re.S | re.M)
    assert block, f"fetch_pdf_sets.sh has no {set_name} set"
    return {Path(line.split()[1]).name for line in block.group(1).splitlines() if line.strip()}


def test_the_sets_are_found():
    assert {p.name for p in SETS} >= set(PDF_SETS)


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.name)
def test_every_row_has_the_four_fields_and_up_to_three_lowercase_keys(path):
    for n, row in enumerate(rows(path), 1):
        where = f"{path.name}:{n}"
        assert set(row) == {"q", "files", "answer", "keys"}, where
        assert isinstance(row["q"], str) and row["q"].strip(), where
        assert isinstance(row["answer"], str) and row["answer"].strip(), where
        assert row["files"] and all(isinstance(f, str) and f for f in row["files"]), where
        keys = row["keys"]
        assert 1 <= len(keys) <= 3, where
        assert all(isinstance(k, str) and k.strip() and k == k.lower() for k in keys), where


@pytest.mark.parametrize("path", SETS, ids=lambda p: p.name)
def test_the_evaluation_loader_reads_every_row(path):
    questions = load_questions(path)
    assert len(questions) == len(rows(path))
    assert len({q.question for q in questions}) == len(questions)


@pytest.mark.parametrize("name", sorted(PDF_SETS))
def test_pdf_sets_have_their_size_and_keys_that_survive_extraction(name):
    set_rows = rows(QUESTIONS / name)
    assert len(set_rows) == PDF_SETS[name][1]
    for n, row in enumerate(set_rows, 1):
        for key in row["keys"]:
            assert not any(pair in key for pair in LIGATURE_PAIRS), f"{name}:{n} key {key!r}"
            # A key the question already holds would credit an answer that merely echoes it.
            assert key not in row["q"].lower(), f"{name}:{n} key {key!r} is in the question"


@pytest.mark.parametrize("name", sorted(PDF_SETS))
def test_pdf_sets_name_only_files_the_fetch_script_provides(name):
    provided = fetched_names(PDF_SETS[name][0])
    used = {f for row in rows(QUESTIONS / name) for f in row["files"]}
    assert used <= provided, used - provided
    # Questions spread over the documents: every fetched document answers at least one.
    assert provided <= used, provided - used
