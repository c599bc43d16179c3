"""Domain adaptation (paper section 3.6): UniMAE post-training on the documents about to be indexed.

`unirag adapt ./docs --output DIR --minutes 10` reads the folder with ingest's readers, cuts it
into the very texts ingest will embed (heading path + chunk), and continues the model's adapter
on them with the `adapt` recipe (p_mar 0, alpha 1, anchor loss) until the time budget runs out.
Then `unirag ingest ./docs --adapter DIR` indexes with the adapted model, and `ask` must use the
same `--adapter` (a collection refuses a model that did not make its vectors).
"""

from __future__ import annotations

from pathlib import Path

from unirag.errors import UniragError
from unirag.retrieval.chunking import ChunkSettings, chunk_text, embed_text
from unirag.retrieval.ingest import scan
from unirag.readers.registry import DEFAULT_MAX_BYTES, Skipped, parse, read_bytes


def domain_texts(root: str | Path, tokenizer, settings: ChunkSettings = ChunkSettings(),
                 max_file_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """The chunk texts `ingest` would embed for `root`, in file order (unreadable files skipped)."""
    files, _, _ = scan(Path(root).expanduser())
    texts = []
    for file in files:
        data = read_bytes(file, max_file_bytes)
        doc = data if isinstance(data, Skipped) else parse(file, data)
        if isinstance(doc, Skipped):
            continue
        texts += [embed_text(chunk, doc.title, settings)
                  for chunk in chunk_text(doc.text, tokenizer, settings, doc.markdown)]
    if not texts:
        raise UniragError(f"no readable text under {root} to adapt on")
    return texts


def adapt(model: str, root: str | Path, output: str | Path, *, minutes: float, adapter: str | None = "default",
          recipe: str = "adapt", settings: ChunkSettings = ChunkSettings(), overrides: dict | None = None,
          resume: bool = False, device: str = "auto") -> Path:
    """Train `adapter` (the shipped one by default) further on the chunks of `root`; return the folder."""
    import datasets
    from transformers import AutoTokenizer

    from unirag.model.adapters import read_adapter_info
    from unirag.model.registry import resolve_adapter, resolve_model
    from unirag.training.config import load_config
    from unirag.training.trainer import train

    init_adapter = resolve_adapter(model, adapter)
    if init_adapter:
        read_adapter_info(init_adapter)  # a missing or broken folder fails here, before any work
    config = load_config(recipe, {"max_minutes": minutes, **(overrides or {})})
    tokenizer = AutoTokenizer.from_pretrained(resolve_model(model))
    texts = domain_texts(root, tokenizer, settings)
    # The longest chunk must fit whole: heading path + chunk_size tokens + EOS.
    config.max_length = max(config.max_length, settings.chunk_size + 64)
    return train(config, model, str(root), str(output), resume=resume,
                 init_adapter=init_adapter, device=device,
                 texts=datasets.Dataset.from_dict({"text": texts}))
