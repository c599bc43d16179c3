"""Plot an ablation sweep from `train/ablate.py`'s results.jsonl: STS (and the average) against one
recipe setting, e.g. the paper's Figure 3a (p_mar).

Each row's value of the setting is the current recipe with the row's overrides applied, so name
the rows of the sweep with `--names` (a results file can hold rows of several sweeps, and rows
trained before the recipe changed).

    python train/plot_ablation.py runs/ablate/s40/results.jsonl --key p_mar --names anchor4,pmar0,pmar08 \
        --output runs/figures/p_mar.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unirag.evaluation.figures import save_line_plot
from unirag.training.config import load_config

def sweep_points(rows: list[dict], key: str) -> dict[str, list[tuple[float, float]]]:
    """{task or "average": [(value of key, score), ...]} for the given rows."""
    points: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        config = load_config(row["recipe"], {k: str(v) for k, v in row["overrides"].items() if k != "init_adapter"})
        x = float(getattr(config, key))
        for task, score in row["sts"].items():
            points.setdefault(task, []).append((x, score))
        points.setdefault("average", []).append((x, sum(row["sts"].values()) / len(row["sts"])))
    return points


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="results.jsonl of train/ablate.py")
    parser.add_argument("--key", default="p_mar")
    parser.add_argument("--output", default="runs/figures/p_mar.png")
    parser.add_argument("--names", default="", help="comma-separated row names (default: all rows)")
    args = parser.parse_args()
    rows = [json.loads(line) for line in Path(args.results).read_text().splitlines() if line.strip()]
    wanted = [n for n in args.names.split(",") if n]
    rows = [r for r in rows if not wanted or r["name"] in wanted]
    if not rows:
        raise SystemExit(f"no rows named {args.names} in {args.results}")
    recipe = rows[0]["recipe"]
    points = sweep_points(rows, args.key)
    path = save_line_plot(points, args.key, "Spearman x 100 (EOS pooling)", args.output,
                          title=f"{recipe}: STS against {args.key}")
    for name, series in points.items():
        print(name, sorted(series))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
