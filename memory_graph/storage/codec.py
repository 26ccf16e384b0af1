"""The codec: the one line parser and writer of the store, in the official `server-memory` line format.

    {"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}
    {"type":"relation","from":"Alice","to":"Acme","relationType":"works_at"}

Lessons are entity lines with more fields (`errorPattern`, `verificationSteps`, `metadata`). Reading is
lenient where the meaning is clear (no trailing newline, CRLF, a missing `type` on an otherwise complete record,
an entity without `observations`) and strict where it is not: such a line is a `LineProblem`, never dropped.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import Any

from memory_graph.errors import LineProblem
from memory_graph.storage.layout import FileStat, stat_of

Key = tuple[str, ...]
"""Identity of a record: ("entity", name), ("relation", from, to, relationType), or ("event", id) for a change
event in the history collection."""

HISTORY = "history"
"""The collection of change events (`history.json` beside the memory file): never part of the graph."""

UTF8_BOM = b"\xef\xbb\xbf"
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """The value with every lone surrogate (json.loads pairs the valid ones) replaced by U+FFFD."""
    if isinstance(value, str):
        return LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_lone_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    return value


RecordCheck = Callable[[dict[str, Any]], str | None]
"""A collection's own rule for its records (lessons have one): why a normalized record is unusable, or None."""


def entity_key(name: str) -> Key:
    return ("entity", name)


def relation_key(source: str, target: str, relation_type: str) -> Key:
    return ("relation", source, target, relation_type)


def record_key(record: dict[str, Any]) -> Key:
    """A record's identity. Its names are interned: the store holds every key for as long as the record lives,
    and a relation's ends are names that its entities' keys (and the graph's indexes) hold too, so each name is
    kept once instead of once per relation that names it (34 MB of 124 at 100k entities and 200k relations)."""
    kind = record["type"]
    if kind == "relation":
        return relation_key(_interned(record["from"]), _interned(record["to"]), _interned(record["relationType"]))
    if kind == "event":
        return ("event", record["id"])
    return entity_key(_interned(record["name"]))


def _interned(value: Any) -> Any:
    return intern(value) if type(value) is str else value  # a record not yet checked may hold anything


def event_check(record: dict[str, Any]) -> str | None:
    """The history collection's record rule: it holds change events and nothing else. Passing this check to the
    parser is also what lets it accept event lines at all (see `checked_record`), so a graph file never does."""
    return None if record["type"] == "event" else "only change events belong in the history"


