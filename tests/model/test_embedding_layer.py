"""The embedding read at an earlier decoder layer (an adapter record's `embedding_layer`), on the
tiny random Llama (2 layers): every path that embeds reads that layer, a pass that only embeds
stops there (tests/retrieval/test_store.py: a collection refuses vectors read at another layer)."""

import numpy as np
import pytest
import torch

from unirag import UniragError
from unirag.model.scoring import read
from unirag.model.unimodel import embedding_layer_of

TEXTS = ["The cat sat on the mat.", "A dog ran.", "Paris is the capital of France and a large city."]


def first_layer(tiny):
    tiny.embedding_layer = 1
    return tiny


def reference(tiny, text: str) -> np.ndarray:
    """The final norm of layer 1's output at the appended EOS, from transformers' own hidden states."""
    ids = tiny.embedding_inputs([text])[0].ids
    with torch.inference_mode():
        out = tiny.decoder(input_ids=torch.tensor([ids]), output_hidden_states=True)
        vector = tiny.decoder.norm(out.hidden_states[1])[0, -1].numpy()
    return vector / np.linalg.norm(vector)


def test_embed_reads_the_recorded_layer(tiny):
    last = tiny.embed(TEXTS)
    tiny = first_layer(tiny)
    vectors = tiny.embed(TEXTS)
    for text, vector in zip(TEXTS, vectors):
        np.testing.assert_allclose(vector, reference(tiny, text), atol=1e-5)
    assert not np.allclose(vectors, last, atol=1e-3)
    assert len(tiny.decoder.layers) == 2  # the stack is whole again after a pass that stopped early


def test_a_pass_that_only_embeds_stops_at_the_layer(tiny):
    tiny = first_layer(tiny)
    ran = []
    for i, layer in enumerate(tiny.decoder.layers):
        layer.register_forward_hook(lambda *_, i=i: ran.append(i))
    tiny.embed(TEXTS[:1])
    assert ran == [0]


def test_cache_and_scoring_passes_embed_the_same(tiny):
    tiny = first_layer(tiny)
    expected = tiny.embed(TEXTS)
    vector, prefix = tiny.embed_with_cache(TEXTS[0])
    np.testing.assert_allclose(vector, expected[0], atol=1e-5)
    assert len(prefix.cache.layers) == 2  # every layer's keys and values: generation reuses them
    ids = prefix.ids + tiny.tokenizer(" next", add_special_tokens=False)["input_ids"]
    assert list(tiny.generate_ids(ids, 6, prefix=prefix)) == list(tiny.generate_ids(ids, 6))
    question = tiny.tokenizer(" Where?", add_special_tokens=False)["input_ids"]
    reading = read(tiny, TEXTS, [], question, own_tokens=4)
    np.testing.assert_allclose(reading.vectors, expected, atol=1e-5)


@pytest.mark.parametrize("record, ok", [({}, 30), ({"embedding_layer": 29}, 29), ({"embedding_layer": 1}, 1),
                                        ({"embedding_layer": 0}, None), ({"embedding_layer": 31}, None),
                                        ({"embedding_layer": "29"}, None), ({"embedding_layer": True}, None)])
def test_the_record_names_a_layer_of_the_model(record, ok):
    if ok is None:
        with pytest.raises(UniragError, match="embedding_layer .* from 1 to 30"):
            embedding_layer_of(record, 30)
    else:
        assert embedding_layer_of(record, 30) == ok


def test_an_adapter_record_sets_the_layer_merged_or_not(tmp_path, tiny_model_dir):
    import json

    from test_loading import make_adapter

    from unirag import UniModel
    from unirag.model.adapters import UNIRAG_JSON

    adapter = make_adapter(tiny_model_dir, tmp_path / "adapter")
    record = json.loads((adapter / UNIRAG_JSON).read_text())
    (adapter / UNIRAG_JSON).write_text(json.dumps({**record, "embedding_layer": 1}))
    merged = UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32")
    unmerged = UniModel.load(str(tiny_model_dir), str(adapter), merge=False, precision="fp32")
    assert merged.embedding_layer == unmerged.embedding_layer == 1
    np.testing.assert_allclose(merged.embed(TEXTS), unmerged.embed(TEXTS), atol=1e-4)
    (adapter / UNIRAG_JSON).write_text(json.dumps({**record, "embedding_layer": 3}))
    with pytest.raises(UniragError, match="embedding_layer 3"):
        UniModel.load(str(tiny_model_dir), str(adapter), precision="fp32")
