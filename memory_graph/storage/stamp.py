"""The stamp: one small file per collection (`memory.json.stamp`) that is both its manifest and its change signal.

It lists the collection's shard files by name, each with a generation token that every commit rewriting the
shard renews. It says two things:
- **which files are this collection's shards.** A file named like a shard (`memory-2.json`) that the stamp does
  not list is not ours (it may be another memory's main file in the same folder) and is never read or
  written. A collection without a stamp (a legacy store, or one whose stamp was lost) adopts shard files by
  name, except files that are clearly another memory's (they have a lock, stamp or journal of their own).
- **whether another process committed.** It is written *before* any shard is touched, so a process tells with
  one small read whether to reload; a writer that dies after writing it only makes others reread (harmless).
  It is fsynced only when the set of shards changes: a lost generation only makes the next process compare
  shard stats, but a lost shard name would hide that shard.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from memory_graph.storage.files import atomic_write
from memory_graph.storage.layout import FileStat

FORMAT = 2
Manifest = dict[str, str]
"""Shard file name -> generation token."""


def stat_generation(stat: FileStat) -> str:
    """The generation a commit lists for a shard that no commit has written (held without one: a file the official
    server wrote, or one read before the store had a stamp): made from the stat it was read with, so that every
    process holding that same file finds it unchanged. A new random token there made every process that held it,
    the writer included, read it again whole at its next check (6.5 s at 100k entities in one 38 MB file, with the
    store's lock held). A commit that rewrites the shard gives it a random token, as it gives every shard it
    writes."""
    size, mtime_ns, inode, ctime_ns = stat
    return f"stat-{size:x}-{mtime_ns:x}-{inode:x}-{ctime_ns:x}"


def same_generation(listed: str, held: str | None, stat: FileStat | None) -> bool:
    """Whether a shard the stamp lists with generation `listed` is the file held with generation `held` (None: no
    commit had written it) and `stat`."""
    return listed == held or (held is None and stat is not None and listed == stat_generation(stat))


class StampFile:
    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> bytes:
        try:
            return self.path.read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return b""

    @staticmethod
    def manifest(raw: bytes) -> Manifest | None:
        """The shards a stamp lists, or None when there is no usable stamp (adopt shards by name then)."""
        try:
            data = json.loads(raw.decode("utf-8")) if raw else None
        except (ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("shards"), dict):
            return None  # an older stamp listed only the shards it had rewritten: not a manifest
        return {str(k): str(v) for k, v in data["shards"].items() if isinstance(k, str) and "/" not in k}

    @staticmethod
    def new_token() -> str:
        return secrets.token_hex(8)

    def write(self, shards: Manifest, durable: bool) -> bytes:
        stamp = {"format": FORMAT, "shards": shards}
        text = json.dumps(stamp, separators=(",", ":"), sort_keys=True)
        atomic_write(self.path, text, durable=durable)
        return text.encode("utf-8")
