"""Retrieval-augmented generation over a folder of documents, with the one UniModel.

`readers` turns files into text (and says why a file was skipped), `chunking` cuts text into
token-sized, heading-aware pieces, `store` owns the Chroma collection and remembers which model
made its vectors, `ingest` keeps a collection in sync with a folder (incremental, crash-safe),
`pipeline` retrieves and answers with citations, and `ask` (with `evidence` and `sentences`) is
the ask flow on top of it. The typer commands live in `unirag/cli/rag_commands.py`, and domain
post-training on the documents (`unirag adapt`) in `unirag/training/adapt.py`: both are layers
above this package (pyproject.toml's import-linter contract).
"""
