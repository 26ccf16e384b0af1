"""The stamp: one small file whose bytes change with every commit, so a process tells with one read whether
another process committed since it last looked.

It maps each shard's path to a generation token renewed by every commit that rewrites the shard, written
*before* any shard is touched: a writer that dies after it only makes others reread (harmless); one that wrote
it last could let them miss a change and overwrite it. It is not fsynced: a stamp lost to a power cut only
makes the next process compare shard stats.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from pathlib import Path

from memory_graph.storage.files import atomic_write


class StampFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            return b""

    @staticmethod
    def generations(raw: bytes) -> dict[str, str]:
        """The shard -> generation map in a stamp's bytes; an unreadable stamp counts as empty (rereads)."""
        try:
            data = json.loads(raw.decode("utf-8")) if raw else {}
            generations = data.get("generations", {})
            return {str(k): str(v) for k, v in generations.items()} if isinstance(generations, dict) else {}
        except (ValueError, AttributeError):
            return {}

    def renew(self, rewritten: Iterable[Path], removed: Iterable[Path]) -> tuple[str, bytes]:
        """Give the shards a commit rewrites a new generation (and forget removed ones): (token, new bytes)."""
        generations = self.generations(self.read())
        token = secrets.token_hex(8)
        for path in rewritten:
            generations[str(path)] = token
        for path in removed:
            generations.pop(str(path), None)
        text = json.dumps({"generations": generations}, separators=(",", ":"), sort_keys=True)
        atomic_write(self.path, text, durable=False)
        return token, text.encode("utf-8")
