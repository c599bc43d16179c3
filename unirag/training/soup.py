"""Average LoRA adapters trained from the same base ("model soup"), exactly, as one LoRA.

Runs of one recipe that differ only in seed land on adapters whose scores differ as much as any
recipe change does (docs/ABLATIONS.md). Averaging their weight deltas keeps what they share and
damps what each seed adds at random, without choosing a seed on the evaluation data.

A LoRA delta is `s * B @ A`. The mean of k of them is itself a LoRA of rank k*r:

    mean_i s B_i A_i = s [B_1/k ... B_k/k] @ [A_1; ...; A_k]

so stacking the factors along the rank axis (and scaling lora_alpha by k, so that s = alpha/r
is unchanged) gives the average with no approximation. `rank=` then optionally cuts each
module's averaged delta back to its best approximation of that rank (truncated SVD), so a soup
of k adapters can ship at the size of one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from unirag.model.adapters import UNIRAG_JSON, read_adapter_info
from unirag.errors import UniragError

# Settings that must agree for deltas to be averaged as one LoRA (the rest are refused by _config).
_SAME = ("r", "lora_alpha", "target_modules")


def _config(path: Path) -> dict:
    config = json.loads((path / "adapter_config.json").read_text())
    if config.get("peft_type") != "LORA" or config.get("use_dora"):
        raise UniragError(f"{path}: only plain LoRA adapters can be averaged (peft_type LORA, no DoRA)")
    if config.get("use_rslora"):  # its scale is alpha / sqrt(r): the rank change below assumes alpha / r
        raise UniragError(f"{path}: rank-stabilised LoRA (use_rslora) is not supported")
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise UniragError(f"{path}: per-module ranks or alphas are not supported")
    if config.get("modules_to_save"):
        raise UniragError(f"{path}: adapters with fully trained modules (modules_to_save) cannot be averaged as LoRA")
    return config


def _normalised(value):
    return sorted(value) if isinstance(value, list) else value


def truncate_lora(b: torch.Tensor, a: torch.Tensor, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Factors (B', A') of rank `rank` whose product is the best approximation of B @ A.

    Never forms the (out, in) matrix: QR of both factors leaves an (r, r) core to decompose.
    """
    qb, rb = torch.linalg.qr(b.double())
    qa, ra = torch.linalg.qr(a.double().T)
    u, s, vh = torch.linalg.svd(rb @ ra.T)
    root = s[:rank].sqrt()
    return (qb @ u[:, :rank] * root).float(), (root[:, None] * vh[:rank] @ qa.T).float()


def soup_adapters(sources: list[str | Path], out_dir: str | Path, rank: int | None = None) -> Path:
    """Write to `out_dir` one LoRA adapter whose delta is the mean of the sources' deltas.

    rank=None keeps it exact (rank = the sum of the sources' ranks); a smaller rank stores each
    module's best approximation of that rank instead."""
    sources = [Path(s).expanduser() for s in sources]
    out_dir = Path(out_dir).expanduser()
    if len(sources) < 2:
        raise UniragError("a soup needs at least two adapters")
    if out_dir.exists():
        raise UniragError(f"{out_dir} already exists; choose a new folder for the soup")
    infos = [read_adapter_info(s) for s in sources]
    configs = [_config(s) for s in sources]
    for source, config in zip(sources[1:], configs[1:]):
        for key in _SAME:
            if _normalised(config.get(key)) != _normalised(configs[0].get(key)):
                raise UniragError(f"{source} differs from {sources[0]} in {key}: "
                                  f"{config.get(key)!r} vs {configs[0].get(key)!r}")
    bases = {json.dumps(info.get("base"), sort_keys=True) for info in infos}
    if len(bases) > 1:
        raise UniragError("the adapters were trained on different base models")
    if len({info.get("pooling") for info in infos}) > 1 or len({info.get("mask_token") for info in infos}) > 1:
        raise UniragError("the adapters disagree on pooling or mask token")

    k = len(sources)
    tensors = [load_file(s / "adapter_model.safetensors") for s in sources]
    keys = sorted(tensors[0])
    for source, t in zip(sources[1:], tensors[1:]):
        if sorted(t) != keys:
            raise UniragError(f"{source} has other weight names than {sources[0]}")
    full_rank = k * configs[0]["r"]
    if rank is not None and not 1 <= rank <= full_rank:
        raise UniragError(f"rank must be between 1 and {full_rank} (the sum of the sources' ranks)")
    merged = {}
    for key in keys:
        parts = [t[key].float() for t in tensors]
        if ".lora_A." in key:    # (r, in): stack the rows
            merged[key] = torch.cat(parts, dim=0)
        elif ".lora_B." in key:  # (out, r): stack the columns, each source weighted 1/k
            merged[key] = torch.cat(parts, dim=1) / k
        else:
            raise UniragError(f"{sources[0]}: unexpected weight {key} (not a LoRA factor)")
    if rank is not None and rank < full_rank:
        for key_a in [key for key in keys if ".lora_A." in key]:
            key_b = key_a.replace(".lora_A.", ".lora_B.")
            merged[key_b], merged[key_a] = truncate_lora(merged[key_b], merged[key_a], rank)
    merged = {key: value.to(tensors[0][key].dtype).contiguous() for key, value in merged.items()}
    new_rank = rank or full_rank

    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(merged, tmp / "adapter_model.safetensors", metadata={"format": "pt"})
    scale = configs[0]["lora_alpha"] / configs[0]["r"]  # s = alpha / r, kept
    alpha = scale * new_rank
    config = dict(configs[0], r=new_rank, lora_alpha=int(alpha) if alpha.is_integer() else alpha)
    (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2))
    info = dict(infos[0], soup={"rank": new_rank, "exact": new_rank == full_rank,
                                "sources": [{"adapter": str(s), "seed": i.get("config", {}).get("seed")}
                                            for s, i in zip(sources, infos)]})
    info.pop("name", None)
    (tmp / UNIRAG_JSON).write_text(json.dumps(info, indent=2))
    (tmp / "README.md").write_text(
        f"# {out_dir.name}\n\nThe {'exact average' if new_rank == full_rank else f'rank-{new_rank} SVD of the average'}"
        f" (uniform soup) of {k} LoRA adapters, as one LoRA of rank {new_rank}:\n\n"
        + "".join(f"- `{s}`\n" for s in sources))
    tmp.rename(out_dir)
    return out_dir
