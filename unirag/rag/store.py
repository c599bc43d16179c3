"""The Chroma side: one client (embedded or server), one collection per corpus.

A collection is created with cosine space (`configuration={"hnsw": {"space": "cosine"}}`, the
chromadb 1.x form) and no embedding function: unirag always passes its own vectors. Its
metadata records which model (name includes the adapter), pooling and dimension made the
vectors, set once at creation, so a query or an ingest with another model is refused instead of
silently comparing vectors from different spaces.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from ..errors import UniragError

DEFAULT_DB = Path(".unirag") / "chroma"
MODEL_KEY, POOLING_KEY, DIM_KEY, FORMAT_KEY = "unirag_model", "unirag_pooling", "unirag_dim", "unirag_format"
FORMAT = 1  # bump when the chunk id / metadata layout changes


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
    try:
        path.mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=str(path))
    except OSError as err:
        raise UniragError(f"cannot open the Chroma database at {path}: {err.strerror or err}") from None


def model_record(model, pooling: str | None = None) -> dict:
    """What a collection remembers about the model that made its vectors."""
    return {MODEL_KEY: model.name, POOLING_KEY: pooling or model.default_pooling,
            DIM_KEY: int(model.model.config.hidden_size), FORMAT_KEY: FORMAT}


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
            return client.create_collection(name, configuration={"hnsw": {"space": "cosine"}},
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


def records(collection, where: dict | None = None, page: int = 5000) -> dict[str, dict]:
    """{id: metadata} of every record matching `where`, read page by page."""
    out: dict[str, dict] = {}
    offset = 0
    while True:
        got = collection.get(where=where, include=["metadatas"], limit=page, offset=offset)
        out.update(zip(got["ids"], got["metadatas"]))
        if len(got["ids"]) < page:
            return out
        offset += page


BATCH = 1000  # below chromadb's max batch size (5461 embedded, similar on servers)


def upsert(collection, ids, embeddings, documents, metadatas) -> None:
    """Upsert in slices the server accepts; deterministic ids make a repeat a no-op."""
    for i in range(0, len(ids), BATCH):
        collection.upsert(ids=ids[i:i + BATCH], embeddings=embeddings[i:i + BATCH],
                          documents=documents[i:i + BATCH], metadatas=metadatas[i:i + BATCH])


def delete(collection, ids) -> None:
    ids = sorted(ids)
    for i in range(0, len(ids), BATCH):
        collection.delete(ids=ids[i:i + BATCH])
