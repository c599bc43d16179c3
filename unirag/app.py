"""`unirag app`: chat with your documents in the browser (Gradio 6).

One `UniModel`, loaded once by the caller, serves every session: it embeds uploaded files and
questions and writes the answers. Nothing is loaded per request.

- Answers stream into a `gr.Chatbot` (messages format, HTML sanitized, custom tags not kept);
  the chunks they were grounded on are listed, numbered like the prompt's citations, in a
  collapsible "Sources" panel. Chunk text and labels are HTML-escaped there, never rendered.
- Uploads (count, size and extension limits; names reduced to a safe basename) are copied to
  `upload_dir/<collection>/` and ingested into the selected collection with a progress bar.
- Every model-bound event (answer, upload) shares one Gradio concurrency group of size 1, so
  generation is serialised on purpose by Gradio's queue; the queue holds at most `max_queue`
  waiting events and answers past that with Gradio's "This application is currently busy.
  Please try again." message.
- Per-session chat history lives in `gr.State`; handlers copy it and never touch module-level
  mutable state.
- `launch()` binds to 127.0.0.1 unless told otherwise; `share` and `auth` only when asked.
- With no collection named, the page opens `docs`, unless `docs` has no documents and others do:
  then the only one with documents, or the demo's (`pick_collection`); the page says which.
- A Stop button cancels the answer being written (Gradio's `cancels=`), which frees the model.

`gradio` is imported inside functions so `unirag --help` stays fast.
"""

from __future__ import annotations

import html
import ipaddress
import os
import re
import shutil
import sys
import tempfile
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from unirag.cli.options import (COLLECTION_ENV, DEFAULT_ANSWER, DEFAULT_DB, DEFAULT_RERANK, AdapterOpt, AnswerOpt, CompileOpt, DbOpt,
                                DecodeCopyOpt, DeviceOpt, ModelOpt, PrecisionOpt, RerankOpt, RetrievalOpt, SourceOpt,
                                UrlOpt, load_model)
from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.answer.ask import AskSettings
from unirag.retrieval.chunking import ChunkSettings
from unirag.readers.registry import KINDS

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # local-first: no calls home

DEFAULT_COLLECTION = "docs"
DEMO_COLLECTION = "unirag-demo"  # `unirag demo`'s own, so the demo never touches a user's "docs"
ALLOWED_EXTENSIONS = tuple(sorted(KINDS))
MAX_UPLOAD_MB = 10.0
MAX_UPLOAD_FILES = 10
MAX_QUEUE = 16
MAX_TURNS = 20  # turns kept in a session's state; fit() trims further to the context window
MAX_CHAT = 200  # messages kept on screen per session
AUTH_ENV = "UNIRAG_APP_AUTH"
_COLLECTION_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{1,510}[A-Za-z0-9]$")
_UNSAFE_CHARS = re.compile(r"[^\w.\- ()+,@=]")

NO_SOURCES = "_No sources yet: ask a question._"
EMPTY_COLLECTION = ("The collection `{name}` is empty. Upload documents ({exts}) under **Add documents**, "
                    "then ask again.")
BUSY_HINT = ("One answer is written at a time; when more than {max_queue} requests wait, the app says it is "
             "busy: try again a moment later.")


# ---------------------------------------------------------------------- small helpers
_CODE = re.compile(r"```.*?(?:```|$)|(`+)[^`].*?\1", re.DOTALL)


def markdown_text(text: str) -> str:
    """Answer text for the chat's Markdown: `<`, `>` and `&` outside code are shown as themselves,
    never read as HTML (a quoted document may hold `<img src=...>`); code spans and fences are
    already literal in Markdown and stay as they are."""
    out, at = [], 0
    for match in _CODE.finditer(text):
        out += [html.escape(text[at:match.start()], quote=False), match.group(0)]
        at = match.end()
    out.append(html.escape(text[at:], quote=False))
    return "".join(out)


def md_code(text: str) -> str:
    """`text` as a Markdown code span: shown literally (no HTML, no Markdown), on one line."""
    text = " ".join(str(text).replace("`", "'").split())
    return f"`{text}`" if text else "``"


