"""Where a store's bytes live: the one naming rule for shards and for the lock, journal and stamp files.

A collection's main file (`memory.json`) and its shards `memory-1.json`, `memory-2.json`, ... sit in one folder,
with the collection's own `memory.json.lock` and `memory.json.stamp` beside them (they belong to the files they
protect, so two memories sharing one lesson file share its lock). The store's journal is named after its first
collection's main file: `memory.json.journal`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Set
from dataclasses import dataclass, field
from pathlib import Path

BOOKKEEPING = ("lock", "stamp", "journal")
MAX_SHARD_GAP = 8  # shard numbers a folder without a manifest may skip (is_shard_number)

FileStat = tuple[int, int, int, int]
"""(size, mtime_ns, inode, ctime_ns): what tells whether a file changed since it was read. The ctime because no
one sets it: an edit in place that keeps the size and puts the mtime back (`cp -p`, `rsync -t --inplace`,
`touch -r`) still changes it."""


def stat_of(st: os.stat_result) -> FileStat:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def file_stat(path: Path) -> FileStat | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return stat_of(st)


@dataclass
class ShardNames:
    """The shard files of one collection: index 0 is the main file, index n is `<stem>-<n><suffix>`."""

    main_path: Path
    _paths: dict[int, Path] = field(default_factory=dict, repr=False)
    _texts: dict[int, str] = field(default_factory=dict, repr=False)
    _names: dict[int, str] = field(default_factory=dict, repr=False)

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

    def file_name(self, index: int) -> str:
        """The shard's file name (what the stamp lists), cached."""
        name = self._names.get(index)
        if name is None:
            name = self._names[index] = self.path(index).name
        return name

    def path_text(self, index: int) -> str:
        """The shard's path as text, cached: stat-ing a str skips building a Path on the hot path."""
        text = self._texts.get(index)
        if text is None:
            text = self._texts[index] = str(self.path(index))
        return text

    def index_of(self, file_name: str) -> int | None:
        if file_name == self.main_path.name:
            return 0
        match = self._pattern.match(file_name)
        return int(match.group(1)) if match else None

    def discover(self, manifest: Mapping[str, str] | None, indexes: set[int] | None = None) -> dict[int, FileStat]:
        """This collection's shards on disk (with a manifest: or only those of `indexes`) and their stats, one
        stat per shard.

        The main file is always ours; another shard only if the manifest lists it, or, without a manifest
        (a legacy store), if it is not another memory's main file (which has bookkeeping files of its own):
        only then is the folder scanned. (A scan cost more than the stats: every process follows every other's
        commits, and reloads at each.)"""
        if manifest is not None:
            wanted = {self.main_path.name, *manifest} if indexes is None else map(self.file_name, indexes)
            folder = str(self.folder)
            found: dict[int, FileStat] = {}
            for name in wanted:
                index = self.index_of(name)
                if index is None or (index and name not in manifest):
                    continue
                try:
                    st = os.stat(os.path.join(folder, name))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                if stat.S_ISREG(st.st_mode):
                    found[index] = stat_of(st)
            return found
        try:
            with os.scandir(self.folder) as entries:
                listing = {entry.name: entry for entry in entries}
        except FileNotFoundError:
            return {}
        found = {}
        numbered = {i for i in map(self.index_of, listing) if i}
        for name, entry in listing.items():
            index = self.index_of(name)
            if index is None or (index and not self._ours(name, manifest, listing)):
                continue
            if index and not is_shard_number(index, numbered):
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                found[index] = stat_of(st)
        return found

    @staticmethod
    def _ours(name: str, manifest: Mapping[str, str] | None, listing: Mapping[str, object]) -> bool:
        if manifest is not None:
            return name in manifest
        return not any(f"{name}.{suffix}" in listing for suffix in BOOKKEEPING)


def is_shard_number(index: int, numbers: Set[int]) -> bool:
    """Whether `memory-<index>.json` beside a memory with files of these numbers is one of its shards, where no
    manifest says (a first start on a folder, an import): shards are numbered from 1 as they are made, so a number
    far past how many there are is a copy named by a date or a version (`memory-20240101.json`), whose records a
    start would otherwise take for the memory's, deleted facts and all."""
    return index <= 2 * len(numbers) + MAX_SHARD_GAP


def bookkeeping_file(main_path: Path, suffix: str) -> Path:
    """`memory.json.lock`, `memory.json.stamp`, `memory.json.journal`: a data file's own bookkeeping."""
    return main_path.with_name(f"{main_path.name}.{suffix}")


def rejected_lines_file(shard: Path, stamp: str) -> Path:
    """Where `repair` keeps the lines it takes out of a shard."""
    return shard.with_name(f"{shard.name}.rejected-{stamp}")


def kind_of(path: Path) -> str | None:
    """What a path is when it is not a regular file ("a folder", "a FIFO", ...), or None (a file, or nothing)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    kinds = {stat.S_ISDIR: "a folder", stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a device", stat.S_ISBLK: "a device"}
    return next((kind for test, kind in kinds.items() if test(mode)), "not a regular file")


def overlap(first: Path, second: Path) -> bool:
    """Whether one data file is another's shard or bookkeeping file (so they would overwrite each other)."""
    if first.parent != second.parent:
        return False
    for main, other in ((first, second), (second, first)):
        if ShardNames(main).index_of(other.name) is not None:
            return True
        if other.name in {bookkeeping_file(main, suffix).name for suffix in BOOKKEEPING}:
            return True
    return False


def folder_usage(folder: Path, stems: tuple[str, ...] = ("memory", "history", "lesson")) -> tuple[int, float | None]:
    """Bytes and newest modification time (epoch seconds) of a store folder's data files (`memory.json`,
    `memory-3.json`, `history.json`, ...): what `list_projects` reports. A missing folder holds nothing."""
    total, newest = 0, None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0, None
    for entry in entries:
        stem = entry.name.split(".", 1)[0].rsplit("-", 1)[0]
        if stem in stems and entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
            info = entry.stat(follow_symlinks=False)
            total += info.st_size
            newest = info.st_mtime if newest is None else max(newest, info.st_mtime)
    return total, newest
