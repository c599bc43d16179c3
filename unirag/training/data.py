"""Training text in, tokenised examples out (via `datasets`, so big corpora stay on disk).

Accepted inputs: a .txt file (one document per line), a .jsonl file with a `text` field, a
folder of .txt/.md files (split into passages at blank lines), or a folder saved with
`datasets.Dataset.save_to_disk`. Every example is truncated to `max_length - 1` tokens and gets
the tokenizer's EOS appended: UniMAE's embedding is the hidden state at that EOS.
`split_sentences` turns each document into one example per sentence (STS pairs are sentences).
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from unirag.errors import UniragError

PASSAGE_CHARS = 2000  # folder documents are cut into passages of about this many characters
# A sentence ends at . ! or ? followed by whitespace and an upper-case letter, digit or quote.
_SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+(?=[A-Z0-9\"'(\[])")


def _passages(text: str) -> list[str]:
    """Group blank-line-separated paragraphs into passages of about PASSAGE_CHARS."""
    passages, current = [], ""
    for paragraph in (p.strip() for p in text.split("\n\n")):
        if not paragraph:
            continue
        if current and len(current) + len(paragraph) > PASSAGE_CHARS:
            passages.append(current)
            current = ""
        current = f"{current}\n\n{paragraph}" if current else paragraph
    if current:
        passages.append(current)
    return passages


def load_texts(path: str | Path):
    """Return a `datasets.Dataset` with one `text` column."""
    import datasets

    path = Path(path).expanduser()
    if not path.exists():
        raise UniragError(f"training data {path} does not exist")
    if path.is_dir() and (path / "dataset_info.json").is_file():
        dataset = datasets.load_from_disk(str(path))
        if isinstance(dataset, datasets.DatasetDict):
            dataset = dataset["train"] if "train" in dataset else next(iter(dataset.values()))
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".md") and p.is_file())
        if not files:
            raise UniragError(f"{path} holds no .txt or .md files")
        rows = []
        for file in files:
            try:
                rows += _passages(file.read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                raise UniragError(f"{file} is not UTF-8 text") from None
        dataset = datasets.Dataset.from_dict({"text": rows})
    elif path.suffix == ".jsonl":
        dataset = datasets.load_dataset("json", data_files=str(path), split="train")
    elif path.suffix in (".txt", ".md", ""):
        dataset = datasets.load_dataset("text", data_files=str(path), split="train")
    else:
        raise UniragError(f"cannot read {path}: use .txt, .jsonl, a folder of .txt/.md, or a saved dataset")
    if "text" not in dataset.column_names:
        raise UniragError(f"{path} has no `text` field (columns: {', '.join(dataset.column_names)})")
    return dataset.select_columns(["text"])


def load_pairs(path: str | Path):
    """A `datasets.Dataset` with `query` and `passage` columns (and `negative`, where the rows carry
    a passage that does not answer the question) from a .jsonl file, one pair a line: a question
    and the passage that answers it, e.g. written by `unirag.training.queries`."""
    import datasets

    path = Path(path).expanduser()
    if not path.is_file() or path.suffix != ".jsonl":
        raise UniragError(f"pairs data must be a .jsonl file of {{\"query\", \"passage\"}} rows, not {path}")
    dataset = datasets.load_dataset("json", data_files=str(path), split="train")
    missing = {"query", "passage"} - set(dataset.column_names)
    if missing:
        raise UniragError(f"{path} has no {', '.join(sorted(missing))} field")
    return dataset.select_columns([c for c in ("query", "passage", "negative") if c in dataset.column_names])


def tokenize_pairs(dataset, tokenizer, max_length: int, query_length: int, query_prefix: str = ""):
    """Passages as `input_ids`, questions as `query_ids` (after `query_prefix`), negatives (if any)
    as `negative_ids`; each truncated and given EOS, as embedded."""
    eos = tokenizer.eos_token_id
    prefix = tokenizer("", add_special_tokens=True)["input_ids"]

    def encode(batch):
        out = {}
        for column, name, limit in (("passage", "input_ids", max_length), ("query", "query_ids", query_length),
                                    ("negative", "negative_ids", max_length)):
            if column not in batch:
                continue
            texts = [query_prefix + q for q in batch[column]] if column == "query" else batch[column]
            ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
            out[name] = [prefix + row[: limit - 1 - len(prefix)] + [eos] for row in ids]
        return out

    columns = [c for c in ("query", "passage", "negative") if c in dataset.column_names]
    dataset = dataset.filter(lambda b: [all(isinstance(t, str) and t.strip() for t in row)
                                        for row in zip(*(b[c] for c in columns))], batched=True)
    dataset = dataset.map(encode, batched=True, remove_columns=dataset.column_names, desc="tokenising pairs")
    if len(dataset) == 0:
        raise UniragError("no usable query/passage pair")
    return dataset


def split_sentences(dataset):
    """One row per sentence (a crude rule, good enough for encyclopedic prose)."""
    def split(batch):
        return {"text": [s.strip() for t in batch["text"] for s in _SENTENCE_END.split(t) if s.strip()]}

    return dataset.map(split, batched=True, remove_columns=dataset.column_names, desc="splitting sentences")


def tokenize(dataset, tokenizer, max_length: int, min_tokens: int = 8):
    """Tokenise, truncate, append EOS, drop documents that are too short to be useful."""
    eos = tokenizer.eos_token_id
    prefix = tokenizer("", add_special_tokens=True)["input_ids"]  # e.g. BOS for Llama-3

    def encode(batch):
        ids = tokenizer(batch["text"], add_special_tokens=False)["input_ids"]
        budget = max_length - 1 - len(prefix)
        return {"input_ids": [prefix + row[:budget] + [eos] for row in ids]}

    dataset = dataset.filter(lambda b: [bool(t and t.strip()) for t in b["text"]], batched=True)
    dataset = dataset.map(encode, batched=True, remove_columns=["text"], desc="tokenising")
    dataset = dataset.filter(lambda b: [len(r) >= min_tokens for r in b["input_ids"]], batched=True)
    if len(dataset) == 0:
        raise UniragError(f"no training document has at least {min_tokens} tokens")
    return dataset


class PadCollator:
    """Right-pad a list of examples; attention_mask marks real tokens. Pairs' questions and
    negatives (`query_ids`, `negative_ids`) are padded the same way, with `query_mask` /
    `negative_mask`."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        length = max(len(r) for r in rows)
        ids = torch.full((len(rows), length), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), length), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
            mask[i, : len(r)] = 1
        return ids, mask

    def __call__(self, examples: list[dict]) -> dict[str, torch.Tensor]:
        ids, mask = self.pad([e["input_ids"] for e in examples])
        batch = {"input_ids": ids, "attention_mask": mask}
        for name in ("query", "negative"):
            if f"{name}_ids" in examples[0]:
                batch[f"{name}_ids"], batch[f"{name}_mask"] = self.pad([e[f"{name}_ids"] for e in examples])
        return batch


