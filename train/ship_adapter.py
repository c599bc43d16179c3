"""Copy a trained adapter into the package (unirag/weights/NAME), weights cast to bf16.

bf16 halves the size (LoRA r=16 on SmolLM2-135M: ~19 MB fp32 -> ~10 MB) and is exact enough:
PEFT casts the tensors back to the model's dtype on load. Checkpoints are not copied.

    python train/ship_adapter.py runs/cpu-quick-s42 smollm2-135m-unimae [--notes docs/adapter-notes.md]
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = Path(__file__).resolve().parents[1] / "unirag" / "weights"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("name")
    parser.add_argument("--notes", type=Path, help="Markdown appended to the model card (evaluation numbers).")
    args = parser.parse_args()
    target = WEIGHTS / args.name
    tmp = target.with_name(f".{args.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tensors = load_file(args.source / "adapter_model.safetensors")
    save_file({k: v.to(torch.bfloat16).contiguous() for k, v in tensors.items()},
              tmp / "adapter_model.safetensors", metadata={"format": "pt"})
    info = json.loads((args.source / "unirag.json").read_text())
    adapter_config = json.loads((args.source / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = info["base_model"]  # not this machine's cache path
    (tmp / "adapter_config.json").write_text(json.dumps(adapter_config, indent=2))
    info.update(name=args.name, weights_dtype="bfloat16")
    (tmp / "unirag.json").write_text(json.dumps(info, indent=2))
    card = (args.source / "README.md").read_text().replace(f"# {args.source.name}", f"# {args.name}", 1)
    if args.notes:
        card += "\n" + args.notes.read_text()
    (tmp / "README.md").write_text(card)
    shutil.rmtree(target, ignore_errors=True)
    tmp.rename(target)
    size = sum(p.stat().st_size for p in target.iterdir()) / 1e6
    print(f"shipped {args.source} -> {target} ({size:.1f} MB)")


if __name__ == "__main__":
    main()
