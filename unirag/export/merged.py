"""Write a plain Hugging Face model folder with the adapter merged in, for serving at scale."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from unirag.model.adapters import UNIRAG_JSON
from unirag.errors import UniragError

SERVING_NOTE = """# Serving this model

This folder is a plain Hugging Face causal LM (safetensors) with a unirag adapter merged in.

- Generation: any engine that runs Llama models (transformers, vLLM, TGI) generates with it as
  with the base model; for llama.cpp, `unirag export --gguf FILE` writes a GGUF file.
- Embeddings: append the tokenizer's EOS token (`{eos}`) to the text and take the hidden state
  of {layer} (after the final norm) at that position; L2-normalise. Engines with last-token
  pooling do exactly this when the EOS is appended, e.g. vLLM's pooling runner with
  `--runner pooling` and a `LAST` pooling type, normalised.
- `unirag.json` records how the adapter was trained (pooling, mask token, recipe, data).
"""


def export_merged(uni, out_dir: str | Path) -> Path:
    """Save `uni`'s (already merged) model + tokenizer atomically into out_dir."""
    out_dir = Path(out_dir).expanduser()
    if out_dir.exists() and any(out_dir.iterdir()):
        raise UniragError(f"{out_dir} exists and is not empty; choose a new folder")
    if hasattr(uni.model, "get_base_model"):
        raise UniragError("export needs a merged model; load the adapter with merge=True")
    if uni.bf16_weights:
        raise UniragError("this model holds its weights in bf16 for serving; load it with precision='fp32' "
                          "(or bf16_weights=False) to export the weights as trained")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        uni.model.save_pretrained(tmp, safe_serialization=True)
        uni.tokenizer.save_pretrained(tmp)
        (tmp / UNIRAG_JSON).write_text(json.dumps({**uni.info, "merged_from": uni.name}, indent=2))
        (tmp / "SERVING.md").write_text(SERVING_NOTE.format(eos=uni.tokenizer.eos_token, layer=_layer_words(uni)))
        if out_dir.exists():
            out_dir.rmdir()
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _layer_words(uni) -> str:
    layers = uni.model.config.num_hidden_layers
    if uni.embedding_layer == layers:
        return "the last layer"
    return (f"layer {uni.embedding_layer} of {layers} (`embedding_layer` in unirag.json; last-token "
            "pooling in a serving engine reads the last layer instead)")
