"""What every storage engine offers the services, and the rules the engines share.

The services (graph, lessons, history) see one interface, `StoreEngine`: `transaction()` for a read-modify-write
committed all or nothing, `reading()` for a consistent read after catching up with other writers, change
listeners that hear of every record that changed (this process's commits and other processes' alike), and the
change events of the history. Two engines implement it: the JSON Lines files (store.py, the default) and
PostgreSQL (postgres.py). A service never knows which one it runs on.
"""

from __future__ import annotations

import ctypes
import gc
import itertools
import logging
import secrets
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from memory_graph.errors import ConflictError, LineProblem, StorageError
from memory_graph.storage import codec as codec_module
from memory_graph.storage import snapshot as snapshot_module
from memory_graph.storage.check import CheckReport
from memory_graph.storage.codec import HISTORY, Key, RecordCheck
from memory_graph.storage.history_log import change_events
from memory_graph.storage.placement import Changes
from memory_graph.storage.snapshot import WrittenSnapshot, code_tag, mark_used, read_snapshot, write_snapshot

log = logging.getLogger(__name__)

# Below this many records a load takes well under a tenth of a second: no snapshot is worth its file.
SNAPSHOT_MIN_RECORDS = 20_000
NOTIFY_SLICE = 20_000  # records a load's listeners hear in one call (`_notify_taking`)
# The longest a load waits, in all, for reads answered beside it: room for a broad search beside a million entities'
# first load (9 s alone on a slow 2-core machine; with 5 s the load took the processor back half way through it,
# and it ended 3-4 s later).
GIVE_WAY_SECONDS = 15.0
# The longest a writer waits for another process's write (the files' folder lock, PostgreSQL's store lock) before
# it gives up with `lock_held_too_long`: a stuck writer must not freeze every server on the store.
LOCK_TIMEOUT_SECONDS = 60.0
SNAPSHOT_FORMAT = "4"  # 3: large containers in chunks, the file mapped; 4: the skeleton after the chunks (snapshot.py)


def lock_held_too_long(lock: str, seconds: float, holder: str = "another process", remedy: str = "") -> StorageError:
    """The error of a writer that waited `seconds` for a lock another process holds (both engines say it so)."""
    return StorageError(
        f"{holder} has held the lock {lock} for over {seconds:g} s (a long import or repair?). Nothing was changed; "
        f"retry when it has finished{remedy}."
    )


class ChangeListener(Protocol):
    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        """Called with the store held, after the change is stored (or was found stored by another process)."""


class SnapshotCopy(Protocol):
    """What a part (or the engine's collections) copied with the store held, turned into its snapshot state with
    the store let go: a save holds the store only for the copies (tens of ms at 100k entities), not for the
    seconds of computing, checking and encoding the state, which every call arriving meanwhile waited for."""

    def snapshot_state(self) -> Any:
        """The state, called with the store let go: it reads only the copy, which no later write reaches."""
        ...


class Taken:
    """A state already made with the store held, for a part whose state is cheap to copy whole."""

    __slots__ = ("state",)

    def __init__(self, state: Any) -> None:
        self.state = state

    def snapshot_state(self) -> Any:
        return self.state


@runtime_checkable
class Snapshotting(Protocol):
    """A listener whose state the start snapshot keeps (snapshot.py): restored at a start instead of hearing every
    record, then told the differences. Its state is plain containers (what marshal writes)."""

    snapshot_name: str

    def snapshot_version(self) -> str:
        """Names the code that shapes the state (a digest of its source): a snapshot of other code is not used."""
        ...

    def snapshot_copy(self) -> SnapshotCopy:
        """Called with the store held: copies of whatever the state is made of (the containers writes change in
        place; strings and tuples are shared), whose `snapshot_state` gives, with the store let go, the state as
        it was at this call."""
        ...

    def snapshot_state(self) -> Any:
        """The state now, called with the store held (`snapshot_copy().snapshot_state()`, for tests and tools):
        plain containers, and `SnapshotStream`s for large tables made as they are written (read once;
        `snapshot.as_read_back` gives the state as a restore is given it)."""
        ...

    def restore_state(self, state: Any) -> None:
        """Take a state `snapshot_state` made, before any record is heard; all or nothing (raise, change none)."""
        ...


