"""A tiny random Llama with a real (byte-level BPE) tokenizer, built in-process in ~1 s.

Unit tests use it instead of the real model: same code paths, seconds instead of minutes.
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "The cat sat on the mat.", "A dog ran in the park.", "Paris is the capital of France.",
    "Rust has ownership and borrowing.", "Loops can return values with break.",
    "Embeddings map text to vectors.", "The quick brown fox jumps over the lazy dog.",
] * 20
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|summary|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|im_end|>",
                                   bos_token="<|im_start|>", unk_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def tiny_llama(vocab_size: int = 400, hidden_size: int = 32, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, eos_token_id=2, bos_token_id=1, pad_token_id=2,
                         tie_word_embeddings=True, initializer_range=0.3)  # logits big enough to learn
    return LlamaForCausalLM(config).eval()


def save_tiny_model(path: Path, hidden_size: int = 32, seed: int = 0) -> Path:
    tokenizer = tiny_tokenizer()
    model = tiny_llama(len(tokenizer), hidden_size, seed)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
