"""`unirag eval ...`: embedding quality (MTEB tasks) and kept generation quality (LM tasks).

The lead's ``unirag/cli.py`` mounts this with ``app.add_typer(eval_app, name="eval")``. Each
command loads a model once per variant with ``UniModel.load`` and imports mteb only when needed
(importing it takes seconds).
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..cli_options import AdapterOpt, ModelOpt, PrecisionOpt, load_model

from ..errors import UniragError

eval_app = typer.Typer(
    help="Evaluate a model: MTEB embedding tasks (embed) and language-modelling tasks (lm).",
    no_args_is_help=True,
    add_completion=False,
)

DEFAULT_EMBED_TASKS = "STSBenchmark,SICK-R,STS17,Banking77Classification,SciFact"
DEFAULT_LM_TASKS = "wikitext2,arc_easy,piqa,sciq,hellaswag,lambada"

DataOpt = Annotated[Optional[Path], typer.Option(
    "--data", help="Evaluation data folder (default: $UNIRAG_DATA/eval, else ../shared/data/eval).")]
LimitOpt = Annotated[Optional[int], typer.Option(help="Keep only the first N items of each task (quick runs).")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Folder for JSON results and results.md.")]
ProgressOpt = Annotated[bool, typer.Option("--progress/--no-progress", help="Show progress bars.")]


def data_dir(data: Optional[Path]) -> Path:
    """The evaluation data folder: --data, else $UNIRAG_DATA/eval, else ../shared/data/eval."""
    if data is None:
        env = os.environ.get("UNIRAG_DATA")
        data = Path(env) / "eval" if env else Path("../shared/data/eval")
    if not data.is_dir():
        raise UniragError(
            f"evaluation data folder {data} not found; pass --data DIR or set UNIRAG_DATA to the shared data folder"
        )
    return data


def _split(values: list[str] | str | None) -> list[str]:
    """Comma-separated and/or repeated option values as one list, in order, without duplicates."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return list(dict.fromkeys(v.strip() for item in values for v in item.split(",") if v.strip()))


@eval_app.command("embed")
def embed(
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    pooling: Annotated[Optional[list[str]], typer.Option(
        help="eos, mean, last or echo; repeat (or comma-separate) to compare several on one loaded model. "
             "Default: the adapter's pooling, else eos.")] = None,
    tasks: Annotated[str, typer.Option(help="Comma-separated MTEB task names.")] = DEFAULT_EMBED_TASKS,
    data: DataOpt = None,
    limit: LimitOpt = None,
    output: OutputOpt = None,
    batch_size: int = 32,
    max_length: Annotated[int, typer.Option(help="Longer inputs are truncated.")] = 512,
    precision: PrecisionOpt = "auto",
    progress: ProgressOpt = True,
):
    """Score embeddings on MTEB tasks and print a Markdown table (one row per model and pooling)."""
    from ..unimodel import POOLINGS

    poolings = _split(pooling)
    bad = [p for p in poolings if p not in POOLINGS]
    if bad:
        raise UniragError(f"unknown pooling {', '.join(bad)}; choose from {', '.join(POOLINGS)}")
    task_names = _split(tasks)
    if not task_names:
        raise UniragError("no tasks given")
    folder = data_dir(data)

    from .mteb_tasks import TASKS, results_markdown, run_tasks  # imports mteb (slow)

    unknown = [t for t in task_names if t not in TASKS]
    if unknown:
        raise UniragError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    uni = load_model(model, adapter, precision, max_length)
    rows = {}
    for p in poolings or [uni.default_pooling]:
        rows[f"{uni.name} {p}"] = run_tasks(uni, task_names, folder, pooling=p, limit=limit, output_dir=output,
                                            batch_size=batch_size, show_progress=progress)
    table = results_markdown(rows)
    typer.echo(table, nl=False)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        (output / "results.md").write_text(table, encoding="utf-8")
        typer.echo(f"unirag: results written to {output}", err=True)


@eval_app.command("lm")
def lm(
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    compare_base: Annotated[Optional[bool], typer.Option(
        "--compare-base/--no-compare-base",
        help="Also evaluate the base model and show the change (default: on when an adapter is used).")] = None,
    tasks: Annotated[str, typer.Option(help="Comma-separated: " + DEFAULT_LM_TASKS)] = DEFAULT_LM_TASKS,
    data: DataOpt = None,
    limit: LimitOpt = None,
    limit_tokens: Annotated[Optional[int], typer.Option(
        help="Wikitext tokens to score (default: all, or 100 x --limit).")] = None,
    window: Annotated[Optional[int], typer.Option(help="Perplexity window in tokens (default 1024).")] = None,
    stride: Annotated[Optional[int], typer.Option(help="Perplexity stride in tokens (default 512).")] = None,
    batch_size: int = 16,
    output: OutputOpt = None,
    precision: PrecisionOpt = "auto",
    progress: ProgressOpt = True,
):
    """Perplexity, zero-shot multiple choice and LAMBADA, scored like lm-evaluation-harness."""
    from .lm import TASK_FILES, lm_results_markdown, run_lm_eval

    task_names = _split(tasks)
    unknown = [t for t in task_names if t not in TASK_FILES]
    if unknown or not task_names:
        raise UniragError(f"unknown or no LM task(s) {', '.join(unknown)}; known: {', '.join(TASK_FILES)}")
    folder = data_dir(data)
    from ..models import resolve_adapter

    adapter_dir = resolve_adapter(model, adapter)
    if compare_base is None:
        compare_base = adapter_dir is not None
    variants = ["none", adapter_dir] if adapter_dir and compare_base else [adapter_dir or "none"]
    runs: dict[str, dict] = {}
    for variant in variants:  # one model in memory at a time
        uni = load_model(model, variant, precision)
        label = uni.name if uni.name not in runs else f"{uni.name} ({variant})"
        runs[label] = run_lm_eval(uni, folder, task_names, limit=limit, limit_tokens=limit_tokens,
                                  batch_size=batch_size, max_length=window, stride=stride, show_progress=progress)
        del uni
        gc.collect()
    table = lm_results_markdown(runs)
    typer.echo(table, nl=False)
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        record = {"limit": limit, "limit_tokens": limit_tokens, "runs": runs}
        (output / "lm_results.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
        (output / "lm_results.md").write_text(table, encoding="utf-8")
        typer.echo(f"unirag: results written to {output}", err=True)
