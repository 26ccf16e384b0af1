"""Where a store's bytes live: the one naming rule for shards and for the lock, journal and stamp files.

A collection's main file (`memory.json`) and its shards `memory-1.json`, `memory-2.json`, ... sit in one folder.
The store's own bookkeeping files are named after the first collection's main file: `memory.json.lock`,
`memory.json.journal`, `memory.json.stamp`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

FileStat = tuple[int, int, int]
"""(size, mtime_ns, inode): what tells whether a file changed since it was read."""


def file_stat(path: Path) -> FileStat | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


@dataclass
class ShardNames:
    """The shard files of one collection: index 0 is the main file, index n is `<stem>-<n><suffix>`."""

    main_path: Path
    _paths: dict[int, Path] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        stem, suffix = self.main_path.stem, self.main_path.suffix
        self._pattern = re.compile(rf"^{re.escape(stem)}-([1-9][0-9]*){re.escape(suffix)}$")

    @property
    def folder(self) -> Path:
        return self.main_path.parent

    def path(self, index: int) -> Path:
        path = self._paths.get(index)
        if path is None:
            main = self.main_path
            name = main.name if index == 0 else f"{main.stem}-{index}{main.suffix}"
            path = self._paths[index] = main.with_name(name)
        return path

    def index_of(self, file_name: str) -> int | None:
        if file_name == self.main_path.name:
            return 0
        match = self._pattern.match(file_name)
        return int(match.group(1)) if match else None

    def discover(self) -> dict[int, FileStat]:
        """The shards on disk and their stats: one directory scan, one stat per shard."""
        found: dict[int, FileStat] = {}
        try:
            entries = os.scandir(self.folder)
        except FileNotFoundError:
            return found
        with entries:
            for entry in entries:
                index = self.index_of(entry.name)
                if index is None:
                    continue
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                found[index] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return found


@dataclass(frozen=True)
class StoreFiles:
    """The store's bookkeeping files, beside the first collection's main file."""

    folder: Path
    lock: Path
    journal: Path
    stamp: Path

    @classmethod
    def beside(cls, main_path: Path) -> StoreFiles:
        def sibling(suffix: str) -> Path:
            return main_path.with_name(f"{main_path.name}.{suffix}")

        return cls(main_path.parent, sibling("lock"), sibling("journal"), sibling("stamp"))


def rejected_lines_file(shard: Path, stamp: str) -> Path:
    """Where `repair` keeps the lines it takes out of a shard."""
    return shard.with_name(f"{shard.name}.rejected-{stamp}")
