"""Check and repair: one pass that reads every shard from disk with the store's own parser and record rules,
reports what is wrong and, with `fix`, plans the repair.

Run by `Store.check` under the store's lock; the repair is committed like any other change (through the
journal, with the stamp renewed), and every line it takes out is first kept byte for byte in a side file next
to its shard (`memory-3.json.rejected-<time>`), so repair never loses a byte. Python-diskcache's
`Cache.check(fix)` is the model: the engine checks itself, so no maintenance tool keeps a drifting copy of its rules.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_graph.errors import LineProblem
from memory_graph.storage.codec import Key, dump_line, merge_records
from memory_graph.storage.collection import Collection
from memory_graph.storage.files import FileWrite
from memory_graph.storage.layout import rejected_lines_file


@dataclass
class CheckReport:
    """What `check` found (`problems`: repair fixes them; `notes`: worth knowing, nothing to fix) and, with
    `fix`, what it did."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class ShardScan:
    path: Path
    records: list[tuple[Key, dict[str, Any], str, int]]  # key, record, line, line number
    problems: list[LineProblem]

    @property
    def line_count(self) -> int:
        return len(self.records) + len(self.problems)


@dataclass
class CollectionScan:
    collection: Collection
    shards: list[ShardScan] = field(default_factory=list)

    def copies(self) -> Counter[Key]:
        """How many lines hold each record, across all shards."""
        return Counter(key for shard in self.shards for key, _, _, _ in shard.records)


def scan(collection: Collection) -> CollectionScan:
    result = CollectionScan(collection)
    for index in sorted(collection.on_disk()):
        try:
            parsed = collection.read(index)
        except FileNotFoundError:
            continue
        records = [(k, r, line, n) for (k, r, line), n in zip(parsed.records, parsed.record_lines, strict=True)]
        result.shards.append(ShardScan(collection.names.path(index), records, parsed.problems))
    return result


def describe(key: Key) -> str:
    if key[0] == "relation":
        return f"relation {json.dumps(key[1], ensure_ascii=False)} -{key[3]}-> {json.dumps(key[2], ensure_ascii=False)}"
    return f"entity {json.dumps(key[1], ensure_ascii=False)}"


def report(scans: list[CollectionScan], shard_lines: int) -> CheckReport:
    found = CheckReport()
    for collection_scan in scans:
        name = collection_scan.collection.name
        for shard in collection_scan.shards:
            found.problems.extend(str(p) for p in shard.problems)
            if shard.line_count > shard_lines:
                found.notes.append(
                    f"{shard.path}: {shard.line_count} lines, over the {shard_lines}-line limit "
                    "(it is split the next time it is written)"
                )
        for key, count in collection_scan.copies().items():
            if count > 1:
                found.problems.append(f"{name}: {describe(key)} is stored {count} times (repair merges the copies)")
    homes = entity_homes(scans)
    for entity, where in homes.items():
        if len(where) > 1:
            found.problems.append(
                f"entity {json.dumps(entity, ensure_ascii=False)} is in both {' and '.join(where)} "
                f"(repair keeps the {where[keep_home(scans, where)]} copy, with the other's observations)"
            )
    for collection_scan in scans:
        for shard in collection_scan.shards:
            for key, _, _, _ in shard.records:
                missing = [end for end in key[1:3] if key[0] == "relation" and end not in homes]
                if missing:
                    found.notes.append(
                        f"dangling {describe(key)}: no entity {', '.join(json.dumps(m) for m in missing)}"
                    )
    return found


def entity_homes(scans: list[CollectionScan]) -> dict[str, list[str]]:
    homes: dict[str, list[str]] = {}
    for collection_scan in scans:
        for key in collection_scan.copies():
            if key[0] == "entity":
                homes.setdefault(key[1], []).append(collection_scan.collection.name)
    return homes


def keep_home(scans: list[CollectionScan], where: list[str]) -> int:
    """Which copy of an entity stored in several collections to keep: the one in a collection with a record
    rule of its own (it passed that rule, so it is the more specific record, a lesson), else the first."""
    checked = {s.collection.name for s in scans if s.collection.check is not None}
    return next((i for i, name in enumerate(where) if name in checked), 0)


@dataclass
class Repair:
    writes: list[FileWrite] = field(default_factory=list)
    rejected: dict[Path, list[tuple[int, str]]] = field(default_factory=dict)  # shard -> (line number, why)


def plan_repair(scans: list[CollectionScan]) -> Repair:
    """New contents of every shard that needs repair: bad lines out, copies merged into the first one."""
    repair = Repair()
    homes = entity_homes(scans)
    merged: dict[tuple[str, Key], dict[str, Any]] = {}
    for collection_scan in scans:
        for shard in collection_scan.shards:
            for key, record, _, _ in shard.records:
                slot = _slot(collection_scan, key, homes, scans)
                merged[slot] = merge_records(merged[slot], record) if slot in merged else record
    written: set[tuple[str, Key]] = set()
    for collection_scan in scans:
        name = collection_scan.collection.name
        for shard in collection_scan.shards:
            kept: list[str] = []
            rejected = [(p.line_number, p.reason) for p in shard.problems]
            rewritten = False
            for key, record, line, number in shard.records:
                slot = _slot(collection_scan, key, homes, scans)
                if slot[0] != name:
                    rejected.append((number, f"also stored in {slot[0]}: merged into that copy"))
                elif slot in written:
                    rejected.append((number, "a copy of a record stored earlier: merged into the first copy"))
                else:
                    written.add(slot)
                    rewritten = rewritten or merged[slot] is not record
                    kept.append(line if merged[slot] is record else dump_line(merged[slot]))
            if rejected or rewritten:
                repair.rejected[shard.path] = sorted(rejected)
                repair.writes.append(FileWrite(shard.path, "".join(f"{line}\n" for line in kept) if kept else None))
    return repair


def _slot(scan_: CollectionScan, key: Key, homes: dict[str, list[str]], scans: list[CollectionScan]) -> tuple[str, Key]:
    """Where a record belongs after repair: (collection, key)."""
    if key[0] == "entity" and len(homes.get(key[1], ())) > 1:
        where = homes[key[1]]
        return (where[keep_home(scans, where)], key)
    return (scan_.collection.name, key)


def keep_rejected_lines(repair: Repair, stamp: str) -> list[str]:
    """Copy every line the repair takes out into a side file beside its shard, durably, before the repair."""
    done: list[str] = []
    for path, rejected in repair.rejected.items():
        if not rejected:
            done.append(f"{path}: merged copies of records")
            continue
        raw_lines = path.read_bytes().split(b"\n")
        side = rejected_lines_file(path, stamp)
        with open(side, "ab") as handle:
            handle.write(b"".join(raw_lines[number - 1].removesuffix(b"\r") + b"\n" for number, _ in rejected))
            handle.flush()
            os.fsync(handle.fileno())
        done.append(f"{path}: moved {len(rejected)} line(s) to {side}")
        done.extend(f"  {path}:{number}: {why}" for number, why in rejected)
    return done
