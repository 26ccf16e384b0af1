"""The sharded JSON Lines store: shards, locking, change detection and all-or-nothing commits.

A *collection* is one logical data file (`memory.json`, `lesson.json`) split into shards of at most
`shard_lines` lines: `memory.json`, `memory-1.json`, `memory-2.json`, ... beside it. Every record lives in one
shard; a write rewrites only the shards it changes, so its cost does not grow with the graph.

Several processes may share the files (Claude Desktop and Cursor on one memory). The rules:
- every commit happens under an inter-process `filelock`, after the store has caught up with the files;
- a small *stamp* file beside the main file maps each shard to a generation token that every commit renews
  (before touching any shard). A call reads that one small file; only when it changed does the store stat
  the shards and reparse the ones whose generation or (size, mtime, inode) changed. Hand edits, which renew
  no token, are caught by the stat comparison done before every commit and at most once a second on reads;
- a commit that touches more than one file goes through a journal (see `files.py`), so a crash leaves the
  state before or after it, never a mix; whoever takes the lock next finishes an interrupted commit.

The store knows records only as dicts with a key; it tells its listeners (the graph and lesson indexes) what
changed, whether the change came from this process or from the files.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, Protocol, TypeVar

import filelock

from memory_graph.errors import CorruptFileError, LineProblem, StaleShardError, StorageError
from memory_graph.storage.files import (
    FileWrite,
    atomic_write,
    commit_files,
    recover_journal,
    remove_stray_temps,
)
from memory_graph.storage.format import Key, ParsedFile, dump_line, merge_records, parse_text, record_key

log = logging.getLogger(__name__)

Stamp = tuple[int, int, int]
P = ParamSpec("P")
R = TypeVar("R")
LOCK_TIMEOUT_SECONDS = 60.0


def retry_if_stale(method: Callable[P, R]) -> Callable[P, R]:
    """Run a write again (once) when its commit found a shard changed on disk since it was read.

    The store has read the change in by then, so the second run decides on the current data.
    """

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except StaleShardError:
            return method(*args, **kwargs)

    return wrapper


class ChangeListener(Protocol):
    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        """Called with the store lock held, after the change is on disk (or was found on disk)."""


@dataclass
class Changes:
    """What one call changes in one collection: records to write (insert or replace) and keys to delete."""

    upserts: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[Key] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)


@dataclass
class Shard:
    path: Path
    lines: dict[Key, str]
    stamp: Stamp | None
    generation: str | None
    problems: list[LineProblem] = field(default_factory=list)
    line_count: int = 0  # lines in the file, good and bad: what the shard limit counts


def _stat(path: Path) -> Stamp | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def read_shard_file(path: Path) -> ParsedFile:
    """Parse a shard; bytes that are not UTF-8 make their line a problem instead of failing the file."""
    data = path.read_bytes()
    try:
        return parse_text(path, data.decode("utf-8"))
    except UnicodeDecodeError:
        parsed = parse_text(path, data.decode("utf-8", errors="replace"))
        undecodable: dict[int, str] = {}
        for number, raw in enumerate(data.split(b"\n"), start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                undecodable[number] = f"not UTF-8 text ({exc.reason})"
        parsed.without_lines(set(undecodable))
        problems = {p.line_number: p for p in parsed.problems}
        problems.update((n, LineProblem(path, n, why)) for n, why in undecodable.items())
        parsed.problems = [problems[n] for n in sorted(problems)]
        return parsed


class Collection:
    """One logical data file and its shards."""

    def __init__(self, name: str, main_path: Path, shard_lines: int) -> None:
        self.name = name
        self.main_path = main_path
        self.shard_lines = shard_lines
        self.shards: dict[int, Shard] = {}
        self.locations: dict[Key, list[int]] = {}
        self._paths: dict[int, Path] = {}
        self._main_name = main_path.name
        stem, suffix = main_path.stem, main_path.suffix
        self._stem, self._suffix = stem, suffix
        self._pattern = re.compile(rf"^{re.escape(stem)}-([1-9][0-9]*){re.escape(suffix)}$")

    def shard_path(self, index: int) -> Path:
        path = self._paths.get(index)
        if path is None:
            name = self.main_path.name if index == 0 else f"{self._stem}-{index}{self._suffix}"
            path = self._paths[index] = self.main_path.with_name(name)
        return path

    def discover(self) -> dict[int, Stamp]:
        """The shards on disk and their (size, mtime, inode): one directory scan, one stat per shard."""
        found: dict[int, Stamp] = {}
        try:
            entries = os.scandir(self.main_path.parent)
        except FileNotFoundError:
            return found
        main_name = self._main_name
        with entries:
            for entry in entries:
                if entry.name == main_name:
                    index = 0
                else:
                    match = self._pattern.match(entry.name)
                    if not match:
                        continue
                    index = int(match.group(1))
                try:
                    st = entry.stat()
                except FileNotFoundError:
                    continue
                found[index] = (st.st_size, st.st_mtime_ns, st.st_ino)
        return found

    def problems(self) -> list[LineProblem]:
        return [p for index in sorted(self.shards) for p in self.shards[index].problems]

    def all_lines(self, key: Key) -> str | None:
        """Every stored copy of a record (usually one), to tell whether any of them changed."""
        where = self.locations.get(key)
        if not where:
            return None
        return "\n".join(self.shards[index].lines[key] for index in where)

    def record(self, key: Key, parsed: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """The record for a key, merging copies that several shards hold (an old fork's split duplicated them)."""
        where = self.locations[key]
        if len(where) == 1:
            line = self.shards[where[0]].lines[key]
            return parsed.get(line) or json.loads(line)
        records = [parsed.get(line) or json.loads(line) for line in (self.shards[i].lines[key] for i in where)]
        merged = records[0]
        for other in records[1:]:
            merged = merge_records(merged, other)
        return merged

    def all_records(self) -> Iterator[dict[str, Any]]:
        """Every record once, in file order, copies in several shards merged."""
        for index in sorted(self.shards):
            for key in self.shards[index].lines:
                if self.locations[key][0] == index:
                    yield self.record(key, {})


class Store:
    """All collections of one memory, one lock, one journal; see the module docstring."""

    def __init__(
        self,
        collections: dict[str, Path],
        shard_lines: int = 1000,
        hand_edit_check_seconds: float = 1.0,
    ) -> None:
        if shard_lines < 1:
            raise StorageError("the shard size must be at least 1 line; set MEMORY_SHARD_LINES to 1 or more")
        self.collections = {name: Collection(name, path, shard_lines) for name, path in collections.items()}
        main = next(iter(collections.values()))
        self.folder = main.parent
        self.lock_path = main.with_name(f"{main.name}.lock")
        self.journal_path = main.with_name(f"{main.name}.journal")
        self.stamp_path = main.with_name(f"{main.name}.stamp")
        self.shard_lines = shard_lines
        self._hand_edit_interval = hand_edit_check_seconds
        self._thread_lock = threading.RLock()
        self._file_lock = filelock.FileLock(str(self.lock_path), timeout=LOCK_TIMEOUT_SECONDS)
        self._listeners: list[ChangeListener] = []
        self._seen_stamp: bytes | None = None
        self._last_full_check = 0.0
        self._opened = False
        self.bytes_written = 0  # for tests and benchmarks: what commits cost

    # -- lifecycle -------------------------------------------------------------------------------------
    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def open(self) -> None:
        """Create the folders, finish an interrupted commit, and load every shard."""
        for collection in self.collections.values():
            try:
                collection.main_path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot create the data folder {collection.main_path.parent}: {exc.strerror}. "
                    "Point MEMORY_FILE_PATH (or LESSON_FILE_PATH) at a folder you can write to."
                ) from exc
        with self._thread_lock:
            if self._opened:
                return
            with self._locked():
                self._catch_up(startup=True)
                self._opened = True

    @contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self._file_lock.acquire()
        except filelock.Timeout as exc:
            raise StorageError(
                f"another process has held the lock {self.lock_path} for over {LOCK_TIMEOUT_SECONDS:.0f} s; "
                "if no memory-graph process is running, delete that file and retry"
            ) from exc
        except OSError as exc:
            raise StorageError(f"cannot create the lock file {self.lock_path}: {exc.strerror}") from exc
        try:
            yield
        finally:
            self._file_lock.release()

    # -- reading and writing ---------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the store still for a read, after catching up with other processes' commits."""
        with self._thread_lock:
            if not self._opened:
                self.open()
            elif self._behind():
                with self._locked():
                    self._catch_up()
            yield

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store and the inter-process lock for a read-modify-write; commit() inside."""
        with self._thread_lock:
            if not self._opened:
                self.open()
            with self._locked():
                # Other processes renew the stamp before they touch a shard, so an unchanged stamp means
                # nothing to reload; hand edits are caught by the throttled full check and, for the shards
                # a commit rewrites, by `_verify_unchanged` just before writing.
                if self._behind():
                    self._catch_up()
                yield

    def problems(self) -> list[LineProblem]:
        with self.reading():
            return [p for c in self.collections.values() for p in c.problems()]

    # -- catching up with the files --------------------------------------------------------------------
    def _read_stamp(self) -> bytes:
        try:
            return self.stamp_path.read_bytes()
        except FileNotFoundError:
            return b""

    def _stamp_generations(self, raw: bytes) -> dict[str, str]:
        try:
            data = json.loads(raw.decode("utf-8")) if raw else {}
            generations = data.get("generations", {})
            return {str(k): str(v) for k, v in generations.items()} if isinstance(generations, dict) else {}
        except (ValueError, AttributeError):
            return {}

    def _behind(self) -> bool:
        """Whether another process committed (the stamp changed) or a check for hand edits is due."""
        return (
            self._read_stamp() != self._seen_stamp
            or time.monotonic() - self._last_full_check >= self._hand_edit_interval
        )

    def _catch_up(self, startup: bool = False) -> None:
        """With the file lock held: finish any interrupted commit and reload what changed on disk."""
        try:
            recovered = recover_journal(self.journal_path)
        except OSError as exc:
            raise StorageError(f"cannot finish the interrupted commit in {self.journal_path}: {exc}") from exc
        if recovered:
            log.warning("finished a commit interrupted by a crash: %d file(s)", len(recovered))
        if startup or recovered:
            # Only a crashed writer leaves temp files; sweeping them on every write would cost a directory scan.
            for collection in self.collections.values():
                remove_stray_temps(collection.main_path.parent, collection.main_path.stem)
        raw = self._read_stamp()
        generations = self._stamp_generations(raw)
        for collection in self.collections.values():
            self._reload_changed_shards(collection, generations)
        self._seen_stamp = raw
        self._last_full_check = time.monotonic()
        if startup:
            for problem in (p for c in self.collections.values() for p in c.problems()):
                log.error("unreadable line (kept, never overwritten): %s", problem)

    def _reload_changed_shards(self, collection: Collection, generations: dict[str, str]) -> None:
        on_disk = collection.discover()
        changed: dict[int, ParsedFile | None] = {}
        for index in set(on_disk) | set(collection.shards):
            known = collection.shards.get(index)
            if index not in on_disk:
                changed[index] = None
                continue
            stamp = on_disk[index]
            path = collection.shard_path(index)
            generation = generations.get(str(path)) if generations else None
            if known is None or known.stamp != stamp or (generation is not None and generation != known.generation):
                try:
                    changed[index] = read_shard_file(path)
                except FileNotFoundError:
                    changed[index] = None
                except OSError as exc:
                    raise StorageError(f"cannot read {path}: {exc.strerror}") from exc
        if not changed:
            return
        affected: set[Key] = set()
        before: dict[Key, str | None] = {}
        for index in changed:
            old = collection.shards.get(index)
            if old is not None:
                affected.update(old.lines)
            parsed = changed[index]
            if parsed is not None:
                affected.update(key for key, _, _ in parsed.records)
        first_load = not collection.locations
        if not first_load:
            for key in affected:
                before[key] = collection.all_lines(key)
        fresh_records: dict[str, dict[str, Any]] = {}
        for index, parsed in changed.items():
            old = collection.shards.pop(index, None)
            if old is not None:
                for key in old.lines:
                    where = collection.locations.get(key)
                    if where is not None and index in where:
                        where.remove(index)
            if parsed is None:
                continue
            path = collection.shard_path(index)
            lines: dict[Key, str] = {}
            for key, record, line in parsed.records:
                if key in lines:
                    # The same record twice in one shard (the official server's in-call duplicates, a hand edit):
                    # merged, so no observation is lost; `check` reports it, the next write keeps one line.
                    record = merge_records(fresh_records[lines[key]], record)
                    line = dump_line(record)
                lines[key] = line
                fresh_records[line] = record
            collection.shards[index] = Shard(
                path=path,
                lines=lines,
                stamp=_stat(path),
                generation=generations.get(str(path)),
                problems=parsed.problems,
                line_count=len(parsed.records) + len(parsed.problems),
            )
            for key in lines:
                where = collection.locations.setdefault(key, [])
                where.append(index)
                where.sort()
        removed: list[Key] = []
        changed_keys: set[Key] = set()
        for key in () if first_load else affected:
            now = collection.all_lines(key)
            if now is None:
                collection.locations.pop(key, None)
                if before.get(key) is not None:
                    removed.append(key)
            elif now != before.get(key):
                changed_keys.add(key)
        # Listeners see records in file order, so a fresh load keeps the graph's insertion order.
        upserted: list[dict[str, Any]] = []
        if first_load:
            changed_keys = affected
        for index in sorted(i for i in changed if i in collection.shards):
            for key in collection.shards[index].lines:
                if key in changed_keys and collection.locations[key][0] == index:
                    changed_keys.discard(key)
                    upserted.append(collection.record(key, fresh_records))
        for key in changed_keys:  # a copy in another shard changed, or vanished
            upserted.append(collection.record(key, fresh_records))
        self._notify(collection.name, removed, upserted)

    def _notify(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        if removed or upserted:
            for listener in self._listeners:
                listener.records_changed(collection, removed, upserted)

    # -- committing ------------------------------------------------------------------------------------
    def commit(self, changes: dict[str, Changes]) -> None:
        """Write the changes of one call to disk, all or nothing; call inside `writing()`."""
        plans = {name: self._plan(self.collections[name], ch) for name, ch in changes.items() if ch}
        if not plans:
            return
        self._verify_unchanged(plans)
        writes: list[FileWrite] = []
        for name, plan in plans.items():
            collection = self.collections[name]
            for index, lines in plan.items():
                path = collection.shard_path(index)
                if lines:
                    writes.append(FileWrite(path, "\n".join(lines.values()) + "\n"))
                elif index in collection.shards:
                    writes.append(FileWrite(path, None))
        generations = self._stamp_generations(self._read_stamp())
        token = secrets.token_hex(8)
        for write in writes:
            generations[str(write.path)] = token
        for gone in [w for w in writes if w.content is None]:
            generations.pop(str(gone.path), None)
        stamp_text = json.dumps({"generations": generations}, separators=(",", ":"), sort_keys=True)
        try:
            # The stamp goes first: if we die after it, other processes reread the shards (harmless);
            # if it went last, they could miss a change and overwrite it.
            # No fsync: a stamp lost to a power cut only makes the next process compare shard stats.
            atomic_write(self.stamp_path, stamp_text, durable=False)
            commit_files(writes, self.journal_path)
        except OSError as exc:
            raise StorageError(
                f"could not save to {self.folder}: {exc.strerror or exc}. Nothing was changed; "
                "free disk space or fix the folder's permissions, then retry."
            ) from exc
        self.bytes_written += sum(len(w.content.encode("utf-8")) for w in writes if w.content) + len(stamp_text)
        self._seen_stamp = stamp_text.encode("utf-8")
        for name, plan in plans.items():
            self._apply_plan(self.collections[name], plan, changes[name], token)

    def _verify_unchanged(self, plans: dict[str, dict[int, dict[Key, str]]]) -> None:
        """Refuse to overwrite a shard that changed on disk since it was read (a hand edit, say)."""
        for name, plan in plans.items():
            collection = self.collections[name]
            for index in plan:
                known = collection.shards.get(index)
                if _stat(collection.shard_path(index)) != (known.stamp if known is not None else None):
                    self._catch_up()
                    raise StaleShardError(
                        f"{collection.shard_path(index)} changed on disk while this call was being prepared "
                        "(edited by hand?). Nothing was written; the change has been read in, so retry the call."
                    )

    def _plan(self, collection: Collection, changes: Changes) -> dict[int, dict[Key, str]]:
        """New content of every shard the changes touch (copy-on-write); raises before anything is written."""
        plan: dict[int, dict[Key, str]] = {}

        def edit(index: int) -> dict[Key, str]:
            if index not in plan:
                shard = collection.shards.get(index)
                if shard is not None and shard.problems:
                    raise CorruptFileError(shard.problems)
                plan[index] = dict(shard.lines) if shard is not None else {}
            return plan[index]

        for key in changes.deletes:
            for index in collection.locations.get(key, ()):
                edit(index).pop(key, None)
        new_lines: list[tuple[Key, str]] = []
        for record in changes.upserts:
            key = record_key(record)
            line = dump_line(record)
            where = collection.locations.get(key)
            if where:
                edit(where[0])[key] = line
                for extra in where[1:]:
                    edit(extra).pop(key, None)
            else:
                new_lines.append((key, line))
        for index in list(plan):
            overflow = list(plan[index].items())[collection.shard_lines :]
            for key, line in overflow:
                del plan[index][key]
                new_lines.append((key, line))
        if new_lines:
            self._place(collection, plan, new_lines)
        return plan

    def _place(self, collection: Collection, plan: dict[int, dict[Key, str]], new_lines: list[tuple[Key, str]]):
        def size(index: int) -> int:
            if index in plan:
                return len(plan[index])
            return collection.shards[index].line_count

        def usable(index: int) -> bool:
            shard = collection.shards.get(index)
            return shard is None or not shard.problems

        pending = list(new_lines)
        candidates = sorted(set(collection.shards) | set(plan))
        for index in candidates:
            if not pending:
                return
            if not usable(index) or size(index) >= collection.shard_lines:
                continue
            lines = plan.setdefault(index, dict(collection.shards[index].lines) if index in collection.shards else {})
            while pending and len(lines) < collection.shard_lines:
                key, line = pending.pop(0)
                lines[key] = line
        index = 0
        while pending:
            while index in collection.shards or index in plan:
                index += 1
            lines = plan.setdefault(index, {})
            while pending and len(lines) < collection.shard_lines:
                key, line = pending.pop(0)
                lines[key] = line

    def _apply_plan(
        self, collection: Collection, plan: dict[int, dict[Key, str]], changes: Changes, token: str
    ) -> None:
        for index, lines in plan.items():
            old = collection.shards.get(index)
            old_keys = old.lines.keys() if old is not None else dict[Key, str]().keys()
            for key in old_keys - lines.keys():
                where = collection.locations[key]
                where.remove(index)
                if not where:
                    del collection.locations[key]
            for key in lines.keys() - old_keys:
                where = collection.locations.setdefault(key, [])
                where.append(index)
                where.sort()
            if lines:
                path = collection.shard_path(index)
                collection.shards[index] = Shard(path, lines, _stat(path), token, [], len(lines))
            else:
                collection.shards.pop(index, None)
        removed = [key for key in changes.deletes if key not in collection.locations]
        upserted = [r for r in changes.upserts if record_key(r) in collection.locations]
        self._notify(collection.name, removed, upserted)
