"""The embeddings side file: one line per entity, `{"name", "hash", "vector"}`, the vector as base64 of little-endian
float16 (768 bytes for 384 dimensions, so 10k entities take about 10 MB). It is a cache: a missing, unreadable or
other-model file is rebuilt from the graph, never trusted; a line whose `hash` no longer matches its entity's
text is embedded again. Written atomically (temp file, fsync, rename), like the data files.
"""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

from memory_graph.storage.files import atomic_write

log = logging.getLogger(__name__)


def read_vectors(path: Path, model: str) -> dict[str, tuple[str, bytes]]:
    """name -> (text hash, float16 bytes) from the side file, or nothing when it is missing or for another model."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring the embeddings file %s (%s); they are computed again", path, exc)
        return {}
    if not lines:
        return {}
    try:
        header = json.loads(lines[0])
        if header.get("model") != model:
            return {}
        found: dict[str, tuple[str, bytes]] = {}
        for line in lines[1:]:
            item = json.loads(line)
            found[str(item["name"])] = (str(item["hash"]), base64.b64decode(item["vector"]))
        return found
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("ignoring the unreadable embeddings file %s (%s); they are computed again", path, exc)
        return {}


def write_vectors(path: Path, model: str, vectors: dict[str, tuple[str, bytes]]) -> None:
    lines = [json.dumps({"model": model, "count": len(vectors)})]
    for name, (digest, raw) in vectors.items():
        lines.append(
            json.dumps(
                {"name": name, "hash": digest, "vector": base64.b64encode(raw).decode("ascii")}, ensure_ascii=False
            )
        )
    atomic_write(path, "\n".join(lines) + "\n", durable=False)  # a cache: losing it to a power cut costs a rebuild
