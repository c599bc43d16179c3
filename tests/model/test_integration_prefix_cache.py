"""Exact prefix reuse on the real model: greedy answers with reuse are token-identical."""

from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYSTEM = "Answer the question about the passage."
DOCS = Path(__file__).resolve().parents[2] / "docs"


def long_passage(model, n_tokens: int) -> str:
    text = "\n\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))
    ids = model.tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) >= n_tokens, "docs/ is too short for the long-prefix case"
    # end on a whole word: cut mid-word, the passage's last token can merge with the text the
    # prompt puts after it, and which way that goes would depend on the docs' current wording
    text = model.tokenizer.decode(ids[:n_tokens])
    return text[:max(text.rfind(" "), text.rfind("\n"))].rstrip()


@pytest.mark.parametrize("case", ["question", "question+suffix", "passage+question", "long"])
def test_greedy_with_reuse_is_token_identical(real_model, case):
    model = real_model
    saved_max_length = model.max_length
    try:
        if case == "question":  # the user turn is the embedded text: even the EOS (<|im_end|>) matches
            text, content = "What is the capital of France?", "What is the capital of France?"
        elif case == "question+suffix":
            text = "Which planet is the largest?"
            content = text + "\n\nAnswer in one short sentence."
        elif case == "passage+question":
            text = long_passage(model, 300)
            content = text + "\n\nQuestion: What is this passage about?"
        else:
            model.max_length = 1400
            text = long_passage(model, 1200)
            content = text + "\n\nQuestion: Which file describes the model?"
        _, prefix = model.embed_with_cache(text, instruction=model.prompt_head(SYSTEM))
        ids = model.prompt_ids([{"role": "user", "content": content}], system=SYSTEM)
        reused = model.reusable_prefix(prefix, ids)
        assert reused >= len(prefix) - 1 >= 10
        if case == "long":
            assert reused > 1000
        with_reuse = list(model.generate_ids(ids, max_new_tokens=24, prefix=prefix))
        without = list(model.generate_ids(ids, max_new_tokens=24))
        assert with_reuse == without and len(without) > 0
    finally:
        model.max_length = saved_max_length


def test_embed_with_cache_vector_is_the_embed_vector(real_model):
    import numpy as np

    text = "Rust guarantees memory safety without a garbage collector."
    vector, prefix = real_model.embed_with_cache(text)
    np.testing.assert_allclose(vector, real_model.embed([text])[0], atol=1e-5)
    assert prefix.cache.get_seq_length() == len(prefix.ids)
