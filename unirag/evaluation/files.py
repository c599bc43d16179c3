"""Reading the local evaluation files: one JSONL reader with one clear error for a missing file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from unirag.errors import UniragError


def check_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise UniragError(f"evaluation file {path} not found; pass --data pointing at the shared evaluation data")
    return path


def read_jsonl(path: str | Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The first `limit` (default: all) non-empty lines of a JSONL file, parsed."""
    rows = []
    with open(check_file(path), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                rows.append(json.loads(line))
                if limit and len(rows) >= limit:
                    break
    return rows
