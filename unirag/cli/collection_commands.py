"""`unirag collections` and `unirag forget`: see what a database holds, delete a collection, drop a file.

Neither loads the model: they read and delete what Chroma stores. A collection's model is the one
recorded in its metadata when it was made (`store.model_record`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from unirag.cli.options import DEFAULT_DB, CollectionOpt, DbOpt, UrlOpt
from unirag.errors import UniragError


def _size(n: int) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def describe(collection, index_bytes: int | None = None) -> str:
    """One line about a collection: chunks, files, the model that embedded it, its index's size."""
    from unirag.retrieval import store

    meta = collection.metadata or {}
    model = meta.get(store.MODEL_KEY)
    layer = f", layer {meta[store.LAYER_KEY]}" if store.LAYER_KEY in meta else ""
    made = (f"model {model} ({meta.get(store.POOLING_KEY, 'eos')} pooling{layer})" if model
            else "not made by unirag (no model recorded)")
    size = f", index {_size(index_bytes)}" if index_bytes is not None else ""
    return (f"{_plural(collection.count(), 'chunk')}, {_plural(store.files(collection), 'file')}, "
            f"{made}{size}")


def collections(
    name: Annotated[Optional[str], typer.Argument(help="List this collection's files (the paths --source and "
                                                 "`forget` take), with their chunk counts.")] = None,
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    delete: Annotated[Optional[str], typer.Option("--delete", metavar="NAME",
                                                  help="Delete this collection (asks first, unless --yes).")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
):
    """List the database's collections (chunks, files, model, size on disk), one collection's files, or delete one."""
    from unirag.retrieval import store

    client = store.connect(db, chroma_url, must_exist=True)
    where = chroma_url or db
    if name is not None and delete is None:
        coll = store.open_collection(client, name)
        typer.echo(f"unirag: collection {name!r} in {where}: {describe(coll)}")
        for source, count in sorted(store.source_counts(coll).items()):
            typer.echo(f"  {source}  ({_plural(count, 'chunk')})")
        return
    if delete is not None:
        coll = store.open_collection(client, delete)  # a clear error when there is none
        count = coll.count()
        if not yes:
            typer.confirm(f"Delete collection {delete!r} ({_plural(count, 'chunk')}) from {where}?", abort=True)
        store.delete_collection(client, delete)
        typer.echo(f"unirag: deleted collection {delete!r} ({_plural(count, 'chunk')}) from {where}")
        return
    found = sorted(client.list_collections(), key=lambda c: c.name)
    if not found:
        typer.echo(f"unirag: no collections in {where}; run `unirag ingest FOLDER` to make one")
        return
    sizes, shared = store.disk_usage(db) if not chroma_url else ({}, 0)
    total = f" ({_size(sum(sizes.values()) + shared)} on disk)" if not chroma_url else ""
    typer.echo(f"unirag: {_plural(len(found), 'collection')} in {where}{total}")
    width = max(len(c.name) for c in found)
    for coll in found:
        index = sizes.get(str(coll.id), 0) if not chroma_url else None
        typer.echo(f"  {coll.name:<{width}}  {describe(coll, index)}")
    if not chroma_url:
        typer.echo(f"  (texts and metadata of every collection: {_size(shared)}, in {db / store.SQLITE_FILE})")


def forget(
    path: Annotated[str, typer.Argument(help="The file: its path as ingested, relative to the ingested folder "
                                        "(e.g. guide/intro.md), or its own path on disk.")],
    db: DbOpt = DEFAULT_DB,
    chroma_url: UrlOpt = None,
    collection: CollectionOpt = "docs",
):
    """Drop one file's chunks from a collection (dense and BM25 search stop finding them at once).

    The file itself is not touched: a later `unirag ingest` of its folder adds it again while it is there."""
    from unirag.retrieval import store

    client = store.connect(db, chroma_url, must_exist=True)
    coll = store.open_collection(client, collection)
    deleted: dict[str, int] = {}
    on_disk = Path(path).expanduser()
    # a path on disk (absolute, or a file that is there): the folder it was ingested under says which
    # file; else the path as ingested, so that `forget intro.md` never means ./intro.md by chance
    if on_disk.is_absolute() or on_disk.exists():
        on_disk = on_disk.resolve()
        for root in sorted(store.roots(coll)):
            if root and on_disk.is_relative_to(root) and on_disk != Path(root):
                deleted.update(store.forget(coll, on_disk.relative_to(root).as_posix(), root))
    source = path.replace("\\", "/").removeprefix("./")
    if not deleted:
        deleted = store.forget(coll, source)
    if not deleted:
        raise UniragError(f"collection {collection!r} holds no file {path!r}; give its path as ingested, relative "
                          f"to the folder (`unirag collections {collection}` lists them), or its path on disk")
    chunks = sum(deleted.values())
    folders = ", ".join(deleted)
    typer.echo(f"unirag: forgot {path} ({_plural(chunks, 'chunk')}) from collection {collection!r}; "
               f"`unirag ingest` of {folders} adds it again while the file is there")
