"""unirag: one decoder-only LLM that both embeds (UniMAE, EOS pooling) and generates for RAG.

The public API, whatever the folders below:

    model = unirag.load()                                   # the one model
    docs = unirag.open_collection(unirag.connect(".unirag/chroma"), "docs", model)
    hits = unirag.retrieve(model, docs, "How do I ...?")    # chunks, best first
    answer = unirag.ask(model, docs, "How do I ...?", unirag.AskSettings())
"""

from unirag.errors import UniragError
from unirag.model.registry import DEFAULT_MODEL

__version__ = "0.1.0"

# name -> module; imported on first use, since they import torch and the CLI should start fast
_LAZY = {
    "UniModel": "unirag.model.unimodel",
    "POOLINGS": "unirag.model.unimodel",
    "ask": "unirag.answer.ask",
    "AskSettings": "unirag.answer.ask",
    "retrieve": "unirag.retrieval.search",
    "connect": "unirag.retrieval.store",
    "open_collection": "unirag.retrieval.store",
}


def load(model: str | None = None, adapter: str | None = "default", **kwargs) -> "UniModel":  # noqa: F821
    """Shortcut for `UniModel.load`: the one model a process should hold."""
    from unirag.model.unimodel import UniModel

    return UniModel.load(model, adapter, **kwargs)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'unirag' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names plus the lazy ones, so `dir(unirag)` and completion list them."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["DEFAULT_MODEL", "UniragError", "load", "__version__", *_LAZY]
