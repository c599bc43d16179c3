"""MTEB evaluation on local copies of the data, scored by mteb's own code.

Why: the paper reports MTEB numbers, so the metrics must come from mteb itself (Spearman of cosine
similarity for STS, accuracy of mteb's logistic-regression protocol for classification, nDCG@10
for retrieval), but this project runs offline. Each task here subclasses mteb's own task class (so
its metadata, main score and evaluation code are mteb's) and only replaces ``load_data`` with a
reader of the files under ``data_dir`` (layout: ``shared/README.md``, ``data/eval``).

Public API: ``TASKS``, ``get_task``, ``MtebEncoder``, ``run_tasks``, ``results_markdown``.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import datasets
import mteb
import numpy as np
from datasets import Dataset, DatasetDict
from mteb.models import ModelMeta
from mteb.models.abs_encoder import AbsEncoder
from mteb.tasks.classification.eng.banking77_classification import Banking77Classification
from mteb.tasks.retrieval.eng.sci_fact_retrieval import SciFact
from mteb.tasks.sts.eng.sickr_sts import SickrSTS
from mteb.tasks.sts.eng.sts_benchmark_sts import STSBenchmarkSTS
from mteb.tasks.sts.multilingual.sts17_crosslingual_sts import STS17Crosslingual

from unirag.evaluation.files import read_jsonl

# With ``limit`` a retrieval corpus keeps every document judged for the kept queries plus this many
# other documents per kept query (at least RETRIEVAL_MIN_DISTRACTORS), sampled with a fixed seed.
# Scores on such a reduced corpus are higher than on the full one: use limits for smoke runs only.
RETRIEVAL_DISTRACTORS_PER_QUERY = 20
RETRIEVAL_MIN_DISTRACTORS = 100


# ----------------------------------------------------------------------------- readers


def _read_sts(path: Path, limit: int | None) -> Dataset:
    """First ``limit`` pairs of a ``sentence1, sentence2, score`` TSV (QUOTE_NONE: text has quotes)."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    rows = rows[:limit] if limit else rows
    return Dataset.from_dict(
        {
            "sentence1": [r["sentence1"] for r in rows],
            "sentence2": [r["sentence2"] for r in rows],
            "score": [float(r["score"]) for r in rows],
        }
    )


def _sample(n: int, k: int | None, seed: int) -> list[int]:
    """Sorted seeded sample of k of range(n) (all of it when k is None or >= n)."""
    if not k or k >= n:
        return list(range(n))
    return sorted(np.random.default_rng(seed).choice(n, size=k, replace=False).tolist())


# ----------------------------------------------------------------------------- tasks


class _LocalTask:
    """Mixin put before an mteb task class: read local files instead of the Hugging Face Hub.

    ``limit`` shortens the evaluation split for quick runs (see each ``_read``). The mteb metadata
    (task name, main score, prompts) stays the original one, except where a subclass says otherwise.
    """

    def __init__(self, data_dir: str | Path, limit: int | None = None, seed: int = 42) -> None:
        super().__init__(seed=seed)
        self.data_dir = Path(data_dir)
        self.limit = limit

    def load_data(self, num_proc: int | None = None, **kwargs: Any) -> None:
        if self.data_loaded:
            return
        self.dataset = {self.hf_subsets[0]: self._read()}
        self.data_loaded = True

    def check_if_dataset_is_superseded(self) -> None:
        """Silenced: we run the original versions (as the paper did) on purpose."""

    def _read(self) -> Any:
        raise NotImplementedError


class _LocalSTS(_LocalTask):
    files: dict[str, str]  # split -> file under data_dir; ``limit`` keeps the first N pairs

    def _read(self) -> DatasetDict:
        return DatasetDict({s: _read_sts(self.data_dir / f, self.limit) for s, f in self.files.items()})


class LocalSTSBenchmark(_LocalSTS, STSBenchmarkSTS):
    files = {"test": "sts/STSBenchmark-test.tsv"}


