"""Small ablations of the UniMAE recipe: train each variant, then score embedding and generation.

Each variant is a name plus `key=value` overrides of a recipe. For every variant this trains an
adapter (skipped if its output folder is already complete), then measures in the same process:
STS Spearman with EOS pooling (mteb's scorer, first `--limit` pairs) and wikitext-2 perplexity
(first `--ppl-tokens` tokens) against the base model's perplexity under the same settings.
One JSON line per variant goes to `<out>/results.jsonl`; a Markdown table is printed at the end.

    python train/ablate.py --recipe cpu-quick --set steps=30 \
        plain: anchor1:anchor_weight=1 anchor5:anchor_weight=5

`init_adapter=FOLDER` in a variant starts it from an existing adapter (e.g. to continue one).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

from unirag import UniModel
from unirag.evaluation.lm import run_lm_eval
from unirag.evaluation.mteb_tasks import run_tasks
from unirag.training.config import load_config
from unirag.training.trainer import train


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    """`name:key=value,key=value` -> (name, overrides)."""
    name, _, rest = text.partition(":")
    overrides = dict(item.split("=", 1) for item in rest.split(",") if item)
    return name, overrides


def evaluate(model: str, adapter: str, args) -> dict:
    uni = UniModel.load(model, adapter, precision="fp32")
    sts = run_tasks(uni, args.tasks.split(","), Path(args.data), pooling="eos", limit=args.limit,
                    show_progress=False)
    lm = run_lm_eval(uni, Path(args.data), ["wikitext2"], limit_tokens=args.ppl_tokens,
                     max_length=args.window, stride=args.window, show_progress=False)
    del uni
    gc.collect()
    return {"sts": {t: round(r["main_score"], 2) for t, r in sts.items()},
            "perplexity": round(lm["wikitext2"]["perplexity"], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("variants", nargs="+", help="name:key=value,... (name: alone = the recipe itself)")
    parser.add_argument("--recipe", default="cpu-quick")
    parser.add_argument("--set", default="", help="overrides shared by all variants, key=value,...")
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--corpus", default="../shared/data/corpus/wiki_vital_extracts.txt")
    parser.add_argument("--data", default="../shared/data/eval")
    parser.add_argument("--tasks", default="STSBenchmark-dev,SICK-R")
    parser.add_argument("--limit", type=int, default=500, help="STS pairs per task")
    parser.add_argument("--ppl-tokens", type=int, default=4096)
    parser.add_argument("--window", type=int, default=1024, help="perplexity window = stride")
    parser.add_argument("--out", default="runs/ablate")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shared = parse_variant(":" + args.set)[1]
    base_file = out / f"base-ppl-{args.ppl_tokens}-{args.window}.json"
    if not base_file.is_file():
        base_file.write_text(json.dumps(evaluate(args.model, "none", args)))
    base = json.loads(base_file.read_text())
    print(f"base: {base}", flush=True)

    rows = []
    for variant in args.variants:
        name, overrides = parse_variant(variant)
        overrides = {**shared, **overrides}
        folder = out / name
        start = time.perf_counter()
        if not (folder / "unirag.json").is_file():
            resume = (folder / "checkpoints").is_dir()
            config = {k: v for k, v in overrides.items() if k != "init_adapter"}  # a train() argument
            train(load_config(args.recipe, config), args.model, args.corpus, str(folder), resume=resume,
                  init_adapter=overrides.get("init_adapter"))
        train_s = time.perf_counter() - start
        info = json.loads((folder / "unirag.json").read_text())
        scores = evaluate(args.model, str(folder), args)
        row = {"name": name, "recipe": args.recipe, "overrides": overrides, "train_seconds": round(train_s, 1),
               "final_losses": info.get("final_losses"), **scores,
               "ppl_change_pct": round(100 * (scores["perplexity"] / base["perplexity"] - 1), 2)}
        with open(out / "results.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
        rows.append(row)

    tasks = args.tasks.split(",")
    print("\n| variant | " + " | ".join(tasks) + " | ppl | ppl change |")
    print("|---|" + "---:|" * (len(tasks) + 2))
    print("| base | " + " | ".join(str(base["sts"][t]) for t in tasks) + f" | {base['perplexity']} | |")
    for r in rows:
        print(f"| {r['name']} | " + " | ".join(str(r["sts"][t]) for t in tasks)
              + f" | {r['perplexity']} | {r['ppl_change_pct']:+.1f}% |")


if __name__ == "__main__":
    main()
