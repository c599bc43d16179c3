"""Retrieval: documents in, the chunks that answer a question out, with the one UniModel.

`chunking` cuts a reader's Markdown into token-sized, heading-aware pieces, `store` owns the
Chroma collection and remembers which model made its vectors, `ingest` keeps a collection in sync
with a folder (incremental, crash-safe), `lexical` is BM25 over the same chunks, `search`
retrieves (dense, BM25 or both, fused) and `rerank` reorders by the model's likelihood. The
answer built from them lives one layer up, in `unirag.answer`.
"""
