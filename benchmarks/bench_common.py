"""Helpers shared by the speed and memory benchmarks (embedding.py, decode.py, memory.py).

Nothing here loads a model: machine facts, timing, the Markdown table, prose chunks, JSON output.
The scripts put this folder on sys.path, so `python benchmarks/<name>.py` works from anywhere.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DOCS = ROOT.parent / "shared" / "data" / "docs" / "rust-book" / "src"


def cpu_model() -> str:
    """The CPU's name from /proc/cpuinfo ("model name"), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """Facts that decide a CPU benchmark's numbers; stored next to every result."""
    info = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }
    try:
        info["load_average_1_5_15"] = [round(x, 2) for x in os.getloadavg()]  # >0 means others share the CPU
    except OSError:
        pass
    try:
        from unirag.model.hardware import cpu_has_fast_bf16

        info["cpu_has_fast_bf16"] = cpu_has_fast_bf16()
    except ImportError:
        pass
    if "torch" in sys.modules:  # only report torch where the script uses it (memory.py's parent does not)
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
    return info


def timed_median(fn: Callable[[], object], repeats: int) -> tuple[float, list[float]]:
    """Run `fn` once untimed (warm-up), then `repeats` times; (median seconds, all timings)."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def timed_interleaved(fns: Sequence[Callable[[], object]], repeats: int) -> list[tuple[float, list[float]]]:
    """Like `timed_median` for several callables timed in alternating rounds (one untimed warm-up
    each first), so a drift in the machine's speed during the run falls on all of them alike."""
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, mine in zip(fns, times):
            start = time.perf_counter()
            fn()
            mine.append(time.perf_counter() - start)
    return [(statistics.median(t), t) for t in times]


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub Markdown table; floats get 3 significant digits unless already formatted as strings."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        return "" if value is None else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells, the table {len(headers)} columns: {row!r}")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def prose_chunks(docs: str | Path, tokenizer, n_texts: int, chunk_tokens: int = 200) -> list[str]:
    """`n_texts` pieces of real prose of about `chunk_tokens` tokens each, from the .md files in `docs`.

    Files are read in sorted order and cut with unirag's own chunker (Markdown ignored, no
    overlap, cuts moved back to a nearby break); pieces under half the size (file ends) are
    dropped. If the folder runs out, the pieces repeat. `tokenizer=None` counts words instead.
    """
    from unirag.retrieval.chunking import ChunkSettings, chunk_text

    files = sorted(Path(docs).rglob("*.md"))
    if not files:
        raise FileNotFoundError(f"no .md files under {docs}")
    settings = ChunkSettings(chunk_size=chunk_tokens, overlap=0, embed_headings=False)
    pieces: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        pieces += [c.text for c in chunk_text(text, tokenizer, settings, markdown=False)
                   if c.n_tokens >= chunk_tokens // 2]
        if len(pieces) >= n_texts:
            break
    if not pieces:
        raise ValueError(f"the .md files under {docs} hold no piece of {chunk_tokens // 2}+ tokens")
    return [pieces[i % len(pieces)] for i in range(n_texts)]


def write_json(path: str | Path, result: dict) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    return out
