"""The change history's rules inside the store: which events a transaction makes, and how a commit whose events
were written but whose graph shard was not is finished.

Events are records of the `history` collection: {type: "event", id, at, op, actor, collection, key, before,
after} with the full records before and after. Ids start with the time in nanoseconds, zero-padded, so they sort
in time and `compact` cuts them without parsing. The common commit (one graph shard plus one history shard) skips
the journal: the events are written first and are their own redo log. They are appended to their shard (one
fdatasync, no replace), each carrying `commitEvents`, how many events its commit wrote, so an append a crash
cut short is told from a whole one: such a tail is moved aside (`unfinished_tail`), since its commit never
reached the graph.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory_graph.storage.codec import HISTORY, dump_line, record_key
from memory_graph.storage.collection import Collection, ShardLines
from memory_graph.storage.files import FileWrite
from memory_graph.storage.placement import Changes, Plan

if TYPE_CHECKING:
    from memory_graph.storage.engine import RecordSource, Transaction


def change_events(
    tx: Transaction, collections: Mapping[str, RecordSource], ids: Iterator[int], after_ns: int = 0
) -> list[dict[str, Any]]:
    """One event per record the transaction really changes, in the graph collections. Their ids start after
    `after_ns` (the newest stored event's time), so ids keep the order of commits when the clock steps back."""
    at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    stamp = f"{max(time.time_ns(), after_ns + 1):020d}-{os.getpid()}"
    events: list[dict[str, Any]] = []
    for name, changes in list(tx.changes.items()):
        if name == HISTORY:
            continue
        collection = collections[name]
        for key, after in changes.final().items():
            before = collection.record(key) if key in collection.locations else None
            if before == after:
                continue
            event: dict[str, Any] = {
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
    count = len(events)
    for event in events:
        event["commitEvents"] = count
    return events


def unfinished_commit(new_events: list[dict[str, Any]], collections: dict[str, Collection]) -> dict[str, Changes]:
    """The changes that finish the newest commit among events just read, when its records all still hold their
    `before` (the graph shard was never written); nothing when it landed, or when a record holds neither (it was
    edited by hand since). Only the newest commit can be unfinished: every later commit catches up first."""
    newest = max(new_events, key=lambda e: str(e["id"]))
    prefix = str(newest["id"]).rsplit("-", 1)[0] + "-"
    commit = [e for e in new_events if str(e["id"]).startswith(prefix)]
    expected = newest.get("commitEvents")
    if isinstance(expected, int) and len(commit) < expected:
        return {}  # part of a commit: never applied (an unfinished append is moved aside first, see below)
    changes: dict[str, Changes] = {}
    for event in commit:
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


def events_appended(events: Changes, plans: dict[str, Plan], history: Collection) -> tuple[int, ShardLines] | None:
    """Where and what to append when a commit is the common one: new events, and one graph shard rewritten.

    Trigger: the events fit in the history's last shard, which is readable. Why: replacing a shard of up to
    1000 events would cost a rewrite and two flushes per call; an append costs one flush, overlapped with the
    graph shard's (see Store._write). None otherwise (the commit is planned like any other)."""
    if events.deletes or not history.shards or len(plans) != 1:
        return None
    (plan,) = plans.values()
    if len(plan) != 1 or not next(iter(plan.values())):
        return None
    index = max(history.shards)
    shard = history.shards[index]
    if shard.problems or shard.line_count + len(events.upserts) > history.shard_lines:
        return None
    lines = {record_key(event): dump_line(event) for event in events.upserts}
    if len(lines) != len(events.upserts) or any(key in history.locations for key in lines):
        return None
    return index, lines


def unfinished_tail(data: bytes, held: Callable[[str], int]) -> int | None:
    """Where a shard's unfinished append starts, or None when it ends with a whole commit.

    Unfinished: a last line without its newline that is not a whole event, or a last commit of which the
    collection holds (`held`: events with that id prefix, in any shard) fewer events than its `commitEvents`.
    Either is what a crash during the append leaves, and the events are written before the graph shard, so
    that commit changed nothing else. Events written before `commitEvents` existed are never unfinished."""
    cut = len(data)
    if data and not data.endswith(b"\n"):
        start = data.rfind(b"\n") + 1
        if _event(data[start:]) is None:
            cut = start
    commit: str | None = None
    expected: object = None
    start = cut
    while start > 0:
        line_start = data.rfind(b"\n", 0, start - 1) + 1
        event = _event(data[line_start:start])
        if event is None:
            # A hole a power loss left inside an append (it reads as NULs): part of the tail being looked at.
            start = line_start
            if commit is not None:
                cut = line_start
            continue
        prefix = str(event.get("id", "")).rsplit("-", 1)[0] + "-"
        if commit is None:
            commit, expected = prefix, event.get("commitEvents")
            if not isinstance(expected, int) or held(prefix) >= expected:
                break
        elif prefix != commit:
            break
        start = cut = line_start
    return cut if cut < len(data) else None


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and value.get("type") == "event" else None
