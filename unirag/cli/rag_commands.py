"""`unirag ingest / adapt / retrieve / ask / chat`: the commands over the user's documents, as plain
typer command functions.

They are registered on the main app in `unirag/cli/commands.py` (`app.command()(ingest)`), so this module
holds no Typer app. It sits in the top (interface) layer: it may import every layer below
(training, answer, retrieval, readers, model), and nothing below imports it (pyproject.toml's
import-linter contract). Heavy imports (torch, chromadb) happen inside the commands, keeping
`unirag --help` fast. The model is loaded once per command and passed on as an object.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from unirag.cli.options import (DEFAULT_ANSWER, DEFAULT_DB, DEFAULT_RERANK, AdapterOpt, AnswerOpt, CollectionOpt,
                                CompileOpt, ContextWordsOpt, DbOpt, DecodeCopyOpt, DeviceOpt, ModelOpt, PrecisionOpt,
                                RerankOpt, RetrievalOpt, SourceOpt, UrlOpt, launcher_rank, load_model)
from unirag.errors import UniragError

TopKOpt = Annotated[int, typer.Option("--top-k", "-k", min=1, help="How many chunks to retrieve (and, for ask/chat, show and cite).")]
MaxNewOpt = Annotated[int, typer.Option(help="Longest answer, in tokens.")]
TemperatureOpt = Annotated[float, typer.Option(help="0 means greedy.")]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _safe(text: str) -> str:
    """Text from documents (chunks, headings, file names, answers) with terminal control
    characters, such as the ESC that starts colour or cursor codes, shown as U+FFFD."""
    return _CONTROL.sub("\ufffd", text)


def _check_question(question: str, command: str) -> None:
    """An empty question fails at once, before the model loads."""
    if not question.strip():
        raise UniragError(f"the question is empty; pass it as text, e.g. unirag {command} "
                          '"How do I configure logging?"')


def _model_and_collection(db: Path, chroma_url: Optional[str], collection: str, model: str, adapter: str,
                          precision: str, compile_decode: bool = False, decode_copy: str = "int4",
                          device: str = "auto"):
    """Open the existing database first (so a bad --db fails before the slow model load), then
    the model, then the collection (which checks that this model made its vectors)."""
    from unirag.retrieval.store import connect, open_collection

    client = connect(db, chroma_url, must_exist=True)
    uni = load_model(model, adapter, precision, compile_decode=compile_decode, decode_copy=decode_copy, device=device)
    return uni, open_collection(client, collection, uni)


# what readers.KINDS reads, spelled out here so that `unirag --help` does not import the readers
INGESTED_TYPES = ".md .markdown .mdx .txt .rst .adoc .asciidoc .html .htm .pdf .ipynb"


def ingest(
    path: Annotated[Path, typer.Argument(help=f"Folder to index recursively ({INGESTED_TYPES}), or one file.")],
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: CollectionOpt = "docs",
    chunk_size: Annotated[int, typer.Option(help="Tokens per chunk.")] = 256,
    chunk_overlap: Annotated[int, typer.Option(help="Tokens shared by consecutive chunks of a section.")] = 32,
    embed_headings: Annotated[bool, typer.Option(help="Embed 'title / heading path' before each chunk's text (better retrieval; the stored text is the chunk alone).")] = True,
    context_words: ContextWordsOpt = 0,
    max_file_mb: Annotated[float, typer.Option(help="Skip files larger than this.")] = 20.0,
    batch_size: Annotated[int, typer.Option(min=1, help="Chunks per embedding batch.")] = 32,
    reset: Annotated[bool, typer.Option(help="Delete the collection first and rebuild it.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
    max_files: Annotated[Optional[int], typer.Option(hidden=True, min=0, help="Process only the first N files.")] = None,
):
    """Index a folder into Chroma; re-runs embed only new or changed files and drop removed ones."""
    from unirag.retrieval.chunking import ChunkSettings
    from unirag.retrieval.ingest import ingest as run_ingest
    from unirag.retrieval.ingest import scan
    from unirag.retrieval.store import connect, delete_collection, open_collection

    settings = ChunkSettings(chunk_size, chunk_overlap, embed_headings, context_words)
    scan(path)  # a missing path, an empty folder or a bad --db fails here, before the model loads
    worker, workers = launcher_rank()
    if workers > 1 and not chroma_url:
        raise UniragError(f"{workers} ingest workers need one Chroma server to write to (--chroma-url); "
                          "an embedded database takes one writer")
    if workers > 1 and reset:
        raise UniragError("--reset with several workers would race; reset in one process first")
    client = connect(db, chroma_url)
    uni = load_model(model, adapter, precision, device=device)
    if chunk_size + 32 > uni.max_length:
        raise UniragError(f"--chunk-size {chunk_size} leaves no room under the model's max_length {uni.max_length}")
    if reset:
        delete_collection(client, collection)
    coll = open_collection(client, collection, uni, create=True)
    summary = run_ingest(uni, coll, path, settings=settings, max_file_bytes=int(max_file_mb * 2**20),
                         batch_size=batch_size, max_files=max_files, progress=progress and worker == 0,
                         worker=worker, workers=workers)
    who = f"worker {worker + 1} of {workers}: " if workers > 1 else ""
    typer.echo(f"unirag: {who}indexed {path} into collection {collection!r} at {chroma_url or db} "
               f"({coll.count()} chunks, model {uni.name})\n{_safe(summary.report())}")


def adapt(
    path: Annotated[Path, typer.Argument(help="Folder (or file) of the documents you will index.")],
    output: Annotated[Path, typer.Option(help="Folder for the adapted adapter.")],
    minutes: Annotated[float, typer.Option(min=0.1, help="Training time budget.")] = 10.0,
    model: ModelOpt = "smollm2-135m",
    adapter: Annotated[str, typer.Option("--adapter", "-a", help="Adapter to continue; 'default' = the shipped one.")] = "default",
    recipe: Annotated[str, typer.Option(help="A shipped recipe (unirag/training/recipes) or the path of a YAML file.")] = "adapt",
    chunk_size: Annotated[int, typer.Option(help="Tokens per chunk (use the value you will ingest with).")] = 256,
    chunk_overlap: Annotated[int, typer.Option(help="Tokens shared by consecutive chunks of a section.")] = 32,
    resume: Annotated[bool, typer.Option(help="Continue from the last checkpoint in OUTPUT.")] = False,
    device: DeviceOpt = "auto",
):
    """Adapt the model to your documents (UniMAE post-training, paper section 3.6), then ingest with --adapter OUTPUT."""
    from unirag.training.adapt import adapt as run_adapt
    from unirag.retrieval.chunking import ChunkSettings

    settings = ChunkSettings(chunk_size, chunk_overlap)
    out = run_adapt(model, path, output, minutes=minutes, adapter=adapter, recipe=recipe, settings=settings,
                    resume=resume, device=device)
    typer.echo(f"unirag: adapted adapter written to {out}\n"
               f"next: unirag ingest {path} --adapter {out} (and pass --adapter {out} to ask/chat/app)")


def retrieve(
    question: Annotated[str, typer.Argument(help="What to search for.")],
    top_k: TopKOpt = 5,
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: CollectionOpt = "docs",
    retrieval: RetrievalOpt = "hybrid",
    rerank: RerankOpt = DEFAULT_RERANK,
    source: SourceOpt = None,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
):
    """Print the top-k chunks for a question (score, source, heading, first line), without generating."""
    from unirag.retrieval.search import retrieve as run_retrieve

    _check_question(question, "retrieve")
    uni, coll = _model_and_collection(db, chroma_url, collection, model, adapter, precision, device=device)
    hits = run_retrieve(uni, coll, question, top_k, retrieval, rerank, sources=tuple(source or ()))
    if not hits:
        typer.echo(f"unirag: collection {collection!r} is empty; run `unirag ingest` first")
    for i, hit in enumerate(hits, 1):
        typer.echo(f"[{i}] {hit.score:.3f}  {_safe(hit.label)}\n      {_safe(hit.first_line)}")


def _settings(top_k: int, retrieval: str, rerank: int, answer_mode: str, max_new_tokens: int,
              temperature: float, sources: Optional[list[str]] = None):
    from unirag.answer.ask import AskSettings

    return AskSettings(top_k=top_k, retrieval=retrieval, rerank=rerank, answer=answer_mode,
                       max_new_tokens=max_new_tokens, temperature=temperature, sources=tuple(sources or ()))


def _answer_and_cite(uni, coll, question: str, settings, history=(), query: Optional[str] = None) -> str:
    """Run the ask flow, stream the answer, print the sources; returns the answer text."""
    from unirag.answer.ask import ask as run_ask

    import sys

    def reading(hits) -> None:
        # on a terminal only: what is being read, while the evidence is chosen (stdout, which
        # scripts read, is unchanged)
        if hits and sys.stderr.isatty():
            typer.echo(_safe("(reading " + "; ".join(h.label for h in hits) + ")"), err=True)

    result = run_ask(uni, coll, question, settings, history, query, on_retrieved=reading)
    for piece in result.stream():
        typer.echo(_safe(piece), nl=False)
    typer.echo()
    if result.hits:
        typer.echo("\nSources:\n" + _safe("\n".join(result.citations)))
    return result.text


def ask(
    question: Annotated[str, typer.Argument(help="The question to answer from your documents.")],
    top_k: TopKOpt = 3,
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: CollectionOpt = "docs",
    retrieval: RetrievalOpt = "hybrid",
    rerank: RerankOpt = DEFAULT_RERANK,
    answer: AnswerOpt = DEFAULT_ANSWER,
    max_new_tokens: MaxNewOpt = 64,
    temperature: TemperatureOpt = 0.0,
    source: SourceOpt = None,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
    compile: CompileOpt = False,
    decode_copy: DecodeCopyOpt = "int4",
):
    """Answer a question from the indexed documents: quoted evidence and/or a short answer, with citations."""
    _check_question(question, "ask")
    settings = _settings(top_k, retrieval, rerank, answer, max_new_tokens, temperature, source)
    uni, coll = _model_and_collection(db, chroma_url, collection, model, adapter, precision, compile, decode_copy,
                                      device)
    _answer_and_cite(uni, coll, question, settings)


def chat(
    top_k: TopKOpt = 3,
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: CollectionOpt = "docs",
    retrieval: RetrievalOpt = "hybrid",
    rerank: RerankOpt = DEFAULT_RERANK,
    answer: AnswerOpt = DEFAULT_ANSWER,
    max_new_tokens: MaxNewOpt = 64,
    temperature: TemperatureOpt = 0.0,
    source: SourceOpt = None,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
    compile: CompileOpt = False,
    decode_copy: DecodeCopyOpt = "int4",
):
    """Chat with your documents: each question retrieves afresh; earlier turns stay in the prompt."""
    settings = _settings(top_k, retrieval, rerank, answer, max_new_tokens, temperature, source)
    uni, coll = _model_and_collection(db, chroma_url, collection, model, adapter, precision, compile, decode_copy,
                                      device)
    only = f", files matching {' '.join(source)}" if source else ""
    typer.echo(f"unirag chat over {collection!r} ({coll.count()} chunks{only}) with {uni.name}; "
               "an empty line, /exit or Ctrl-D quits.")
    history: list[tuple[str, str]] = []
    while True:
        try:
            question = input("\nyou> ").strip()
        except (EOFError, KeyboardInterrupt):
            typer.echo()
            break
        if not question or question in ("/exit", "/quit"):
            break
        query = f"{history[-1][0]}\n{question}" if history else question  # follow-ups keep their topic
        typer.echo("unirag> ", nl=False)
        reply = _answer_and_cite(uni, coll, question, settings, history, query)
        history.append((question, reply))
