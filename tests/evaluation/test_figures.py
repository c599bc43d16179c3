"""The figure helpers on made-up data: stable intent choice, t-SNE panels, PNGs written whole."""

import json

import numpy as np
from typer.testing import CliRunner

from unirag.cli.commands import app
from unirag.evaluation.figures import (intent_texts, largest_intents, save_line_plot, save_tsne_figure,
                                       tsne_panel)

INTENTS = {"card_lost": 5, "fee": 5, "refund": 4, "pin": 3}


def write_banking77(root):
    folder = root / "classification"
    folder.mkdir(parents=True)
    for split in ("train", "test"):
        with open(folder / f"Banking77-{split}.jsonl", "w") as f:
            for label, n in INTENTS.items():
                for i in range(n):
                    f.write(json.dumps({"text": f"{label.replace('_', ' ')} question {i}", "label": label}) + "\n")
    return root


def test_largest_intents_breaks_ties_by_name(tmp_path):
    data = write_banking77(tmp_path)
    assert largest_intents(data, 3) == ["card_lost", "fee", "refund"]
    texts, labels = intent_texts(data, ["pin"])
    assert labels == ["pin"] * 3 and texts[0] == "pin question 0"


def test_tsne_panel_separates_clusters_and_figures_are_written(tmp_path):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16)) * 5
    vectors = np.concatenate([c + rng.normal(size=(10, 16)) for c in centres])
    labels = [f"c{i}" for i in range(3) for _ in range(10)]
    points, silhouette = tsne_panel(vectors, labels)
    assert points.shape == (30, 2) and silhouette > 0.5
    png = save_tsne_figure({"a": (points, silhouette), "b": (points, silhouette)}, labels, tmp_path / "t.png")
    assert png.read_bytes()[:4] == b"\x89PNG" and not list(tmp_path.glob("*.tmp.png"))
    line = save_line_plot({"STS avg": [(0.0, 40.0), (0.5, 60.0)]}, "p_mar", "Spearman", tmp_path / "l.png")
    assert line.stat().st_size > 1000


def test_eval_tsne_command_on_the_tiny_model(tiny_model_dir, tmp_path):
    data = write_banking77(tmp_path / "eval")
    out = tmp_path / "fig.png"
    result = CliRunner().invoke(app, ["eval", "tsne", "--model", str(tiny_model_dir), "--adapter", "none",
                                      "--data", str(data), "--classes", "3", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file() and result.stdout.count("silhouette") == 2
