"""The store: all collections of one memory behind one lock, one journal and one stamp.

Several processes may share the files (Claude Desktop and Cursor on one memory). The rules:
- every change happens in a `transaction()`, under an inter-process `filelock`, after the store has caught
  up with the files, and is committed all or nothing when the block ends (nothing is written if it raises);
- a call reads the stamp (see stamp.py); only when it changed does the store stat the shards and reparse the
  ones whose generation or stat changed. Hand edits, which renew no generation, are caught by a stat of every
  shard when a transaction starts and at most once a second on reads;
- a commit that touches more than one file goes through the journal (see files.py), so a crash leaves the
  state before or after it, never a mix; whoever takes the lock next finishes an interrupted commit;
- `check(fix=True)` repairs through the same lock, journal and stamp.

The store knows records only as dicts with a key; it tells its listeners (the graph and lesson indexes) what
changed, whether the change came from this process or from the files.
"""

from __future__ import annotations

import errno
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import filelock

from memory_graph.errors import LineProblem, StaleShardError, StorageError
from memory_graph.storage.check import CheckReport, keep_rejected_lines, plan_repair, report, scan
from memory_graph.storage.codec import Key, RecordCheck, record_key
from memory_graph.storage.collection import Collection, Reloaded
from memory_graph.storage.files import FileWrite, commit_files, read_journal, recover_journal, remove_stray_temps
from memory_graph.storage.layout import ShardNames, StoreFiles, file_stat
from memory_graph.storage.placement import Changes, Plan, plan_changes
from memory_graph.storage.stamp import StampFile

log = logging.getLogger(__name__)

LOCK_TIMEOUT_SECONDS = 60.0
READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


class ChangeListener(Protocol):
    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        """Called with the store lock held, after the change is on disk (or was found on disk)."""


@dataclass
class Transaction:
    """The changes of one call, committed together when the `transaction()` block ends."""

    changes: dict[str, Changes] = field(default_factory=dict)

    def upsert(self, collection: str, record: dict[str, Any]) -> None:
        self.changes.setdefault(collection, Changes()).upserts.append(record)

    def delete(self, collection: str, key: Key) -> None:
        self.changes.setdefault(collection, Changes()).deletes.append(key)


