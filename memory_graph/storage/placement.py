"""Placement: which shards a change rewrites, and with what lines (copy-on-write, decided before any write).

A replaced record stays in its shard; a new one goes into the lowest-numbered shard with room; a shard over the
limit (a legacy file) spills its tail into shards with room; a shard holding unreadable lines is never rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_graph.errors import CorruptFileError
from memory_graph.storage.codec import Key, dump_line, record_key
from memory_graph.storage.collection import Collection, Plan, ShardLines, lines_size

__all__ = ["Changes", "Plan", "plan_changes"]


@dataclass
class Changes:
    """What one call changes in one collection: records to write (insert or replace) and keys to delete."""

    upserts: list[dict[str, Any]] = field(default_factory=list)
    deletes: list[Key] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.upserts or self.deletes)

    def final(self) -> dict[Key, dict[str, Any] | None]:
        """What the changes leave for each key: the last record upserted, or None when deleted. Deletes apply
        before upserts, as placement applies them (a call that deletes and re-creates a name keeps the new one)."""
        final: dict[Key, dict[str, Any] | None] = dict.fromkeys(self.deletes)
        final.update((record_key(r), r) for r in self.upserts)
        return final


def plan_changes(collection: Collection, changes: Changes) -> Plan:
    """New content of every shard the changes touch; raises (CorruptFileError) before anything is written."""
    plan = Plan()

    def edit(index: int, key: Key) -> ShardLines:
        if index not in plan:
            shard = collection.shards.get(index)
            if shard is not None and shard.problems:
                raise CorruptFileError(shard.problems)
            plan[index] = dict(shard.lines) if shard is not None else {}
        plan.edited(index, key)
        return plan[index]

    for key in changes.deletes:
        for index in collection.locations.get(key, ()):
            edit(index, key).pop(key, None)
    new_lines: dict[Key, str] = {}  # by key: a record upserted twice in one call is placed once, the last version
    for record in changes.upserts:
        key = record_key(record)
        line = dump_line(record)
        where = collection.locations.get(key)
        if where:
            edit(where[0], key)[key] = line
            for extra in where[1:]:
                edit(extra, key).pop(key, None)
        else:
            new_lines[key] = line
    for index, lines in plan.items():
        if len(lines) > collection.shard_lines:
            for key, line in list(lines.items())[collection.shard_lines :]:
                del lines[key]
                plan.edited(index, key)
                new_lines[key] = line
    if new_lines:
        _place(collection, plan, list(new_lines.items()))
    return plan


def _place(collection: Collection, plan: Plan, new_lines: list[tuple[Key, str]]) -> None:
    pending = list(reversed(new_lines))  # popped from the end: first in, first placed

    def fill(index: int, lines: ShardLines, size: int) -> None:
        while pending and not collection.full(len(lines), size):
            key, line = pending.pop()
            lines[key] = line
            size += len(line) + 1
            plan.edited(index, key)

    held = sorted(set(collection.shards) | set(plan))
    if collection.lazy:
        # Append-only (the history): new records go after the newest shard, never into an older one, so the
        # shards written last are the highest-numbered ones, which is all a lazy load reads.
        held = held[-1:] if held and held[-1] > max(collection.deferred, default=-1) else []
    for index in held:
        if not pending:
            return
        shard = collection.shards.get(index)
        if shard is not None and shard.problems:
            continue
        if index in plan:
            count, size = len(plan[index]), lines_size(plan[index]) if collection.shard_bytes else 0
        elif shard is not None:
            count, size = shard.line_count, collection.shard_size(index) if collection.shard_bytes else 0
        else:
            count, size = 0, 0
        if collection.full(count, size):
            continue
        fill(index, plan.setdefault(index, dict(shard.lines) if shard is not None else {}), size)
    index = max([*collection.shards, *plan, *collection.deferred], default=-1) + 1 if collection.lazy else 0
    while pending:
        # A file already there that is not ours (another memory's `memory-2.json`) is never taken over.
        while index in collection.shards or index in plan or collection.names.path(index).exists():
            index += 1
        fill(index, plan.setdefault(index, {}), 0)