def safe_filename(name: str) -> str:
    """The basename of an uploaded file's name, safe to join to the upload folder.

    Directory parts (either slash) are dropped; "", ".", ".." and hidden names are refused;
    control characters are refused; characters outside letters, digits and ``._-()+,@=`` and space
    become "_". Raises UniragError with the reason.
    """
    base = unicodedata.normalize("NFC", str(name)).replace("\\", "/").split("/")[-1].strip()
    if base in ("", ".", ".."):
        raise UniragError(f"{md_code(name)} is not a usable file name")
    if base.startswith("."):
        raise UniragError(f"{md_code(name)}: hidden files (names starting with '.') are not accepted")
    if any(unicodedata.category(ch) == "Cc" for ch in base):
        raise UniragError(f"{md_code(name)}: file names with control characters are not accepted")
    cleaned = _UNSAFE_CHARS.sub("_", base)
    if len(cleaned) > 200:
        suffix = Path(cleaned).suffix[:16]
        cleaned = cleaned[: 200 - len(suffix)] + suffix
    return cleaned


def check_collection_name(name: str | None) -> str:
    name = (name or "").strip()
    if not _COLLECTION_NAME.match(name):
        raise UniragError(f"bad collection name {md_code(name)}: use 3-512 letters, digits, '.', '_' or '-', "
                          "starting and ending with a letter or digit")
    return name


def _highlighted(text: str, spans: Sequence) -> str:
    """The chunk's text HTML-escaped, the evidence spans in <mark>; newlines as `&#10;`."""
    out, at = [], 0
    for span in sorted(spans, key=lambda s: s.start):
        if span.start < at:
            continue
        out += [html.escape(text[at:span.start]), '<mark class="unirag-evidence">',
                html.escape(text[span.start:span.end]), "</mark>"]
        at = span.end
    out.append(html.escape(text[at:]))
    return "".join(out).replace("\r", "").replace("\n", "&#10;")


def render_sources(hits: Sequence, spans: Sequence = ()) -> str:
    """The Sources panel: numbered like the answer's citations; labels and text HTML-escaped, the
    evidence the answer quotes highlighted.

    Each chunk is one line of HTML (newlines become `&#10;` inside <pre>), so no Markdown
    parser ever sees a chunk's text as Markdown or HTML: it is displayed verbatim.
    """
    if not hits:
        return "_No passages were retrieved for this question._"
    parts = []
    for i, hit in enumerate(hits, 1):
        label = html.escape(hit.label)
        text = _highlighted(hit.text, [s for s in spans if s.hit == i - 1])
        parts.append(f'<p class="unirag-source-label"><strong>[{i}] {label}</strong> '
                     f'<em>(similarity {hit.score:.3f})</em></p>\n'
                     f'<pre class="unirag-source-text">{text}</pre>')
    return "\n\n".join(parts)


def render_reading(hits: Sequence) -> str:
    """The Sources panel while the answer is made: the retrieved chunks' labels, unnumbered (the
    answer's numbering follows the evidence, which may reorder them)."""
    if not hits:
        return "_No passages were retrieved for this question._"
    return "\n".join(f'<p class="unirag-source-label"><em>reading</em> {html.escape(hit.label)}</p>' for hit in hits)


def new_session() -> dict:
    """A session's state: `turns` [[question, answer], ...] for the prompt, `chat` for the display."""
    return {"turns": [], "chat": []}


def parse_auth(value: str | tuple[str, str] | None) -> tuple[str, str] | None:
    """'USER:PASS' (or a (user, password) tuple) -> (user, password); None/'' -> None."""
    if value is None or value == "":
        return None
    if isinstance(value, tuple):
        user, password = value
    else:
        user, sep, password = str(value).partition(":")
        if not sep:
            raise UniragError("--auth must look like USER:PASSWORD")
    if not user or not password:
        raise UniragError("--auth needs both a user name and a password (USER:PASSWORD)")
    return user, password


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.1f} KB"


