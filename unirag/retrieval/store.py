"""The Chroma side: one client (embedded or server), one collection per corpus.

A collection is created with cosine space (`configuration={"hnsw": {"space": "cosine"}}`, the
chromadb 1.x form) and no embedding function: unirag always passes its own vectors. Its
metadata records which model (name includes the adapter), pooling, embedding layer and dimension
made the vectors, set once at creation, so a query or an ingest with another model is refused
instead of silently comparing vectors from different spaces.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import numpy as np

from unirag.errors import UniragError

DEFAULT_DB = Path(".unirag") / "chroma"
MODEL_KEY, POOLING_KEY, DIM_KEY, FORMAT_KEY = "unirag_model", "unirag_pooling", "unirag_dim", "unirag_format"
# the decoder layer the vectors were read at; a collection without it was embedded at the last
LAYER_KEY = "unirag_layer"
FORMAT = 1  # bump when the chunk id / metadata layout changes
# a fresh random value an ingest writes whenever it changes the collection's chunks: what the
# BM25 index of those chunks is keyed by (retrieval/lexical.py), instead of a scan of every id
STAMP_KEY = "unirag_chunks_stamp"


def connect(db: str | Path | None = None, url: str | None = None, *, must_exist: bool = False):
    """A Chroma client: HttpClient for `url` (http[s]://host:port), else PersistentClient(db)."""
    import chromadb

    if url:
        parsed = urlparse(url if "://" in url else f"http://{url}")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise UniragError(f"--chroma-url must look like http://HOST:PORT, not {url!r}")
        port = parsed.port or (443 if parsed.scheme == "https" else 8000)
        try:
            client = chromadb.HttpClient(host=parsed.hostname, port=port, ssl=parsed.scheme == "https")
            client.heartbeat()
        except Exception as err:
            raise UniragError(f"cannot reach a Chroma server at {url} ({type(err).__name__}); "
                              "start one with `chroma run --path DIR --port PORT`") from None
        return client
    path = Path(db or DEFAULT_DB)
    if must_exist and not path.exists():
        raise UniragError(f"no Chroma database at {path}; run `unirag ingest FOLDER --db {path}` first")
    if path.exists() and not path.is_dir():
        raise UniragError(f"--db {path} is a file; pass a folder for the Chroma database")
    if (path / SQLITE_FILE).is_file():
        check_sqlite(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path))
    except OSError as err:
        raise UniragError(f"cannot open the Chroma database at {path}: {err.strerror or err}") from None
    except Exception as err:  # chromadb's InternalError on a damaged file, for one
        if type(err).__module__.split(".")[0] != "chromadb":
            raise
        raise UniragError(damaged(path, err)) from None


SQLITE_FILE = "chroma.sqlite3"
LOCK_WAIT_S = 10.0  # how long to wait for another process's write to the database to finish
_PROBE = """
import sqlite3, sys
path, wait = sys.argv[1], float(sys.argv[2])
try:
    con = sqlite3.connect(path, timeout=wait, isolation_level=None)
    con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    con.execute("BEGIN IMMEDIATE")  # Chroma takes the write lock as it opens, even to query
    con.execute("ROLLBACK")
    con.close()
except sqlite3.Error as err:
    print(err)
    sys.exit(3 if "locked" in str(err) or "busy" in str(err) else 4)
"""


def check_sqlite(path: Path) -> None:
    """Refuse a locked or damaged embedded database with a clear message, before Chroma opens it.

    Chroma waits without end for a lock another process holds, and reports a damaged file with
    a traceback. The check reads the SQLite file, then takes the write lock and gives it back,
    within LOCK_WAIT_S seconds. It runs in a child process on purpose: two SQLite
    libraries in one process (Python's and the copy inside Chroma) must not open the same file,
    since closing one silently drops the other's locks (sqlite.org/howtocorrupt.html, 2.2).
    """
    import subprocess
    import sys

    file = path / SQLITE_FILE
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", "-c", _PROBE, str(file), str(LOCK_WAIT_S)],
                               capture_output=True, text=True, timeout=LOCK_WAIT_S + 60)
    except (OSError, subprocess.TimeoutExpired):
        return  # no verdict: let Chroma open it
    reason = " ".join(probe.stdout.split()) or f"status {probe.returncode}"
    if probe.returncode == 3:
        raise UniragError(f"the Chroma database at {path} is locked by another process (an ingest or app "
                          f"using it?); wait for it to finish or stop it, then try again")
    if probe.returncode == 4:
        if "unable to open" in reason or "readonly" in reason:
            raise UniragError(f"cannot open the Chroma database at {path}: {reason}; check its permissions")
        raise UniragError(damaged(path, reason))


