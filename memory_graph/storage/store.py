"""The store: all collections of one memory, behind their folders' locks, their stamps and one journal.

Several processes may share the files (Claude Desktop and Cursor on one memory). The rules:
- every change happens in a `transaction()`, under an inter-process lock (lock.py), after the store has caught
  up with the files, and is committed all or nothing when the block ends (nothing is written if it raises);
- a call reads each collection's stamp (see stamp.py); only when one changed does the store stat the shards
  and reparse the ones whose generation or stat changed. Hand edits, which renew no generation, are caught by
  a stat of every shard when a transaction starts and at most once a second on reads;
- a commit that touches more than one file goes through the journal (see files.py), so a crash leaves the
  state before or after it, never a mix; whoever takes the lock next finishes an interrupted commit;
- `check(fix=True)` repairs through the same lock, journal and stamp.

The store knows records only as dicts with a key; it tells its listeners (the graph and lesson indexes) what
changed, whether the change came from this process or from the files.

History: a store opened with a `history` file records, in the same commit, one change event per record a
transaction upserts or deletes in the other collections: {id, at, op, actor, collection, key, before, after}
(full old and new records, None when absent). Events live in their own sharded collection, `history.json`
beside the memory file, so the graph files keep the official format; history listeners hear of them, graph
listeners never do.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import wait
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memory_graph.errors import LineProblem, MemoryGraphError, StaleShardError, StorageError
from memory_graph.storage import collection as collection_module
from memory_graph.storage.check import CheckReport, keep_rejected_lines, plan_repair, report, scan
from memory_graph.storage.codec import HISTORY, RecordCheck, event_check, record_key
from memory_graph.storage.collection import MANY_SHARDS, Collection, CollectionCopy, Reloaded
from memory_graph.storage.engine import (
    LOCK_TIMEOUT_SECONDS,
    ReadsBesideLoad,
    ReadsWhileLoading,
    SnapshotCopy,
    StoreEngine,
    Transaction,
    collector_paused,
    lock_held_too_long,
    public_caller,
    return_freed_memory,
)
from memory_graph.storage.files import (
    BACKGROUND_FLUSH,
    FileWrite,
    appending,
    atomic_write,
    commit_files,
    cut_tail,
    fsync_dir,
    read_journal,
    recover_journal,
    remove_stray_temps,
    replace_in_order,
)
from memory_graph.storage.history_log import (
    commit_of,
    events_appended,
    events_first,
    redo_changes,
    unfinished_commit,
    unfinished_tail,
    whole_commits,
)
from memory_graph.storage.layout import (
    FileStat,
    ShardNames,
    bookkeeping_file,
    file_stat,
    kind_of,
    overlap,
    rejected_lines_file,
)
from memory_graph.storage.lock import FolderLock, LockTimeout
from memory_graph.storage.placement import Changes, plan_changes
from memory_graph.storage.scan import ShardScan
from memory_graph.storage.stamp import Manifest, StampFile

log = logging.getLogger(__name__)

# A load of files larger than this takes long enough (about 0.1 s per 4 MB) that a call arriving meanwhile is
# answered from the files themselves (scan.py); below it, the call waits for the load and gets its whole answer.
SCAN_MIN_BYTES = 8 << 20
# How long such a call waits for the load to take the folder's lock (taken at once, unless another process holds
# it) before it waits for the whole load instead.
SCAN_WAIT_SECONDS = 1.0


class CollectionsCopy:
    """Every kept collection's copy (`Collection.snapshot_copy`): their states, or None when one cannot be kept."""

    def __init__(self, copies: dict[str, CollectionCopy]) -> None:
        self._copies = copies

    def snapshot_state(self) -> dict[str, Any] | None:
        states = {name: copied.snapshot_state() for name, copied in self._copies.items()}
        kept = {name: state for name, state in states.items() if state is not None}
        return kept if len(kept) == len(states) else None


