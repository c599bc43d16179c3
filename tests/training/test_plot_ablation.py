"""train/plot_ablation.py: sweep points from ablate.py's rows, the recipe's value where a row has no override."""

import importlib.util
import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "train" / "plot_ablation.py"


def load():
    spec = importlib.util.spec_from_file_location("plot_ablation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_sweep_points_and_plot(tmp_path, monkeypatch):
    plot = load()
    rows = [{"name": "ref", "recipe": "cpu-quick", "overrides": {"steps": "40"}, "sts": {"A": 70.0, "B": 50.0}},
            {"name": "zero", "recipe": "cpu-quick", "overrides": {"steps": "40", "p_mar": "0"},
             "sts": {"A": 80.0, "B": 60.0}}]
    points = plot.sweep_points(rows, "p_mar")
    assert sorted(points["average"]) == [(0.0, 70.0), (0.5, 60.0)]  # the recipe's own p_mar is 0.5
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "p_mar.png"
    monkeypatch.setattr(sys, "argv", ["plot", str(results), "--names", "ref,zero", "--output", str(out)])
    plot.main()
    assert out.read_bytes().startswith(b"\x89PNG")
