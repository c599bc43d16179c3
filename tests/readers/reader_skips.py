"""What the readers' skip tests share: a file a reader refuses is skipped with its reason, and
only such a file gets the skipped format (its old chunks dropped); every other keeps its ids."""

from __future__ import annotations

from unirag.readers.registry import READER_FORMATS, SKIPPED_FORMAT, Skipped, parse, reader_format


def check_skip(file, data: bytes, skipped: bool, reason: str) -> None:
    doc = parse(file, data)
    assert isinstance(doc, Skipped) == skipped
    if skipped:
        assert reason in doc.reason
    assert reader_format(file, data) == (SKIPPED_FORMAT if skipped else READER_FORMATS[file.kind])
