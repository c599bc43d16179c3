"""The `unirag` command. Each subcommand loads the one model once and passes the object on.

User errors (`UniragError`) print as one line, `unirag: error: ...`, and exit with status 1;
wrong options (unknown option, missing argument, bad value) print one such line too and exit
with status 2. A damaged Chroma database is reported the same way (status 1). None of these
prints a traceback; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Annotated, Optional

import typer

from unirag.cli.options import (DEFAULT_ANSWER, DEFAULT_DB, DEFAULT_RERANK, AdapterOpt, AnswerOpt, CompileOpt, DbOpt,
                                DecodeCopyOpt, DeviceOpt, ModelOpt, PrecisionOpt, launcher_rank, load_model)

from unirag.errors import UniragError
from unirag.evaluation.cli import eval_app
from unirag.cli.collection_commands import collections, forget
from unirag.cli.rag_commands import adapt, ask, chat, ingest, retrieve
from unirag.app import DEMO_COLLECTION, app_command
from unirag.server.command import serve_command

app = typer.Typer(
    name="unirag",
    help="One decoder-only LLM for both embedding and generation in RAG.\n\nUNIRAG_MODEL, UNIRAG_DB and "
         "UNIRAG_COLLECTION, when set, are the defaults of --model, --db and --collection (an option given wins).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.add_typer(eval_app, name="eval")
for _command in (ingest, adapt, retrieve, ask, chat, collections, forget):
    app.command()(_command)
app.command("app")(app_command)
app.command("serve")(serve_command)


def _print_version(value: bool) -> None:
    if value:
        from unirag import __version__

        typer.echo(f"unirag {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                              help="Print the version and exit.")] = False,
):
    """Options of `unirag` itself (before the command)."""


@app.command()
def embed(
    texts: Annotated[list[str], typer.Argument(help="Texts to embed; '-' reads one text per line from stdin.")],
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    pooling: Annotated[Optional[str], typer.Option(help="eos, mean, last or echo (default: the adapter's, else eos).")] = None,
    instruction: Annotated[Optional[str], typer.Option(help="Text prepended to every input.")] = None,
    max_length: Annotated[int, typer.Option(help="Longer inputs are truncated, with a warning.")] = 512,
    batch_size: int = 32,
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write a .npy file instead of JSON lines.")] = None,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
):
    """Embed texts and print one JSON line per text (or save a .npy matrix)."""
    if texts == ["-"]:
        texts = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    uni = load_model(model, adapter, precision, max_length, device=device)
    vectors = uni.embed(texts, pooling=pooling, batch_size=batch_size, instruction=instruction,
                        show_progress=len(texts) > batch_size)
    if output is not None:
        import numpy as np

        np.save(output, vectors)
        typer.echo(f"wrote {vectors.shape[0]} x {vectors.shape[1]} float32 embeddings to {output}", err=True)
        return
    for text, vector in zip(texts, vectors):
        typer.echo(json.dumps({"text": text, "embedding": [round(float(x), 6) for x in vector]}))


@app.command()
def generate(
    prompt: Annotated[str, typer.Argument(help="The user message (the chat template is applied).")],
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    max_new_tokens: int = 256,
    temperature: Annotated[float, typer.Option(help="0 means greedy.")] = 0.0,
    system: Annotated[Optional[str], typer.Option(help="Optional system message.")] = None,
    stream: Annotated[bool, typer.Option(help="Print tokens as they come.")] = True,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
    compile: CompileOpt = False,
    decode_copy: DecodeCopyOpt = "int4",
):
    """Generate an answer with the same model that embeds."""
    uni = load_model(model, adapter, precision, compile_decode=compile, decode_copy=decode_copy, device=device)
    result = uni.generate(prompt, max_new_tokens=max_new_tokens, temperature=temperature,
                          system=system, stream=stream)
    if stream:
        for piece in result:
            typer.echo(piece, nl=False)
        typer.echo()
    else:
        typer.echo(result)


def _parse_overrides(extra: list[str]) -> dict[str, str]:
    """Turn trailing `--key value` / `--key=value` pairs into config overrides."""
    overrides, i = {}, 0
    while i < len(extra):
        item = extra[i]
        if not item.startswith("--"):
            raise UniragError(f"unexpected argument {item!r}; overrides look like --key value")
        key = item[2:]
        if "=" in key:
            key, value = key.split("=", 1)
        elif i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            value, i = extra[i + 1], i + 1
        else:
            value = "true"
        overrides[key.replace("-", "_")] = value
        i += 1
    return overrides


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    data: Annotated[Path, typer.Option(help="A .txt (one document per line), .jsonl with `text`, a folder of .txt/.md, or a saved dataset; "
        "for --recipe pairs, the .jsonl `unirag queries` writes.")],
    output: Annotated[Path, typer.Option(help="Folder for the adapter (checkpoints go in OUTPUT/checkpoints).")],
    recipe: Annotated[str, typer.Option(help="A shipped recipe (paper, cpu-quick, simcse, pairs, domain, adapt) or the path of a YAML file.")] = "paper",
    model: ModelOpt = "smollm2-135m",
    init_adapter: Annotated[Optional[str], typer.Option(help="Continue from this adapter (e.g. SimCSE after UniMAE).")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the last checkpoint in OUTPUT.")] = False,
    device: DeviceOpt = "auto",
):
    """Train a UniMAE / SimCSE / question-passage adapter. Extra `--key value` pairs override the recipe (e.g. --steps 50)."""
    from unirag.training.config import load_config
    from unirag.training.trainer import train as run_training

    config = load_config(recipe, _parse_overrides(ctx.args))
    out = run_training(config, model, str(data), str(output), resume=resume, init_adapter=init_adapter,
                       device=device)
    if launcher_rank()[0] == 0:  # under torchrun / accelerate only the first process writes it
        typer.echo(f"unirag: adapter written to {out}")


@app.command()
def queries(
    data: Annotated[Path, typer.Option(help="Training text, as `unirag train --data` reads it.")],
    output: Annotated[Path, typer.Option(help="The .jsonl of question/passage pairs to write (resumable).")],
    limit: Annotated[int, typer.Option(min=2, help="Texts to ask about (drawn in a seeded shuffle).")] = 1400,
    seed: int = 0,
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    device: DeviceOpt = "auto",
):
    """Write synthetic questions for `unirag train --recipe pairs`: the model asks one question per
    passage; questions that are no question, or that find other passages first, are dropped."""
    from unirag.training.data import load_texts
    from unirag.training.queries import sample, synthesize

    texts = sample(load_texts(data)["text"], limit, seed)
    counts = synthesize(load_model(model, adapter, device=device), texts, output)
    typer.echo(f"unirag: {counts['kept']} pairs written to {output} ({counts['passages']} passages asked, "
               f"{counts['plausible']} plausible questions)")


@app.command()
def export(
    merged: Annotated[Optional[Path], typer.Option(help="New folder for the merged Hugging Face model.")] = None,
    gguf: Annotated[Optional[Path], typer.Option(help="New .gguf file for llama.cpp / Ollama.")] = None,
    gguf_type: Annotated[str, typer.Option(help="GGUF weight type: f16 (answers as fp32 unirag), q8_0 (smaller, faster), bf16 or f32.")] = "f16",
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
):
    """Merge an adapter into the base weights; save a plain HF folder (safetensors), a GGUF file, or both."""
    from unirag.export.merged import export_merged
    from unirag.export.gguf import check_target, export_gguf
    from unirag.model.registry import source_gguf

    if merged is None and gguf is None:
        raise UniragError("say where to write: --merged FOLDER, --gguf FILE.gguf, or both")
    if gguf is not None:
        check_target(gguf, gguf_type)  # before the model loads
    uni = load_model(model, adapter, precision="fp32", device="cpu")  # weights as trained, never bf16-held
    if merged is not None:
        out = export_merged(uni, merged)
        typer.echo(f"unirag: merged model written to {out} (see {out / 'SERVING.md'})")
    if gguf is not None:
        out = export_gguf(uni, gguf, gguf_type, source_gguf(model))
        typer.echo(f"unirag: {gguf_type} GGUF written to {out} ({out.stat().st_size / 1e6:.0f} MB); embeddings: "
                   f"llama.cpp --embedding --pooling last, with {uni.tokenizer.eos_token} at the end of each text")


SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_docs"  # package data: short guide pages about unirag


@app.command()
def demo(
    docs: Annotated[Path, typer.Option(help="Folder of sample documents to index.",
                                       show_default="the guide pages shipped in unirag/sample_docs")] = SAMPLE_DOCS,
    question: Annotated[str, typer.Option(help="A first question to answer before the app opens.")] =
        "How does unirag keep a crashed ingest from leaving duplicates?",
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    db: DbOpt = DEFAULT_DB,
    open_app: Annotated[bool, typer.Option("--app/--no-app", help="Open the chat app at the end.")] = True,
    port: int = 7860,
    answer: AnswerOpt = DEFAULT_ANSWER,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Longest generated answer, in tokens.")] = 64,
    device: DeviceOpt = "auto",
):
    """The main job on the embedded defaults: index sample docs, answer a question, open the chat app.

    One model is loaded once and used for all three steps.
    """
    from unirag.answer.ask import AskSettings, ask
    from unirag.retrieval.ingest import ingest as run_ingest
    from unirag.retrieval.store import connect, delete_collection, open_collection

    settings = AskSettings(rerank=DEFAULT_RERANK, answer=answer, max_new_tokens=max_new_tokens)

    uni = load_model(model, adapter, device=device)
    typer.echo(f"unirag demo: {uni.name} (one {type(uni.model).__name__} embeds and generates)")
    client = connect(db)
    try:
        collection = open_collection(client, DEMO_COLLECTION, uni, create=True)
    except UniragError as err:  # made by another model or adapter: it only indexes the sample docs
        typer.echo(f"unirag demo: rebuilding {DEMO_COLLECTION!r}: {err}")
        delete_collection(client, DEMO_COLLECTION)
        collection = open_collection(client, DEMO_COLLECTION, uni, create=True)
    typer.echo(run_ingest(uni, collection, docs, progress=True).report())
    result = ask(uni, collection, question, settings)
    typer.echo(f"\nQ: {question}\nA: ", nl=False)
    for piece in result.stream():
        typer.echo(piece, nl=False)
    typer.echo("\n\nSources:\n" + "\n".join(result.citations))
    if open_app:
        from unirag.app import launch

        typer.echo(f"\nunirag demo: chat app on http://127.0.0.1:{port} (Ctrl-C stops it)")
        launch(uni, port=port, db=db, collection=DEMO_COLLECTION, rerank=DEFAULT_RERANK, answer=answer,
               max_new_tokens=max_new_tokens)


def main() -> None:
    """Entry point: run the app, turning user errors into one clean line."""
    configure_logging()
    warnings.filterwarnings("ignore", category=FutureWarning)  # libraries' deprecation notes are not for users
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    usage_error, click_error = _click_errors()
    try:
        # standalone_mode=False hands usage errors to us, so they print as one line too
        status = app(prog_name="unirag", standalone_mode=False)
    except UniragError as err:
        typer.echo(f"unirag: error: {err}", err=True)
        raise SystemExit(1) from None
    except usage_error as err:  # unknown option or command, missing argument, bad value: status 2
        if type(err).__name__ != "NoArgsIsHelpError":  # `unirag` alone: the help is already printed
            where = err.ctx.command_path if err.ctx else "unirag"
            typer.echo(f"unirag: error: {_one_line(err.format_message())} (see `{where} --help`)", err=True)
        raise SystemExit(err.exit_code) from None
    except click_error as err:
        typer.echo(f"unirag: error: {_one_line(err.format_message())}", err=True)
        raise SystemExit(err.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("unirag: interrupted", err=True)
        raise SystemExit(130) from None
    except Exception as err:
        if type(err).__name__ == "Abort":  # EOF at a prompt
            typer.echo("unirag: aborted", err=True)
            raise SystemExit(1) from None
        if type(err).__module__.split(".")[0] != "chromadb":
            raise  # anything else is a bug: keep its traceback
        typer.echo(f"unirag: error: the Chroma database failed ({type(err).__name__}: "
                   f"{_one_line(str(err))[:300]}); if it is damaged, move its folder away and run "
                   "`unirag ingest` again", err=True)
        raise SystemExit(1) from None
    if isinstance(status, int) and status:  # typer.Exit(code), or Ctrl-C inside a command (130)
        if status == 130:
            typer.echo("unirag: interrupted", err=True)
        raise SystemExit(status)


class _LevelPrefix(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"unirag: {record.levelname.lower()}: {record.getMessage()}"


def configure_logging() -> None:
    """Show unirag's own warnings on stderr as `unirag: warning: ...`, and nothing from libraries.

    Libraries log progress and internals (bm25s sets its logger to DEBUG and logs "Building index
    from IDs objects" for every BM25 index): none of that is for the user, and printed mid-answer it
    reads as a unirag warning. So the one handler takes records of the `unirag` logger tree at
    WARNING and above only. Where a program or test runner has configured logging already, it is
    left as it is.
    """
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler()  # stderr, beside the progress bars
    handler.setLevel(logging.WARNING)
    handler.addFilter(logging.Filter("unirag"))  # "unirag" and "unirag.*" records only
    handler.setFormatter(_LevelPrefix())
    root.addHandler(handler)
    root.setLevel(logging.WARNING)


def _click_errors() -> tuple[type, type]:
    """(UsageError, ClickException) of the click that typer runs on (recent typer vendors a copy)."""
    classes = {c.__name__: c for c in typer.BadParameter.__mro__}
    return classes["UsageError"], classes["ClickException"]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


if __name__ == "__main__":
    main()
