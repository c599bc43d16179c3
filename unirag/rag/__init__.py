"""Retrieval-augmented generation over a folder of documents, with the one UniModel.

`readers` turns files into text (and says why a file was skipped), `chunking` cuts text into
token-sized, heading-aware pieces, `store` owns the Chroma collection and remembers which model
made its vectors, `ingest` keeps a collection in sync with a folder (incremental, crash-safe),
`pipeline` retrieves and answers with citations, and `cli` holds the typer commands.
"""
