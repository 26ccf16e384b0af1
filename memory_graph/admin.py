"""Looking after a memory from the command line: import, export, stats, check, repair.

`check` and `stats` only read. `repair` takes the store's lock and never deletes a byte without keeping a copy:
malformed and duplicate lines move to a side file next to their shard (`memory-3.json.rejected-<time>.jsonl`),
an unreadable journal is moved aside, a readable one is finished.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import filelock

from lessons.model import complete_metadata
from memory_graph.errors import InvalidInputError, LineProblem, StorageError
from memory_graph.graph import LESSONS, MEMORY
from memory_graph.model import entity_view
from memory_graph.storage.files import FileWrite, atomic_write, commit_files, read_journal, recover_journal
from memory_graph.storage.format import Key, dump_line, merge_records, normalize_record, record_key
from memory_graph.storage.store import Changes, Collection, Store, read_shard_file

ProgressCallback = Callable[[int, int], None]


# -- reading files without a store -----------------------------------------------------------------------
@dataclass
class ShardReport:
    path: Path
    lines: int
    size: int
    problems: list[LineProblem]
    duplicate_lines: list[int]  # line numbers superseded by a later line of the same record in this shard


@dataclass
class CollectionReport:
    name: str
    shards: list[ShardReport] = field(default_factory=list)
    records: dict[Key, dict[str, Any]] = field(default_factory=dict)
    copies: Counter[Key] = field(default_factory=Counter)  # how many shards hold each record


def scan(collection: Collection) -> CollectionReport:
    report = CollectionReport(collection.name)
    for index in sorted(collection.discover()):
        path = collection.shard_path(index)
        try:
            parsed = read_shard_file(path)
        except FileNotFoundError:
            continue
        seen: dict[Key, int] = {}
        superseded: list[int] = []
        for (key, record, _), number in zip(parsed.records, parsed.record_lines, strict=True):
            if key in seen:
                superseded.append(seen[key])
            seen[key] = number
            report.records.setdefault(key, record)
        for key in seen:
            report.copies[key] += 1
        report.shards.append(
            ShardReport(
                path=path,
                lines=len(parsed.records) + len(parsed.problems),
                size=path.stat().st_size,
                problems=parsed.problems,
                duplicate_lines=superseded,
            )
        )
    return report


# -- check -----------------------------------------------------------------------------------------------
@dataclass
class CheckResult:
    problems: list[str]
    notes: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def check(store: Store) -> CheckResult:
    problems: list[str] = []
    notes: list[str] = []
    reports = {name: scan(c) for name, c in store.collections.items()}
    for report in reports.values():
        for shard in report.shards:
            problems.extend(f"{p}" for p in shard.problems)
            problems.extend(
                f"{shard.path}:{n}: duplicate record, superseded by a later line in the same file"
                for n in shard.duplicate_lines
            )
            if shard.lines > store.shard_lines:
                notes.append(
                    f"{shard.path}: {shard.lines} lines, over the {store.shard_lines}-line limit "
                    "(it is split the next time it is written)"
                )
        for key, copies in report.copies.items():
            if copies > 1:
                problems.append(f"{report.name}: {_describe(key)} is stored in {copies} shards")
    entity_homes: dict[str, list[str]] = {}
    for name, report in reports.items():
        for key in report.records:
            if key[0] == "entity":
                entity_homes.setdefault(key[1], []).append(name)
    for entity, homes in entity_homes.items():
        if len(homes) > 1:
            problems.append(f"entity {json.dumps(entity, ensure_ascii=False)} is in both {' and '.join(homes)}")
    for key in reports[MEMORY].records:
        if key[0] == "relation":
            missing = [end for end in (key[1], key[2]) if end not in entity_homes]
            if missing:
                notes.append(f"dangling {_describe(key)}: no entity {', '.join(json.dumps(m) for m in missing)}")
    if store.journal_path.exists():
        try:
            writes = read_journal(store.journal_path)
            problems.append(
                f"{store.journal_path}: an interrupted commit of {len(writes or [])} file(s); the next server start "
                "or `memory-graph repair` finishes it"
            )
        except StorageError as exc:
            problems.append(str(exc))
    return CheckResult(problems, notes)


def _describe(key: Key) -> str:
    if key[0] == "relation":
        return f"relation {key[1]!r} -{key[3]}-> {key[2]!r}"
    return f"entity {key[1]!r}"


# -- repair ----------------------------------------------------------------------------------------------
def repair(store: Store, now: Callable[[], float] = time.time) -> list[str]:
    """Fix what `check` finds; returns what was done. Every removed line is kept in a side file."""
    done: list[str] = []
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now()))
    lock = filelock.FileLock(str(store.lock_path), timeout=60)
    with lock:
        if store.journal_path.exists():
            try:
                writes = recover_journal(store.journal_path)
                done.append(f"finished the interrupted commit in {store.journal_path} ({len(writes)} file(s))")
            except StorageError:
                aside = store.journal_path.with_name(f"{store.journal_path.name}.unreadable-{stamp}")
                os.replace(store.journal_path, aside)
                done.append(f"moved the unreadable journal {store.journal_path} to {aside}")
        for collection in store.collections.values():
            done.extend(_repair_collection(collection, stamp))
    return done


def _repair_collection(collection: Collection, stamp: str) -> list[str]:
    done: list[str] = []
    shards: list[tuple[Path, list[tuple[int, bytes, Key | None, str]]]] = []
    copies: dict[Key, list[dict[str, Any]]] = {}
    for index in sorted(collection.discover()):
        path = collection.shard_path(index)
        rows: list[tuple[int, bytes, Key | None, str]] = []
        for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                record, why = normalize_record(json.loads(raw.decode("utf-8").removesuffix("\r")))
            except UnicodeDecodeError:
                record, why = None, "not UTF-8 text"
            except ValueError as exc:
                record, why = None, f"not valid JSON ({exc})"
            key = record_key(record) if record is not None else None
            if record is not None and key is not None:
                copies.setdefault(key, []).append(record)
            rows.append((number, raw, key, why))
        shards.append((path, rows))
    written: set[Key] = set()
    for path, rows in shards:
        kept: list[bytes] = []
        rejected: list[tuple[int, bytes, str]] = []
        for number, raw, key, why in rows:
            if key is None:
                rejected.append((number, raw, why))
            elif key in written:
                rejected.append((number, raw, "duplicate: merged into the record's first copy"))
            else:
                written.add(key)
                if len(copies[key]) == 1:
                    kept.append(raw.removesuffix(b"\r"))
                else:
                    merged = copies[key][0]
                    for other in copies[key][1:]:
                        merged = merge_records(merged, other)
                    kept.append(dump_line(merged).encode("utf-8"))
                    rejected.append((number, raw, f"duplicated {len(copies[key])} times: replaced by their merge"))
        if not rejected:
            continue
        # The side file holds the removed or replaced lines byte for byte, one per line, in their original order.
        side = path.with_name(f"{path.name}.rejected-{stamp}")
        with open(side, "ab") as handle:
            handle.write(b"".join(raw + b"\n" for _, raw, _ in rejected))
            handle.flush()
            os.fsync(handle.fileno())
        if kept:
            atomic_write(path, b"".join(line + b"\n" for line in kept).decode("utf-8"))
        else:
            commit_files([FileWrite(path, None)], path.with_name(f"{path.name}.journal"))
        done.append(f"{path}: moved {len(rejected)} line(s) to {side}")
        done.extend(f"  {path}:{number}: {why}" for number, _, why in rejected)
    return done


# -- stats -----------------------------------------------------------------------------------------------
def stats(store: Store) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, collection in store.collections.items():
        report = scan(collection)
        types: Counter[str] = Counter()
        relation_types: Counter[str] = Counter()
        for key, record in report.records.items():
            if key[0] == "entity":
                types[record["entityType"]] += 1
            else:
                relation_types[record["relationType"]] += 1
        out[name] = {
            "entities": sum(types.values()),
            "relations": sum(relation_types.values()),
            "entityTypes": dict(types.most_common()),
            "relationTypes": dict(relation_types.most_common()),
            "shards": [{"file": str(s.path), "lines": s.lines, "bytes": s.size} for s in report.shards],
            "bytes": sum(s.size for s in report.shards),
        }
    return out


# -- export ----------------------------------------------------------------------------------------------
def _all_records(store: Store) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    lessons: list[dict[str, Any]] = []
    with store.reading():
        for name, collection in store.collections.items():
            for record in collection.all_records():
                if record["type"] == "relation":
                    relations.append(record)
                elif name == LESSONS:
                    lessons.append(record)
                else:
                    entities.append(record)
    return entities, relations, lessons


def export(store: Store, fmt: str, out: TextIO) -> int:
    entities, relations, lessons = _all_records(store)
    if fmt == "jsonl":
        # The official format: entity lines, then relation lines; lessons are entities with extra fields,
        # which the official server ignores.
        for record in [*entities, *lessons, *relations]:
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    elif fmt == "json":
        json.dump(
            {
                "entities": [entity_view(e) for e in entities],
                "lessons": [{k: v for k, v in r.items() if k != "type"} for r in lessons],
                "relations": [{k: v for k, v in r.items() if k != "type"} for r in relations],
            },
            out,
            ensure_ascii=False,
            indent=2,
        )
        out.write("\n")
    elif fmt in ("mermaid", "dot"):
        out.write(_drawing(fmt, entities, lessons, relations))
    else:
        raise InvalidInputError(f"unknown export format {fmt!r}; use jsonl, json, mermaid or dot")
    return len(entities) + len(lessons) + len(relations)


def _drawing(fmt: str, entities: list[dict], lessons: list[dict], relations: list[dict]) -> str:
    ids: dict[str, str] = {}
    for number, record in enumerate([*entities, *lessons]):
        ids[record["name"]] = f"n{number}"
    lesson_names = {r["name"] for r in lessons}
    lines: list[str] = []
    if fmt == "mermaid":

        def label(text: str) -> str:
            return text.replace('"', "#quot;").replace("\n", " ")

        lines.append("graph LR")
        for record in [*entities, *lessons]:
            node = ids[record["name"]]
            text = label(f"{record['name']} ({record['entityType']})")
            lines.append(f'  {node}{{{{"{text}"}}}}' if record["name"] in lesson_names else f'  {node}["{text}"]')
        for relation in relations:
            source, target = ids.get(relation["from"]), ids.get(relation["to"])
            if source and target:
                lines.append(f'  {source} -->|"{label(relation["relationType"])}"| {target}')
        lines.append("  classDef lesson fill:#fff3cd,stroke:#b58900,color:#333")
        if lesson_names:
            lines.append(f"  class {','.join(ids[n] for n in sorted(lesson_names))} lesson")
        return "\n".join(lines) + "\n"

    def quote(text: str) -> str:
        return json.dumps(text, ensure_ascii=False)

    lines.append("digraph memory {")
    lines.append("  rankdir=LR;")
    lines.append('  node [shape=box, style="rounded"];')
    for record in entities:
        lines.append(f"  {ids[record['name']]} [label={quote(record['name'] + chr(10) + record['entityType'])}];")
    for record in lessons:
        lines.append(
            f'  {ids[record["name"]]} [label={quote(record["name"])}, shape=note, style=filled, fillcolor="#fff3cd"];'
        )
    for relation in relations:
        source, target = ids.get(relation["from"]), ids.get(relation["to"])
        if source and target:
            lines.append(f"  {source} -> {target} [label={quote(relation['relationType'])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


# -- import ----------------------------------------------------------------------------------------------
@dataclass
class ImportResult:
    entities: int = 0
    relations: int = 0
    lessons: int = 0
    skipped_duplicates: int = 0
    skipped_dangling: int = 0
    problems: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


SHARD_SUFFIX = re.compile(r"^(?P<stem>.+)-(?P<n>[1-9][0-9]*)$")


def import_files(files: Iterable[Path]) -> list[Path]:
    """The files to read for the given paths: each file, its `-N` shards, and what a file_registry.json lists."""
    found: list[Path] = []

    def add(path: Path) -> None:
        if path.exists() and path not in found:
            found.append(path)

    for path in files:
        if path.is_dir():
            for child in sorted(path.iterdir()):
                if child.suffix in (".json", ".jsonl") and child.name != "file_registry.json" and child.is_file():
                    add(child)
            registry = path / "file_registry.json"
        else:
            add(path)
            for shard in sorted(
                path.parent.glob(f"{path.stem}-*{path.suffix}"), key=lambda p: _shard_number(p, path.stem)
            ):
                if _shard_number(shard, path.stem) > 0:
                    add(shard)
            registry = path.parent / "file_registry.json"
            if path.name == "file_registry.json":
                found.remove(path)
        if registry.exists():
            for listed in _registry_files(registry):
                add(listed)
    missing = [str(p) for p in files if not p.exists()]
    if missing:
        raise InvalidInputError(f"nothing to import at {', '.join(missing)}: check the path")
    return found


def _shard_number(path: Path, stem: str) -> int:
    match = SHARD_SUFFIX.match(path.stem)
    return int(match.group("n")) if match and match.group("stem") == stem else 0


def _registry_files(registry: Path) -> list[Path]:
    """Every existing .json/.jsonl file a registry names, wherever it names it (keys, values, lists)."""
    try:
        data = json.loads(registry.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    names: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str) and value.endswith((".json", ".jsonl")):
            names.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(data)
    out = []
    for name in names:
        candidate = Path(name) if Path(name).is_absolute() else registry.parent / Path(name).name
        if candidate.exists() and candidate.name != registry.name:
            out.append(candidate)
    return out


def read_records(path: Path) -> Iterator[tuple[dict[str, Any] | None, str]]:
    """Records of a file in any of the known layouts: JSON Lines, a JSON array, or {entities, relations, ...}."""
    text = path.read_text(encoding="utf-8", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")) and not _is_jsonl(text):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, list):
            items: list[Any] = data
        elif isinstance(data, dict) and any(k in data for k in ("entities", "relations", "lessons")):
            items = [
                *({"type": "entity", **e} if isinstance(e, dict) else e for e in data.get("entities", [])),
                *({"type": "lesson", **e} if isinstance(e, dict) else e for e in data.get("lessons", [])),
                *({"type": "relation", **e} if isinstance(e, dict) else e for e in data.get("relations", [])),
            ]
        else:
            items = [data] if data is not None else []
        for number, item in enumerate(items, start=1):
            record, why = _import_record(item)
            yield record, "" if record else f"{path}: item {number}: {why}"
        return
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError as exc:
            yield None, f"{path}:{number}: not valid JSON ({exc})"
            continue
        record, why = _import_record(item)
        yield record, "" if record else f"{path}:{number}: {why}"


def _is_jsonl(text: str) -> bool:
    lines = [line for line in text.split("\n") if line.strip()]
    if len(lines) < 2:
        return bool(lines) and lines[0].strip().startswith("{") and '"type"' in lines[0]
    try:
        json.loads(lines[0])
        return True
    except ValueError:
        return False


def _import_record(item: Any) -> tuple[dict[str, Any] | None, str]:
    if isinstance(item, dict) and item.get("type") == "lesson":
        item = {**item, "type": "entity", "entityType": item.get("entityType") or "lesson"}
    return normalize_record(item)


def is_lesson(record: dict[str, Any]) -> bool:
    return record.get("type") == "entity" and (
        record.get("entityType") == "lesson" and isinstance(record.get("errorPattern"), dict)
    )


def import_into(
    store: Store, paths: list[Path], progress: ProgressCallback | None = None, batch: int = 500
) -> ImportResult:
    from memory_graph.graph import GraphState

    result = ImportResult()
    files = import_files(paths)
    result.files = [str(f) for f in files]
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    for path in files:
        for record, problem in read_records(path):
            if record is None:
                result.problems.append(problem)
            elif record["type"] == "relation":
                relations.append(record)
            else:
                entities.append(record)
    total = len(entities) + len(relations)
    state = GraphState()
    store.add_listener(state)
    done = 0
    pending: dict[str, Changes] = {}
    pending_count = 0

    def flush() -> None:
        nonlocal pending, pending_count
        if pending_count:
            with store.writing():
                store.commit(pending)
        pending, pending_count = {}, 0

    with store.reading():
        pass  # load the current state into `state`
    seen_names: set[str] = set()
    for record in entities:
        done += 1
        name = record["name"]
        if name in state.entities or name in seen_names:
            result.skipped_duplicates += 1
        else:
            seen_names.add(name)
            lesson = is_lesson(record)
            if lesson:
                record = {**record, "metadata": complete_metadata(record)}
                result.lessons += 1
            else:
                result.entities += 1
            pending.setdefault(LESSONS if lesson else MEMORY, Changes()).upserts.append(record)
            pending_count += 1
        if pending_count >= batch:
            flush()
        if progress:
            progress(done, total)
    flush()
    seen_relations: set[tuple[str, str, str]] = set()
    for record in relations:
        done += 1
        key = (record["from"], record["to"], record["relationType"])
        if key in state.relations or key in seen_relations:
            result.skipped_duplicates += 1
        elif record["from"] not in state.entities or record["to"] not in state.entities:
            result.skipped_dangling += 1
            result.problems.append(
                f"relation {record['from']!r} -{record['relationType']}-> {record['to']!r} skipped: "
                "an end does not exist"
            )
        else:
            seen_relations.add(key)
            pending.setdefault(MEMORY, Changes()).upserts.append(record)
            pending_count += 1
            result.relations += 1
        if pending_count >= batch:
            flush()
        if progress:
            progress(done, total)
    flush()
    return result


class ProgressBar:
    """A progress bar on stderr, shown only once the work has taken more than a moment."""

    def __init__(self, label: str, stream: TextIO = sys.stderr, delay: float = 0.5) -> None:
        self.label, self.stream, self.delay = label, stream, delay
        self.started = time.monotonic()
        self.shown = False
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.started < self.delay or (now - self.last < 0.1 and done < total):
            return
        self.last = now
        self.shown = True
        width = 30
        filled = int(width * done / total) if total else width
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{end}")
        self.stream.flush()