def choose_mask_token(tokenizer, requested: str = "auto") -> tuple[str, int]:
    """Pick the MAR mask token. Llama tokenizers have none, so this is a deliberate choice:

    1. the tokenizer's own mask token, if any;
    2. a reserved special token (Llama-3: `<|reserved_special_token_0|>`), never used in text;
    3. `<|endoftext|>` (SmolLM2): a trained separator that does not occur inside documents;
    4. the unknown token.
    EOS is never used: the EOS position carries the embedding.
    """
    vocab = tokenizer.get_vocab()
    if requested != "auto":
        if requested not in vocab:
            raise UniragError(f"mask token {requested!r} is not in the tokenizer's vocabulary")
        token = requested
    else:
        candidates = [tokenizer.mask_token, "<|reserved_special_token_0|>", "<|endoftext|>", tokenizer.unk_token]
        token = next((t for t in candidates if t and t in vocab and t != tokenizer.eos_token), None)
        if token is None:
            raise UniragError("the tokenizer has no usable mask token; pass --mask-token TOKEN")
    if token == tokenizer.eos_token:
        raise UniragError("the mask token must differ from EOS (the EOS state is the embedding)")
    return token, vocab[token]


def choose_summary_tokens(tokenizer, k: int, avoid: set[int] = frozenset()) -> tuple[list[str], list[int]]:
    """GEM's summary tokens: k special tokens that never occur in ordinary text.

    Reserved tokens (Llama-3) first, then the tokenizer's other added special tokens that are not
    EOS/BOS/PAD or the MAR mask token (SmolLM2 has a dozen code-dataset markers).
    """
    vocab = tokenizer.get_vocab()
    taken = {tokenizer.eos_token_id, tokenizer.bos_token_id, tokenizer.pad_token_id, *avoid}
    reserved = [f"<|reserved_special_token_{i}|>" for i in range(1, 1 + k)]
    specials = [t.content if hasattr(t, "content") else str(t) for t in tokenizer.added_tokens_decoder.values()]
    candidates = [t for t in reserved if t in vocab] + [t for t in reversed(specials) if t in vocab]
    chosen = []
    for token in candidates:
        if vocab[token] not in taken and token not in chosen:
            chosen.append(token)
        if len(chosen) == k:
            return chosen, [vocab[t] for t in chosen]
    raise UniragError(f"the tokenizer has fewer than {k} unused special tokens for GEM summary tokens")
