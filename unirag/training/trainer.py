"""The UniMAE trainer: a Hugging Face `Trainer` computing the joint loss.

Built on `transformers.Trainer` so that the same code runs on one CPU, on a GPU, and data-parallel
under `accelerate launch` / `torchrun` (FSDP included), with its checkpointing and resume.

What is trained is `UniMAEModule`: the LLM (with LoRA, or all weights) plus the objective's
training-only parts (the MRC tiny decoder). Checkpoints hold every trainable tensor, the tiny
decoder included, so `--resume` continues exactly; the final output is a plain PEFT adapter
folder (no tiny decoder) with `unirag.json` and a model card.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
from transformers import Trainer, TrainerCallback, TrainerState, TrainingArguments

from unirag.model.adapters import UNIRAG_JSON, base_fingerprint, read_record
from unirag.errors import UniragError
from unirag.training.config import TrainConfig
from unirag.training.objectives import (IGNORE_INDEX, TinyDecoder, eos_hidden, gem_attention_mask, gem_embedding, gem_insert,
                         gem_labels, mar_corrupt, mar_loss, mrc_loss, simcse_loss, anchor_loss)

CHECKPOINTS = "checkpoints"
TRAINABLE_FILE = "model.safetensors"  # the name Trainer looks for when resuming


class UniMAEModule(nn.Module):
    """LLM + training-only heads; forward returns the loss and its parts."""

    _keys_to_ignore_on_save = None

    def __init__(self, llm, config: TrainConfig, mask_token_id: int, summary_ids: list[int] | None = None):
        super().__init__()
        self.llm = llm
        self.config = config
        self.mask_token_id = mask_token_id
        self.summary_ids = summary_ids or []
        causal_lm = self.causal_lm
        hidden = causal_lm.config.hidden_size
        for module in causal_lm.modules():
            if hasattr(module, "attention_dropout"):  # transformers' attention layers read it when training
                module.attention_dropout = config.attention_dropout
        self.decoder = None
        if config.objective == "unimae":
            heads = config.decoder_heads or causal_lm.config.num_attention_heads
            self.decoder = TinyDecoder(hidden, causal_lm.config.vocab_size, heads, config.max_length,
                                       num_layers=config.decoder_layers,
                                       lm_head_weight=causal_lm.get_output_embeddings().weight)

    @property
    def causal_lm(self):
        """The *ForCausalLM module (LoRA layers injected in place when PEFT wraps it)."""
        return self.llm.get_base_model() if hasattr(self.llm, "get_base_model") else self.llm

    def hidden(self, input_ids, attention_mask):
        """(last-layer states, embedding-layer states), both after the final norm: what generation
        reads, and exactly what UniModel.embed pools (one tensor where it embeds at the last layer)."""
        decoder = self.causal_lm.base_model
        layer = self.config.embedding_layer
        if not layer or layer == decoder.config.num_hidden_layers:
            states = decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return states, states
        out = decoder(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        return out.last_hidden_state, decoder.norm(out.hidden_states[layer])

    def forward(self, input_ids, attention_mask, seed: int, query_ids=None, query_mask=None,
                negative_ids=None, negative_mask=None):
        generator = torch.Generator(device=input_ids.device).manual_seed(seed)
        if self.config.objective == "pairs":
            return self.pairs_forward(input_ids, attention_mask, query_ids, query_mask, negative_ids, negative_mask)
        if self.config.objective == "simcse":
            return self.simcse_forward(input_ids, attention_mask, generator)
        if self.config.objective == "gem":
            return self.gem_forward(input_ids, attention_mask, generator)
        corrupted, _ = mar_corrupt(input_ids, attention_mask, self.mask_token_id, self.config.p_mar,
                                   generator=generator)
        n_anchor = self.anchor_rows(input_ids)
        corrupted[:n_anchor] = input_ids[:n_anchor]  # anchor rows stay clean
        states, embedded = self.hidden(corrupted, attention_mask)
        head = self.causal_lm.get_output_embeddings()
        parts = {}
        loss = torch.zeros((), device=input_ids.device)
        if self.config.alpha > 0 and n_anchor < len(input_ids):
            parts["mar"] = mar_loss(head(states[n_anchor:]), input_ids[n_anchor:], attention_mask[n_anchor:])
            loss = loss + self.config.alpha * parts["mar"]
        if n_anchor:
            parts["anchor"] = self.anchor_term(states, input_ids, attention_mask, n_anchor)
            loss = loss + self.config.anchor_weight * parts["anchor"]
        h_eos = eos_hidden(embedded, attention_mask)
        token_embeds = self.causal_lm.get_input_embeddings()(input_ids).detach()
        logits = self.decoder(h_eos, token_embeds, attention_mask, self.config.p_mrc, generator)
        parts["mrc"] = mrc_loss(logits, input_ids, attention_mask)
        loss = loss + parts["mrc"]
        return {"loss": loss, **{k: v.detach() for k, v in parts.items()}}

    def anchor_rows(self, input_ids) -> int:
        return min(self.config.anchor_rows, len(input_ids)) if self.config.anchor_weight > 0 else 0

    def anchor_term(self, states, input_ids, attention_mask, n: int) -> torch.Tensor:
        """KL of the first n (clean) rows' next-token distributions to the base model's
        (teacher = the same network with the adapter switched off, and without dropout)."""
        training = self.llm.training
        self.llm.eval()
        try:
            with torch.no_grad(), self.llm.disable_adapter():
                teacher = self.causal_lm(input_ids=input_ids[:n], attention_mask=attention_mask[:n]).logits
        finally:
            self.llm.train(training)
        head = self.causal_lm.get_output_embeddings()
        return anchor_loss(head(states[:n]), teacher, attention_mask[:n])

    def simcse_forward(self, input_ids, attention_mask, generator):
        """Unsupervised SimCSE: two passes = two dropout masks (LoRA dropout), positives on the
        diagonal, in-batch negatives; plus the anchor term on the first view if it is on.
        With simcse_positive "masked" the second pass reads the text with p_mar of it masked."""
        states, embedded = self.hidden(input_ids, attention_mask)
        a = eos_hidden(embedded, attention_mask)
        second = input_ids
        if self.config.simcse_positive == "masked":
            second, _ = mar_corrupt(input_ids, attention_mask, self.mask_token_id, self.config.p_mar,
                                    generator=generator)
        b = eos_hidden(self.hidden(second, attention_mask)[1], attention_mask)
        return self.with_anchor("simcse", simcse_loss(a, b, self.config.temperature), states, input_ids,
                                attention_mask)

    def pairs_forward(self, input_ids, attention_mask, query_ids, query_mask, negative_ids=None, negative_mask=None):
        """Question -> passage contrast: each question's EOS state must pick its own passage's
        among the micro-batch's (in-batch negatives) and the rows' hard negatives, if any, so
        questions land near the passages that answer them; plus the anchor term on the passages."""
        states, embedded = self.hidden(input_ids, attention_mask)
        passages = eos_hidden(embedded, attention_mask)
        if negative_ids is not None:
            negatives = eos_hidden(self.hidden(negative_ids, negative_mask)[1], negative_mask)
            passages = torch.cat([passages, negatives])  # row i's target stays column i
        questions = eos_hidden(self.hidden(query_ids, query_mask)[1], query_mask)
        return self.with_anchor("pairs", simcse_loss(questions, passages, self.config.temperature), states,
                                input_ids, attention_mask)

    def with_anchor(self, name: str, contrast, states, input_ids, attention_mask) -> dict:
        """A contrastive loss plus the anchor term on the first clean rows, if it is on."""
        parts, loss = {name: contrast.detach()}, contrast
        n_anchor = self.anchor_rows(input_ids)
        if n_anchor:
            anchor = self.anchor_term(states, input_ids, attention_mask, n_anchor)
            parts["anchor"] = anchor.detach()
            loss = loss + self.config.anchor_weight * anchor
        return {"loss": loss, **parts}

    def gem_forward(self, input_ids, attention_mask, generator):
        """GEM: summary tokens inserted at a random place; text after them sees the text before
        only through them; plain next-token loss (plus optional SimCSE on the summary state)."""
        k = len(self.summary_ids)
        ids, mask, start = gem_insert(input_ids, attention_mask, self.summary_ids, generator)
        dtype = self.causal_lm.get_input_embeddings().weight.dtype
        mask4d = gem_attention_mask(mask, start, k, dtype=dtype)
        states = self.causal_lm.base_model(input_ids=ids, attention_mask=mask4d).last_hidden_state
        logits = self.causal_lm.get_output_embeddings()(states)
        labels = gem_labels(ids, mask, start, k)
        lm = nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]),
                                         labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX)
        parts = {"gem_lm": lm.detach()}
        loss = lm
        if self.config.gem_contrastive > 0:
            again = self.causal_lm.base_model(input_ids=ids, attention_mask=mask4d).last_hidden_state
            contrast = simcse_loss(gem_embedding(states, start, k), gem_embedding(again, start, k),
                                   self.config.temperature)
            parts["gem_simcse"] = contrast.detach()
            loss = loss + self.config.gem_contrastive * contrast
        return {"loss": loss, **parts}


def last_complete_checkpoint(ckpt_dir: Path) -> str | None:
    """The newest checkpoint folder that was written to the end.

    Trainer writes trainer_state.json last, so a folder without it (or without the weights) was
    cut short, e.g. by SIGKILL while saving: skip it and resume from the one before."""
    def step(folder: Path) -> int:
        return int(folder.name.rsplit("-", 1)[1]) if folder.name.rsplit("-", 1)[-1].isdigit() else -1

    for folder in sorted(Path(ckpt_dir).glob("checkpoint-*"), key=step, reverse=True):
        if step(folder) >= 0 and (folder / "trainer_state.json").is_file() and (folder / TRAINABLE_FILE).is_file():
            return str(folder)
    return None


class StopOnSignal(TrainerCallback):
    """Ctrl-C (SIGINT) or SIGTERM: finish the current step, save a checkpoint, stop cleanly.

    A second Ctrl-C interrupts at once, as usual.
    """

    def __init__(self):
        self.requested = False

    def request(self, *_):
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print("\nunirag: stopping after this step and saving a checkpoint (Ctrl-C again to abort)")

    def on_step_end(self, args, state, control, **kwargs):
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control


class StopAfterMinutes(TrainerCallback):
    """A time budget (`max_minutes`): stop after the step that crosses it and write the adapter.

    The run then ends early but normally (fewer steps than `steps`, recorded as `steps_done`)."""

    def __init__(self, minutes: float):
        self.seconds = minutes * 60
        self.started = 0.0  # set when training begins (after data loading and, on resume, the checkpoint)
        self.hit = False

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        if self.seconds > 0 and time.time() - self.started >= self.seconds:
            self.hit = True
            control.should_training_stop = True
        return control


class UniMAETrainer(Trainer):
    """Trainer with the joint loss, deterministic per-step masking and small checkpoints."""

    def __init__(self, *args, unirag_meta: dict, **kwargs):
        super().__init__(*args, **kwargs)
        self.unirag_meta = unirag_meta
        self._seed_step, self._micro = -1, 0
        self._parts: dict[str, list[float]] = {}

    def _next_seed(self) -> int:
        """Masks depend only on (seed, step, micro-batch), so a resumed run draws the same."""
        step = self.state.global_step
        if step != self._seed_step:
            self._seed_step, self._micro = step, 0
        self._micro += 1
        # Numbered across processes as the data is dealt (process r gets micro-batches r, r + world,
        # ...), so N processes draw the masks one process draws for the same global batch.
        micro = (self._micro - 1) * self.args.world_size + self.args.process_index + 1
        return (self.args.seed * 1_000_003 + step * 10_007 + micro * 101) % (2**63)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        pairs = {k: inputs[k] for k in ("query_ids", "query_mask", "negative_ids", "negative_mask") if k in inputs}
        seed = self._next_seed()
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=devices):  # dropout too: drawn from the micro-batch's seed
            torch.manual_seed(seed)
            out = model(inputs["input_ids"], inputs["attention_mask"], seed=seed, **pairs)
        for key, value in out.items():
            if key != "loss":
                self._parts.setdefault(key, []).append(float(value))
        return (out["loss"], out) if return_outputs else out["loss"]

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            for key, values in self._parts.items():
                if values:
                    logs[f"loss_{key}"] = round(sum(values) / len(values), 4)
            self._parts = {}
        super().log(logs, start_time)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        """Load the trainable tensors back; the frozen base weights come from the base model."""
        from safetensors.torch import load_file

        model = model or self.model
        path = Path(resume_from_checkpoint) / TRAINABLE_FILE
        if not path.is_file():
            raise UniragError(f"checkpoint {resume_from_checkpoint} is incomplete ({TRAINABLE_FILE} missing)")
        result = model.load_state_dict(load_file(str(path)), strict=False)
        trainable = {n for n, p in model.named_parameters() if p.requires_grad}
        if result.unexpected_keys or trainable & set(result.missing_keys):
            raise UniragError(f"checkpoint {resume_from_checkpoint} does not match this model and recipe")

    def _save(self, output_dir: str | None = None, state_dict=None) -> None:
        """Checkpoint = every trainable tensor (LoRA + tiny decoder) in safetensors + metadata."""
        from safetensors.torch import save_file

        if not self.args.should_save:  # data-parallel: only the main process writes
            return
        output_dir = Path(output_dir or self.args.output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        model = self.accelerator.unwrap_model(self.model)
        tensors = {n: p.detach().cpu().contiguous() for n, p in model.named_parameters() if p.requires_grad}
        save_file(tensors, str(output_dir / TRAINABLE_FILE), metadata={"format": "pt"})
        (output_dir / UNIRAG_JSON).write_text(json.dumps(self.unirag_meta, indent=2))


def build_llm(base, config: TrainConfig, init_adapter: str | None = None, train_token_ids: list[int] | None = None):
    """Wrap the base model for training: LoRA (fresh or continued) or all weights.

    `train_token_ids` (GEM's summary tokens) also get trainable embedding rows, stored in the
    adapter (PEFT's trainable_token_indices), so the summary token can learn its role."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if config.full_finetune:
        for p in base.parameters():
            p.requires_grad_(True)
        return base
    if init_adapter:
        llm = PeftModel.from_pretrained(base, init_adapter, is_trainable=True)
        set_lora_dropout(llm, config.lora_dropout)
        return llm
    lora = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=config.lora_targets, task_type="CAUSAL_LM",
                      trainable_token_indices=list(train_token_ids) if train_token_ids else None)
    return get_peft_model(base, lora)


def set_lora_dropout(llm, p: float) -> None:
    """Use this run's lora_dropout on a continued adapter (PEFT keeps the one it was trained with).

    SimCSE's positives differ only by dropout, so its strength has to be the recipe's choice."""
    for module in llm.modules():
        dropouts = getattr(module, "lora_dropout", None)
        if isinstance(dropouts, nn.ModuleDict):
            for name in dropouts:
                dropouts[name] = nn.Dropout(p) if p > 0 else nn.Identity()
    for adapter_config in llm.peft_config.values():
        adapter_config.lora_dropout = p  # so the saved adapter_config.json says what was used


def write_output(module: UniMAEModule, tokenizer, out_dir: Path, meta: dict) -> None:
    """Write the final adapter (or full model) atomically: a temp folder renamed into place."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        module.llm.save_pretrained(tmp, safe_serialization=True)
        if module.config.full_finetune:
            tokenizer.save_pretrained(tmp)
        (tmp / UNIRAG_JSON).write_text(json.dumps(meta, indent=2))
        (tmp / "README.md").write_text(model_card(meta))
        checkpoints = out_dir / CHECKPOINTS
        if checkpoints.exists():
            os.replace(checkpoints, tmp / CHECKPOINTS)  # keep them with the result
        backup = out_dir.with_name(f".{out_dir.name}.old")
        if out_dir.exists():
            os.replace(out_dir, backup)
        os.replace(tmp, out_dir)
        shutil.rmtree(backup, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def lineage(init_adapter: str | Path) -> dict:
    """The record of the adapter a run continues (its unirag.json, with its own lineage), so the
    final adapter says how every stage of it was trained."""
    earlier = read_record(init_adapter)
    keys = ("name", "objective", "data", "examples", "mask_token", "config", "final_losses", "train_seconds",
            "steps_done", "continued_from")
    return {"path": str(init_adapter), **{k: earlier[k] for k in keys if k in earlier}}


def _stage_line(meta: dict) -> str:
    cfg = meta["config"]
    return (f"recipe `{cfg['recipe']}`; steps {_steps(meta)}, batch {cfg['batch_size']}, lr {cfg['lr']}, "
            f"max length {cfg['max_length']}, alpha {cfg['alpha']}, p_mar {cfg['p_mar']}, seed {cfg['seed']}; "
            f"data `{meta.get('data', '?')}`")


def _steps(meta: dict) -> str:
    """"120", or "22 of 1000 (time budget of 10 min)" for a run that a time budget ended."""
    cfg = meta["config"]
    done = meta.get("steps_done", cfg["steps"])
    return str(done) if done == cfg["steps"] else f"{done} of {cfg['steps']} (time budget of {cfg.get('max_minutes', 0):g} min)"


def _objective_line(cfg: dict, meta: dict) -> str:
    if cfg["objective"] == "gem":
        return (f"- objective: GEM, summary token(s) {', '.join(f'`{t}`' for t in meta.get('summary_tokens', []))}, "
                f"contrastive weight {cfg.get('gem_contrastive', 0.0)}")
    if cfg["objective"] == "pairs":
        return (f"- objective: question -> passage pairs, temperature {cfg.get('temperature')}, "
                f"anchor weight {cfg.get('anchor_weight')}")
    if cfg["objective"] == "simcse":
        return f"- objective: SimCSE, temperature {cfg.get('temperature')}, lora dropout {cfg.get('lora_dropout')}"
    return (f"- objective: alpha {cfg['alpha']}, p_mar {cfg['p_mar']}, p_mrc {cfg['p_mrc']}, "
            f"mask token `{meta['mask_token']}`")


def model_card(meta: dict) -> str:
    cfg = meta["config"]
    pooled_at = "the summary token's state" if cfg["objective"] == "gem" else "EOS pooling"
    lines = [
        f"# {meta['name']}",
        "",
        f"A unirag {cfg['objective']} adapter for `{meta['base_model']}`: {pooled_at} "
        f"(`{meta['pooling']}`) gives sentence embeddings; generation is kept.",
        "",
        f"- recipe: `{cfg['recipe']}`; steps {_steps(meta)}, batch {cfg['batch_size']}, lr {cfg['lr']}, "
        f"max length {cfg['max_length']}, seed {cfg['seed']}",
        _objective_line(cfg, meta),
        f"- data: `{meta['data']}` ({meta['examples']} examples)",
        f"- final losses: {json.dumps(meta.get('final_losses', {}))}",
        f"- training time: {meta.get('train_seconds', 0):.0f} s",
    ]
    earlier = meta.get("continued_from")
    while earlier:  # newest first: this run continued `earlier`, which may itself continue another
        lines.append(f"- continues `{earlier['path']}`"
                     + (f": {_stage_line(earlier)}" if "config" in earlier else " (no unirag.json)"))
        earlier = earlier.get("continued_from")
    lines += ["", "Load it with `unirag.load(adapter=PATH)` or `PeftModel.from_pretrained(base, PATH)`."]
    return "\n".join(lines) + "\n"


def train(config: TrainConfig, model: str, data: str, output: str, resume: bool = False,
          init_adapter: str | None = None, keep_checkpoints: bool = True, texts=None,
          device: str = "auto") -> Path:
    """Run one training job and return the output folder. `device`: auto (CUDA where torch sees a
    GPU), cpu or cuda.

    `texts`: an in-memory `datasets.Dataset` with a `text` column to train on instead of reading
    `data` (which is then only recorded, e.g. the folder `unirag adapt` chunked)."""
    from unirag.model.hardware import resolve_device, resolve_precision, tune_allocator
    from unirag.model.registry import load_base
    from unirag.training.data import (PadCollator, choose_mask_token, choose_summary_tokens, load_pairs, load_texts, split_sentences,
                       tokenize, tokenize_pairs)

    out_dir = Path(output).expanduser()
    ckpt_dir = out_dir / CHECKPOINTS
    if resume and not ckpt_dir.is_dir():
        raise UniragError(f"nothing to resume: {ckpt_dir} does not exist")
    if not resume and ckpt_dir.is_dir() and any(ckpt_dir.glob("checkpoint-*")):
        raise UniragError(f"{out_dir} already has checkpoints; pass --resume to continue, or pick a new --output")

    target = resolve_device(device)  # a bad --device fails before the data is read
    tune_allocator()  # much faster steps on CPU; training only, since it raises a server's RSS
    torch.manual_seed(config.seed)
    # a later stage trains the embedding where the earlier one put it, unless told otherwise
    if init_adapter and not config.embedding_layer and config.objective != "gem":
        config = dataclasses.replace(config, embedding_layer=read_record(init_adapter).get("embedding_layer", 0))
    base, tokenizer = load_base(model)
    if config.embedding_layer > base.config.num_hidden_layers:
        raise UniragError(f"embedding_layer {config.embedding_layer}: {model} has {base.config.num_hidden_layers} layers")
    mask_token, mask_id = choose_mask_token(tokenizer, config.mask_token)
    if config.objective == "pairs":
        dataset = tokenize_pairs(load_pairs(data), tokenizer, config.max_length, config.query_length,
                                 config.query_prefix)
    else:
        texts = load_texts(data) if texts is None else texts
        if config.text_unit == "sentence":
            texts = split_sentences(texts)
        dataset = tokenize(texts, tokenizer, config.max_length, config.min_tokens)
    summary_tokens, summary_ids = [], []
    if config.objective == "gem":
        summary_tokens, summary_ids = choose_summary_tokens(tokenizer, config.gem_tokens, avoid={mask_id})
    module = UniMAEModule(build_llm(base, config, init_adapter, summary_ids), config, mask_id, summary_ids)

    device = target
    bf16 = resolve_precision(config.precision, device) is torch.bfloat16
    args = TrainingArguments(
        output_dir=str(ckpt_dir), max_steps=config.steps, per_device_train_batch_size=config.micro_batch_size,
        gradient_accumulation_steps=config.accumulation(int(os.environ.get("WORLD_SIZE", "1"))),
        learning_rate=config.lr,
        lr_scheduler_type=config.lr_schedule, warmup_steps=config.warmup_steps, weight_decay=config.weight_decay,
        max_grad_norm=config.max_grad_norm, logging_steps=config.logging_steps, save_steps=config.save_steps,
        save_total_limit=2, seed=config.seed, bf16=bf16, report_to="none", remove_unused_columns=False,
        dataloader_pin_memory=False, use_cpu=device.type == "cpu", ddp_find_unused_parameters=False,
    )
    meta = {
        "name": out_dir.name, "format": "unirag-adapter/1", "pooling": "eos", "objective": config.objective,
        "base_model": model, "base": base_fingerprint(base.config), "mask_token": mask_token,
        "mask_token_id": mask_id, "data": str(data), "examples": len(dataset), "config": config.to_dict(),
    }
    if init_adapter:
        meta["continued_from"] = lineage(init_adapter)
    # how retrieval must embed a question: this stage's cue, or the one an earlier stage taught
    earlier_prefix = read_record(init_adapter).get("query_prefix", "") if init_adapter else ""
    query_prefix = config.query_prefix if config.objective == "pairs" else earlier_prefix
    if query_prefix:
        meta["query_prefix"] = query_prefix
    if config.embedding_layer:  # UniModel embeds where the losses trained the embedding
        meta["embedding_layer"] = config.embedding_layer
    if summary_ids:  # GEM embeds at the summary token(s) appended after the text, not at EOS
        meta.update(summary_tokens=summary_tokens, embed_suffix_ids=summary_ids)
    stopper = StopOnSignal()
    budget = StopAfterMinutes(config.max_minutes)
    trainer = UniMAETrainer(model=module, args=args, train_dataset=dataset,
                            data_collator=PadCollator(tokenizer.pad_token_id or tokenizer.eos_token_id),
                            callbacks=[stopper, budget], unirag_meta=meta)
    previous = {s: signal.signal(s, stopper.request) for s in (signal.SIGINT, signal.SIGTERM)}
    started = time.time()
    last = last_complete_checkpoint(ckpt_dir) if resume else None
    try:
        if last and int(Path(last).name.rsplit("-", 1)[1]) >= config.steps:
            # Already there: Trainer would still run one more step, so just load and write out.
            trainer._load_from_checkpoint(last)
            trainer.state = TrainerState.load_from_json(str(Path(last) / "trainer_state.json"))
        else:
            trainer.train(resume_from_checkpoint=last or False)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if stopper.requested:
        raise UniragError(f"training stopped at step {trainer.state.global_step}; "
                          f"continue with the same command plus --resume")
    losses = [h for h in trainer.state.log_history if "loss" in h]
    meta["final_losses"] = {k: v for k, v in losses[-1].items() if k.startswith("loss")} if losses else {}
    meta["train_seconds"] = round(time.time() - started, 1)
    meta["steps_done"] = trainer.state.global_step
    if budget.hit:
        print(f"unirag: time budget of {config.max_minutes:g} min reached after {trainer.state.global_step} "
              f"of {config.steps} steps")
    if trainer.is_world_process_zero():
        write_output(module, tokenizer, out_dir, meta)
        if not keep_checkpoints:
            shutil.rmtree(out_dir / CHECKPOINTS, ignore_errors=True)
    leave_process_group()
    return out_dir


def leave_process_group() -> None:
    """Under torchrun/accelerate: every process waits until the writer is done, then leaves the
    process group. A process that exits with the group still up can abort in the backend's threads
    ("terminate called without an active exception"), which fails the launch although the
    adapter was written. Nothing to do in a single process."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
