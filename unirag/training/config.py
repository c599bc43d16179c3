"""Every training knob in one dataclass. Defaults equal the UniMAE paper; recipes only override.

Recipes are YAML files shipped in the package, `unirag/training/recipes/` (e.g. `cpu-quick.yaml`),
holding a subset of these fields; `--recipe` also takes the path of a YAML file of your own, and
`--key value` on the command line overrides a recipe.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from unirag.errors import UniragError

RECIPES = "recipes"  # package data of unirag.training: <name>.yaml per recipe
OBJECTIVES = ("unimae", "simcse", "gem", "pairs")
ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class TrainConfig:
    objective: str = "unimae"          # unimae (MAR + MRC) | simcse | gem | pairs (question -> passage)
    # optimisation (paper: lr 1e-4 constant, 100 steps, global batch 32, length 512)
    steps: int = 100
    batch_size: int = 32               # global batch = micro_batch_size * accumulation * devices
    micro_batch_size: int = 8
    lr: float = 1e-4
    lr_schedule: str = "constant"
    warmup_steps: int = 0
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_length: int = 512
    min_tokens: int = 8                # shorter documents are dropped
    text_unit: str = "document"        # document | sentence (each sentence its own example)
    seed: int = 42
    precision: str = "auto"            # auto | fp32 | bf16 (auto: bf16 where the hardware is fast at it)
    # adapter (paper: LoRA r=16, alpha=32 on attention and MLP)
    full_finetune: bool = False        # domain post-training may train all weights instead
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_targets: list[str] = field(default_factory=lambda: list(ALL_LINEAR))
    # UniMAE: L = alpha * L_MAR + L_MRC
    alpha: float = 0.1
    p_mar: float = 0.5
    p_mrc: float = 0.5
    mask_token: str = "auto"           # a token string, or auto: see data.choose_mask_token
    decoder_layers: int = 1
    # unirag's addition, not in the paper (0 = off): the first `anchor_rows` rows of every micro-batch
    # stay uncorrupted and their next-token distribution is pulled towards the frozen base model's
    # (KL, teacher = adapter switched off), so that generation is kept. Costs one no-grad forward of
    # those rows.
    anchor_weight: float = 0.0
    anchor_rows: int = 2
    decoder_heads: int = 0             # 0: the LLM's number of attention heads
    # SimCSE (run after UniMAE, from its adapter). Its positives differ only by dropout: LoRA's
    # dropout, plus attention-probability dropout in the LLM (Llama's config has 0; BERT's is 0.1).
    temperature: float = 0.05
    attention_dropout: float = 0.0
    # dropout: the second view is the same text again; masked: the second view has p_mar of its
    # tokens replaced by the mask token (a harder positive when dropout views are near-identical)
    simcse_positive: str = "dropout"
    # pairs: a .jsonl of {"query", "passage"[, "negative"]}; each query must pick its passage among
    # the micro-batch's passages and negatives (InfoNCE at `temperature`); questions are cut here
    query_length: int = 64
    # text embedded before each question (an asymmetric cue; passages get none). The adapter
    # records it, and retrieval embeds users' questions after the same text.
    query_prefix: str = ""
    # the decoder layer whose EOS state (through the final norm) is the embedding the losses train
    # (unimae, simcse, pairs); 0: the last. The adapter records it, and UniModel embeds there.
    embedding_layer: int = 0
    # GEM
    gem_tokens: int = 1
    gem_contrastive: float = 0.0       # weight of an optional SimCSE term on the summary state
    # bookkeeping
    save_steps: int = 25
    max_minutes: float = 0.0           # a time budget: stop after the step that crosses it (0 = none)
    logging_steps: int = 1
    recipe: str = "paper"

    def accumulation(self, world_size: int = 1) -> int:
        """Gradient-accumulation steps so that micro x accumulation x devices = batch_size."""
        per_step = self.micro_batch_size * world_size
        if self.batch_size % per_step:
            raise UniragError(f"batch_size {self.batch_size} is not a multiple of micro_batch_size "
                              f"{self.micro_batch_size} x {world_size} device(s)")
        return self.batch_size // per_step

    def validate(self) -> "TrainConfig":
        if self.objective not in OBJECTIVES:
            raise UniragError(f"unknown objective {self.objective!r}; choose {', '.join(OBJECTIVES)}")
        if self.text_unit not in ("document", "sentence"):
            raise UniragError(f"text_unit must be document or sentence, not {self.text_unit!r}")
        if self.simcse_positive not in ("dropout", "masked"):
            raise UniragError(f"simcse_positive must be dropout or masked, not {self.simcse_positive!r}")
        if self.batch_size % self.micro_batch_size:
            raise UniragError("batch_size must be a multiple of micro_batch_size")
        for name in ("p_mar", "p_mrc", "lora_dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise UniragError(f"{name} must be between 0 and 1")
        if self.anchor_weight < 0 or self.anchor_rows < 0:
            raise UniragError("anchor_weight and anchor_rows must be >= 0")
        if self.anchor_weight > 0 and self.full_finetune:
            raise UniragError("anchor_weight needs LoRA (the base model is the adapter switched off)")
        if self.embedding_layer < 0:
            raise UniragError("embedding_layer must be >= 0 (0: the last layer)")
        if self.embedding_layer and self.objective == "gem":
            raise UniragError("embedding_layer: GEM embeds at its summary tokens of the last layer; leave it 0")
        if self.steps < 1 or self.max_length < 8:
            raise UniragError("steps must be >= 1 and max_length >= 8")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _coerce(name: str, value, current):
    """Turn a command-line string (or YAML value) into the field's type."""
    if isinstance(current, bool):
        if isinstance(value, bool):
            return value
        if str(value).lower() in ("1", "true", "yes", "on"):
            return True
        if str(value).lower() in ("0", "false", "no", "off"):
            return False
        raise UniragError(f"{name} takes true or false, not {value!r}")
    if isinstance(current, list):
        return value if isinstance(value, list) else [v for v in str(value).split(",") if v]
    try:
        return type(current)(value)
    except (TypeError, ValueError):
        raise UniragError(f"{name} takes a {type(current).__name__}, not {value!r}") from None


