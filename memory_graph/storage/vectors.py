"""The embeddings side cache (see side_cache.py): per entity, the text hash and the vector as base64 of
little-endian float16 (768 bytes for 384 dimensions, so 10k entities take about 10 MB), tagged with the model."""

from __future__ import annotations

import base64
from pathlib import Path

from memory_graph.storage.side_cache import read_side_cache, write_side_cache


def read_vectors(path: Path, model: str) -> dict[str, tuple[str, bytes]]:
    """name -> (text hash, float16 bytes); nothing when the file is missing, unreadable or for another model."""
    found: dict[str, tuple[str, bytes]] = {}
    for name, (digest, value) in read_side_cache(path, model).items():
        try:
            found[name] = (digest, base64.b64decode(value))
        except (ValueError, TypeError):
            continue
    return found


def write_vectors(path: Path, model: str, vectors: dict[str, tuple[str, bytes]]) -> None:
    encoded = {name: (digest, base64.b64encode(raw).decode("ascii")) for name, (digest, raw) in vectors.items()}
    write_side_cache(path, model, encoded)
