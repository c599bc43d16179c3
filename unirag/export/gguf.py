"""Write a merged Llama model as one GGUF file, for llama.cpp and Ollama.

The layout follows llama.cpp's own converter (`convert_hf_to_gguf.py`, class `LlamaModel`): tensor
names from the `gguf` package's map, the q/k projections permuted to GGML's rotary layout, norms
kept in f32, every other matrix in the chosen type. Tokenizer metadata is copied verbatim from the
GGUF the model came from when there is one (the registry models), so llama.cpp tokenizes exactly
as before; otherwise it is rebuilt from the Hugging Face tokenizer (byte-level BPE only).

The embedding a served file gives is the same as unirag's where the model embeds at its last layer
(the default): that layer's state after the final norm at an appended EOS token (llama.cpp:
`--pooling last`, with the EOS token at the end). llama.cpp has no pooling at an earlier layer, so
for an adapter whose record names one the file's embeddings differ from unirag's; it says so.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

import numpy as np

from unirag.errors import UniragError

log = logging.getLogger("unirag")
GGUF_TYPES = ("f16", "bf16", "q8_0", "f32")
MODEL_KEY = "unirag.model"  # base model + adapter digest, as UniModel names it
POOLING_KEY = "unirag.model.pooling"  # read by nothing in llama.cpp; says how to embed with this file
COPIED_PREFIXES = ("tokenizer.", "general.")  # from a source GGUF; model shape always comes from the config
NOT_COPIED = {"general.file_type", "general.quantization_version", "general.architecture"}


def _qtype(kind: str):
    import gguf

    return {"f16": gguf.GGMLQuantizationType.F16, "bf16": gguf.GGMLQuantizationType.BF16,
            "q8_0": gguf.GGMLQuantizationType.Q8_0, "f32": gguf.GGMLQuantizationType.F32}[kind]


def _file_type(kind: str):
    import gguf

    return {"f16": gguf.LlamaFileType.MOSTLY_F16, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
            "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "f32": gguf.LlamaFileType.ALL_F32}[kind]


def permute_for_gguf(weight: np.ndarray, n_head: int) -> np.ndarray:
    """HF's rotary halves -> GGML's interleaved pairs (the inverse of transformers' GGUF loader)."""
    return (weight.reshape(n_head, 2, weight.shape[0] // n_head // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def _check_supported(config) -> float:
    """Refuse Llama variants this writer would get wrong; return the rope base."""
    if getattr(config, "model_type", None) != "llama":
        raise UniragError(f"GGUF export supports Llama models; this one is {getattr(config, 'model_type', '?')!r}")
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type", "default")) != "default":
        raise UniragError("GGUF export supports plain rotary embeddings only; this model scales its rope")
    if getattr(config, "attention_bias", False) or getattr(config, "mlp_bias", False):
        raise UniragError("GGUF export supports Llama models without biases")
    theta = rope.get("rope_theta", getattr(config, "rope_theta", None))
    if theta is None:
        raise UniragError("the model config has no rope_theta")
    return float(theta)


def _add_shape(writer, config, rope_theta: float) -> None:
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_hidden_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope_theta)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)


def _copy_fields(writer, source: Path) -> None:
    """Tokenizer and general metadata of the source GGUF, value for value."""
    import gguf

    reader = gguf.GGUFReader(source)
    for key, field in reader.fields.items():
        if not key.startswith(COPIED_PREFIXES) or key in NOT_COPIED:
            continue
        value = field.contents()
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, kind, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, kind)


def _add_hf_tokenizer(writer, tokenizer, vocab_size: int) -> None:
    """Byte-level BPE vocabulary, merges, special ids and chat template from an HF tokenizer."""
    import gguf

    state = json.loads(tokenizer.backend_tokenizer.to_str()) if hasattr(tokenizer, "backend_tokenizer") else {}
    if state.get("model", {}).get("type") != "BPE":
        raise UniragError("GGUF export rebuilds byte-level BPE tokenizers only; convert the --merged folder "
                          "with llama.cpp's convert_hf_to_gguf.py instead")
    by_id = {i: t for t, i in tokenizer.get_vocab().items()}
    special = set(tokenizer.all_special_ids)
    added = set(tokenizer.added_tokens_decoder)
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in by_id:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
        else:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special or (i in added and tokenizer.added_tokens_decoder[i].special)
                         else gguf.TokenType.USER_DEFINED if i in added else gguf.TokenType.NORMAL)
    writer.add_tokenizer_model("gpt2")
    # llama.cpp picks its pre-tokenizer split by this name, and knows each model family's by a
    # hash of sample tokenizations that only its converter computes; "default" is its generic
    # split, which may differ from the model's own on unusual text. Registry models keep theirs.
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(folder)
        gguf.SpecialVocab(folder, load_merges=True, n_vocab=vocab_size).add_to_gguf(writer)
    writer.add_add_bos_token(False)  # unirag never prepends BOS; an embedding is text + EOS


