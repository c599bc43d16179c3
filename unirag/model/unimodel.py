"""UniModel: one causal LM in memory that both embeds and generates.

`embed()` runs the decoder stack (no LM head) and pools last-layer hidden states; `generate()`
runs the same module with its LM head. There is exactly one `torch.nn.Module` and one set of
weights behind both (tests check the parameter objects are identical).

The pure helpers live beside it, by job: `pooling.py` (token layout per pooling: eos, last,
mean, echo; batches by a token budget; pooled vectors), `precision.py` (autocast, bf16-held
weights), `decoding.py` (sampling), `prefix_cache.py` (KV reuse from an
embedding pass), `split_head.py` (the LM head on all threads), `quantized_decode.py` (the 4- or 8-bit
copy generated tokens read), `lean_step.py` (a generated token over it, for Llama decoders) and
`native_step.py` (that step compiled).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch

from unirag.model.decoding import sample
from unirag.errors import UniragError
from unirag.model.hardware import resolve_precision
from unirag.model.fast_decode.lean_step import LeanStep
from unirag.model.pooling import POOLINGS, Encoded, encode, padded_batch, pooled
from unirag.model.pooling import token_budget_batches as token_budget_batches  # re-exported: benchmarks and tests import it here
from unirag.model.precision import autocast, hold_linear_weights_in_bf16
from unirag.model.prefix_cache import PrefixCache, static_copy
from unirag.model.fast_decode.quantized_decode import FORMATS as DECODE_FORMATS
from unirag.model.fast_decode.quantized_decode import DecodeCopy
from unirag.model.fast_decode.quantized_decode import supported as decode_copy_supported
from unirag.model.fast_decode.split_head import head_logits

STATIC_CACHE_BUCKET = 256  # static_cache sizes are multiples of this (fewer shapes to compile)
# An embedding batch's padded size (rows x longest text), per device type. On a CPU, ingest's
# chunks (of mixed length: a section's last chunk is short) embed faster in batches of about 2k
# padded tokens than in batches of 32 full chunks: less padding, and the activations between the
# matmuls stay in cache (`python benchmarks/ingest.py --budgets 16384` times both; on texts of one
# length the gain vanishes). An accelerator wants big batches, so other devices keep the larger one.
EMBED_BATCH_TOKENS = {"cpu": 2048}
DEFAULT_EMBED_BATCH_TOKENS = 16384
log = logging.getLogger("unirag")

Messages = list[dict[str, str]]


def embedding_layer_of(info: dict, num_layers: int, name: str = "the model") -> int:
    """The decoder layer a model embeds at: its record's `embedding_layer` (1..num_layers), else the
    last."""
    layer = info.get("embedding_layer", num_layers)
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= num_layers:
        raise UniragError(f"the record of {name} gives embedding_layer {layer!r}; it must be a whole "
                          f"number from 1 to {num_layers} (the model's layers)")
    return layer


class UniModel:
    """A decoder-only LLM serving sentence embeddings and text generation from one module."""

    def __init__(self, model, tokenizer, name: str, max_length: int = 512,
                 precision: str = "auto", info: dict | None = None, compile_decode: bool = False,
                 bf16_weights: bool = True, static_cache: bool = False, decode_copy: str | None = "int4",
                 native_step: bool = True):
        if tokenizer.eos_token_id is None:
            raise UniragError(f"the tokenizer of {name} has no EOS token; eos pooling needs one")
        self.model = model
        self.tokenizer = tokenizer
        self.name = name
        self.info = info or {}
        self.max_length = max_length
        self.device = next(model.parameters()).device
        self.autocast_dtype = resolve_precision(precision, self.device)
        # embed()'s default padded size of a batch (settable, e.g. to measure another)
        self.embed_batch_tokens = EMBED_BATCH_TOKENS.get(self.device.type, DEFAULT_EMBED_BATCH_TOKENS)
        self.default_pooling = self.info.get("pooling", "eos")
        # the decoder layer whose output (through the final norm) embeds: the adapter record's
        # `embedding_layer`, else the last. A pass that only embeds stops there.
        self.embedding_layer = embedding_layer_of(self.info, model.config.num_hidden_layers, name)
        # text retrieval embeds before a question: the cue a `pairs` adapter was trained with
        self.query_prefix: str = self.info.get("query_prefix", "")
        # what "eos" pooling appends: the EOS token, or a GEM adapter's summary token(s)
        self.embed_suffix_ids = list(self.info.get("embed_suffix_ids") or [tokenizer.eos_token_id])
        self._prefix_ids = tokenizer("", add_special_tokens=True)["input_ids"]  # e.g. [BOS]
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self._lock = threading.Lock()  # one forward pass at a time on the shared weights
        # Under bf16 autocast, the decoder layers' linear weights are held in bf16 (converted in
        # place: the module is changed): autocast casts them to bf16 in every matmul anyway, so
        # embeddings and prefills are unchanged, but a matmul reads half the bytes and generated
        # tokens' steps (now under autocast too) need no per-token re-cast, so tokens come faster
        # (docs/PERFORMANCE.md section 2 has the numbers). The LM head (tied to the input
        # embeddings) stays fp32 and runs outside autocast. Not for an unmerged PEFT model; the
        # module must then not run outside autocast (UniModel never does).
        self.bf16_weights = (bf16_weights and self.autocast_dtype == torch.bfloat16
                             and not hasattr(model, "get_base_model"))
        if self.bf16_weights:
            hold_linear_weights_in_bf16(self.decoder)
        self._lm_head = model.get_output_embeddings()
        # Generated tokens' steps read a 4-bit (or 8-bit) copy of the linear weights and the LM
        # head (unirag/model/fast_decode/quantized_decode.py): faster steps for the copy's bytes. Only with
        # bf16-held weights (the kernels' fast path is bf16 activations) and not under
        # torch.compile (its graphs would have to capture the switch).
        if decode_copy not in (None, *DECODE_FORMATS):
            raise UniragError(f"decode_copy {decode_copy!r}: one of {', '.join(DECODE_FORMATS)} or None")
        if decode_copy == "int4" and not decode_copy_supported(self.device, "int4"):
            decode_copy = "int8"
        self.decode_copy = (DecodeCopy.for_decoder(self.decoder, self._lm_head, decode_copy)
                            if decode_copy and self.bf16_weights and not compile_decode
                            and decode_copy_supported(self.device, decode_copy) else None)
        # With a decode copy, a Llama-architecture decoder's generated tokens skip transformers'
        # forward: unirag/model/fast_decode/lean_step.py runs the same operations straight over the layer weights
        # into a preallocated KV cache (its docstring says why that is faster and what it refuses).
        # Its cache is preallocated already, so static_cache changes nothing where it runs. With
        # native_step it runs compiled (unirag/model/fast_decode/native_step.py: the same values, less overhead).
        self._lean = None
        if self.decode_copy is not None:
            self._lean, why_not = LeanStep.for_decoder(self.decoder, self.decode_copy, native_step)
            if why_not:
                log.info("generated tokens run transformers' forward (no lean step: %s)", why_not)
        # What runs each generated token's decoder step. With compile_decode, torch.compile with
        # dynamic shapes: one graph serves every cache length, compiled once, on the first generated
        # token (its cost: docs/PERFORMANCE.md section 2).
        # static_cache: after the prompt, generated tokens write into a preallocated StaticCache
        # (sized to the prompt plus max_new_tokens, rounded up to STATIC_CACHE_BUCKET) instead of
        # a DynamicCache that grows by concatenation. Only where the prompt and the generated
        # tokens run in one precision (fp32, or bf16-held weights), so one tensor holds both.
        # Compiled, it takes static shapes (one graph per bucket): with dynamic shapes over a
        # StaticCache the compiled step was far slower than eager (docs/PERFORMANCE.md section 2).
        self.static_cache = static_cache and (self.autocast_dtype is None or self.bf16_weights)
        self._decode_step = (torch.compile(self.decoder.forward, dynamic=not self.static_cache)
                             if compile_decode else self.decoder.forward)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, model: str | None = None, adapter: str | None = "default", *, merge: bool = True,
             precision: str = "auto", max_length: int = 512, device: str | None = "auto",
             trust_remote_code: bool = False, compile_decode: bool = False,
             bf16_weights: bool = True, static_cache: bool = False, decode_copy: str | None = "int4",
             native_step: bool = True) -> "UniModel":
        """Load a base model (registry name, local folder or hub id) and an adapter.

        adapter="default" takes the UniMAE adapter shipped for registry models (none for other
        models); None or "none" loads the plain base model; anything else is an adapter folder.
        compile_decode=True runs generation steps through torch.compile (faster once compiled).
        bf16_weights=False keeps fp32 weights even under bf16 autocast (e.g. to export them).
        static_cache=True decodes into a preallocated KV cache (docs/PERFORMANCE.md section 2).
        decode_copy picks the copy generated tokens read: "int4", "int8", or None (the bf16 weights).
        native_step=False keeps the lean step in Python (unirag/model/fast_decode/native_step.py; the same tokens).
        device: "auto" (CUDA where torch sees a GPU, else the CPU), "cpu" or "cuda" ("cuda:N");
        every pass then runs there (on CUDA, precision "auto" is bf16 where the GPU has it, and
        the CPU-only decode copy and native step stand aside).
        """
        from unirag.model.adapters import apply_adapter, read_record, weights_digest
        from unirag.model.hardware import resolve_device
        from unirag.model.registry import DEFAULT_MODEL, load_base, resolve_adapter

        target = resolve_device(device)  # before the weights load: a bad --device fails at once
        model_name = model or DEFAULT_MODEL
        adapter = resolve_adapter(model_name, adapter)
        base, tokenizer = load_base(model_name, trust_remote_code=trust_remote_code)
        info: dict = {} if adapter else read_record(model_name)  # a merged export's record
        name = model_name
        if adapter:
            base, info = apply_adapter(base, adapter, merge=merge)
            name = f"{model_name}+{info.get('name', adapter)}@{weights_digest(adapter)}"
        if target.type != "cpu":
            base.to(target)
        return cls(base, tokenizer, name=name, max_length=max_length, precision=precision, info=info,
                   compile_decode=compile_decode, bf16_weights=bf16_weights, static_cache=static_cache,
                   decode_copy=decode_copy, native_step=native_step)

    @property
    def context_window(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    def _autocast(self):
        return autocast(self.device, self.autocast_dtype)

    @property
    def pad_id(self) -> int:
        """The token id that right-pads a batch (the tokenizer's pad token, else EOS)."""
        return self._pad_id

    @contextlib.contextmanager
    def forward_context(self):
        """Where code outside this class runs the module: holds the lock that serialises passes
        on the shared weights, without autograd, under the model's autocast precision."""
        with self._lock, torch.inference_mode(), self._autocast():
            yield

    # ------------------------------------------------------------------ embedding
    def _encode(self, text: str, pooling: str, instruction_ids: list[int]) -> Encoded:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return encode(ids, pooling, self._prefix_ids + instruction_ids, self.embed_suffix_ids, self.max_length,
                      self._pad_id)

    def _prepare(self, texts: Sequence[str], pooling: str | None,
                 instruction: str | None) -> tuple[str, list[Encoded]]:
        """Check the arguments and tokenise; warns once about truncated texts."""
        pooling = pooling or self.default_pooling
        if pooling not in POOLINGS:
            raise UniragError(f"unknown pooling {pooling!r}; choose one of {', '.join(POOLINGS)}")
        if any(not isinstance(t, str) for t in texts):
            raise UniragError("embed() takes strings")
        instruction_ids = self.tokenizer(instruction, add_special_tokens=False)["input_ids"] if instruction else []
        encoded = [self._encode(t, pooling, instruction_ids) for t in texts]
        n_truncated = sum(e.truncated for e in encoded)
        if n_truncated:
            log.warning("%d of %d texts were longer than max_length=%d tokens and were truncated",
                        n_truncated, len(texts), self.max_length)
        return pooling, encoded

    def embedding_inputs(self, texts: Sequence[str]) -> list[Encoded]:
        """The token layout `embed(texts)` runs, default pooling and no instruction: for a pass
        that embeds the texts and continues them (`scoring.read`)."""
        return self._prepare(texts, None, None)[1]

    def embed(self, texts: str | Sequence[str], pooling: str | None = None, batch_size: int | None = 32,
              instruction: str | None = None, normalize: bool = True, show_progress: bool = False,
              max_batch_tokens: int | None = None,
              on_batch: Callable[[list[int]], None] | None = None) -> np.ndarray:
        """Embed texts into a float32 array (n, hidden_size); rows are L2-normalised by default.

        Texts run longest first; a batch ends at `batch_size` rows (None: no row limit) or
        before its padded size (rows x longest) would pass `max_batch_tokens` (None:
        `self.embed_batch_tokens`, by device type), so short texts share big batches and long
        ones small batches, at a bounded memory cost. `on_batch`, if given, is called after each
        batch with the indices (into `texts`) of the rows it embedded: a caller's progress.
        """
        if isinstance(texts, str):
            texts = [texts]
        pooling, encoded = self._prepare(texts, pooling, instruction)
        hidden = self.model.config.hidden_size
        if len(texts) == 0:
            return np.zeros((0, hidden), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(encoded[i].ids))  # less padding
        out = np.empty((len(texts), hidden), dtype=np.float32)
        max_batch_tokens = max_batch_tokens or self.embed_batch_tokens
        batches = token_budget_batches([len(encoded[i].ids) for i in order], batch_size, max_batch_tokens)
        batches = [[order[j] for j in batch] for batch in batches]
        if show_progress:
            from tqdm.auto import tqdm

            batches = tqdm(batches, desc="embedding", unit="batch")
        for batch in batches:
            vectors = self._embed_batch([encoded[i] for i in batch])
            out[batch] = vectors
            if on_batch is not None:
                on_batch(batch)
        if normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out

    def embed_with_cache(self, text: str, pooling: str | None = None, instruction: str | None = None,
                         normalize: bool = True) -> tuple[np.ndarray, PrefixCache]:
        """Embed one text and keep the KV cache of that pass.

        The vector is the one `embed([text])` gives. Passing the PrefixCache to `generate`
        skips the prefill of every leading prompt token that matches the embedded ids.
        """
        from transformers import DynamicCache

        _, (encoded,) = self._prepare([text], pooling, instruction)
        cache = DynamicCache(config=self.model.config)
        vector = self._embed_batch([encoded], cache)[0]
        if normalize:
            vector /= max(float(np.linalg.norm(vector)), 1e-12)
        return vector, PrefixCache(list(encoded.ids), cache, self.autocast_dtype)

    def _embed_batch(self, items: list[Encoded], cache=None) -> np.ndarray:
        """Right-pad (a text embeds the same alone or batched, up to rounding:
        `pooling.padded_batch`), run the decoder stack without the LM head up to the embedding
        layer, pool each row's own slice.

        A `cache` (one row only) is filled with the keys and values of every layer: generation
        reuses it, so that pass runs the whole stack.
        """
        ids, attention, pool = padded_batch(items, self._pad_id)
        ids, attention = ids.to(self.device), attention.to(self.device)
        with self._lock, torch.inference_mode(), self._autocast():
            if cache is None:
                states = self.hidden_states(ids, attention, layers=self.embedding_layer)
            else:
                states, _ = self.embedding_and_last_states(ids, attention, cache)
        return pooled(states, pool)

    @property
    def decoder(self) -> torch.nn.Module:
        """The decoder stack without the LM head (through a PEFT wrapper if there is one)."""
        model = self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model
        return model.base_model

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, cache=None,
                      layers: int | None = None) -> torch.Tensor:
        """Hidden states (after the final norm) from the decoder, skipping the LM head: of the last
        layer, or with `layers`, of that many first layers (the rest do not run).

        No KV cache is built unless one is passed (transformers would otherwise make one).
        """
        decoder = self.decoder
        run = functools.partial(decoder, input_ids=input_ids, attention_mask=attention_mask,
                                use_cache=cache is not None, **{self._cache_keyword: cache})
        if layers is None or layers >= self.model.config.num_hidden_layers:
            return run().last_hidden_state
        stack = decoder.layers
        decoder.layers = stack[:layers]  # the same modules: the forward loops over those there are
        try:
            return run().last_hidden_state
        finally:
            decoder.layers = stack

    def embedding_and_last_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                                  cache=None) -> tuple[torch.Tensor, torch.Tensor]:
        """(states at the embedding layer, last-layer states), both through the final norm, from one
        pass over the whole stack: for a pass that embeds and also scores or fills a cache."""
        if self.embedding_layer == self.model.config.num_hidden_layers:
            states = self.hidden_states(input_ids, attention_mask, cache)
            return states, states
        kept: list[torch.Tensor] = []
        decoder = self.decoder

        def keep(_module, _inputs, output):
            kept.append(output[0] if isinstance(output, tuple) else output)

        hook = decoder.layers[self.embedding_layer - 1].register_forward_hook(keep)
        try:
            last = self.hidden_states(input_ids, attention_mask, cache)
        finally:
            hook.remove()
        return decoder.norm(kept[0]), last

    @functools.cached_property
    def _cache_keyword(self) -> str:
        """The name the decoder's forward takes a KV cache under. transformers 5.x renames
        `past_key_values` to `cache` and drops the old name in 5.40; the project supports every
        5.x, so it passes the one this release declares."""
        return "cache" if "cache" in inspect.signature(type(self.decoder).forward).parameters else "past_key_values"

    # ------------------------------------------------------------------ generation
    def prompt_ids(self, prompt: str | Messages, system: str | None = None) -> list[int]:
        """Token ids of a prompt, through the chat template when the tokenizer has one."""
        if isinstance(prompt, str):
            messages: Messages = [{"role": "user", "content": prompt}]
        else:
            messages = list(prompt)
        if system is not None and not (messages and messages[0].get("role") == "system"):
            messages = [{"role": "system", "content": system}] + messages
        if self.tokenizer.chat_template:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return self.tokenizer(text, add_special_tokens=False)["input_ids"]
        text = "\n\n".join(m["content"] for m in messages)
        return self._prefix_ids + self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def prompt_head(self, system: str | None = None) -> str:
        """The prompt text that comes before the first user message's content.

        Embedding `prompt_head(system) + text` (as `instruction`) runs the first tokens of the
        prompt `generate([user: text ...], system=system)` will build, so its cache is reusable.
        A BOS the tokenizer adds by itself is left out: `embed` adds it already.
        """
        marker = "\ue000"  # a private-use character no template writes
        messages: Messages = [{"role": "user", "content": marker}]
        if system is not None:
            messages.insert(0, {"role": "system", "content": system})
        if not self.tokenizer.chat_template:
            return "".join(m["content"] + "\n\n" for m in messages[:-1])
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        head = text[: text.index(marker)]
        bos = self.tokenizer.bos_token
        if bos and head.startswith(bos) and self._prefix_ids[:1] == [self.tokenizer.bos_token_id]:
            head = head[len(bos):]
        return head

    def reusable_prefix(self, prefix: PrefixCache | None, prompt_ids: Sequence[int]) -> int:
        """How many leading prompt tokens `generate` would take from `prefix` (0: none)."""
        if prefix is None:
            return 0
        if prefix.autocast_dtype != self.autocast_dtype:
            log.info("prefix cache made under %s, generation runs under %s: not reused",
                     prefix.autocast_dtype, self.autocast_dtype)
            return 0
        return prefix.reusable(prompt_ids)

    def _stop_ids(self) -> set[int]:
        stops = {self.tokenizer.eos_token_id}
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            stops.add(configured)
        elif configured:
            stops.update(configured)
        return stops

    def generate(self, prompt: str | Messages, max_new_tokens: int = 256, temperature: float = 0.0,
                 top_p: float = 1.0, stream: bool = False, system: str | None = None,
                 seed: int | None = None, prefix: PrefixCache | None = None) -> str | Iterator[str]:
        """Answer a prompt (or chat messages). Greedy when temperature is 0.

        With stream=True, returns an iterator of text pieces as they are decoded. `prefix`
        (from `embed_with_cache`) skips the prefill of the prompt tokens it already holds.
        """
        ids = self.prompt_ids(prompt, system)
        self._check_fits(len(ids), max_new_tokens)
        pieces = self.text_pieces(self.generate_ids(ids, max_new_tokens, temperature, top_p, seed, prefix))
        return pieces if stream else "".join(pieces)

    def text_pieces(self, token_ids: Iterable[int]) -> Iterator[str]:
        """New text as generated ids arrive; pieces ending inside a multi-byte character wait."""
        generated: list[int] = []
        shown = ""
        for token_id in token_ids:
            generated.append(token_id)
            text = self.tokenizer.decode(generated, skip_special_tokens=True)
            if text.endswith("\ufffd"):
                continue
            if len(text) > len(shown):
                yield text[len(shown):]
                shown = text

    def generate_ids(self, prompt_ids: list[int], max_new_tokens: int = 256, temperature: float = 0.0,
                     top_p: float = 1.0, seed: int | None = None,
                     prefix: PrefixCache | None = None) -> Iterator[int]:
        """Yield new token ids one by one (stop tokens are not yielded).

        With a `prefix`, the longest run of leading prompt ids it shares (leaving at least one
        to prefill) comes from a copy of its cache, and only the rest of the prompt is run.
        """
        from transformers import DynamicCache

        reused = self.reusable_prefix(prefix, prompt_ids)
        if reused:
            with self._lock, torch.inference_mode():
                cache = prefix.cropped_copy(reused)
        else:
            cache = DynamicCache(config=self.model.config)
        log.debug("generate: %d of %d prompt tokens reused from the prefix cache", reused, len(prompt_ids))
        yield from self._decode(cache, prompt_ids[reused:], max_new_tokens, temperature, top_p, seed)

    def _check_fits(self, prompt_tokens: int, max_new_tokens: int) -> None:
        if prompt_tokens + max_new_tokens > self.context_window:
            raise UniragError(
                f"the prompt has {prompt_tokens} tokens; with max_new_tokens={max_new_tokens} it exceeds "
                f"the model's context window of {self.context_window} tokens. Shorten it."
            )

    def _next_token_logits(self, hidden: torch.Tensor, quantized: bool = False) -> torch.Tensor:
        """The LM head on the last position, in the head's own precision, as the model's forward
        computes it (with Gemma-style soft-capping where the config has it), its rows split over
        threads (unirag/model/fast_decode/split_head.py: the same logits, faster on CPU); with `quantized`, from
        the decode copy."""
        if quantized:
            logits = self.decode_copy.head_logits(hidden[0, -1])
        else:
            logits = head_logits(self._lm_head, hidden[0, -1].to(self._lm_head.weight.dtype))
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        return torch.tanh(logits / cap) * cap if cap else logits

    def _static_cache_for(self, cache, max_new_tokens: int):
        """The prompt's DynamicCache copied into a StaticCache with room for the new tokens.

        Sizes are rounded up to STATIC_CACHE_BUCKET so that a compiled step sees few shapes."""
        needed = cache.get_seq_length() + max_new_tokens
        size = -(-needed // STATIC_CACHE_BUCKET) * STATIC_CACHE_BUCKET
        return static_copy(cache, self.model.config, max(needed, min(size, self.context_window)))

    def _decode(self, cache, step_ids: list[int], max_new_tokens: int, temperature: float, top_p: float,
                seed: int | None) -> Iterator[int]:
        """Feed `step_ids` (the prompt tokens `cache` does not hold yet), then sample token by token."""
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        stops = self._stop_ids()
        step_input = torch.tensor([step_ids], device=self.device)
        generated: list[int] = []
        for step in range(max_new_tokens):
            # Contexts are entered per step, not around the loop: a streaming consumer (e.g. a
            # web server's thread pool) may resume this generator on another thread, and both
            # grad mode and the lock must never be held across a yield.
            # Step 0 runs the part of the prompt the cache lacks (even a single token) under
            # autocast and eagerly: with or without a reused prefix the prompt is computed alike,
            # so reuse stays exact. Later steps go through the lean step where there is one
            # (its own KV cache, filled from the prompt's), else through `_decode_step` (compiled
            # or not), under autocast only if the weights are held in bf16: with fp32 weights
            # autocast would re-cast every weight matrix on each token, a slower step
            # (docs/PERFORMANCE.md section 2).
            # The LM head runs on the last position only, in its own (fp32) precision.
            # With a decode copy, generated tokens' steps (not the prompt's) run on it, and a
            # greedy token comes from its shortlisting head (DecodeCopy.greedy_token: the
            # unquantized head's argmax, from a smaller copy).
            quantized = self.decode_copy is not None and step > 0
            shortlist = quantized and temperature <= 0
            with self._lock, torch.inference_mode():
                if step == 1:
                    cache = self._cache_for_steps(cache, max_new_tokens)
                if step > 0 and self._lean is not None:
                    hidden = self._lean.hidden(generated[-1], cache)
                else:
                    hidden = self._forward_step(step, step_input, cache, quantized)
                if shortlist:
                    next_id = self.decode_copy.greedy_token(hidden[0, -1])
                else:
                    logits = self._next_token_logits(hidden, quantized).float().cpu()
            if not shortlist:
                next_id = sample(logits, temperature, top_p, generator)
            if next_id in stops:
                return
            generated.append(next_id)
            yield next_id
            step_input = torch.tensor([[next_id]], device=self.device)

    def _cache_for_steps(self, cache, max_new_tokens: int):
        """Where generated tokens' keys and values go after the prompt's step: the lean step's
        KV cache, a StaticCache (static_cache=True), or the prompt's DynamicCache itself."""
        if self._lean is not None:
            return self._lean.new_cache(cache, max_new_tokens)
        if self.static_cache:
            return self._static_cache_for(cache, max_new_tokens)
        return cache

    def _forward_step(self, step: int, step_input: torch.Tensor, cache, quantized: bool) -> torch.Tensor:
        """One step through transformers' forward: the prompt's (eager, under autocast) or a
        generated token's (through `_decode_step`; on the decode copy with `quantized`)."""
        autocast = step == 0 or self.bf16_weights
        forward = self.decoder if step == 0 else self._decode_step
        with self._autocast() if autocast else contextlib.nullcontext(), \
                self.decode_copy.steps() if quantized else contextlib.nullcontext():
            return forward(input_ids=step_input, **{self._cache_keyword: cache}, use_cache=True).last_hidden_state
