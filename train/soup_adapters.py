"""Average LoRA adapters of one recipe (different seeds) into one exact LoRA: a uniform soup.

    python train/soup_adapters.py runs/v3-seed42 runs/v3-seed43 runs/v3-seed44 --output runs/v3-soup3

The result loads like any adapter (`unirag eval embed --adapter runs/v3-soup3`); its rank is the
sum of the sources' ranks (`--rank 16` stores the best rank-16 approximation instead). See
unirag/training/soup.py for why it is exact.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unirag.errors import UniragError
from unirag.training.soup import soup_adapters


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("adapters", nargs="+", type=Path)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--rank", type=int, help="cut the averaged deltas to this rank (truncated SVD); default: exact")
    args = parser.parse_args()
    try:
        out = soup_adapters(args.adapters, args.output, args.rank)
    except UniragError as err:
        sys.exit(f"error: {err}")
    print(f"souped {len(args.adapters)} adapters -> {out}")


if __name__ == "__main__":
    main()
