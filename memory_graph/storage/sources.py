"""Reading other memories' files for import: an official `memory.jsonl`, the lessons fork's `memory.json` /
`lesson.json` with their `-N` shards and `file_registry.json`, or a `{entities, relations, lessons}` export.

Lines are read with the store's own parser (codec.py), so what import accepts is exactly what the store reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from memory_graph.errors import InvalidInputError
from memory_graph.storage.codec import ParsedFile, normalize_record, parse_text, read_shard_file
from memory_graph.storage.layout import ShardNames, is_shard_number

# What a memory-graph data folder holds beside its memory: its change history (`history.json`, `<stem>-history.json`
# and their shards; migrate copies it) and side caches. A folder's import reads neither.
NOT_MEMORY = re.compile(r"(^|-)history(-[1-9][0-9]*)?\.json$|\.(signatures|embeddings)\.jsonl$")
REGISTRY = "file_registry.json"


@dataclass(frozen=True)
class SourceRecord:
    """A record read from a file to import, or why the item there could not be read."""

    record: dict[str, Any] | None
    problem: str = ""
    place: str = ""  # where it was read: "file:line" or "file: item N" (a rule's refusal of the record names it)


def files_to_import(paths: Iterable[Path]) -> list[Path]:
    """The files to read for the given paths: each file, its `-N` shards, and what a file_registry.json lists."""
    paths = list(paths)
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InvalidInputError(f"nothing to import at {', '.join(missing)}: check the path")
    found: list[Path] = []

    def add(path: Path) -> None:
        if path.exists() and path not in found and path.name != REGISTRY:
            found.append(path)

    for path in paths:
        if path.is_dir():
            for child in sorted(path.iterdir()):
                if child.suffix in (".json", ".jsonl") and child.is_file() and not NOT_MEMORY.search(child.name):
                    add(child)
            registry = path / REGISTRY
        else:
            add(path)
            names = ShardNames(path)  # (the store's own reading of `<stem>-<n><suffix>`)
            numbered = {shard: names.index_of(shard.name) for shard in path.parent.glob(f"{path.stem}-*{path.suffix}")}
            shards = {shard: n for shard, n in numbered.items() if n}
            for shard, number in sorted(shards.items(), key=lambda item: item[1]):
                if is_shard_number(number, set(shards.values())):
                    add(shard)
            registry = path.parent / REGISTRY
        if registry.exists():
            for listed in _registry_files(registry):
                add(listed)
    return found


def _registry_files(registry: Path) -> list[Path]:
    """Every existing .json/.jsonl file a registry names (keys, values, lists), looked up in the registry's
    own folder: a registry copied from elsewhere must not pull in files from anywhere on the machine."""
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
    candidates = (registry.parent / Path(name).name for name in names)
    return [c for c in candidates if c.is_file() and c.name != REGISTRY]


def read_source(path: Path) -> Iterator[SourceRecord]:
    """Records of a file in any of the known layouts: JSON Lines, a JSON array, or {entities, relations, ...}.
    Text that is not UTF-8 is never guessed at: a JSON Lines file's bad lines are problems (as the store reports
    them), a whole document with such bytes is refused."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if _whole_document(data.decode("utf-8", errors="replace")) is not None:
            yield SourceRecord(
                None,
                f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); convert the file to UTF-8 and import it",
            )
        else:
            yield from _records_by_line(path, read_shard_file(path))
        return
    try:
        document = _whole_document(text)
    except ValueError as exc:
        yield SourceRecord(None, f"{path}: {exc}")
        return
    if document is None:
        yield from _records_by_line(path, parse_text(path, text))
        return
    for number, item in enumerate(document, start=1):
        record, why = normalize_record(item)
        place = f"{path}: item {number}"
        yield SourceRecord(record, "" if record else f"{place}: {why}", place)


def _records_by_line(path: Path, parsed: ParsedFile) -> Iterator[SourceRecord]:
    lines = dict(zip(parsed.record_lines, (record for _, record, _ in parsed.records), strict=True))
    problems = {p.line_number: str(p) for p in parsed.problems}
    for number in sorted(lines.keys() | problems.keys()):
        yield SourceRecord(lines.get(number), problems.get(number, ""), f"{path}:{number}")


def _whole_document(text: str) -> list[Any] | None:
    """The items of a file that is one JSON document (an array or an export object), or None for JSON Lines.
    Raises ValueError saying where when it is a document broken by hand (an exported .json file): no line of its
    start is a record of its own, so read as JSON Lines every line of it would be reported broken, and the one
    place to fix not named."""
    if not text.lstrip().startswith(("[", "{")):
        return None
    try:
        data = json.loads(text)
    except RecursionError:
        return None
    except json.JSONDecodeError as exc:
        start = [line for line in islice((line for line in text.splitlines() if line.strip()), 20)]
        if not any(_is_record_line(line) for line in start):
            raise ValueError(
                f"{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); the file is one JSON document, not JSON "
                "Lines: fix it there and import it again"
            ) from None
        return None
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and any(k in data for k in ("entities", "relations", "lessons")) and "type" not in data:
        return [
            *({"type": "entity", **e} if isinstance(e, dict) else e for e in data.get("entities", [])),
            *({"type": "lesson", **e} if isinstance(e, dict) else e for e in data.get("lessons", [])),
            *({"type": "relation", **e} if isinstance(e, dict) else e for e in data.get("relations", [])),
        ]
    return None


def _is_record_line(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False