def merge_records(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One record from two copies of the same one (the official server stores `Alice` twice; the lessons fork
    duplicated records when it split files): the first copy's fields, plus the second's observations it lacks."""
    if first.get("type") == "relation":
        return first
    observations = list(dict.fromkeys([*(first.get("observations") or []), *(second.get("observations") or [])]))
    merged = {**second, **first, "observations": observations}
    for key in ("aliases", "mergedNames"):  # a lesson's learned wordings and merged twins' names
        both = [*(first.get(key) or []), *(second.get(key) or [])]
        if both and all(isinstance(item, str) for item in both):
            merged[key] = list(dict.fromkeys(both))
    return merged


def searchable_fields(record: dict[str, Any]) -> list[str]:
    """What search_nodes looks at in an entity record: name, type, observations, and a lesson's error pattern."""
    fields = [record["name"], record["entityType"], *record["observations"]]
    pattern = record.get("errorPattern")
    if isinstance(pattern, dict):
        fields.extend(str(pattern.get(k) or "") for k in ("type", "message", "context"))
    return fields


def search_text(record: dict[str, Any]) -> str:
    """An entity record's searchable fields joined by spaces, ASCII letters lower-cased (whatever the locale): the
    text a storage narrows a search with while it loads (PostgreSQL keeps it in a column, the files compute it)."""
    return ascii_lower(" ".join(searchable_fields(record)))


def ascii_lower(text: str) -> str:
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def dump_line(record: dict[str, Any]) -> str:
    """Compact JSON with unescaped Unicode, like the reference's JSON.stringify."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


@dataclass
class ParsedFile:
    records: list[tuple[Key, dict[str, Any], str]] = field(default_factory=list)
    record_lines: list[int] = field(default_factory=list)  # the 1-based line number of each record
    problems: list[LineProblem] = field(default_factory=list)
    # How many lines the file has as `Collection._read_lines` splits it, and whether each is held as written (no
    # line ends in "\r"): with no problem and no key twice, the file then gives back every held line by position.
    lines_in_file: int = 0
    lines_as_written: bool = False
    stat: FileStat | None = None  # of the file the text was read from (not of one that replaced it since)

    def line_keys(self) -> list[Key | None] | None:
        """The key of each line of the file (None for a blank one) when the file gives back every record's line by
        position, as a restored shard's are read (`UnreadLines`); None when it cannot (a problem, a line ending in
        "\r": only the lines held tell those apart)."""
        if self.problems or not self.lines_as_written or self.stat is None:
            return None
        keys: list[Key | None] = [None] * self.lines_in_file
        for (key, _, _), number in zip(self.records, self.record_lines, strict=True):
            keys[number - 1] = key
        return keys

    def add(self, record: dict[str, Any], line: str, number: int) -> None:
        self.records.append((record_key(record), record, line))
        self.record_lines.append(number)

    def without_lines(self, numbers: set[int]) -> None:
        """Forget the records read from these lines (they turned out to be unreadable)."""
        kept = [(r, n) for r, n in zip(self.records, self.record_lines, strict=True) if n not in numbers]
        self.records = [r for r, _ in kept]
        self.record_lines = [n for _, n in kept]


def _canonical_entity(item: dict[str, Any]) -> bool:
    name = item["name"]
    return (
        type(name) is str
        and bool(name)
        and type(item["entityType"]) is str
        and type(item["observations"]) is list
        and set(map(type, item["observations"])) <= STR_ONLY  # C-level loops: this runs for every entity loaded
    )


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


STR_ONLY = frozenset({str})
ENTITY_KEYS = ("type", "name", "entityType", "observations")
RELATION_KEYS = ("type", "from", "to", "relationType")


def normalize_record(item: Any, events: bool = False) -> tuple[dict[str, Any] | None, str]:
    """A stored object made canonical, or (None, why it is unusable); change events only when `events`."""
    if not isinstance(item, dict):
        return None, "not a JSON object"
    # Fast path: what we write ourselves is already canonical.
    if tuple(item) == ENTITY_KEYS and item["type"] == "entity" and _canonical_entity(item):
        item["type"] = "entity"  # one shared string instead of a copy per record
        return item, ""
    if (
        tuple(item) == RELATION_KEYS
        and item["type"] == "relation"
        and type(item["from"]) is str
        and type(item["to"]) is str
        and type(item["relationType"]) is str
        and item["from"]
        and item["to"]
    ):
        return item, ""
    kind = item.get("type")
    if kind is None:
        # Trigger: hand-written or older files omit "type". Why: the shape says what the record is.
        # Outcome: a complete entity or relation is accepted; anything else is reported.
        if {"from", "to", "relationType"} <= item.keys():
            kind = "relation"
        elif {"name", "entityType"} <= item.keys():
            kind = "entity"
        else:
            return None, 'no "type" and not shaped like an entity or a relation'
    if kind == "relation":
        return _relation(item)
    if kind in ("entity", "lesson"):
        return _entity(item, kind)
    if kind == "event" and events:
        return _event(item)
    return None, f'unknown record type "{kind}" (expected "entity" or "relation")'


def _relation(item: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    for name in ("from", "to", "relationType"):
        if not isinstance(item.get(name), str):
            return None, f'relation field "{name}" must be a string'
    for name in ("from", "to"):
        if not item[name]:
            return None, f'relation field "{name}" must name an entity (it is empty)'
    return {"type": "relation", "from": item["from"], "to": item["to"], "relationType": item["relationType"]}, ""


def _entity(item: dict[str, Any], kind: str) -> tuple[dict[str, Any] | None, str]:
    """An entity (or the fork's "lesson" record, an entity with more fields), extra fields kept."""
    if not isinstance(item.get("name"), str) or not item["name"]:
        return None, 'entity field "name" must be a non-empty string'
    entity_type = item.get("entityType", "lesson" if kind == "lesson" else None)
    if not isinstance(entity_type, str):
        return None, 'entity field "entityType" must be a string'
    observations = item.get("observations")
    if observations is None:  # an entity without observations (legacy or hand-written) has none
        observations = []
    if not _is_str_list(observations):
        return None, 'entity field "observations" must be a list of strings'
    record = {"type": "entity", "name": item["name"], "entityType": entity_type, "observations": observations}
    for extra, value in item.items():
        if extra not in record and extra != "type":
            record[extra] = value
    return record, ""


def _is_record_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and isinstance(value.get("type"), str))


