"""The paper's figures at small scale: t-SNE of Banking77 intents (Fig. 2) and an ablation line
plot (Fig. 3a). matplotlib and scikit-learn are imported here only, so the rest of unirag does
not pay for them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from unirag.evaluation.files import read_jsonl

BANKING77 = Path("classification")


def largest_intents(data_dir: str | Path, n: int = 6) -> list[str]:
    """The n intents with the most training examples (ties broken by name, so the choice is stable)."""
    rows = read_jsonl(Path(data_dir) / BANKING77 / "Banking77-train.jsonl")
    counts = Counter(r["label"] for r in rows)
    return [label for label, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def intent_texts(data_dir: str | Path, intents: Sequence[str], split: str = "test") -> tuple[list[str], list[str]]:
    """Texts and labels of the given intents from Banking77's `split` file, in file order."""
    rows = read_jsonl(Path(data_dir) / BANKING77 / f"Banking77-{split}.jsonl")
    keep = [r for r in rows if r["label"] in set(intents)]
    return [r["text"] for r in keep], [r["label"] for r in keep]


def tsne_panel(vectors: np.ndarray, labels: Sequence[str], seed: int = 0) -> tuple[np.ndarray, float]:
    """2-D t-SNE of cosine-normalised vectors, plus their silhouette score (cosine) as a number to
    quote beside the picture: it measures class separation in the original space, not in 2-D."""
    from sklearn.manifold import TSNE
    from sklearn.metrics import silhouette_score

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
    points = TSNE(n_components=2, metric="cosine", init="pca", random_state=seed,
                  perplexity=min(30.0, (len(unit) - 1) / 3)).fit_transform(unit)
    return points, float(silhouette_score(unit, labels, metric="cosine"))


def save_tsne_figure(panels: Mapping[str, tuple[np.ndarray, float]], labels: Sequence[str], path: str | Path) -> Path:
    """Side-by-side scatter plots, one per model, coloured by intent; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = sorted(set(labels))
    colours = {c: plt.get_cmap("tab10")(i) for i, c in enumerate(classes)}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5.2), squeeze=False)
    for ax, (title, (points, silhouette)) in zip(axes[0], panels.items()):
        for c in classes:
            idx = [i for i, label in enumerate(labels) if label == c]
            ax.scatter(points[idx, 0], points[idx, 1], s=9, color=colours[c], label=c)
        ax.set_title(f"{title}\nsilhouette (cosine) {silhouette:.3f}", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0][-1].legend(fontsize=7, loc="best", markerscale=1.5)
    fig.tight_layout()
    return _save(fig, path)


def save_line_plot(points: Mapping[str, Sequence[tuple[float, float]]], xlabel: str, ylabel: str,
                   path: str | Path, title: str = "") -> Path:
    """One line per series of (x, y) points, e.g. STS average against p_mar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name, series in points.items():
        xs, ys = zip(*sorted(series))
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(path)
    return path