def _chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# ---------------------------------------------------------------------- the app's logic
class RagChat:
    """What the UI does, as plain methods (the Gradio handlers call these; tests may too).

    Holds only shared, read-mostly resources: the model, the Chroma client and the settings.
    Per-session data (chat history) is passed in and returned, never kept here.
    """

    def __init__(self, model, *, db: str | Path = DEFAULT_DB, chroma_url: str | None = None,
                 collection: str | None = None, upload_dir: str | Path | None = None, top_k: int = 3,
                 max_new_tokens: int = 64, temperature: float = 0.0,
                 chunk_settings: ChunkSettings | None = None, max_upload_mb: float = MAX_UPLOAD_MB,
                 max_upload_files: int = MAX_UPLOAD_FILES, retrieval: str = "hybrid", rerank: int = 0,
                 answer: str = DEFAULT_ANSWER, sources: Sequence[str] = ()):
        self.ask_settings = AskSettings(top_k=top_k, retrieval=retrieval, rerank=rerank, answer=answer,
                                        max_new_tokens=max_new_tokens, temperature=temperature,
                                        sources=tuple(sources))
        self.model = model
        self.settings = chunk_settings or ChunkSettings()
        if self.settings.chunk_size + 32 > model.max_length:
            raise UniragError(f"chunk size {self.settings.chunk_size} leaves no room under the model's "
                              f"max_length {model.max_length}")
        if collection is not None:
            check_collection_name(collection)
        self.max_upload_bytes = int(max_upload_mb * 2**20)
        self.max_upload_files = max_upload_files
        self.db_path = None if chroma_url else Path(db).expanduser().resolve()
        self.client = store.connect(db, chroma_url)
        # `picked`: why the page opens another collection than the one asked for, or ""
        self.default_collection, self.picked = self.pick_collection(collection)
        if upload_dir is None:
            upload_dir = (Path(db).parent if not chroma_url else Path(".unirag")) / "uploads"
        self.upload_dir = Path(upload_dir).expanduser().resolve()

    # ------------------------------------------------------------------ collections
    def pick_collection(self, asked: str | None) -> tuple[str, str]:
        """(the collection the page opens with, a Markdown line saying why, or "").

        A collection named (--collection, UNIRAG_COLLECTION) opens as it is. Otherwise `docs`,
        unless it has no documents while others made by this model do: then the only such one,
        else the demo's (`unirag demo` fills it; a new user's first `unirag app` comes next)."""
        if asked:
            return check_collection_name(asked), ""
        filled = []
        for coll in self.client.list_collections():
            meta = coll.metadata or {}
            if meta.get(store.MODEL_KEY) == self.model.name and meta.get(store.FORMAT_KEY) == store.FORMAT \
                    and coll.count() > 0:
                filled.append(coll.name)
        if DEFAULT_COLLECTION in filled or not filled:
            return DEFAULT_COLLECTION, ""
        empty = f"{md_code(DEFAULT_COLLECTION)} has no documents"
        if len(filled) == 1:
            return filled[0], f"Opened {md_code(filled[0])}, the only collection with documents ({empty})."
        if DEMO_COLLECTION in filled:
            return DEMO_COLLECTION, (f"Opened {md_code(DEMO_COLLECTION)}, the demo's documents ({empty}; "
                                     f"{len(filled) - 1} more collections under Collection).")
        return DEFAULT_COLLECTION, (f"{empty}; {len(filled)} other collections do: pick one under Collection.")

    def collection_names(self) -> list[str]:
        names = {c.name if hasattr(c, "name") else str(c) for c in self.client.list_collections()}
        return sorted(names | {self.default_collection})

    def _get(self, name: str, create: bool = False):
        """The collection, or None when it does not exist (and create is False)."""
        name = check_collection_name(name)
        try:
            return store.open_collection(self.client, name, self.model, create=create)
        except UniragError as err:
            if not create and str(err).startswith(f"no collection {name!r}"):
                return None
            raise

    def collection_status(self, name: str | None) -> str:
        try:
            coll = self._get(name or "")
            count = coll.count() if coll is not None else 0
        except UniragError as err:
            return f"**Error:** {err}"
        if count == 0:
            return EMPTY_COLLECTION.format(name=(name or "").strip(), exts=" ".join(ALLOWED_EXTENSIONS))
        return f"Collection {md_code(name)}: {_chunks(count)}, embedded by {md_code(self.model.name)}."

    # ------------------------------------------------------------------ answering
    def respond(self, message: str, session: dict | None, collection: str) -> Iterator[tuple]:
        """Stream one answer: yields (chat messages, session, sources markdown, textbox value).

        The session is copied, never mutated in place; the returned copy carries the new turn.
        Empty or missing collections get EMPTY_COLLECTION instead of an answer.
        """
        from unirag.answer.ask import ask_in_stages

        session = session or new_session()
        turns = [list(t) for t in session.get("turns", [])][-MAX_TURNS:]
        chat = [dict(m) for m in session.get("chat", [])][-MAX_CHAT:]
        question = (message or "").strip()
        if not question:
            yield chat, {"turns": turns, "chat": chat}, NO_SOURCES, ""
            return
        chat += [{"role": "user", "content": question}, {"role": "assistant", "content": ""}]

        def say(text: str, sources: str = NO_SOURCES):
            """A snapshot of the outputs: later pieces never change what was yielded before."""
            chat[-1] = {"role": "assistant", "content": markdown_text(text)}
            return list(chat), {"turns": list(turns), "chat": list(chat)}, sources, ""

        try:
            coll = self._get(collection)
            if coll is None or coll.count() == 0:
                yield say(EMPTY_COLLECTION.format(name=(collection or "").strip(),
                                                  exts=" ".join(ALLOWED_EXTENSIONS)))
                return
            query = f"{turns[-1][0]}\n{question}" if turns else question  # follow-ups keep their topic
            stages = ask_in_stages(self.model, coll, question, self.ask_settings, [tuple(t) for t in turns], query)
            # what is being read, as soon as retrieval ends; numbered once the answer is
            yield say("", render_reading(next(stages)))
            result = next(stages)
            sources = render_sources(result.hits, result.evidence.spans)
            yield say("", sources)
            text = ""
            for piece in result.stream():
                text += piece
                yield say(text, sources)
        except UniragError as err:
            yield say(f"**Error:** {err}")
            return
        if not text.strip():
            text = "_(the model returned an empty answer)_"
            yield say(text, sources)
        turns.append([question, text])
        del turns[:-MAX_TURNS]
        yield say(text, sources)

    # ------------------------------------------------------------------ uploads
    def add_files(self, files: Sequence[str | Path | tuple[str, str | Path]] | None, collection: str,
                  progress: Callable[[float, str], Any] | None = None) -> list[str]:
        """Check, save and ingest uploaded files into `collection`; one Markdown line per file.

        Items are local paths (the upload's name is the basename) or (original name, path).
        """
        from unirag.retrieval.ingest import ingest

        files = list(files or [])
        if not files:
            return ["No files were uploaded."]
        if len(files) > self.max_upload_files:
            return [f"**Refused:** too many files: {len(files)} in one upload; the limit is "
                    f"{self.max_upload_files}. Nothing was added."]
        try:
            name = check_collection_name(collection)
        except UniragError as err:
            return [f"**Error:** {err}"]
        folder = self.upload_dir / name
        lines, accepted = [], []
        for item in files:
            shown, path = (item if isinstance(item, tuple) else (Path(item).name, item))
            try:
                safe = safe_filename(shown)
            except UniragError as err:
                lines.append(f"**Refused:** {err}")
                continue
            ext = Path(safe).suffix.lower()
            if ext not in KINDS:
                lines.append(f"{md_code(safe)}: **refused**, {md_code(ext or 'no extension')} is not an accepted "
                             f"type (accepted: {' '.join(ALLOWED_EXTENSIONS)})")
                continue
            try:
                size = Path(path).stat().st_size
            except OSError as err:
                lines.append(f"{md_code(safe)}: **refused**, unreadable upload ({err.strerror or err})")
                continue
            if size > self.max_upload_bytes:
                lines.append(f"{md_code(safe)}: **refused**, too large ({_size(size)}; the limit is "
                             f"{_size(self.max_upload_bytes)})")
                continue
            if size == 0:
                lines.append(f"{md_code(safe)}: **refused**, the file is empty")
                continue
            accepted.append((safe, Path(path)))
        if not accepted:
            return lines
        try:
            coll = self._get(name, create=True)
        except UniragError as err:
            return lines + [f"**Error:** {err}"]
        folder.mkdir(parents=True, exist_ok=True)
        for i, (safe, src) in enumerate(accepted):
            if progress is not None:
                progress(i / len(accepted), f"Ingesting {safe} ({i + 1}/{len(accepted)})")
            dest = (folder / safe).resolve()
            if dest.parent != folder.resolve():  # cannot happen after safe_filename; kept as a guard
                lines.append(f"{md_code(safe)}: **refused**, it would be saved outside the upload folder")
                continue
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".upload-")
            os.close(fd)
            try:
                shutil.copyfile(src, tmp)
                os.replace(tmp, dest)
                summary = ingest(self.model, coll, dest, settings=self.settings,
                                 max_file_bytes=self.max_upload_bytes)
            except (OSError, UniragError) as err:
                Path(tmp).unlink(missing_ok=True)
                lines.append(f"{md_code(safe)}: **not added** ({getattr(err, 'strerror', None) or err})")
                continue
            lines.append(self._describe(safe, summary, dest))
        if progress is not None:
            progress(1.0, "Done")
        return lines

    @staticmethod
    def _describe(safe: str, summary, dest: Path) -> str:
        if summary.skipped:
            dest.unlink(missing_ok=True)  # keep the upload folder in step with the collection
            return f"{md_code(safe)}: **not added** ({summary.skipped[0].reason})"
        if summary.added:
            return f"{md_code(safe)}: **added** ({_chunks(summary.chunks_written)})"
        if summary.changed:
            return f"{md_code(safe)}: **replaced** the earlier upload ({_chunks(summary.chunks_written)})"
        return f"{md_code(safe)}: **already indexed**, unchanged"