class Store(StoreEngine):
    """The JSON Lines engine (the default): one memory's sharded files, their lock, stamps and journal."""

    collections: dict[str, Collection]

    def __init__(
        self,
        collections: dict[str, Path],
        shard_lines: int = 1000,
        hand_edit_check_seconds: float = 1.0,
        record_checks: dict[str, RecordCheck] | None = None,
        lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
        history: Path | None = None,
        actor: str | None = None,
    ) -> None:
        super().__init__(actor)
        if shard_lines < 1:
            raise StorageError("the shard size must be at least 1 line; set MEMORY_SHARD_LINES to 1 or more")
        # A symlinked data file is followed to the real one: its shards and stamp live beside it, and replacing
        # the link with a regular file would silently stop updating the file it points to.
        collections = {name: Path(os.path.realpath(path)) for name, path in collections.items()}
        main = next(iter(collections.values()))
        if history is not None:
            collections[HISTORY] = Path(os.path.realpath(history))
        _refuse_overlaps(collections)
        checks = {**(record_checks or {}), HISTORY: event_check}
        self.collections = {
            name: Collection(name, ShardNames(path), shard_lines, checks.get(name), lazy=name == HISTORY)
            for name, path in collections.items()
        }
        self.folder = main.parent
        self.journal = bookkeeping_file(main, "journal")
        self.shard_lines = shard_lines
        self._hand_edit_interval = hand_edit_check_seconds
        self._thread_lock = threading.RLock()
        self._lock_timeout = lock_timeout_seconds
        # One lock per data folder, always taken in one global order (by path): two stores sharing a collection
        # share its folder's lock and never deadlock.
        folders = sorted({c.names.folder.resolve() for c in self.collections.values()}, key=str)
        self._locks = [FolderLock(folder, lock_timeout_seconds) for folder in folders]
        self._last_full_check = 0.0
        self._opened = False
        self.reads_beside = ReadsBesideLoad(gated=True, wait_seconds=SCAN_WAIT_SECONDS)
        self._scan = ShardScan(self)
        self.bytes_written = 0  # for tests and benchmarks: what commits cost

    def owns(self, path: Path) -> bool:
        """Whether a path is one of this store's data files (a shard by the naming rule, in its folder)."""
        return any(
            path.parent.resolve() == c.names.folder.resolve() and c.names.index_of(path.name) is not None
            for c in self.collections.values()
        )

    def paths(self) -> set[Path]:
        """Every file that is the store's own: shards on disk, main files, locks, stamps, the journal."""
        owned = {self.journal}
        for collection in self.collections.values():
            owned.update({collection.names.main_path, collection.stamp.path})
            owned.update(collection.names.path(i) for i in collection.on_disk())
        return {p.resolve() for p in owned}

    # -- lifecycle -------------------------------------------------------------------------------------------
    @property
    def location(self) -> str:
        return str(next(iter(self.collections.values())).names.main_path)

    def opening(self) -> None:
        if not self._opened:
            self.reads_beside.load_begins()

    def reads_while_loading(self) -> ReadsWhileLoading | None:
        return self._scan if self.reads_beside.expected else None

    def _give_way(self) -> None:
        self.reads_beside.give_way()

    def open(self) -> None:
        """Create the folders, finish an interrupted commit, and load every shard."""
        with self._thread_lock:
            if self._opened:
                return
            self.reads_beside.load_begins()
            try:
                self._open()
            finally:
                self.reads_beside.stop_admitting()
                self._scan.forget()
            # Before the first call is let in: the RSS a client sees after its first answer is then what the
            # memory holds, not also the restore's chunks (a restart at 100k: 241 MB at the answer, 211 MB once
            # handed back).
            return_freed_memory()
            log.info("memory opened: %s", ", ".join(str(c.names.main_path) for c in self.collections.values()))

    def _open(self) -> None:
        for collection in self.collections.values():
            _make_folder(collection.names.folder)
            _refuse_odd_files(collection.names.main_path, collection.stamp.path, self.journal)
        # A load makes millions of small containers and no garbage: the collector would rescan them all,
        # again and again, for a third of the load time.
        with self._locked(write=False), collector_paused(freeze=True):
            # Calls arriving meanwhile are answered from the files (scan.py) while this holds their lock and they
            # are what they will stay: not while a crash's commit is still to be finished, nor once the lock is let
            # go (`stop_admitting` waits for those running).
            if not self.journal.exists() and self._shard_bytes() > SCAN_MIN_BYTES:
                # A restore takes a tenth of what reading every line takes: a read that passes over every record
                # (a search matching thousands) waits for it instead.
                restoring = self._snapshot is not None and self._snapshot.exists()
                self._scan.every_record = not restoring
                self.reads_beside.admit()
            try:
                # (Only the snapshotted ones: the history, kept by no snapshot, stays held when a hold as restored
                # fails and the store is opened again, which must restore, so the catch-up reports to every part what
                # changed since the snapshot, removals too; a load from nothing reports only records.)
                try:
                    if not any(c.shards or c.locations for c in self._snapshotted().values()):
                        self._restore_snapshot()
                    self._catch_up(startup=True)
                except BaseException:
                    # Trigger: a load that failed part way (a file edited while it was read, a part's error). Why: a
                    # first load is heard a slice at a time, so the collections and the parts hold part of it.
                    # Outcome: all of it is let go; the next call loads again from nothing.
                    self._hold_nothing()
                    raise
                self._opened = True
            finally:
                self.reads_beside.stop_admitting()

    def _shard_bytes(self) -> int:
        return sum(size for c in self.collections.values() if c.name != HISTORY for size, *_ in c.on_disk().values())

    @contextmanager
    def _locked(self, write: bool) -> Iterator[None]:
        """Hold the inter-process lock of every data folder; yields whether they are held."""
        taken: list[FolderLock] = []
        try:
            for lock in self._locks:
                lock.acquire()
                taken.append(lock)
        except LockTimeout as exc:
            _release(taken)
            raise lock_held_too_long(str(exc), self._lock_timeout) from exc
        except OSError as exc:
            _release(taken)
            raise StorageError(
                f"cannot open the data folder {exc.filename} ({exc.strerror}); check that it exists and that "
                "this user may read it, or point MEMORY_FILE_PATH elsewhere"
            ) from exc
        try:
            if write:
                self._refuse_read_only()
            yield
        finally:
            _release(taken)

    def _refuse_read_only(self) -> None:
        for folder in {c.names.folder for c in self.collections.values()}:  # usually one folder for all
            if not os.access(folder, os.W_OK):
                raise StorageError(
                    f"cannot change the memory: the data folder {folder} is read-only for this user. Reads still "
                    "work; to write, make the folder writable or point MEMORY_FILE_PATH at a writable folder."
                )

    # -- reading and writing ---------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the store still for a read, after catching up with other processes' commits."""
        with self._thread_lock:
            if not self._opened:
                self.open()
            elif self._behind():
                with self._locked(write=False):
                    self._catch_up(full=self._full_check_due())
            yield

    @contextmanager
    def transaction(
        self, operation: str | None = None, actor: str | None = None, record_history: bool = True
    ) -> Iterator[Transaction]:
        label = operation or public_caller()
        with self._thread_lock:
            if not self._opened:
                self.open()
            with self._locked(write=True):
                # Other processes renew the stamp before they touch a shard; hand edits renew nothing, so every
                # shard's stat is compared too, and a change is read in before the call decides anything. The
                # history is nobody's to edit by hand: its (many) shards are not statted on every write, and a
                # shard edited anyway is still refused by `_verify_unchanged` before it is overwritten.
                # Another process's commits first: they changed its shards' stats too, which were taken for hand
                # edits (a full catch-up) by a writer that waited for the lock while others committed. What the
                # stats still tell after it is a hand edit.
                if self._behind():
                    self._catch_up(full=self._full_check_due())
                if any(c.edited_by_hand() for name, c in self.collections.items() if name != HISTORY):
                    self._catch_up()
                tx = Transaction(operation=label, actor=actor or self.actor, record_history=record_history)
                yield tx
                self._record_events(tx)
                if self._commit(tx.changes, tx.token) > MANY_SHARDS:
                    # (after the commit let go of its plans and file texts) the lines of many shards, made and
                    # let go: held by their keys since (Collection.apply)
                    return_freed_memory()

    def problems(self) -> list[LineProblem]:
        with self.reading():
            return [p for c in self.collections.values() for p in c.problems()]

    def _newest_event_ns(self) -> int:
        """From the last line of the newest history shard (new events always go last)."""
        history = self.collections.get(HISTORY)
        if history is None or not history.shards:
            return 0
        lines = history.shards[max(history.shards)].lines
        last = next(reversed(lines), None) if lines else None
        head = str(last[1])[:20] if last is not None else ""
        return int(head) if head.isdigit() else 0

    def load_history(self) -> None:
        history = self.collections.get(HISTORY)
        if history is not None and history.deferred:
            with self._thread_lock, self._locked(write=False):
                # A shard at a time, each let go before the next is parsed: a whole history parsed at once (every
                # event's records as objects) was several times its size on disk, held until the call returned.
                for index in sorted(history.deferred):
                    self._notify(HISTORY, [], history.load_deferred([index]).upserted)
            return_freed_memory()

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """Each collection's shard files: path, lines, bytes."""
        with self.reading():
            self.load_history()
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

    # -- the start snapshot (snapshot.py; the shared rules are the engine's) -----------------------------------
    def close(self) -> None:
        self.save_snapshot()

    def _held(self) -> threading.RLock:
        return self._thread_lock

    def _snapshotted(self) -> dict[str, Collection]:
        """The collections a snapshot keeps: all but the history (it loads lazily anyway)."""
        return {name: c for name, c in self.collections.items() if name != HISTORY}

    def _snapshot_identity(self) -> list[str]:
        kept = self._snapshotted()
        return [
            collection_module.__file__,
            str(self.shard_lines),
            *(f"{n}={c.names.main_path}" for n, c in kept.items()),
        ]

    def _record_count(self) -> int:
        return sum(len(c.locations) for c in self._snapshotted().values())

    def _collection_copy(self) -> SnapshotCopy | None:
        """None when a collection cannot be kept (`Collection.snapshot_copy`)."""
        copies = {name: c.snapshot_copy() for name, c in self._snapshotted().items()}
        kept = {name: copied for name, copied in copies.items() if copied is not None}
        return CollectionsCopy(kept) if len(kept) == len(copies) else None

    def _collections_saved(self, state: Any) -> None:
        """Once kept, the shards still as copied are held by their keys as a restart holds them
        (`Collection.hold_keys_only`): their files were just checked against what they hold."""
        for name, kept in state.items():
            self.collections[name].hold_keys_only(kept)

    def _restore_collections(self, state: Any) -> dict[str, Callable[[], list[dict[str, Any]]]]:
        kept = self._snapshotted()
        if not isinstance(state, dict) or set(state) != set(kept):
            raise ValueError("it holds other collections")
        try:
            changed = {name: kept[name].restore_state(state[name]) for name in kept}
        except (TypeError, ValueError, KeyError, IndexError, AttributeError):
            self._forget_collections()
            raise
        return {name: functools.partial(kept[name].restored_records, changed[name]) for name in kept}

    def _forget_collections(self) -> None:
        for collection in self._snapshotted().values():  # (the history, kept by no snapshot, is left as it is)
            collection.shards, collection.locations = {}, {}

    # -- catching up with the files --------------------------------------------------------------------------
    def _behind(self) -> bool:
        """Whether another process committed (the stamp changed) or a check for hand edits is due."""
        return any(c.behind() for c in self.collections.values()) or self._full_check_due()

    def _full_check_due(self) -> bool:
        return time.monotonic() - self._last_full_check >= self._hand_edit_interval

    def _catch_up(self, startup: bool = False, full: bool = True) -> None:
        """With the lock held: finish any interrupted commit and reload what changed on disk.

        Not `full` (another process committed, and the check for hand edits is not due): only what a commit can
        have changed is looked at, a collection whose stamp changed and the history's newest shard (appends do
        not renew its stamp). With 16 processes on one store every call follows others' commits, and statting
        every shard of every collection each time held the lock for longer than the commits being followed."""
        try:
            left = recover_journal(self.journal, self.owns)
        except OSError as exc:
            raise StorageError(f"cannot finish the interrupted commit in {self.journal}: {exc}") from exc
        if left is not None:
            log.warning(
                "finished a commit interrupted by a crash%s", f"; left alone: {', '.join(left)}" if left else ""
            )
        full = full or startup or left is not None
        if startup or left is not None:
            # Only a crashed writer leaves temp files; sweeping them on every write would cost a directory scan.
            for folder in {c.names.folder for c in self.collections.values()}:
                remove_stray_temps(folder, [c.names.main_path.stem for c in self.collections.values()])
        appended = self._follow_appended_events() if not startup else []
        new_events: list[dict[str, Any]] = []
        for collection in self.collections.values():
            if not (full or collection.behind() or collection.lazy):
                continue
            # A first load's records are heard shard by shard as they are read (`Collection.reload`'s `hear`).
            hear = functools.partial(self._hear_loaded, collection.name) if collection.name != HISTORY else None
            change = collection.reload(hand_edits=full, hear=hear, give_way=self._give_way)
            if collection.name == HISTORY:
                change = Reloaded(change.removed, [*appended, *change.upserted])
                change = self._set_aside_unfinished_appends(collection, change)
                new_events = change.upserted
            if collection.name == HISTORY or change.removed:
                self._notify(collection.name, change.removed, change.upserted)
            else:  # records new or changed only (a first load's, all of them): heard in slices
                self._notify_taking(collection.name, change.upserted)
        if new_events:
            self._roll_forward(new_events)
        if full:
            self._last_full_check = time.monotonic()
        if startup:
            for problem in (p for c in self.collections.values() for p in c.problems()):
                log.error("unreadable line (kept, never overwritten): %s", problem)

    def _hear_loaded(self, collection: str, records: list[dict[str, Any]]) -> None:
        """A first load's records, a parsed slice at a time: a call answered from the files meanwhile goes first."""
        self._give_way()
        self._notify_taking(collection, records)

    def _follow_appended_events(self) -> list[dict[str, Any]]:
        """Apply other processes' commits from the events they appended, instead of reparsing the shards they
        rewrote; returns those events (the history's reload then finds its shard already read).

        Trigger: the newest history shard grew. Why: with several processes on one store, every commit made
        every other process reparse a 1000-line graph shard and the history's; now each reads the few appended
        lines and replays the commits through the same placement the writer used (same state, same plan), then
        compares the bytes it would have written with the file. A shard that differs (a hand edit, an
        unforeseen placement) is reread by the reload that follows, which also corrects what listeners heard."""
        history = self.collections.get(HISTORY)
        if history is None or not history.shards:
            return []
        events = history.read_appended(max(history.shards))
        if not events:
            return []
        touched: dict[str, set[int]] = {}
        for commit in whole_commits(events):
            try:
                # A shard restored from the start snapshot whose file this commit rewrote can no longer be read
                # as it was (StaleShardError): the reload that follows reads it whole.
                changes = redo_changes(commit, self.collections)
                if changes is None:
                    break
                plans = {name: plan_changes(self.collections[name], ch) for name, ch in changes.items()}
            except MemoryGraphError:
                break
            if not all(self.collections[name].shard_known(index) for name, plan in plans.items() for index in plan):
                break  # placed in a shard whose lines are unknown (a new record, say): the reload reads it
            for name, plan in plans.items():
                collection = self.collections[name]
                collection.apply(plan, "")
                touched.setdefault(name, set()).update(plan)
                removed = [key for key in changes[name].deletes if key not in collection.locations]
                upserted = [r for r in changes[name].upserts if record_key(r) in collection.locations]
                self._notify(name, removed, upserted)
        for name, indexes in touched.items():
            collection = self.collections[name]
            generations = collection.stamp.manifest(collection.stamp.read()) or {}
            for index in indexes:
                shard = collection.shards.get(index)
                if shard is None:
                    continue
                if collection.holds_on_disk(index):
                    shard.stat = file_stat(collection.names.path(index))
                    shard.generation = generations.get(collection.names.file_name(index))
                else:
                    shard.stat = None  # read whole by the reload
        return events

    def _set_aside_unfinished_appends(self, history: Collection, change: Reloaded) -> Reloaded:
        """Move aside what a crash left of an append to the history (see `unfinished_tail`), then read the shard
        again. Looked for only where it can be: a shard with an unreadable line, or new events whose newest
        commit is short of its `commitEvents`."""
        suspects = {index for index, shard in history.shards.items() if shard.problems}
        if change.upserted:
            newest = max(change.upserted, key=lambda e: str(e["id"]))
            prefix = commit_of(newest)
            expected = newest.get("commitEvents")
            if isinstance(expected, int) and sum(str(e["id"]).startswith(prefix) for e in change.upserted) < expected:
                suspects.add(history.locations[record_key(newest)][0])
        if not suspects or not all(os.access(c.names.folder, os.W_OK) for c in self.collections.values()):
            return change

        def held(prefix: str) -> int:
            """A commit's events in the whole history (older shards read first: rare, a short commit)."""
            if history.deferred:
                self._notify(HISTORY, [], history.load_deferred().upserted)
            return sum(1 for key in history.locations if str(key[1]).startswith(prefix))

        label = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        cut_any = False
        for index in sorted(suspects):
            path = history.names.path(index)
            try:
                cut = unfinished_tail(path.read_bytes(), held)
                if cut is not None:
                    aside = rejected_lines_file(path, label)
                    cut_tail(path, cut, aside)
                    log.warning("moved what a crash left of an unfinished history append in %s to %s", path, aside)
                    cut_any = True
            except OSError as exc:
                raise StorageError(f"cannot finish the history file {path} a crash left unfinished: {exc}") from exc
        if not cut_any:
            return change
        again = history.reload()
        gone = set(again.removed)
        return Reloaded(
            [*change.removed, *again.removed],
            [*(e for e in change.upserted if record_key(e) not in gone), *again.upserted],
        )

    def _roll_forward(self, new_events: list[dict[str, Any]]) -> None:
        """Finish a commit whose events were written but whose graph shard was not (see history_log.py)."""

        @functools.cache
        def appended() -> FileStat | None:
            """The time of the newest commit's append, by the same clock as the shards' (the kernel's, not the
            event ids', which keep their order when the clock steps back); read once, when first asked."""
            history = self.collections[HISTORY]
            where = history.locations.get(record_key(max(new_events, key=lambda e: str(e["id"]))))
            return file_stat(history.names.path(where[-1])) if where else None

        def written(name: str, token: str) -> bool:
            collection = self.collections.get(name)
            manifest = collection.stamp.manifest(collection.stamp.read()) if collection is not None else None
            if collection is None or manifest is None:
                return True  # no stamp: nothing to tell by
            files = [file for file, generation in manifest.items() if generation == token]
            if not files:
                return False
            appended_at = appended()
            if appended_at is None:
                return True
            # Trigger: a shard the commit was rewriting changed after the commit's events were appended. Why: a
            # crash leaves it as it was before (older than the append); a newer one was replaced by the commit
            # and then edited by hand, say to delete the record the commit created. Outcome: that edit stands,
            # nothing is redone.
            stats = (file_stat(collection.names.folder / file) for file in files)
            return all(stat is None or stat[1] <= appended_at[1] for stat in stats)

        changes = unfinished_commit(new_events, self.collections, written)
        if changes and all(os.access(c.names.folder, os.W_OK) for c in self.collections.values()):
            log.warning("finishing a commit interrupted by a crash, from its history events")
            self._commit(changes)

    # -- committing ------------------------------------------------------------------------------------------
    def _commit(self, changes: dict[str, Changes], token: str | None = None) -> int:
        """Write the changes all or nothing and hold what was written; returns the most shards one collection's
        plan wrote."""
        plans = {
            name: plan_changes(self.collections[name], ch) for name, ch in changes.items() if ch and name != HISTORY
        }
        events = changes.get(HISTORY)
        token = token or StampFile.new_token()
        append = events_appended(events, plans, self.collections[HISTORY]) if events else None
        if events and append is None:
            plans[HISTORY] = plan_changes(self.collections[HISTORY], events)
        if not plans:
            return 0
        self._verify_unchanged(plans if append is None else {**plans, HISTORY: {append[0]: {}}})
        writes: list[FileWrite] = []
        for name, plan in plans.items():
            collection = self.collections[name]
            for index, lines in plan.items():
                path = collection.names.path(index)
                if lines:
                    writes.append(FileWrite(path, "\n".join(lines.values()) + "\n"))
                elif index in collection.shards:
                    writes.append(FileWrite(path, None))
        manifests = {name: self.collections[name].next_manifest(plan, token) for name, plan in plans.items()}
        if append is not None:
            # The history's stamp is not renewed for an append: the graph's is, and every process reloads all its
            # collections when a stamp changes, finding the appended shard by its size.
            index, lines = append
            history_file = self.collections[HISTORY].names.path(index)
            writes.insert(0, FileWrite(history_file, "".join(line + "\n" for line in lines.values()), append=True))
            redo_log = True
        else:
            redo_log = HISTORY in self.collections and events_first(plans, writes, self.collections[HISTORY])
        self._write(writes, manifests, redo_log=redo_log)
        for name, plan in plans.items():
            collection = self.collections[name]
            collection.apply(plan, token, by_keys=len(plan) > MANY_SHARDS)
            removed = [key for key in changes[name].deletes if key not in collection.locations]
            upserted = [r for r in changes[name].upserts if record_key(r) in collection.locations]
            self._notify(name, removed, upserted)
        if append is not None and events is not None:
            self.collections[HISTORY].appended(*append)
            self._notify(HISTORY, [], events.upserts)
        return max(map(len, plans.values()))

    def _write(self, writes: list[FileWrite], manifests: dict[str, Manifest], redo_log: bool = False) -> None:
        """Renew the stamps (first: see stamp.py), then make the writes happen all or nothing (in order, without
        the journal, for a `redo_log` commit: see `_events_first`)."""
        try:
            for name, manifest in manifests.items():
                collection = self.collections[name]
                held = {collection.names.file_name(i) for i in collection.shards}
                collection.seen_stamp = collection.stamp.write(manifest, durable=set(manifest) != held)
                self.bytes_written += len(collection.seen_stamp)
            if redo_log and writes[0].append:
                # The events are the redo log: they must be on disk before the graph shard is replaced, not
                # before its new content is written, so the two flushes overlap.
                # If the graph shard cannot be written, the events are cut back off: the call changed nothing.
                events, shard = writes
                try:
                    with appending(events.path, events.content or "") as flush:
                        flushed = BACKGROUND_FLUSH.submit(flush)
                        try:
                            atomic_write(
                                shard.path, shard.content or "", before_replace=flushed.result, sync_folder=False
                            )
                        finally:
                            wait([flushed])  # the file is closed after this, never under a running flush
                except BaseException:
                    self.collections[HISTORY].taken_back(events.path)
                    raise
                # Past the replace the change is made (and its events are the redo log): a failed folder flush
                # only leaves the rename exposed to a power failure, so it is reported, not undone.
                try:
                    fsync_dir(shard.path.parent)
                except OSError as exc:
                    log.error("saved %s, but flushing its folder failed (%s)", shard.path, exc.strerror or exc)
            elif redo_log:
                replace_in_order(writes)
            else:
                commit_files(writes, self.journal)
        except OSError as exc:
            raise StorageError(
                f"could not save to {self.folder}: {exc.strerror or exc}. Nothing was changed; "
                "free disk space or fix the folder's permissions, then retry."
            ) from exc
        self.bytes_written += sum(len(w.content.encode("utf-8")) for w in writes if w.content)

    def _verify_unchanged(self, plans: Mapping[str, Mapping[int, object]]) -> None:
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
                token = StampFile.new_token()
                manifests = {scanned.collection.name: {s.path.name: token for s in scanned.shards} for scanned in scans}
                self._write(repair.writes, manifests)
                found = report([scan(c) for c in self.collections.values()], self.shard_lines)
            found.repaired = repaired
            if self._opened and fix:
                self._catch_up()
            return found

    def _journal_problems(self) -> list[str]:
        try:
            writes = read_journal(self.journal, self.owns)
        except StorageError as exc:
            return [str(exc)]
        if writes is None:
            return []
        return [
            f"{self.journal}: an interrupted commit of {len(writes)} file(s); the next server start "
            "or `memory-graph repair` finishes it"
        ]

    def _finish_or_set_aside_journal(self, label: str) -> list[str]:
        try:
            left = recover_journal(self.journal, self.owns)
        except StorageError:
            aside = self.journal.with_name(f"{self.journal.name}.unreadable-{label}")
            self.journal.replace(aside)
            return [f"moved the unreadable journal {self.journal} to {aside}"]
        if left is None:
            return []
        kept = f"; left alone (changed since): {', '.join(left)}" if left else ""
        return [f"finished the interrupted commit in {self.journal}{kept}"]


