"""Side caches: files a service keeps to avoid recomputing what it derives from records (lesson signatures, entity
embeddings). One JSON line per entry, `{"key": ..., "hash": ..., "value": ...}`, after a header line naming what
the cache holds (its `tag`: the code version or model that made it). A cache is never trusted: a missing,
unreadable or other-tag file reads as empty, and an entry counts only while its `hash` matches the record it was
made from. Written atomically (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from memory_graph.storage.files import atomic_write

log = logging.getLogger(__name__)


def read_side_cache(path: Path, tag: str) -> dict[str, tuple[str, Any]]:
    """key -> (hash of the record it was made from, value); empty when missing, unreadable or of another tag."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring the cache %s (%s); it is computed again", path, exc)
        return {}
    try:
        if not lines or json.loads(lines[0]).get("tag") != tag:
            return {}
        found: dict[str, tuple[str, Any]] = {}
        for line in lines[1:]:
            item = json.loads(line)
            found[str(item["key"])] = (str(item["hash"]), item["value"])
        return found
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("ignoring the unreadable cache %s (%s); it is computed again", path, exc)
        return {}


def write_side_cache(path: Path, tag: str, entries: dict[str, tuple[str, Any]]) -> None:
    lines = [json.dumps({"tag": tag, "count": len(entries)})]
    for key, (digest, value) in entries.items():
        lines.append(json.dumps({"key": key, "hash": digest, "value": value}, ensure_ascii=False))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the cache folder; a data folder exists already
    atomic_write(path, "\n".join(lines) + "\n", durable=False)  # a cache: losing it costs a recomputation