# ---------------------------------------------------------------------- the Gradio UI
def build_app(model, *, db: str | Path = DEFAULT_DB, chroma_url: str | None = None, collection: str | None = None,
              upload_dir: str | Path | None = None, top_k: int = 3, max_new_tokens: int = 64,
              temperature: float = 0.0, chunk_settings: ChunkSettings | None = None,
              max_upload_mb: float = MAX_UPLOAD_MB, max_upload_files: int = MAX_UPLOAD_FILES,
              max_queue: int = MAX_QUEUE, retrieval: str = "hybrid", rerank: int = 0, answer: str = DEFAULT_ANSWER,
              sources: Sequence[str] = ()):
    """The chat-over-documents UI as a `gr.Blocks`, queue configured; `demo.unirag` is its RagChat.

    `model` is the one loaded UniModel, shared by all sessions. `collection`: the one the page
    opens with (None: `RagChat.pick_collection` picks). `sources`: globs that answers search
    within (`AskSettings.sources`).
    """
    import gradio as gr

    rag = RagChat(model, db=db, chroma_url=chroma_url, collection=collection, upload_dir=upload_dir,
                  top_k=top_k, max_new_tokens=max_new_tokens, temperature=temperature,
                  chunk_settings=chunk_settings, max_upload_mb=max_upload_mb, max_upload_files=max_upload_files,
                  retrieval=retrieval, rerank=rerank, answer=answer, sources=sources)

    def respond(message, session, collection_name):
        yield from rag.respond(message, session, collection_name)

    def upload(files, collection_name, progress=gr.Progress()):
        lines = rag.add_files(files, collection_name, progress=lambda f, desc: progress(f, desc=desc))
        choices = rag.collection_names()
        return ("\n".join(f"- {line}" for line in lines), gr.Dropdown(choices=choices, value=collection_name),
                rag.collection_status(collection_name), None)

    def refresh(collection_name):
        return gr.Dropdown(choices=rag.collection_names(), value=collection_name), \
            rag.collection_status(collection_name)

    def clear():
        return [], new_session(), NO_SOURCES

    # delete_cache: Gradio's copies of uploaded files go after an hour (ours are in upload_dir)
    with gr.Blocks(title="unirag: chat with your documents", fill_width=True, delete_cache=(3600, 3600)) as demo:
        only = (f" Answers search only the files matching {', '.join(md_code(g) for g in sources)}."
                if sources else "")
        gr.Markdown(f"## unirag · chat with your documents\nModel {md_code(model.name)}: the same model "
                    f"embeds your documents and writes the answers.{only}")
        if rag.picked:
            gr.Markdown(rag.picked, elem_id="unirag-picked")
        session = gr.State(new_session())
        with gr.Row(equal_height=False):
            with gr.Column(scale=3):
                chatbot = gr.Chatbot(label="Chat", elem_id="unirag-chat", height=460, sanitize_html=True,
                                     allow_tags=False, render_markdown=True, feedback_options=None,
                                     buttons=["copy"],
                                     placeholder="Ask a question about the documents in the collection.")
                question = gr.Textbox(placeholder="Ask about your documents…", show_label=False, lines=1,
                                      max_lines=6, submit_btn="Ask", elem_id="unirag-question",
                                      autofocus=True)
                stop_button = gr.Button("Stop", variant="stop", size="sm", elem_id="unirag-stop")
                with gr.Accordion("Sources", open=False, elem_id="unirag-sources-panel"):
                    sources = gr.Markdown(NO_SOURCES, sanitize_html=True, elem_id="unirag-sources")
            with gr.Column(scale=2, min_width=280):
                picker = gr.Dropdown(choices=rag.collection_names(), value=rag.default_collection,
                                     label="Collection", allow_custom_value=True, filterable=True,
                                     elem_id="unirag-collection",
                                     info="Pick one, or type a new name and upload files into it.")
                status = gr.Markdown(rag.collection_status(rag.default_collection), elem_id="unirag-status")
                files = gr.File(label="Add documents", file_count="multiple",
                                file_types=list(ALLOWED_EXTENSIONS), elem_id="unirag-upload")
                upload_status = gr.Markdown(
                    f"Accepted: {' '.join(ALLOWED_EXTENSIONS)}; at most {rag.max_upload_files} files of "
                    f"{_size(rag.max_upload_bytes)} each per upload.", elem_id="unirag-upload-status")
                clear_button = gr.Button("New chat", variant="secondary")
                gr.Markdown(BUSY_HINT.format(max_queue=max_queue), elem_classes=["unirag-hint"])

        # Everything that runs the model shares one concurrency group of size 1: the queue
        # serialises generation and ingestion on purpose (one set of weights, CPU-bound).
        asking = question.submit(respond, [question, session, picker], [chatbot, session, sources, question],
                                 api_name="ask", concurrency_limit=1, concurrency_id="model",
                                 show_progress="minimal")
        # cancels the answer being written: the partial answer stays on screen, the turn is not
        # kept in the session (it is added only when the answer ends), and the model is free
        stop_button.click(None, None, None, cancels=[asking], api_name="stop", api_visibility="private",
                          queue=False)
        files.upload(upload, [files, picker], [upload_status, picker, status, files], api_name="upload",
                     concurrency_limit=1, concurrency_id="model")
        picker.change(refresh, [picker], [picker, status], api_name="pick", api_visibility="private", queue=False)
        demo.load(refresh, [picker], [picker, status], api_name="refresh", api_visibility="private", queue=False)
        clear_button.click(clear, None, [chatbot, session, sources], api_name="clear", api_visibility="private",
                           queue=False)
        chatbot.clear(clear, None, [chatbot, session, sources], api_name="clear_chat", api_visibility="private",
                      queue=False)  # the chatbot's own trash button must reset the session too

    demo.queue(max_size=max_queue, default_concurrency_limit=1)
    demo.unirag = rag
    return demo