def damaged(path: Path, err) -> str:
    first = " ".join(str(err).split())[:200] or type(err).__name__
    return (f"the Chroma database at {path} is damaged or not a Chroma database ({first}); move the folder "
            f"away and rebuild it with `unirag ingest FOLDER --db {path}`")


def model_record(model, pooling: str | None = None) -> dict:
    """What a collection remembers about the model that made its vectors."""
    return {MODEL_KEY: model.name, POOLING_KEY: pooling or model.default_pooling,
            LAYER_KEY: model.embedding_layer, DIM_KEY: int(model.model.config.hidden_size), FORMAT_KEY: FORMAT}


def collection_layer(collection, model) -> int:
    """The decoder layer a collection's vectors were read at (the last of `model`'s where unrecorded)."""
    return int((collection.metadata or {}).get(LAYER_KEY, model.model.config.num_hidden_layers))


def open_collection(client, name: str, model=None, *, create: bool = False):
    """Get a collection (creating it for `model` if asked); refuse one made by another model."""
    from chromadb.errors import InvalidArgumentError, NotFoundError

    bad_name = (ValueError, InvalidArgumentError)  # InvalidArgumentError is not a ValueError in chromadb 1.x
    try:
        collection = client.get_collection(name)
    except NotFoundError:
        if not create:
            raise UniragError(f"no collection {name!r} in this database; run `unirag ingest FOLDER "
                              f"--collection {name}` first") from None
        try:
            # get_or_create: several ingest workers may get here at once; the server settles it
            collection = client.get_or_create_collection(name, configuration={"hnsw": {"space": "cosine"}},
                                                         metadata=model_record(model), embedding_function=None)
        except bad_name as err:
            raise UniragError(f"bad collection name {name!r}: {err}") from None
    except bad_name as err:
        raise UniragError(f"bad collection name {name!r}: {err}") from None
    if model is not None:
        check_model(collection, model)
    return collection


def check_model(collection, model) -> None:
    """Raise a clear UniragError if `collection` was built with a different model or adapter."""
    meta = collection.metadata or {}
    stored = meta.get(MODEL_KEY)
    if stored is None:
        raise UniragError(f"collection {collection.name!r} was not made by unirag (no model recorded); "
                          "use another --collection")
    if stored != model.name or meta.get(DIM_KEY) != int(model.model.config.hidden_size):
        raise UniragError(
            f"collection {collection.name!r} holds vectors from model {stored!r}, but the loaded model is "
            f"{model.name!r}; load the same --model/--adapter, use another --collection, or rebuild it "
            "with `unirag ingest --reset`")
    layer = collection_layer(collection, model)
    if layer != model.embedding_layer:
        raise UniragError(
            f"collection {collection.name!r} holds vectors read at layer {layer} of {stored!r}, but the "
            f"loaded model embeds at layer {model.embedding_layer} (its adapter record's embedding_layer); "
            "load the adapter the collection was made with, or rebuild it with `unirag ingest --reset`")
    if meta.get(FORMAT_KEY) != FORMAT:
        raise UniragError(f"collection {collection.name!r} uses an older unirag layout; rebuild it with "
                          "`unirag ingest --reset`")


def collection_pooling(collection) -> str:
    return (collection.metadata or {}).get(POOLING_KEY, "eos")


def delete_collection(client, name: str) -> None:
    from chromadb.errors import NotFoundError

    try:
        client.delete_collection(name)
    except NotFoundError:
        pass
    folder = _persist_folder(getattr(client, "_server", None) or client)
    if folder is not None:
        import shutil

        shutil.rmtree(folder / "bm25" / name, ignore_errors=True)


def chunks_stamp(collection) -> str | None:
    """The collection's chunks stamp (STAMP_KEY) as the database holds it now, re-read: another
    process may have ingested since this collection object was opened. None for a collection no
    ingest has stamped yet (made before stamps, or still empty)."""
    try:
        model = collection._client.get_collection(name=collection.name, tenant=collection.tenant,
                                                  database=collection.database)
        meta = model.metadata or {}
    except Exception:  # a client without that internal call: trust the object's own copy
        meta = collection.metadata or {}
    stamp = meta.get(STAMP_KEY)
    return stamp if isinstance(stamp, str) and stamp.isalnum() else None


def mark_changed(collection) -> str:
    """Give the collection a new chunks stamp (keeping its other metadata); returns it."""
    import uuid

    stamp = uuid.uuid4().hex
    try:
        current = collection._client.get_collection(name=collection.name, tenant=collection.tenant,
                                                    database=collection.database).metadata or {}
    except Exception:
        current = collection.metadata or {}
    # modify() replaces the whole metadata: carry every other key over
    collection.modify(metadata={**current, STAMP_KEY: stamp})
    return stamp


def persist_folder(collection) -> Path | None:
    """The embedded database's folder the collection lives in; None for a Chroma server."""
    return _persist_folder(collection._client)