def _tensors(model, config):
    """(GGUF name, float32 array) for every weight, in llama.cpp's order and layout."""
    import gguf

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, config.num_hidden_layers)
    state = model.state_dict()
    for name, tensor in state.items():
        if name == "lm_head.weight" and config.tie_word_embeddings:
            continue  # llama.cpp reuses token_embd for the output, as the model does
        if name.endswith("rotary_emb.inv_freq"):
            continue
        gguf_name = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise UniragError(f"GGUF export does not know where {name} goes")
        data = tensor.detach().float().cpu().numpy()
        if name.endswith("q_proj.weight"):
            data = permute_for_gguf(data, config.num_attention_heads)
        elif name.endswith("k_proj.weight"):
            data = permute_for_gguf(data, config.num_key_value_heads)
        yield gguf_name, data


def check_target(out_file: str | Path, kind: str) -> Path:
    """The output path, if it is a new .gguf file and the type is known (checked before any loading)."""
    if kind not in GGUF_TYPES:
        raise UniragError(f"unknown GGUF type {kind!r}; choose one of {', '.join(GGUF_TYPES)}")
    out_file = Path(out_file).expanduser()
    if out_file.exists():
        raise UniragError(f"{out_file} exists; choose a new file name")
    if out_file.suffix != ".gguf":
        raise UniragError(f"{out_file} should end in .gguf")
    return out_file


def export_gguf(uni, out_file: str | Path, kind: str = "f16", source_gguf: Path | None = None) -> Path:
    """Write `uni`'s merged model to a new GGUF file, atomically; returns its path."""
    import gguf

    out_file = check_target(out_file, kind)
    if hasattr(uni.model, "get_base_model"):
        raise UniragError("GGUF export needs a merged model; load the adapter with merge=True")
    if uni.bf16_weights:
        raise UniragError("this model holds its weights in bf16 for serving; load it with precision='fp32' "
                          "to export the weights as trained")
    config = uni.model.config
    rope_theta = _check_supported(config)
    qtype = _qtype(kind)

    out_file.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=f".{out_file.name}.", dir=out_file.parent)
    os.close(handle)
    try:
        writer = gguf.GGUFWriter(tmp, "llama")
        if source_gguf is not None:
            _copy_fields(writer, source_gguf)
        else:
            writer.add_name(Path(str(getattr(config, "_name_or_path", "")) or "model").name)
            _add_hf_tokenizer(writer, uni.tokenizer, config.vocab_size)
        _add_shape(writer, config, rope_theta)
        writer.add_file_type(_file_type(kind))
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        writer.add_string(MODEL_KEY, uni.name)
        writer.add_string(POOLING_KEY, _pooling_note(uni))
        for name, data in _tensors(uni.model, config):
            # Like llama.cpp's converter: 1-D tensors (norms) stay f32, and q8_0 needs rows that
            # are whole 32-value blocks; a matrix that isn't stays f16.
            target = qtype
            if data.ndim == 1:
                target = gguf.GGMLQuantizationType.F32
            elif qtype == gguf.GGMLQuantizationType.Q8_0 and data.shape[-1] % 32:
                target = gguf.GGMLQuantizationType.F16
            if target == gguf.GGMLQuantizationType.F32:
                writer.add_tensor(name, data.astype(np.float32))
            else:
                writer.add_tensor(name, gguf.quants.quantize(data, target), raw_dtype=target)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it private; a model file is as readable as any other
        os.replace(tmp, out_file)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out_file


def _pooling_note(uni) -> str:
    """How to embed with the file, as unirag does."""
    note = f"last: the final-norm state at an appended {uni.tokenizer.eos_token}"
    layers = uni.model.config.num_hidden_layers
    if uni.embedding_layer == layers:
        return note
    log.warning("this model embeds at layer %d of %d; llama.cpp's pooling reads the last layer, so the "
                "GGUF file's embeddings are not unirag's", uni.embedding_layer, layers)
    return f"{note}, read after layer {uni.embedding_layer} of {layers} (not llama.cpp's last-layer pooling)"