CSS = """
.unirag-source-text { white-space: pre-wrap; word-break: break-word; max-height: 18em; overflow: auto; }
.unirag-hint { opacity: 0.7; font-size: 0.85em; }
mark.unirag-evidence { background: #fde68a; color: inherit; }
"""


def launch(model, host: str = "127.0.0.1", port: int = 7860, share: bool = False,
           auth: str | tuple[str, str] | None = None, *, prevent_thread_lock: bool = False,
           quiet: bool = False, **build_kwargs):
    """Build the app and serve it on host:port (loopback by default); returns the Blocks.

    `share` (a public gradio.live link) and `auth` ('USER:PASS' or a tuple) only when asked.
    With prevent_thread_lock=True it returns at once (call `demo.close()` to stop).
    """
    credentials = parse_auth(auth)
    demo = build_app(model, **build_kwargs)
    if demo.unirag.picked and not quiet:
        print(f"unirag app: {demo.unirag.picked.replace('`', '')}", file=sys.stderr)
    if not _is_loopback(host) and credentials is None:
        print(f"unirag app: warning: serving on {host} without --auth; anyone who can reach this port can use "
              "the app", file=sys.stderr)
    rag = demo.unirag
    blocked = [str(rag.upload_dir)] + ([str(rag.db_path)] if rag.db_path else [])  # never served as files
    demo.launch(server_name=host, server_port=port, share=share, auth=credentials,
                max_file_size=rag.max_upload_bytes, blocked_paths=blocked, prevent_thread_lock=prevent_thread_lock,
                quiet=quiet, show_error=False, css=CSS, footer_links=["api"])
    return demo