@runtime_checkable
class Refillable(Snapshotting, Protocol):
    """A part whose state can be let go and taken again from the snapshot it was just saved in
    (`StoreEngine.hold_as_restored`)."""

    def hold_nothing(self) -> None:
        """Hold nothing, as before any record was heard."""
        ...


class RecordSource(Protocol):
    """One collection's current records, as the history rules read them (the record before a change)."""

    name: str
    check: RecordCheck | None  # the rule each record must pass (lessons'), or None

    @property
    def locations(self) -> Mapping[Key, Any]: ...

    def record(self, key: Key) -> dict[str, Any]: ...

    def all_records(self) -> Iterator[dict[str, Any]]: ...


class ReadsWhileLoading(Protocol):
    """Reads answered by the storage itself while the store is still loading (a database's indexes, the files'
    bytes: scan.py), so a large memory's first calls need not wait for the whole load. Each read sees the
    storage's committed state; the records come with their collection, in the order the storage keeps them
    (creation order, as a load hears them). Raises StorageError when the storage cannot answer (the caller then
    waits for the load)."""

    def answering(self) -> AbstractContextManager[None]:
        """Held while a call is answered from these reads: the load gives way to it meanwhile."""
        ...

    def entities(self, names: list[str]) -> list[tuple[str, dict[str, Any]]]:
        """The entity records (of any collection) with these names."""
        ...

    def matching(self, fragments: list[str], limit: int) -> list[tuple[str, dict[str, Any]]] | None:
        """The entity records whose searchable text (name, type, observations, a lesson's error pattern) holds
        every fragment, ASCII letters compared without case; None when more than `limit` do."""
        ...

    def leading_matches(
        self, words: list[str], phrase: str, take: int
    ) -> tuple[int, Callable[[], int], list[tuple[str, dict[str, Any]]]]:
        """How many entity records hold every word (ASCII letters compared without case), how to count the relation
        records touching them (asked only when an answer is cut), and the first `take` of them: those holding the
        whole phrase first (when there are several words), then the name equal to the phrase, names starting with
        it, names holding it, each in creation order."""
        ...

    def relations_touching(self, names: list[str]) -> list[tuple[str, dict[str, Any]]]:
        """The relation records with either end among these names."""
        ...

    def count_relations_touching(self, names: list[str]) -> int:
        """How many relation records have an end among these names."""
        ...


class ReadsBesideLoad:
    """The reads a storage answers beside its own load (`ReadsWhileLoading`), and the load's turns given to them.

    Between two of its pieces the load waits while such a read runs (on 2 cores the load, the read and the
    storage otherwise share the processors), GIVE_WAY_SECONDS in all at most: a steady stream of reads must not
    keep it from finishing. `gated`: reads are let in only between `admit()` and `stop_admitting()` (the files,
    which are still only while the load holds their lock); a read arriving before waits up to `wait_seconds`,
    and one arriving after is refused (StorageError: the caller waits for the load)."""

    def __init__(self, gated: bool = False, wait_seconds: float = 0.0) -> None:
        self._turns = threading.Condition()
        self._running = 0
        self._left = GIVE_WAY_SECONDS
        self._gated = gated
        self._wait_seconds = wait_seconds
        self._admitting = False
        self._expected = False  # a load is about to admit reads

    def load_begins(self) -> None:
        with self._turns:
            self._left = GIVE_WAY_SECONDS
            self._expected = True

    def admit(self) -> None:
        with self._turns:
            self._admitting = True
            self._turns.notify_all()

    def stop_admitting(self) -> None:
        """No read is let in from now on; returns once those running have ended."""
        with self._turns:
            self._admitting = self._expected = False
            self._turns.notify_all()
            self._turns.wait_for(lambda: not self._running)

    @property
    def expected(self) -> bool:
        """Whether a load is under way that lets (or is about to let) reads in."""
        return self._expected or self._admitting

    @contextmanager
    def answering(self) -> Iterator[None]:
        with self._turns:
            if self._gated and not self._turns.wait_for(
                lambda: self._admitting or not self._expected, timeout=self._wait_seconds
            ):
                raise StorageError("the load has not begun yet: answering after it")
            if self._gated and not self._admitting:
                raise StorageError("the load has ended: answering from what it holds")
            self._running += 1
        try:
            yield
        finally:
            with self._turns:
                self._running -= 1
                self._turns.notify_all()

    def give_way(self, stopped: Callable[[], bool] = lambda: False) -> None:
        """Called by the load between two of its pieces: wait while reads beside it run (or until `stopped`)."""
        if self._running and self._left > 0:
            started = time.monotonic()
            with self._turns:
                self._turns.wait_for(lambda: not self._running or stopped(), timeout=self._left)
            self._left -= time.monotonic() - started

    def wake(self) -> None:
        """Wake a load waiting in `give_way` (to look at `stopped` again)."""
        with self._turns:
            self._turns.notify_all()