class Store:
    def __init__(
        self,
        collections: dict[str, Path],
        shard_lines: int = 1000,
        hand_edit_check_seconds: float = 1.0,
        record_checks: dict[str, RecordCheck] | None = None,
        lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
    ) -> None:
        if shard_lines < 1:
            raise StorageError("the shard size must be at least 1 line; set MEMORY_SHARD_LINES to 1 or more")
        checks = record_checks or {}
        self.collections = {
            name: Collection(name, ShardNames(path), shard_lines, checks.get(name))
            for name, path in collections.items()
        }
        self.files = StoreFiles.beside(next(iter(collections.values())))
        self.shard_lines = shard_lines
        self._stamp = StampFile(self.files.stamp)
        self._hand_edit_interval = hand_edit_check_seconds
        self._thread_lock = threading.RLock()
        self._lock_timeout = lock_timeout_seconds
        self._file_lock = filelock.FileLock(str(self.files.lock), timeout=lock_timeout_seconds)
        self._listeners: list[ChangeListener] = []
        self._seen_stamp: bytes | None = None
        self._last_full_check = 0.0
        self._opened = False
        self.bytes_written = 0  # for tests and benchmarks: what commits cost

    @property
    def folder(self) -> Path:
        return self.files.folder

    def paths(self) -> set[Path]:
        """Every file that is the store's own: shards on disk, main files, lock, journal, stamp."""
        owned = {self.files.lock, self.files.journal, self.files.stamp}
        for collection in self.collections.values():
            owned.add(collection.names.main_path)
            owned.update(collection.names.path(i) for i in collection.names.discover())
        return {p.resolve() for p in owned}

    # -- lifecycle -------------------------------------------------------------------------------------------
    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def open(self) -> None:
        """Create the folders, finish an interrupted commit, and load every shard."""
        with self._thread_lock:
            if self._opened:
                return
            for collection in self.collections.values():
                _make_folder(collection.names.folder)
            with self._locked(write=False) as locked:
                self._catch_up(startup=True, locked=locked)
                self._opened = True
            log.info("memory opened: %s", ", ".join(str(c.names.main_path) for c in self.collections.values()))

    @contextmanager
    def _locked(self, write: bool) -> Iterator[bool]:
        """Hold the inter-process lock; yields whether it is held. A folder where the lock file cannot be
        created (read-only) still serves reads, unlocked; writes there are refused with the reason."""
        try:
            self._file_lock.acquire()
        except filelock.Timeout as exc:
            raise StorageError(
                f"another process has held the lock {self.files.lock} for over {self._lock_timeout:g} s "
                "(a long import or repair?). Nothing was changed; retry when it has finished."
            ) from exc
        except OSError as exc:
            if write or exc.errno not in READ_ONLY_ERRNOS:
                raise StorageError(
                    f"cannot change the memory in {self.folder}: the lock file {self.files.lock} cannot be created "
                    f"({exc.strerror}). Reads still work; to write, make the folder writable or point "
                    "MEMORY_FILE_PATH at a writable folder."
                ) from exc
            yield False
            return
        try:
            yield True
        finally:
            self._file_lock.release()

    # -- reading and writing ---------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the store still for a read, after catching up with other processes' commits."""
        with self._thread_lock:
            if not self._opened:
                self.open()
            elif self._behind():
                with self._locked(write=False) as locked:
                    self._catch_up(locked=locked)
            yield

    def poll(self) -> None:
        """Catch up with other processes now (tells listeners, such as idle subscribers, what changed)."""
        with self.reading():
            pass

    @contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A read-modify-write: decide on the current data inside the block, committed when it ends."""
        with self._thread_lock:
            if not self._opened:
                self.open()
            with self._locked(write=True):
                # Other processes renew the stamp before they touch a shard; hand edits renew nothing, so every
                # shard's stat is compared too, and a change is read in before the call decides anything.
                if self._behind() or any(c.stale_shards() for c in self.collections.values()):
                    self._catch_up()
                tx = Transaction()
                yield tx
                self._commit(tx.changes)

    def problems(self) -> list[LineProblem]:
        with self.reading():
            return [p for c in self.collections.values() for p in c.problems()]

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """Each collection's shard files: path, lines, bytes."""
        with self.reading():
            return {
                name: [
                    {
                        "file": str(c.names.path(i)),
                        "lines": c.shards[i].line_count,
                        "bytes": (file_stat(c.names.path(i)) or (0,))[0],
                    }
                    for i in sorted(c.shards)
                ]
                for name, c in self.collections.items()
            }

    # -- catching up with the files --------------------------------------------------------------------------
    def _behind(self) -> bool:
        """Whether another process committed (the stamp changed) or a check for hand edits is due."""
        return (
            self._stamp.read() != self._seen_stamp
            or time.monotonic() - self._last_full_check >= self._hand_edit_interval
        )

    def _catch_up(self, startup: bool = False, locked: bool = True) -> None:
        """Finish any interrupted commit (when holding the lock) and reload what changed on disk."""
        recovered: list[FileWrite] = []
        if locked:
            try:
                recovered = recover_journal(self.files.journal)
            except OSError as exc:
                raise StorageError(f"cannot finish the interrupted commit in {self.files.journal}: {exc}") from exc
        if recovered:
            log.warning("finished a commit interrupted by a crash: %d file(s)", len(recovered))
        if locked and (startup or recovered):
            # Only a crashed writer leaves temp files; sweeping them on every write would cost a directory scan.
            for collection in self.collections.values():
                remove_stray_temps(collection.names.folder, collection.names.main_path.stem)
        raw = self._stamp.read()
        generations = self._stamp.generations(raw)
        for collection in self.collections.values():
            self._notify(collection.name, collection.reload(generations))
        self._seen_stamp = raw
        self._last_full_check = time.monotonic()
        if startup:
            for problem in (p for c in self.collections.values() for p in c.problems()):
                log.error("unreadable line (kept, never overwritten): %s", problem)

    def _notify(self, collection: str, change: Reloaded) -> None:
        if change.removed or change.upserted:
            for listener in self._listeners:
                listener.records_changed(collection, change.removed, change.upserted)

    # -- committing ------------------------------------------------------------------------------------------
    def _commit(self, changes: dict[str, Changes]) -> None:
        plans = {name: plan_changes(self.collections[name], ch) for name, ch in changes.items() if ch}
        if not plans:
            return
        self._verify_unchanged(plans)
        writes: list[FileWrite] = []
        for name, plan in plans.items():
            collection = self.collections[name]
            for index, lines in plan.items():
                path = collection.names.path(index)
                if lines:
                    writes.append(FileWrite(path, "\n".join(lines.values()) + "\n"))
                elif index in collection.shards:
                    writes.append(FileWrite(path, None))
        token = self._write(writes)
        for name, plan in plans.items():
            collection = self.collections[name]
            collection.apply(plan, token)
            removed = [key for key in changes[name].deletes if key not in collection.locations]
            upserted = [r for r in changes[name].upserts if record_key(r) in collection.locations]
            self._notify(name, Reloaded(removed, upserted))

    def _write(self, writes: list[FileWrite]) -> str:
        """Renew the stamp, then make the writes happen all or nothing; returns the new generation token."""
        try:
            token, stamp = self._stamp.renew(
                [w.path for w in writes if w.content is not None], [w.path for w in writes if w.content is None]
            )
            commit_files(writes, self.files.journal)
        except OSError as exc:
            raise StorageError(
                f"could not save to {self.folder}: {exc.strerror or exc}. Nothing was changed; "
                "free disk space or fix the folder's permissions, then retry."
            ) from exc
        self.bytes_written += sum(len(w.content.encode("utf-8")) for w in writes if w.content) + len(stamp)
        self._seen_stamp = stamp
        return token

    def _verify_unchanged(self, plans: dict[str, Plan]) -> None:
        """Refuse to overwrite a shard that changed on disk since the transaction started (a hand edit in the
        last instant): nothing is written, the change is read in, and the caller is told to retry."""
        for name, plan in plans.items():
            collection = self.collections[name]
            for index in plan:
                known = collection.shards.get(index)
                if file_stat(collection.names.path(index)) != (known.stat if known is not None else None):
                    self._catch_up()
                    raise StaleShardError(
                        f"{collection.names.path(index)} changed on disk while this call was being prepared "
                        "(edited by hand?). Nothing was written; the change has been read in, so retry the call."
                    )

    # -- check and repair ------------------------------------------------------------------------------------
    def check(self, fix: bool = False, now: float | None = None) -> CheckReport:
        """Read every file from disk and report what is wrong; with `fix`, repair it (see check.py)."""
        label = time.strftime("%Y%m%dT%H%M%S", time.gmtime(time.time() if now is None else now))
        with self._thread_lock, self._locked(write=fix):
            repaired = self._finish_or_set_aside_journal(label) if fix else []
            journal_problems = [] if fix else self._journal_problems()
            scans = [scan(c) for c in self.collections.values()]
            found = report(scans, self.shard_lines)
            found.problems[:0] = journal_problems
            if fix and found.problems:
                repair = plan_repair(scans)
                repaired.extend(keep_rejected_lines(repair, label))
                self._write(repair.writes)
                found = report([scan(c) for c in self.collections.values()], self.shard_lines)
            found.repaired = repaired
            if self._opened and fix:
                self._catch_up()
            return found

    def _journal_problems(self) -> list[str]:
        try:
            writes = read_journal(self.files.journal)
        except StorageError as exc:
            return [str(exc)]
        if writes is None:
            return []
        return [
            f"{self.files.journal}: an interrupted commit of {len(writes)} file(s); the next server start "
            "or `memory-graph repair` finishes it"
        ]

    def _finish_or_set_aside_journal(self, label: str) -> list[str]:
        try:
            writes = recover_journal(self.files.journal)
        except StorageError:
            aside = self.files.journal.with_name(f"{self.files.journal.name}.unreadable-{label}")
            self.files.journal.replace(aside)
            return [f"moved the unreadable journal {self.files.journal} to {aside}"]
        return [f"finished the interrupted commit in {self.files.journal} ({len(writes)} file(s))"] if writes else []


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot create the data folder {folder}: {exc.strerror}. "
            "Point MEMORY_FILE_PATH (or LESSON_FILE_PATH) at a folder you can write to."
        ) from exc
