"""Options and the model loader shared by every `unirag` subcommand (one spelling, one help text)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from unirag.errors import UniragError
from unirag.answer.ask import AskSettings

# environment variables that stand in for an option left out (the option, given, wins)
MODEL_ENV, DB_ENV, COLLECTION_ENV = "UNIRAG_MODEL", "UNIRAG_DB", "UNIRAG_COLLECTION"
DEFAULT_DB = Path(".unirag") / "chroma"
ModelOpt = Annotated[str, typer.Option("--model", "-m", envvar=MODEL_ENV,
                                       help="Registry name, local HF folder or hub id.")]
DbOpt = Annotated[Path, typer.Option("--db", envvar=DB_ENV, help="Folder of the embedded Chroma database.")]
UrlOpt = Annotated[Optional[str], typer.Option("--chroma-url", envvar="UNIRAG_CHROMA_URL",
                                               help="Use a Chroma server (http://HOST:PORT, see `chroma run`) instead of --db.")]
CollectionOpt = Annotated[str, typer.Option("--collection", "-c", envvar=COLLECTION_ENV, help="Chroma collection name.")]
SourceOpt = Annotated[Optional[list[str]], typer.Option(
    "--source", help="Search only the files whose path under the ingested folder matches this glob "
    "(fnmatch-style: 'guide/*.md', 'api/*'); repeat it for several. Default: every file.")]
AdapterOpt = Annotated[str, typer.Option(
    "--adapter", "-a", help="PEFT adapter folder; 'default' = the shipped UniMAE adapter; 'none' = base model.")]
PrecisionOpt = Annotated[str, typer.Option(
    help="auto (on a CPU bf16 only where it has AMX/AVX512-BF16; on a GPU bf16 where it has it), fp32 or bf16.")]
DeviceOpt = Annotated[str, typer.Option(
    "--device", help="auto (a CUDA GPU where torch sees one, else the CPU), cpu or cuda (cuda:N): where the model runs.")]
CompileOpt = Annotated[bool, typer.Option(
    "--compile/--no-compile", help="Run generation steps through torch.compile, after a one-time compile on the "
    "first answer. Whether it pays off depends on the machine: measure yours (docs/PERFORMANCE.md).")]
DecodeCopyOpt = Annotated[str, typer.Option(
    "--decode-copy", help="int4, int8 or none: the copy of the weights generated tokens are decoded on (faster; "
    "the copy costs half a byte (int4) or a byte (int8) per weight of memory; embeddings and prompts keep the "
    "model's own weights). Only with bf16-held weights and without --compile (unirag/model/fast_decode/quantized_decode.py).")]
RetrievalOpt = Annotated[str, typer.Option(
    "--retrieval", help="hybrid (EOS embeddings + BM25, fused by rank), dense (embeddings only) or lexical (BM25 only).")]
# The CLI and the app answer with the ask flow's own defaults (answer/ask.py AskSettings, where the
# rerank depth and answer mode say why). `search.retrieve` itself defaults to no rerank, so the
# Python API stays one embedding pass unless asked.
DEFAULT_RERANK = AskSettings.rerank
DEFAULT_ANSWER = AskSettings.answer
RerankOpt = Annotated[int, typer.Option(
    "--rerank", min=0, help="Reorder the first N retrieved chunks by how likely the same model finds the question "
    "after each (query likelihood, fused with the retrieval order; one forward pass per chunk). 0 = off.")]

ContextWordsOpt = Annotated[int, typer.Option(
    "--context-words", min=0, help="Embed each chunk after the last N words of the chunk before it in its file, so "
    "its embedding knows what it continues (the stored text stays the chunk alone). 0 = off.")]

def load_model(model: str, adapter: Optional[str] = "default", precision: str = "auto", max_length: int = 512,
               compile_decode: bool = False, decode_copy: str = "int4", device: str = "auto"):
    """Load the one model a command uses (imports torch only when a command needs it);
    decode_copy "none" decodes on the model's own weights; device: auto, cpu or cuda."""
    from unirag.model.unimodel import UniModel

    copy = None if decode_copy.lower() == "none" else decode_copy.lower()
    if copy not in (None, "int4", "int8"):  # before the weights load (UniModel checks only after)
        raise UniragError(f"--decode-copy {decode_copy}: choose int4, int8 or none")
    return UniModel.load(model, adapter, precision=precision, max_length=max_length, compile_decode=compile_decode,
                         decode_copy=copy, device=device)


def launcher_rank() -> tuple[int, int]:
    """(this process, how many) under torchrun / accelerate launch, which set RANK and WORLD_SIZE."""
    try:
        return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise UniragError("RANK and WORLD_SIZE must be whole numbers (set by torchrun or accelerate launch)") from None


AnswerOpt = Annotated[str, typer.Option(
    "--answer", help="extractive: the best evidence sentences, quoted with [n]; generated: a short answer the model "
    "writes from that evidence; both: the quotes, then the short answer (answer/ask.py).")]
