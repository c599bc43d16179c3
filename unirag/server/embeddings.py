"""`/v1/embeddings`: the model's vectors in the shape OpenAI's embeddings API answers with.

They are the ones `unirag embed` prints: the adapter's pooling (EOS for the shipped one),
L2-normalised, each text as given. `input_type: "query"` puts the adapter's query cue before each
text, as unirag's own searches do, for a client that searches with its own vector store.
"""

from __future__ import annotations

import base64

from unirag.server.errors import ApiError
from unirag.server.schemas import EmbeddingRequest


def embeddings(model, request: EmbeddingRequest, model_id: str) -> dict:
    from unirag.retrieval.search import query_text

    hidden = int(model.model.config.hidden_size)
    if request.dimensions is not None and request.dimensions != hidden:
        raise ApiError(400, f"this model's embeddings have {hidden} dimensions, not {request.dimensions}",
                       "dimensions")
    texts = request.texts
    if request.input_type == "query":
        texts = [query_text(model, t) for t in texts]
    vectors = model.embed(texts).astype("<f4")
    tokens = sum(len(ids) for ids in model.tokenizer(texts, add_special_tokens=False)["input_ids"])
    data = []
    for i, vector in enumerate(vectors):
        value = (base64.b64encode(vector.tobytes()).decode() if request.encoding_format == "base64"
                 else [float(x) for x in vector])
        data.append({"object": "embedding", "index": i, "embedding": value})
    return {"object": "list", "data": data, "model": model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