def _refuse_overlaps(collections: dict[str, Path]) -> None:
    paths = list(collections.items())
    for i, (name, path) in enumerate(paths):
        for other_name, other in paths[i + 1 :]:
            if path == other or overlap(path, other):
                raise StorageError(
                    f"the {other_name} file {other} is one of the {name} file's own files ({path}); give it a "
                    "name of its own (MEMORY_FILE_PATH and LESSON_FILE_PATH)"
                )


def _refuse_odd_files(*paths: Path) -> None:
    """Data files must be regular files: a FIFO would hang every call, and a device would be replaced."""
    for path in paths:
        kind = kind_of(path)
        if kind is not None:
            raise StorageError(
                f"{path} is {kind}, not a regular file; memory-graph keeps its data there. Move it away, or point "
                "MEMORY_FILE_PATH (or LESSON_FILE_PATH) at a regular file."
            )


def _release(locks: list[FolderLock]) -> None:
    for lock in reversed(locks):
        lock.release()


def _make_folder(folder: Path) -> None:
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)  # a memory holds personal facts: only its owner may look in
    except OSError as exc:
        raise StorageError(
            f"cannot create the data folder {folder}: {exc.strerror}. "
            "Point MEMORY_FILE_PATH (or LESSON_FILE_PATH) at a folder you can write to."
        ) from exc