class LocalSTSBenchmarkDev(_LocalSTS, STSBenchmarkSTS):
    """STSBenchmark's validation split, for choosing settings without touching the test split."""

    metadata = STSBenchmarkSTS.metadata.model_copy(
        update={"name": "STSBenchmark-dev", "eval_splits": ["validation"], "superseded_by": None}
    )
    files = {"validation": "sts/STSBenchmark-dev.tsv"}


class LocalSICKR(_LocalSTS, SickrSTS):
    files = {"test": "sts/SICK-R-test.tsv"}


class LocalSTS17(_LocalSTS, STS17Crosslingual):
    """STS17 restricted to its en-en subset (the only one the paper's English models are run on)."""

    files = {"test": "sts/STS17-en-en-test.tsv"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hf_subsets = ["en-en"]


class LocalBanking77(_LocalTask, Banking77Classification):
    """Banking77 with mteb's protocol (logistic regression on 8 train examples/label, 10 runs).

    ``limit`` keeps a seeded random sample of N test examples: the file is sorted by label, so its
    first N rows would hold one or two intents only.
    """

    def _read(self) -> DatasetDict:
        split = {}
        for name, limit in (("train", None), ("test", self.limit)):
            rows = read_jsonl(self.data_dir / f"classification/Banking77-{name}.jsonl")
            rows = [rows[i] for i in _sample(len(rows), limit, self.seed)]
            split[name] = Dataset.from_dict(
                {"text": [r["text"] for r in rows], "label": [r["label"] for r in rows]}
            )
        return DatasetDict(split)


class LocalSciFact(_LocalTask, SciFact):
    """SciFact from a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv).

    ``limit`` keeps the first N judged queries (qrels order), every document judged for them and a
    seeded sample of other documents (``RETRIEVAL_DISTRACTORS_PER_QUERY`` per query, at least
    ``RETRIEVAL_MIN_DISTRACTORS``).
    """

    def _read(self) -> dict[str, dict[str, Any]]:
        root = self.data_dir / "retrieval/scifact"
        qrels: dict[str, dict[str, int]] = {}
        with open(root / "qrels/test.tsv", encoding="utf-8", newline="") as f:
            for r in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                qrels.setdefault(str(r["query-id"]), {})[str(r["corpus-id"])] = int(float(r["score"]))
        if self.limit:
            qrels = dict(list(qrels.items())[: self.limit])
        queries = [q for q in read_jsonl(root / "queries.jsonl") if str(q["_id"]) in qrels]
        corpus = read_jsonl(root / "corpus.jsonl")
        if self.limit:
            judged = {d for docs in qrels.values() for d in docs}
            others = [i for i, d in enumerate(corpus) if str(d["_id"]) not in judged]
            n = max(RETRIEVAL_MIN_DISTRACTORS, RETRIEVAL_DISTRACTORS_PER_QUERY * len(qrels))
            keep = {others[i] for i in _sample(len(others), n, self.seed)}
            corpus = [d for i, d in enumerate(corpus) if str(d["_id"]) in judged or i in keep]
        return {
            "test": {
                "corpus": Dataset.from_dict(
                    {
                        "id": [str(d["_id"]) for d in corpus],
                        "title": [d.get("title") or "" for d in corpus],
                        "text": [d["text"] for d in corpus],
                    }
                ),
                "queries": Dataset.from_dict(
                    {"id": [str(q["_id"]) for q in queries], "text": [q["text"] for q in queries]}
                ),
                "relevant_docs": qrels,
                "top_ranked": None,
            }
        }


TASKS: dict[str, type[_LocalTask]] = {
    "STSBenchmark": LocalSTSBenchmark,
    "STSBenchmark-dev": LocalSTSBenchmarkDev,
    "SICK-R": LocalSICKR,
    "STS17": LocalSTS17,
    "Banking77Classification": LocalBanking77,
    "SciFact": LocalSciFact,
}


def get_task(name: str, data_dir: str | Path, limit: int | None = None) -> Any:
    """An mteb task object named ``name`` (a key of ``TASKS``) that reads from ``data_dir``."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name](data_dir, limit=limit)


# ----------------------------------------------------------------------------- model wrapper


class MtebEncoder(AbsEncoder):
    """Adapts an object with ``embed(texts, pooling, batch_size, instruction, normalize)`` and ``name``
    (``unirag.model.unimodel.UniModel``) to mteb 2's encoder protocol.

    ``instructions`` maps a task name (or an mteb task type such as ``"Retrieval"``) to either a
    string used for every input of the task, or ``{"query": ..., "document": ...}`` to treat the two
    sides of retrieval differently (inputs without a side, as in STS, count as queries). The string
    ``"mteb"`` uses each task's prompt from mteb's metadata instead. Embeddings are L2-normalised and
    compared by cosine, as mteb's main scores assume.
    """

    def __init__(
        self,
        encoder: Any,
        pooling: str = "eos",
        instructions: Mapping[str, str | Mapping[str, str]] | str | None = None,
        batch_size: int = 32,
    ) -> None:
        self.model = encoder
        self.pooling = pooling
        self.instructions = instructions
        self.batch_size = batch_size
        self.mteb_model_meta = self._model_meta()

    def _model_meta(self) -> ModelMeta:
        """mteb swaps a model without a real ``ModelMeta`` for an empty one and then fails, so build it.

        The pooling goes into ``experiment_kwargs``, mteb's field for ablations, so two poolings of
        one model never share a results namespace.
        """
        name = str(self.model.name)
        return ModelMeta(
            loader=None,
            name=name if "/" in name else f"unirag/{name}",  # mteb requires "org/name"
            revision=str(getattr(self.model, "revision", None) or "local"),
            release_date=None,
            languages=["eng-Latn"],
            n_parameters=getattr(self.model, "n_parameters", None),
            memory_usage_mb=None,
            max_tokens=getattr(self.model, "max_length", None),
            embed_dim=getattr(self.model, "dim", None),
            license=None,
            open_weights=True,
            public_training_code=None,
            public_training_data=None,
            framework=["PyTorch"],
            similarity_fn_name="cosine",
            use_instructions=bool(self.instructions),
            training_datasets=None,
            modalities=["text"],
            experiment_kwargs={"pooling": self.pooling},
        )

    def instruction_for(self, task_metadata: Any, prompt_type: Any = None) -> str | None:
        """The instruction for one task and side (``prompt_type``: mteb's query/document or None)."""
        side = getattr(prompt_type, "value", prompt_type) or "query"
        if self.instructions == "mteb":
            found = task_metadata.prompt
        elif self.instructions:
            found = self.instructions.get(task_metadata.name, self.instructions.get(task_metadata.type))
        else:
            found = None
        if isinstance(found, Mapping):
            found = found.get(side)
        return found or None

    def encode(
        self,
        inputs: Any,
        *,
        task_metadata: Any,
        hf_split: str,
        hf_subset: str,
        prompt_type: Any = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Embed all texts of mteb's DataLoader in one ``embed`` call (the encoder batches itself)."""
        texts = [text for batch in inputs for text in batch["text"]]
        emb = self.model.embed(
            texts,
            pooling=self.pooling,
            batch_size=int(kwargs.get("batch_size") or self.batch_size),
            instruction=self.instruction_for(task_metadata, prompt_type),
            normalize=True,
        )
        return np.asarray(emb, dtype=np.float32).reshape(len(texts), -1)


# ----------------------------------------------------------------------------- running


def run_tasks(
    encoder: Any,
    task_names: Sequence[str],
    data_dir: str | Path,
    pooling: str = "eos",
    limit: int | None = None,
    output_dir: str | Path | None = None,
    batch_size: int = 32,
    show_progress: bool = True,
    instructions: Mapping[str, str | Mapping[str, str]] | str | None = None,
) -> dict[str, dict[str, Any]]:
    """Evaluate ``encoder`` on the named tasks with ``mteb.evaluate``.

    ``encoder`` is wrapped in ``MtebEncoder(encoder, pooling, instructions, batch_size)``; an
    ``MtebEncoder`` passed in is used as it is (its own pooling and instructions win).

    Returns ``{task: {"main_score": points 0-100, "metric": mteb's main metric name (cosine_spearman,
    accuracy or ndcg_at_10), "split", "n": evaluation size, "scores": mteb's full score dicts}}`` and,
    with ``output_dir``, writes them to ``<output_dir>/mteb_<model>_<pooling>.json``.

    mteb's result cache is off (``cache=None``, ``overwrite_strategy="always"``): its key is the
    model's name and revision, which does not change when an adapter is retrained, so a cache
    could hand back stale scores. No CO2 tracker, nothing is downloaded.
    """
    model = encoder if isinstance(encoder, MtebEncoder) else MtebEncoder(
        encoder, pooling=pooling, instructions=instructions, batch_size=batch_size
    )
    tasks = [get_task(name, data_dir, limit) for name in task_names]
    sizes = {}
    for task in tasks:  # loaded here (and so kept by mteb) to report the evaluation size
        task.load_data()
        sizes[task.metadata.name] = _eval_size(task)
    bars_were_on = datasets.is_progress_bar_enabled()
    if not show_progress:
        datasets.disable_progress_bars()
    try:
        with warnings.catch_warnings():
            # precision/recall of classes absent from a small (limited) test set: not our metric
            warnings.filterwarnings("ignore", message=".*(Precision|Recall) is ill-defined.*")
            result = mteb.evaluate(
                model,
                tasks,
                cache=None,
                overwrite_strategy="always",
                co2_tracker=False,
                encode_kwargs={"batch_size": batch_size, "show_progress_bar": show_progress},
                show_progress_bar=show_progress,
            )
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
    out: dict[str, dict[str, Any]] = {}
    for task, task_result in zip(tasks, result.task_results, strict=True):
        split = task.eval_splits[0]
        subsets = task_result.scores[split]
        out[task.metadata.name] = {
            "main_score": 100.0 * float(np.mean([s["main_score"] for s in subsets])),
            "metric": task.metadata.main_score,
            "split": split,
            "n": sizes[task.metadata.name],
            "scores": task_result.scores,
        }
        task.unload_data()
    if output_dir is not None:
        meta = model.mteb_model_meta
        path = Path(output_dir) / f"mteb_{_slug(meta.name)}_{_slug(model.pooling)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "model": meta.name,
            "pooling": model.pooling,
            "instructions": model.instructions,
            "limit": limit,
            "mteb_version": mteb.__version__,
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "results": out,
        }
        path.write_text(json.dumps(record, indent=2, default=_json_default), encoding="utf-8")
    return out


def _eval_size(task: Any) -> int:
    """Examples in the evaluation split: pairs (STS), test texts (classification), queries (retrieval)."""
    data = task.dataset[task.hf_subsets[0]][task.eval_splits[0]]
    return len(data["queries"]) if isinstance(data, dict) else len(data)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", str(text)).strip("-")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


# ----------------------------------------------------------------------------- reporting


def results_markdown(rows: Mapping[str, Mapping[str, Any]], digits: int = 2) -> str:
    """Markdown table in the paper's layout: one row per method, one column per task, Average last.

    Cells are 0-100 scores (a float, or a ``run_tasks`` entry with ``main_score``). Tasks are
    ordered as first seen. A method missing a task gets "–" there and in Average, since an average
    over fewer tasks would not be comparable.
    """

    def value(v: Any) -> float:
        return float(v["main_score"] if isinstance(v, Mapping) else v)

    tasks = list(dict.fromkeys(t for scores in rows.values() for t in scores))
    lines = [
        "| Method | " + " | ".join(tasks) + " | Average |",
        "|---|" + "---:|" * (len(tasks) + 1),
    ]
    for method, scores in rows.items():
        vals = [value(scores[t]) if t in scores else math.nan for t in tasks]
        avg = float(np.mean(vals)) if vals else math.nan
        cells = ["–" if math.isnan(v) else f"{v:.{digits}f}" for v in [*vals, avg]]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