def _event(item: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A change event: {type, id, at, op, collection, key, before, after} (plus optional notes), kept as is."""
    for name in ("id", "at", "op", "collection"):
        if not isinstance(item.get(name), str) or not item[name]:
            return None, f'event field "{name}" must be a non-empty string'
    if not _is_str_list(item.get("key")) or not item["key"]:
        return None, 'event field "key" must be a non-empty list of strings'
    if not (_is_record_or_none(item.get("before")) and _is_record_or_none(item.get("after"))):
        return None, 'event fields "before" and "after" must be records or null'
    return item, ""


PARSE_SLICE = 2_000
DECODE_PIECE_BYTES = 1 << 20  # a file is decoded and split this much at a time (`SplitText.of_bytes`)


def parse_all_at_once(lines: list[str]) -> list[Any] | None:
    """All lines as one JSON array (one C call instead of one per line), or None if any line is not exactly
    one JSON object; the caller then parses line by line to say which line is wrong."""
    wrapped: list[Any] = []
    try:
        # In slices: one call holds the interpreter throughout, and a database server answers reads from another
        # thread while it loads (`ReadsWhileLoading`). Each line in brackets of its own: joined with commas alone,
        # a line left open (`{"name":"A","observations":["o"`) was closed by the next (`"p"]}, {"name":"B"}`), and
        # two unreadable lines read as two records. A line left open now meets a `],[` it cannot hold (inside an
        # object) or leaves its brackets holding other than one object: either way, read line by line.
        for start in range(0, len(lines), PARSE_SLICE):
            wrapped.extend(json.loads("[[" + "],[".join(lines[start : start + PARSE_SLICE]) + "]]"))
        items = [item for (item,) in wrapped]  # (a pair of brackets holding other than one value: ValueError)
    except (ValueError, TypeError, RecursionError):  # ValueError: also an integer too long to convert
        return None
    if len(items) != len(lines) or not all(type(item) is dict for item in items):
        return None
    return items


def checked_record(
    item: Any, check: RecordCheck | None, repair_text: bool = False
) -> tuple[dict[str, Any] | None, str]:
    """A stored object made canonical and checked by its collection's rule (one rule for files and tables)."""
    if repair_text:
        item = without_lone_surrogates(item)
    record, why = normalize_record(item, events=check is event_check)
    if record is not None and check is not None:
        problem = check(record)
        if problem is not None:
            return None, problem
    return record, why


@dataclass
class SplitText:
    """A shard's text cut into its lines, with what the parse needs to know of the whole text: the text itself
    can be let go before the lines are parsed (a million entities' file is 389 MB of text, held beside every line
    and every parsed record otherwise)."""

    lines: list[str]  # the lines that are not blank, "\r" endings removed
    numbers: list[int] | None  # each one's 1-based line number; None when no line is blank (line i is number i + 1)
    lines_in_file: int
    lines_as_written: bool  # no line ends in "\r"
    # JavaScript writes half an emoji as a lone surrogate escape ("\ud83d"), which no UTF-8 text can hold.
    repair_text: bool

    @classmethod
    def of(cls, text: str) -> SplitText:
        """Splits on "\\n" only: U+2028 inside a string is data, not a line break."""
        return cls.of_pieces([text])

    @classmethod
    def of_bytes(cls, data: bytes, between_pieces: Callable[[], None] = lambda: None) -> SplitText:
        """UTF-8 bytes decoded and split a piece at a time (UnicodeDecodeError if they are not UTF-8), with
        `between_pieces` called after each: one call for the whole of a million entities' file held the
        interpreter for 1-3 s, and a call answered beside the load waited for it (a load gives way to it between
        pieces); nor is all of the text held beside the bytes and the lines."""
        return cls.of_pieces(_decoded_pieces(data, between_pieces))

    @classmethod
    def of_pieces(cls, pieces: Iterable[str]) -> SplitText:
        """The lines of a text given in pieces, each but the last ending in "\\n"."""
        raw: list[str] = []
        as_written, blank, repair_text = True, False, False
        for piece in pieces:
            split = piece.split("\n")
            if split[-1] == "":
                split.pop()  # the piece's last newline
            as_written = as_written and "\r" not in piece
            blank = blank or not all(map(str.strip, split))  # (a line of "\r" alone is blank too)
            repair_text = repair_text or SURROGATE_ESCAPE.search(piece) is not None
            raw.extend(split)
        lines = raw if as_written else [line.removesuffix("\r") for line in raw]
        numbers = None
        if blank:  # blank lines: left out, the others keep their numbers
            numbers = [i for i, line in enumerate(lines, start=1) if line.strip()]
            lines = [lines[number - 1] for number in numbers]
        return cls(lines, numbers, len(raw), as_written, repair_text)

    def numbered(self) -> Iterable[tuple[int, str]]:
        return zip(self.numbers or range(1, len(self.lines) + 1), self.lines, strict=True)


def parse_text(path: Path, text: str, check: RecordCheck | None = None) -> ParsedFile:
    """Parse a whole shard. Splits on "\\n" only: U+2028 inside a string is data, not a line break."""
    return parse_split(path, SplitText.of(text), check)


def parse_split(path: Path, split: SplitText, check: RecordCheck | None = None) -> ParsedFile:
    """Parse a shard's lines (see SplitText)."""
    parsed = ParsedFile(lines_in_file=split.lines_in_file, lines_as_written=split.lines_as_written)
    for part in parse_slices(path, split, check):
        parsed.records.extend(part.records)
        parsed.record_lines.extend(part.record_lines)
        parsed.problems.extend(part.problems)
    return parsed


def parse_slices(
    path: Path, split: SplitText, check: RecordCheck | None = None, let_go: bool = False
) -> Iterator[ParsedFile]:
    """A shard's lines parsed PARSE_SLICE at a time, each slice's records and problems in a ParsedFile of its own
    (together, what `parse_split` gives): a caller can use one slice's records and let them go before the next
    slice is parsed (a first load: `Collection._load_shard_by_shard`). With `let_go`, each slice's lines are taken
    out of `split` once the caller is done with it (left empty strings)."""
    lines, numbers = split.lines, split.numbers
    for start in range(0, len(lines), PARSE_SLICE):
        end = min(start + PARSE_SLICE, len(lines))
        yield _parse_lines(
            path,
            lines[start:end],
            numbers[start:end] if numbers is not None else range(start + 1, end + 1),
            split.repair_text,
            check,
        )
        if let_go:
            lines[start:end] = [""] * (end - start)


def _parse_lines(
    path: Path, lines: list[str], numbers: Sequence[int], repair_text: bool, check: RecordCheck | None
) -> ParsedFile:
    parsed = ParsedFile()
    items = parse_all_at_once(lines)
    if items is not None:
        for item, number, line in zip(items, numbers, lines, strict=True):
            record, _ = checked_record(item, check, repair_text)
            if record is None:
                break  # a valid object that is not a record: let the careful path name its line
            parsed.add(record, line, number)
        else:
            return parsed
        parsed = ParsedFile()
    for number, line in zip(numbers, lines, strict=True):
        try:
            record, why = checked_record(json.loads(line), check, repair_text)
        except json.JSONDecodeError as exc:
            record, why = None, f"not valid JSON ({exc.msg} at column {exc.colno})"
        except RecursionError:
            record, why = None, "JSON nested too deeply to read"
        except ValueError as exc:
            record, why = None, f"not readable JSON ({exc})"
        if record is None:
            parsed.problems.append(LineProblem(path, number, why))
            continue
        parsed.add(record, line, number)
    return parsed


def _read_bytes(path: Path) -> tuple[bytes, FileStat]:
    with open(path, "rb") as handle:
        data = handle.read().removeprefix(UTF8_BOM)  # editors on Windows add one; we accept it and write none
        st = os.fstat(handle.fileno())
    return data, stat_of(st)


def _decoded_pieces(data: bytes, between_pieces: Callable[[], None]) -> Iterator[str]:
    """The bytes decoded DECODE_PIECE_BYTES at a time, each piece ending after a newline (but the last)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + DECODE_PIECE_BYTES) + 1 or len(data)
        yield data[start:end].decode("utf-8")
        between_pieces()
        start = end


def read_split(path: Path, between_pieces: Callable[[], None] = lambda: None) -> tuple[SplitText, FileStat] | None:
    """A shard file's lines, unparsed, and the stat of the file they were read from; None when some of its bytes
    are not UTF-8 (`read_shard_file` reads such a file, each bad line a problem). `between_pieces`: see
    `SplitText.of_bytes`."""
    data, stat = _read_bytes(path)
    try:
        return SplitText.of_bytes(data, between_pieces), stat
    except UnicodeDecodeError:
        return None


def read_shard_file(path: Path, check: RecordCheck | None = None) -> ParsedFile:
    """Parse a shard; bytes that are not UTF-8 make their line a problem instead of failing the file."""
    read = read_split(path)
    if read is not None:
        parsed = parse_split(path, read[0], check)
        parsed.stat = read[1]
        return parsed
    data, stat = _read_bytes(path)  # (read again: rare, and the bytes are not held beside the parse otherwise)
    parsed = parse_text(path, data.decode("utf-8", errors="replace"), check)
    parsed.stat = stat
    undecodable: dict[int, str] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            undecodable[number] = f"not UTF-8 text ({exc.reason})"
    parsed.without_lines(set(undecodable))
    problems = {p.line_number: p for p in parsed.problems}
    problems.update((n, LineProblem(path, n, why)) for n, why in undecodable.items())
    parsed.problems = [problems[n] for n in sorted(problems)]
    return parsed