@dataclass
class Transaction:
    """The changes of one call, committed together when the `transaction()` block ends.

    `operation` and `actor` label the call's change events; `notes` add fields to the event of one key (a
    rename's deleted entity says where it went). `record_history=False` writes the changes as they are, without
    events (a migration copies the source's own events instead)."""

    changes: dict[str, Changes] = field(default_factory=dict)
    operation: str = "write"
    actor: str | None = None
    notes: dict[Key, dict[str, Any]] = field(default_factory=dict)
    record_history: bool = True
    # The generation the files engine gives the shards this call rewrites; its events carry it (`commitToken`)
    # so a crash's unfinished commit is told from one changed back later by another memory (history_log.py).
    token: str = field(default_factory=lambda: secrets.token_hex(8))

    def note(self, key: Key, **fields: Any) -> None:
        self.notes.setdefault(key, {}).update(fields)

    def upsert(self, collection: str, record: dict[str, Any]) -> None:
        self.changes.setdefault(collection, Changes()).upserts.append(record)

    def delete(self, collection: str, key: Key) -> None:
        self.changes.setdefault(collection, Changes()).deletes.append(key)


class StoreEngine(ABC):
    """The store of one memory: its collections (`memory`, `lesson`, and `history` when it keeps one)."""

    collections: Mapping[str, RecordSource]
    history_in_snapshot = False  # whether the start snapshot keeps the history (the files' loads lazily anyway)

    def __init__(self, actor: str | None) -> None:
        self.actor = actor
        self._listeners: list[ChangeListener] = []
        self._history_listeners: list[ChangeListener] = []
        self._event_ids = itertools.count()
        self._opened = False
        self._snapshot: Path | None = None
        self.snapshot_min_records = SNAPSHOT_MIN_RECORDS
        self.notify_slice = NOTIFY_SLICE
        self._snapshot_behind = True  # whether what is held differs from the snapshot on disk
        self._snapshot_saving = threading.Lock()
        self.restored_from_snapshot = False  # for tests and benchmarks
        # The file the last save wrote (`write_snapshot`'s stat), while it is what a full read holds.
        self._saved_after_full_read: WrittenSnapshot | None = None

    # -- what each engine provides ---------------------------------------------------------------------------
    def _give_way(self) -> None:
        """Called by a load between two of its pieces: an engine that answers reads while it loads lets them go
        first (on 2 cores the load, the database and the read otherwise share the processors)."""
        return None  # the files answer no read while they load: nothing to give way to

    def reads_while_loading(self) -> ReadsWhileLoading | None:
        """While a load is under way, reads the storage can answer without it (None: wait for the load; the
        files have no index to answer from)."""
        return None

    def opening(self) -> None:
        """Said before open() is called on another thread: reads the storage can answer while it loads are
        answered from now on, not only once that thread has begun (the files answer none)."""
        return None

    @abstractmethod
    def open(self) -> None:
        """Prepare the storage and load what it holds (listeners hear of every record)."""

    @abstractmethod
    def reading(self) -> AbstractContextManager[None]:
        """Hold the store still for a read, after catching up with other processes' commits."""

    @abstractmethod
    def transaction(
        self, operation: str | None = None, actor: str | None = None, record_history: bool = True
    ) -> AbstractContextManager[Transaction]:
        """A read-modify-write: decide on the current data inside the block; committed all or nothing when it
        ends, nothing written if it raises. `operation` labels the history events (default: the calling
        service method's name, see `public_caller`)."""

    @abstractmethod
    def check(self, fix: bool = False, now: float | None = None) -> CheckReport:
        """Read everything stored and report what is wrong; with `fix`, repair it (keeping what it takes out)."""

    def problems(self) -> list[LineProblem]:
        """The stored lines that could not be read (kept as they are, never overwritten): none in a database, whose
        rows are checked as they are written."""
        return []

    @abstractmethod
    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """Where each collection is stored: files (path, lines, bytes) or tables (rows, bytes)."""

    @abstractmethod
    def paths(self) -> set[Path]:
        """Every local file that is the store's own (none for a database)."""

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the memory is kept, for logs and messages (a path, or a database URL without its password)."""

    def poll(self) -> None:
        """Catch up with other processes now (tells listeners, such as idle subscribers, what changed)."""
        with self.reading():
            pass

    def close(self) -> None:
        """Let go of connections and threads (the file engine holds none between calls); both engines save their
        start snapshot first, when they keep one."""
        return None

    # -- the start snapshot (snapshot.py): each engine says what of its collections it keeps ------------------
    def keep_snapshot(self, path: Path) -> None:
        """Keep a start snapshot in `path`: restored by the next start, which then reads only what changed."""
        self._snapshot = path

    def _held(self) -> AbstractContextManager[Any]:
        """The in-process hold of the store (nothing changes what it holds meanwhile)."""
        raise NotImplementedError

    def _snapshot_identity(self) -> list[str]:
        """What the snapshot's tag must also name: the engine's module and the data it was made from."""
        raise NotImplementedError

    def _record_count(self) -> int:
        raise NotImplementedError

    def _collection_copy(self) -> SnapshotCopy | None:
        """With the store held: a copy of what the engine keeps of its collections, whose `snapshot_state` (with
        the store let go) gives that state, or None when it cannot be kept after all; None here when it cannot be
        kept at all."""
        raise NotImplementedError

    def _collections_saved(self, state: Any) -> None:
        """With the store held, once the state is made: what the engine does with what it kept (the files hold
        their shards by keys from then on). Only what is still as copied may be touched: writes went on."""
        return None

    def _restore_collections(self, state: Any) -> dict[str, Callable[[], list[dict[str, Any]]]]:
        """Hold what `_collection_snapshot` kept (raises ValueError, TypeError or KeyError, holding nothing, when
        it is unusable); returns, per collection, how to get its records for listeners that keep no snapshot."""
        raise NotImplementedError

    def _forget_collections(self) -> None:
        """Hold nothing again (a listener's restore failed after the collections were restored)."""
        raise NotImplementedError

    def _snapshot_tag(self, parts: list[Snapshotting]) -> str:
        # The record rules too: a restored shard is not read again, so a rule that changed (a lesson field now
        # limited) would otherwise leave the lines it refuses held and unreported. And the interpreter: marshal's
        # format and str's case tables are its own.
        rules = {sys.modules[c.check.__module__].__file__ or "" for c in self.collections.values() if c.check}
        return code_tag(
            [
                __file__,
                codec_module.__file__,
                snapshot_module.__file__,
                sys.modules[type(self).__module__].__file__ or "",
                *sorted(rules),
            ],
            SNAPSHOT_FORMAT,
            sys.version,
            *self._snapshot_identity(),
            *(f"{part.snapshot_name}={part.snapshot_version()}" for part in parts),
        )

    def _snapshot_parts(self) -> list[Snapshotting]:
        return [listener for listener in self._listeners if isinstance(listener, Snapshotting)]

    def _restore_snapshot(self) -> bool:
        """Before the first load: hold what the snapshot kept, if there is a usable one. Whether one was restored
        (then the engine catches up from it as after another process's commit)."""
        if self._snapshot is None:
            return False
        parts = self._snapshot_parts()
        payload = read_snapshot(self._snapshot, self._snapshot_tag(parts), between_chunks=self._give_way)
        if not isinstance(payload, dict) or not isinstance(payload.get("parts"), dict):
            return False
        part_states = payload["parts"]
        names = [part.snapshot_name for part in parts]
        if set(part_states) != set(names) or len(set(names)) != len(names):
            return False
        try:
            self._give_way()
            records_of = self._restore_collections(payload.get("collections"))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            log.warning("ignoring the start snapshot %s (%s); the store is read instead", self._snapshot, exc)
            return False
        # The parts that can let go of what they took first: until one that cannot has taken its state, a part
        # refusing its state (never with this code's own snapshot, whose tag and checksum matched; but a snapshot
        # is only a cache) means reading the files instead.
        ordered = sorted(parts, key=lambda part: not isinstance(part, Refillable))
        for position, part in enumerate(ordered):
            self._give_way()
            try:
                part.restore_state(part_states[part.snapshot_name])
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
                if any(not isinstance(taken, Refillable) for taken in ordered[:position]):
                    raise StorageError(
                        f"the start snapshot {self._snapshot} is damaged ({exc}); delete it and start again"
                    ) from exc
                log.warning("ignoring the start snapshot %s (%s); the store is read instead", self._snapshot, exc)
                self._hold_nothing()
                return False
        # Listeners that keep no state of their own hear every record restored; the catch-up that follows tells
        # everyone the rest.
        for name, records in records_of.items():
            listeners = self._history_listeners if name == HISTORY else self._listeners
            others = [listener for listener in listeners if not isinstance(listener, Snapshotting)]
            found = records() if others else []
            for listener in others if found else []:
                listener.records_changed(name, [], found)
        self.restored_from_snapshot = True
        self._snapshot_behind = False
        mark_used(self._snapshot)
        log.info("restored from the start snapshot %s", self._snapshot)
        return True

    def snapshot_outdated(self) -> None:
        """Said by a part whose state moved on with no record changing (work a restored snapshot left undone):
        the next save writes the snapshot again, so the next start does not do that work once more."""
        self._snapshot_behind = True

    def save_snapshot(self) -> bool:
        """Write the snapshot if one is kept, the store is big enough to gain from it, and what is held changed
        since the snapshot was written or restored; whether one was written. Never raises: a snapshot only saves
        time. One save at a time, and a save at exit waits for one in progress (a daemon thread's save must not
        be cut off by the process ending)."""
        if self._snapshot is None or not self._opened:
            return False
        with self._snapshot_saving:
            return self._save_snapshot(self._snapshot)

    def _save_snapshot(self, path: Path) -> bool:
        # Held only to decide and to copy: every call arriving meanwhile waits for this block alone. The copies are
        # hundreds of thousands of new containers and no garbage, which the cyclic collector would scan again and
        # again: paused, a first load's copy at 100k took 153 ms instead of 340.
        with self._held(), collector_paused():
            if not self._snapshot_behind or self._record_count() < self.snapshot_min_records:
                return False
            parts = self._snapshot_parts()
            collections = self._collection_copy()
            if collections is None:
                return False
            copies = {part.snapshot_name: part.snapshot_copy() for part in parts}
            tag = self._snapshot_tag(parts)
            # A write from now on is one the snapshot does not hold: it sets this again.
            self._snapshot_behind = False
        made = False
        try:
            kept = collections.snapshot_state()
            if kept is None:  # a file no longer what was held, in a way a restore could not tell
                return False
            # Each copy is let go once its state is made: what the state does not share of it (at 1M entities the
            # graph's maps, ~300 MB) is not held while the state is written.
            states = {name: copies.pop(name).snapshot_state() for name in list(copies)}
            payload = {"collections": kept, "parts": states}
            try:
                written = write_snapshot(path, tag, payload)
            except ValueError as exc:  # a value marshal cannot write: nothing JSON holds, so never expected
                log.warning("could not make the start snapshot (%s); the next start reads everything", exc)
                return False
            except OSError as exc:
                log.warning("could not write the start snapshot %s (%s); the next start reads everything", path, exc)
                return False
            with self._held():
                self._collections_saved(kept)
                if not self.restored_from_snapshot:
                    self._saved_after_full_read = written
            made = True
        finally:
            if not made:
                self._snapshot_failed()
        log.info("start snapshot written: %s (%.1f MB)", path, written[0] / 1e6)
        return True

    def hold_as_restored(self) -> bool:
        """Once after a full read (not a restore) whose snapshot was saved, while nothing changed since: let go of
        the collections' bookkeeping and of the parts that can be refilled (`Refillable`), and take them again
        from that snapshot, as a restart does; whether it was done. Why: a full read leaves what it keeps
        scattered among the holes of the records it parsed and let go, which the heap cannot hand back; taken
        again with those let go first, it is laid out together, as a restart's is (in process at a million
        entities, 2.21 -> 1.79 GB; at 100k, 265 -> 218 MB). The store is held meanwhile: a call waits for the
        restore's time (0.5 s at 100k entities, 9 s at a million), so the server does this when no call is
        being served. The other parts keep what they hold (the same records)."""
        with self._snapshot_saving, self._held(), collector_paused(freeze=True):
            written, self._saved_after_full_read = self._saved_after_full_read, None
            if written is None or self._snapshot is None or self._snapshot_behind or not self._opened:
                return False
            parts = self._snapshot_parts()
            refilled = [part for part in parts if isinstance(part, Refillable)]
            let_go = False

            def let_go_of_all() -> None:
                nonlocal let_go
                let_go = True
                self._hold_nothing()

            try:
                payload = read_snapshot(
                    self._snapshot, self._snapshot_tag(parts), self._give_way, written, let_go_of_all
                )
                if not let_go:
                    return False  # replaced or damaged since it was written: nothing was let go
                if not isinstance(payload, dict):
                    raise ValueError("it could not be read back")
                self._restore_collections(payload["collections"])
                for part in refilled:
                    part.restore_state(payload["parts"][part.snapshot_name])
            except BaseException as exc:
                if not let_go:
                    raise
                # Never expected with a snapshot this code just wrote and checked, but anything (a folder made
                # unreadable, memory running out, an interrupt) can come: what is held now is part of the memory,
                # which a write must never take for all of it. Hold nothing and be unopened, so the next call reads
                # the memory again (from the snapshot, or the files).
                self._hold_nothing()
                self._opened = False
                if not isinstance(exc, Exception):
                    raise
                log.error("could not take the memory again from its snapshot (%s); it is read again", exc)
                return False
            log.info("the memory is held as restored from its snapshot %s", self._snapshot)
            return True

    def _hold_nothing(self) -> None:
        """Let go of what the snapshotted collections and the refillable parts hold (a hold as restored, or a load
        that failed part way): the next open loads from nothing, and no part keeps a record a later load would not
        tell it of (a load tells records, not removals)."""
        self._forget_collections()
        for part in self._snapshot_parts():
            if isinstance(part, Refillable):
                part.hold_nothing()

    def _snapshot_failed(self) -> None:
        """The save that said the snapshot was current wrote none: the next save must try again."""
        with self._held():
            self._snapshot_behind = True

    # -- shared rules ----------------------------------------------------------------------------------------
    def add_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    def add_history_listener(self, listener: ChangeListener) -> None:
        """Hear of change events (the history collection) instead of graph records."""
        self._history_listeners.append(listener)

    @property
    def keeps_history(self) -> bool:
        return HISTORY in self.collections

    def load_history(self) -> None:
        """Make every stored change event readable and heard by the history listeners (call inside `reading()`
        or a transaction). The files engine reads its older history shards at the first call that needs them;
        the database engine holds nothing back."""
        return None

    def record_counts(self) -> dict[str, int]:
        """How many records each collection holds, the whole history included."""
        with self.reading():
            self.load_history()
            return {name: len(collection.locations) for name, collection in self.collections.items()}

    def events(self) -> list[dict[str, Any]]:
        """Every stored change event, oldest first (ids are time-ordered)."""
        with self.reading():
            if not self.keeps_history:
                return []
            self.load_history()
            return sorted(self.collections[HISTORY].all_records(), key=lambda event: str(event["id"]))

    def event(self, key: Key) -> dict[str, Any]:
        """One stored change event by its key (call inside `reading()` or a transaction)."""
        return self.collections[HISTORY].record(key)

    def prune_history(self, older_than: datetime) -> int:
        """Drop the change events older than a moment (`memory-graph compact`); returns how many went.

        An event's id starts with its time in nanoseconds, zero-padded, so the cut needs no event parsed."""
        if not self.keeps_history:
            return 0
        cutoff = f"{int(older_than.timestamp() * 1_000_000_000):020d}"
        with self.transaction(operation="compact") as tx:
            self.load_history()
            doomed = [key for key in self.collections[HISTORY].locations if key[1] < cutoff]
            for key in doomed:
                tx.delete(HISTORY, key)
        return len(doomed)

    def _record_events(self, tx: Transaction) -> None:
        """Add one event per record the transaction really changes (same commit: history and data agree)."""
        if self.keeps_history and tx.record_history:
            for event in change_events(tx, self.collections, self._event_ids, self._newest_event_ns()):
                tx.upsert(HISTORY, event)

    def _newest_event_ns(self) -> int:
        """The time in an id of the newest stored event, when the engine knows it cheaply (0 otherwise)."""
        return 0

    def _notify_taking(self, collection: str, upserted: list[dict[str, Any]]) -> None:
        """`_notify` of records new to the listeners (a load's), `notify_slice` at a time, taking them out of
        `upserted` (left empty) as they are heard, so each slice can be let go once heard. Why: a first load's
        parsed records (about 1.1 GB at a million entities) were all alive until the last was heard, beside
        everything the listeners built from them; now the room of those heard is taken by what the listeners
        build from the next (the graph's tables) instead of left as holes between them (18 MB less held after a
        first load at 100k entities)."""
        upserted.reverse()
        while upserted:
            heard = upserted[-self.notify_slice :]
            del upserted[-self.notify_slice :]
            heard.reverse()
            self._notify(collection, [], heard)

    def _notify(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        if removed or upserted:
            if collection != HISTORY or self.history_in_snapshot:
                self._snapshot_behind = True
            listeners = self._history_listeners if collection == HISTORY else self._listeners
            for listener in listeners:
                listener.records_changed(collection, removed, upserted)


def copy_records(source: StoreEngine, target: StoreEngine) -> dict[str, int]:
    """Copy every record of every collection (the history's own events included) into an empty store, in one
    commit that records no new events; returns how many records each collection holds in the source.

    The source is only read. The target must be empty: a migration is a copy, not a merge (import merges). A source
    with lines it cannot read is refused: the copy would leave them behind and still match the counts it read."""
    unreadable = source.problems()
    if unreadable:
        shown = "; ".join(str(problem) for problem in unreadable[:5])
        more = f" (and {len(unreadable) - 5} more)" if len(unreadable) > 5 else ""
        raise ConflictError(
            f"{len(unreadable)} line(s) of {source.location} cannot be read, so a copy would leave them behind: "
            f"{shown}{more}. Fix them by hand, or run `memory-graph repair` (it moves them aside to .rejected files), "
            "then migrate again; nothing was copied"
        )
    with source.reading():
        source.load_history()
        records = {name: list(collection.all_records()) for name, collection in source.collections.items()}
    with target.transaction(operation="migrate", record_history=False) as tx:
        held = sum(target.record_counts().values())
        if held:
            raise ConflictError(
                f"{target.location} already holds {held} records; migrate copies into an empty store only. "
                "Choose an empty target, or use `memory-graph import` to merge an export into it."
            )
        missing = [name for name in records if records[name] and name not in target.collections]
        if missing:
            raise ConflictError(f"{target.location} keeps no {', '.join(missing)} collection; nothing was copied")
        for name, rows in records.items():
            for record in rows:
                tx.upsert(name, record)
    return {name: len(rows) for name, rows in records.items()}


def public_caller() -> str:
    """The name of the first public function up the stack from an engine's `transaction()` (a service method
    such as `create_lesson`, past its private helpers): the default label of a call's history events."""
    frame = sys._getframe(3)  # public_caller <- transaction <- contextmanager.__enter__ <- the caller
    while frame.f_back is not None and frame.f_code.co_name.startswith("_"):
        frame = frame.f_back
    return frame.f_code.co_name


@contextmanager
def collector_paused(freeze: bool = False) -> Iterator[None]:
    """The cyclic garbage collector paused for a block that makes many containers and no garbage (a load, a
    snapshot's copies); with `freeze`, what exists afterwards is moved out of its sight (a loaded graph, which it
    would otherwise rescan for nothing at every full collection)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


def return_freed_memory() -> None:
    """Hand the heap a load let go of back to the OS (the parsed files' text and records, a snapshot's chunks):
    glibc keeps it otherwise, 20-30 MB at 100k entities. Elsewhere, nothing."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)
