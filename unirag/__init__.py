"""unirag: one decoder-only LLM that both embeds (UniMAE, EOS pooling) and generates for RAG."""

from .errors import UniragError
from .models import DEFAULT_MODEL

__version__ = "0.1.0"


def load(model: str | None = None, adapter: str | None = "default", **kwargs) -> "UniModel":
    """Shortcut for `UniModel.load`: the one model a process should hold."""
    from .unimodel import UniModel

    return UniModel.load(model, adapter, **kwargs)


def __getattr__(name: str):
    """`UniModel` and `POOLINGS` import torch; load them on first use so the CLI starts fast."""
    if name in ("UniModel", "POOLINGS"):
        from . import unimodel

        return getattr(unimodel, name)
    raise AttributeError(f"module 'unirag' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names plus the lazy ones, so `dir(unirag)` and completion list UniModel and POOLINGS."""
    return sorted(set(globals()) | {"UniModel", "POOLINGS"})


__all__ = ["DEFAULT_MODEL", "POOLINGS", "UniModel", "UniragError", "load", "__version__"]