def _persist_folder(api) -> Path | None:
    try:
        settings = api.get_settings()
    except Exception:
        return None
    if not getattr(settings, "is_persistent", False) or not settings.persist_directory:
        return None
    if "fastapi" in str(getattr(settings, "chroma_api_impl", "")).lower():
        return None
    return Path(settings.persist_directory)


def pages(collection, include: list[str], where: dict | None = None, page: int = 5000) -> Iterator[dict]:
    """`collection.get(...)` results, page by page, so a large collection is never read in one call."""
    offset = 0
    while True:
        got = collection.get(where=where, include=include, limit=page, offset=offset)
        yield got
        if len(got["ids"]) < page:
            return
        offset += page


def records(collection, where: dict | None = None) -> dict[str, dict]:
    """{id: metadata} of every record matching `where`."""
    out: dict[str, dict] = {}
    for got in pages(collection, ["metadatas"], where):
        out.update(zip(got["ids"], got["metadatas"]))
    return out


def source_counts(collection) -> dict[str, int]:
    """{source: chunk count} over the whole collection (`source`: a file's path under its ingested folder)."""
    counts: dict[str, int] = {}
    for got in pages(collection, ["metadatas"]):
        for meta in got["metadatas"]:
            source = str((meta or {}).get("source", ""))
            counts[source] = counts.get(source, 0) + 1
    return counts


def files(collection) -> int:
    """How many files the collection holds chunks of (a file: its ingested folder and its `source`)."""
    return len({(str(m.get("root", "")), str(m.get("source", ""))) for got in pages(collection, ["metadatas"])
                for m in (meta or {} for meta in got["metadatas"])})


def forget(collection, source: str, root: str | None = None) -> dict[str, int]:
    """Delete the chunks of the file `source` (its path under the ingested folder `root`; None:
    under any folder the collection holds it from); {root: chunks deleted}."""
    where = {"source": source} if root is None else {"$and": [{"root": root}, {"source": source}]}
    by_root: dict[str, set[str]] = {}
    for id_, meta in records(collection, where).items():
        by_root.setdefault(str(meta.get("root", "")), set()).add(id_)
    for ids in by_root.values():
        delete(collection, ids)
    if by_root:  # the saved BM25 index (keyed by the stamp) must not pass for the chunks left
        mark_changed(collection)
    return {root: len(ids) for root, ids in sorted(by_root.items())}


def roots(collection) -> set[str]:
    """The folders (absolute paths) the collection's files were ingested from."""
    return {str((meta or {}).get("root", "")) for got in pages(collection, ["metadatas"]) for meta in got["metadatas"]}


_SEGMENTS = """
import json, sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=10)
print(json.dumps(con.execute("SELECT id, collection FROM segments WHERE scope = 'VECTOR'").fetchall()))
"""


def disk_usage(path: str | Path) -> tuple[dict[str, int], int]:
    """({collection id: bytes of its vector index folder}, bytes of the shared SQLite file, which
    holds every collection's texts and metadata) of an embedded database at `path`.

    Chroma names each index folder after a segment, not the collection; the segments table maps
    one to the other. It is read in a child process, as `check_sqlite` explains."""
    import json
    import subprocess
    import sys

    path = Path(path)
    file = path / SQLITE_FILE
    shared = file.stat().st_size if file.is_file() else 0
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", "-c", _SEGMENTS, str(file)], capture_output=True,
                               text=True, timeout=60)
        segments = json.loads(probe.stdout) if probe.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired, ValueError):
        segments = []
    sizes: dict[str, int] = {}
    for segment, collection_id in segments:
        folder = path / segment
        if folder.is_dir():
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
            sizes[collection_id] = sizes.get(collection_id, 0) + size
    return sizes, shared


BATCH = 1000  # below chromadb's max batch size (5461 embedded, similar on servers)


def embeddings(collection, ids) -> dict[str, np.ndarray]:
    """{id: stored vector} of those of `ids` the collection holds."""
    ids, out = sorted(ids), {}
    for i in range(0, len(ids), BATCH):
        got = collection.get(ids=ids[i:i + BATCH], include=["embeddings"])
        out.update(zip(got["ids"], np.asarray(got["embeddings"], dtype=np.float32)))
    return out


def upsert(collection, ids, embeddings, documents, metadatas) -> None:
    """Upsert in slices the server accepts; deterministic ids make a repeat a no-op."""
    for i in range(0, len(ids), BATCH):
        collection.upsert(ids=ids[i:i + BATCH], embeddings=embeddings[i:i + BATCH],
                          documents=documents[i:i + BATCH], metadatas=metadatas[i:i + BATCH])


def delete(collection, ids) -> None:
    ids = sorted(ids)
    for i in range(0, len(ids), BATCH):
        collection.delete(ids=ids[i:i + BATCH])