def recipe_names() -> list[str]:
    """The recipes shipped with unirag (`unirag/training/recipes/*.yaml`), sorted."""
    folder = resources.files(__package__) / RECIPES
    return sorted(p.name[:-len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def recipe_text(recipe: str) -> tuple[str, str]:
    """(name, YAML text) of a shipped recipe by name, or of a YAML file by path.

    A bare name ("cpu-quick") is a shipped recipe; anything with a suffix or a folder in it
    ("mine.yaml", "./recipes/mine") is a file path.
    """
    path = Path(recipe).expanduser()
    if path.suffix or "/" in recipe or "\\" in recipe:
        if not path.is_file():
            raise UniragError(f"recipe file {recipe} does not exist; pass a YAML file or one of the shipped "
                              f"recipes: {', '.join(recipe_names())}")
        return path.stem, path.read_text(encoding="utf-8")
    shipped = resources.files(__package__) / RECIPES / f"{recipe}.yaml"
    if not shipped.is_file():
        raise UniragError(f"unknown recipe {recipe!r}; known recipes: {', '.join(recipe_names())} "
                          "(or the path of a YAML file)")
    return recipe, shipped.read_text(encoding="utf-8")


def load_config(recipe: str = "paper", overrides: dict | None = None) -> TrainConfig:
    """A recipe (a name in unirag/training/recipes or a YAML path) plus overrides, validated."""
    import yaml

    name, text = recipe_text(recipe)
    values = yaml.safe_load(text) or {}
    if not isinstance(values, dict):
        raise UniragError(f"recipe {recipe!r} is not a YAML mapping of training options")
    values.setdefault("recipe", name)
    values.update(overrides or {})
    config = TrainConfig()
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    for key, value in values.items():
        key = key.replace("-", "_")
        if key not in fields:
            raise UniragError(f"unknown training option {key!r}")
        setattr(config, key, _coerce(key, value, getattr(config, key)))
    return config.validate()
