"""Put a PEFT/LoRA adapter on a base model, after checking it was made for that model.

An adapter folder holds `adapter_config.json` + `adapter_model.safetensors` (standard PEFT)
and, when unirag trained it, `unirag.json` describing how to use it (pooling, mask token, the
base model it was trained on). A pickled `adapter_model.bin` is refused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from unirag.errors import UniragError

UNIRAG_JSON = "unirag.json"


def base_fingerprint(config) -> dict:
    """The shape facts an adapter depends on; a mismatch means another base model."""
    return {
        "model_type": config.model_type,
        "hidden_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "vocab_size": config.vocab_size,
    }


def read_adapter_info(path: str | Path) -> dict:
    """Validate an adapter folder and return its unirag.json (empty dict if it has none)."""
    path = Path(path).expanduser()
    if not path.is_dir():
        raise UniragError(f"adapter folder {path} does not exist")
    config_file = path / "adapter_config.json"
    if not config_file.is_file():
        raise UniragError(f"{path} is not a PEFT adapter folder: adapter_config.json is missing")
    try:
        json.loads(config_file.read_text())
    except (ValueError, UnicodeDecodeError):
        raise UniragError(f"{config_file} is corrupt (not valid JSON); re-export or retrain the adapter") from None
    if not (path / "adapter_model.safetensors").is_file():
        if (path / "adapter_model.bin").exists():
            raise UniragError(
                f"{path} holds a pickled adapter_model.bin; unirag loads safetensors only "
                "(re-save it with save_pretrained(safe_serialization=True))"
            )
        raise UniragError(f"{path} has no adapter_model.safetensors; the adapter is incomplete")
    return read_record(path)


def read_record(folder: str | Path) -> dict:
    """The folder's unirag.json (an adapter's, or the one a merged export carries: how it embeds,
    pooling, summary tokens, question cue), or {} where there is none."""
    info_file = Path(folder).expanduser() / UNIRAG_JSON
    if not info_file.is_file():
        return {}
    try:
        return json.loads(info_file.read_text())
    except (ValueError, UnicodeDecodeError):
        raise UniragError(f"{info_file} is corrupt (not valid JSON)") from None


def weights_digest(path: str | Path, length: int = 8) -> str:
    """The first `length` hex digits of the SHA-256 of the adapter's weights file.

    It goes into the model's name (`base+adapter@digest`), which a Chroma collection records: a
    retrained adapter saved under the same folder name then no longer passes for the old one."""
    digest = hashlib.sha256()
    with open(Path(path).expanduser() / "adapter_model.safetensors", "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:length]


def apply_adapter(model, path: str | Path, merge: bool = True):
    """Return (model with the adapter, adapter info). Merging folds LoRA into the weights in
    place, so inference runs at base speed with still one copy of the weights."""
    from peft import PeftModel
    from safetensors import SafetensorError

    info = read_adapter_info(path)
    expected = info.get("base")
    if expected and expected != base_fingerprint(model.config):
        raise UniragError(
            f"adapter {path} was trained on another base model ({expected}); "
            f"this one is {base_fingerprint(model.config)}. Load the base it was made for."
        )
    if info.get("vocab_size") and info["vocab_size"] != model.get_input_embeddings().num_embeddings:
        model.resize_token_embeddings(info["vocab_size"])
    try:
        peft_model = PeftModel.from_pretrained(model, str(path), is_trainable=False)
    except (RuntimeError, ValueError, KeyError, SafetensorError, OSError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UniragError(f"adapter {path} does not fit this model: {first[:300]}") from None
    peft_model.eval()
    if merge:
        return peft_model.merge_and_unload(), info
    return peft_model, info
