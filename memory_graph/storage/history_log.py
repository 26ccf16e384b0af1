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
from datetime import UTC, datetime, timedelta
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
    now_ns = max(time.time_ns(), after_ns + 1)
    stamp = f"{now_ns:020d}-{os.getpid()}"
    # The time shown is the id's own, to the millisecond (read apart, the clock could pass a millisecond between the
    # two): restore_entity(at=an event's `at`) then holds that event, whose id is within that millisecond.
    millis = now_ns // 1_000_000
    shown = datetime.fromtimestamp(millis // 1000, UTC) + timedelta(milliseconds=millis % 1000)
    at = shown.isoformat(timespec="milliseconds").replace("+00:00", "Z")
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
        event["commitToken"] = tx.token
    return events


def whole_commits(events: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """The events, in file order, grouped by commit; stops at the first commit short of its `commitEvents` (or
    one without it: written before commits were counted, so it cannot be told whole)."""
    commit: list[dict[str, Any]] = []
    for event in [*events, None]:
        if commit and (event is None or commit_of(event) != commit_of(commit[0])):
            if len(commit) != commit[0].get("commitEvents"):
                return
            yield commit
            commit = []
        if event is not None:
            commit.append(event)


def unfinished_commit(
    new_events: list[dict[str, Any]], collections: dict[str, Collection], written: Callable[[str, str], bool]
) -> dict[str, Changes]:
    """The changes that finish the newest commit among events just read, when its records all still hold their
    `before` (the graph shard was never written); nothing when it landed, or when a record holds neither (it was
    edited by hand since). Only the newest commit can be unfinished: every later commit catches up first.

    `written(collection, token)`: whether the collection's stamp still lists a shard with the generation the
    commit gave it (`commitToken`), unchanged since the commit's events were appended. If not, a later commit
    rewrote those shards, or a hand edit changed them after the commit landed: a record back at its `before` was
    changed back by someone else (another memory sharing the lesson file, a person), not left unfinished."""
    newest = max(new_events, key=lambda e: str(e["id"]))
    prefix = commit_of(newest)
    commit = [e for e in new_events if str(e["id"]).startswith(prefix)]
    expected = newest.get("commitEvents")
    if isinstance(expected, int) and len(commit) < expected:
        return {}  # part of a commit: never applied (an unfinished append is moved aside first, see below)
    # The records first: in memory, and what rules out the usual case (the commit landed) without the stamps'
    # and shards' I/O `written` does, since every catch-up that follows commits asks.
    changes = redo_changes(commit, collections)
    token = newest.get("commitToken")
    if not changes or (isinstance(token, str) and not all(written(name, token) for name in changes)):
        return {}
    return changes


def redo_changes(commit: list[dict[str, Any]], collections: Mapping[str, Collection]) -> dict[str, Changes] | None:
    """The changes that make a commit's events happen here, when every record they change still holds its
    `before` (this store is exactly that commit behind); None otherwise (it landed, or was edited since)."""
    changes: dict[str, Changes] = {}
    for event in commit:
        name = event.get("collection")
        collection = collections.get(name) if isinstance(name, str) and name != HISTORY else None
        if collection is None:
            return None
        key = tuple(event["key"])
        if not collection.lines_known(key):
            return None  # held with a placeholder line until a reload reads its shard: it reads this commit too
        now = collection.record(key) if key in collection.locations else None
        if now != event["before"]:
            return None
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
    if history.full(shard.line_count, history.shard_size(index)):
        return None  # the events start a new shard (`placement._place`)
    if len(lines) != len(events.upserts) or any(key in history.locations for key in lines):
        return None
    return index, lines


def unfinished_tail(data: bytes, held: Callable[[str], int] | None = None) -> int | None:
    """Where a shard's unfinished append starts, or None when it ends with a whole commit.

    What a crash during an append leaves at the end of the shard: lines that are not events (a torn last line,
    or a range a power loss lost, which reads back as NULs), and a last commit with fewer events than its
    `commitEvents`. Events are written before the graph shard, so that commit changed nothing else. A commit
    that starts on the shard's first line was never appended (an append always follows a line) but written by
    a whole-file replace, which cannot be cut short; its other events are in the shards before. Events written
    before `commitEvents` existed are never unfinished. `held` (events of a commit in the whole collection) is
    asked before a short commit is cut: a store written before new history shards always went last may hold
    the rest of a whole commit in an older shard."""
    lines: list[tuple[int, dict[str, Any] | None]] = []  # (offset, event or None), from the end backwards
    end = len(data)
    while end > 0:
        start = data.rfind(b"\n", 0, end - 1) + 1
        lines.append((start, _event(data[start:end])))
        end = start
    garbage = 0
    while garbage < len(lines) and lines[garbage][1] is None:
        garbage += 1
    if garbage == len(lines):
        return None  # nothing readable: not an append (reported as unreadable lines instead)
    newest = lines[garbage][1] or {}
    commit, expected = commit_of(newest), newest.get("commitEvents")
    found, first = 0, garbage
    for position in range(garbage, len(lines)):
        event = lines[position][1]
        if event is not None and commit_of(event) != commit:
            break
        found += event is not None
        first = position
    whole = not isinstance(expected, int) or found >= expected or lines[first][0] == 0
    whole = whole or (held is not None and isinstance(expected, int) and held(commit) >= expected)
    cut = lines[garbage - 1][0] if whole and garbage else None if whole else lines[first][0]
    return cut


def commit_of(event: dict[str, Any]) -> str:
    """The id prefix every event of one commit shares."""
    return str(event.get("id", "")).rsplit("-", 1)[0] + "-"


def _event(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) and value.get("type") == "event" else None
