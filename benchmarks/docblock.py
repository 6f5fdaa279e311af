"""Put a benchmark's table into its doc, between the doc's begin and end markers."""

from __future__ import annotations

from pathlib import Path


def write_block(doc: Path, begin: str, end: str, block: str) -> None:
    """Replace what stands between ``begin`` and ``end`` in ``doc`` with ``block``."""
    text = doc.read_text()
    if begin not in text or end not in text:
        raise SystemExit(f"{doc} has no {begin} ... {end} markers")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    doc.write_text(f"{head}{begin}\n{block}\n{end}{tail}")