# ---------------------------------------------------------------------- `unirag app`
def app_command(
    model: ModelOpt = "smollm2-135m",
    adapter: AdapterOpt = "default",
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: Annotated[Optional[str], typer.Option(
        "--collection", "-c", envvar=COLLECTION_ENV, show_default=False,
        help="Collection selected when the page opens. Default: docs, or, when docs has no documents, the "
             "only collection that has some (else the demo's).")] = None,
    host: Annotated[str, typer.Option(help="Address to bind; 0.0.0.0 exposes the app to the network.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 7860,
    share: Annotated[bool, typer.Option("--share", help="Also open a public gradio.live link.")] = False,
    auth: Annotated[Optional[str], typer.Option("--auth", envvar=AUTH_ENV, help="Require a login, USER:PASSWORD.")] = None,
    top_k: Annotated[int, typer.Option("--top-k", "-k", min=1, help="How many chunks to retrieve, show and cite.")] = 3,
    retrieval: RetrievalOpt = "hybrid",
    rerank: RerankOpt = DEFAULT_RERANK,
    answer: AnswerOpt = DEFAULT_ANSWER,
    source: SourceOpt = None,
    max_new_tokens: Annotated[int, typer.Option(help="Longest generated answer, in tokens.")] = 64,
    upload_dir: Annotated[Optional[Path], typer.Option(help="Where uploads are kept (default: next to --db, 'uploads/').")] = None,
    max_upload_mb: Annotated[float, typer.Option(help="Largest accepted upload, per file.")] = MAX_UPLOAD_MB,
    precision: PrecisionOpt = "auto",
    device: DeviceOpt = "auto",
    compile: CompileOpt = False,
    decode_copy: DecodeCopyOpt = "int4",
):
    """Chat with your documents in the browser: streamed answers, sources, uploads (Gradio)."""
    credentials = parse_auth(auth)  # a malformed --auth fails before the model loads
    uni = load_model(model, adapter, precision, compile_decode=compile, decode_copy=decode_copy, device=device)
    shown = repr(collection) if collection else "picked on start"
    typer.echo(f"unirag app: {uni.name}, collection {shown} at {chroma_url or db}; "
               f"http://{host}:{port}" + (" (login required)" if credentials else ""))
    launch(uni, host=host, port=port, share=share, auth=credentials, db=db, chroma_url=chroma_url,
           collection=collection, upload_dir=upload_dir, top_k=top_k, max_new_tokens=max_new_tokens,
           max_upload_mb=max_upload_mb, retrieval=retrieval, rerank=rerank, answer=answer,
           sources=tuple(source or ()))
