"""The change history's rules inside the store: which events a transaction makes, and how a commit whose events
were written but whose graph shard was not is finished.

Events are records of the `history` collection: {type: "event", id, at, op, actor, collection, key, before,
after} with the full records before and after. Ids start with the time in nanoseconds, zero-padded, so they sort
in time and `compact` cuts them without parsing. The common commit (one graph shard plus one history shard) skips
the journal: the events are written first and are their own redo log.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory_graph.storage.codec import HISTORY
from memory_graph.storage.collection import Collection
from memory_graph.storage.files import FileWrite
from memory_graph.storage.placement import Changes, Plan

if TYPE_CHECKING:
    from memory_graph.storage.engine import RecordSource, Transaction


def change_events(tx: Transaction, collections: Mapping[str, RecordSource], ids: Iterator[int]) -> list[dict[str, Any]]:
    """One event per record the transaction really changes, in the graph collections."""
    at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    stamp = f"{time.time_ns():020d}-{os.getpid()}"
    events: list[dict[str, Any]] = []
    for name, changes in list(tx.changes.items()):
        if name == HISTORY:
            continue
        collection = collections[name]
        for key, after in changes.final().items():
            before = collection.record(key) if key in collection.locations else None
            if before == after:
                continue
            event = {
                "type": "event",
                "id": f"{stamp}-{next(ids):06d}",
                "at": at,
                "op": tx.operation,
                "actor": tx.actor,
                "collection": name,
                "key": list(key),
                "before": before,
                "after": after,
            }
            event.update(tx.notes.get(key, {}))
            events.append(event)
    return events


def unfinished_commit(new_events: list[dict[str, Any]], collections: dict[str, Collection]) -> dict[str, Changes]:
    """The changes that finish the newest commit among events just read, when its records all still hold their
    `before` (the graph shard was never written); nothing when it landed, or when a record holds neither (it was
    edited by hand since). Only the newest commit can be unfinished: every later commit catches up first."""
    newest = max(new_events, key=lambda e: str(e["id"]))
    prefix = str(newest["id"]).rsplit("-", 1)[0] + "-"
    changes: dict[str, Changes] = {}
    for event in (e for e in new_events if str(e["id"]).startswith(prefix)):
        collection = collections.get(event["collection"])
        key = tuple(event["key"])
        if collection is None:
            return {}
        now = collection.record(key) if key in collection.locations else None
        if now != event["before"]:
            return {}  # landed (it holds `after`), or edited by hand since
        target = changes.setdefault(collection.name, Changes())
        if event["after"] is None:
            target.deletes.append(key)
        else:
            target.upserts.append(event["after"])
    return changes


def events_first(plans: dict[str, Plan], writes: list[FileWrite], history: Collection) -> bool:
    """Whether a commit is the common one, one graph shard plus one history shard, both rewritten; if so, order
    the history's write first.

    Trigger: such a commit would otherwise need the journal (two files). Why: its events hold every new record in
    full, so they are a redo log of their own: written durably before the graph shard, a crash in between is
    rolled forward from them (`unfinished_commit`). Outcome: half the fsyncs of a journal commit."""
    if HISTORY not in plans or len(plans[HISTORY]) != 1 or len(writes) != 2:
        return False
    if any(w.content is None for w in writes):
        return False
    path = history.names.path(next(iter(plans[HISTORY])))
    writes.sort(key=lambda w: w.path != path)
    return True
