"""Reads answered from the shard files themselves while a load holds them (`ReadsWhileLoading` for the files).

A first start on a large memory parses every line before it can answer (45 s at a million entities), and a
restart restores its snapshot (0.5 s at 100k, 8-10 s at a million). A client's first open_nodes or search
needs a few records of all of them: those are found by searching the files' bytes for what the records must
hold (a name's JSON string, a query's words), and only the lines holding it are parsed, by the load's own parser
(`codec.parse_text`), copies of one record merged with `merge_records`.

Exact, or refused: a line can spell a name or a word otherwise than this code writes it only through a JSON
escape (`\\u00e9`, `\\/`), so every line holding one is parsed too; a read that would parse more than
SCAN_LINE_LIMIT lines raises StorageError, and the caller waits for the load. The files are still throughout: the
load holds their lock while these reads run (`ReadsBesideLoad`, gated), and lets it go only once they have ended.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from itertools import chain, filterfalse, groupby
from typing import TYPE_CHECKING, Any, BinaryIO

from memory_graph.errors import StorageError
from memory_graph.storage.codec import (
    HISTORY,
    UTF8_BOM,
    Key,
    ascii_lower,
    merge_records,
    parse_text,
    record_key,
    search_text,
    without_lone_surrogates,
)
from memory_graph.storage.layout import FileStat

if TYPE_CHECKING:
    from memory_graph.storage.collection import Collection
    from memory_graph.storage.store import Store

CHUNK_BYTES = 8 << 20  # a file is searched this much at a time (the official server's million entities: one file)
# Lines parsed for one read at most: past it, parsing them is a good part of the load itself.
SCAN_LINE_LIMIT = 50_000
# Up to this many names a read searches for each name's bytes; for more, it reads every record's names instead
# (one pass, about 0.1 s per 200,000 records) rather than one pass per name.
NAME_NEEDLES = 16
# The only ways JSON can write a name's or a word's characters otherwise than this code (`dump_line`) does: a \u
# escape, an escaped solidus (a quote, a backslash and the control characters have one spelling short of \u).
ESCAPES = (b"\\u", b"\\/")
# What `dump_line` writes with an escape in a JSON string: a quote, a backslash, a control character.
_ESCAPED = re.compile(r'["\\\x00-\x1f]')
_VALUE = rb'"((?:[^"\\\n]|\\.)*)"'
# A value the load reads as it is written: without escapes or control characters (a name: not empty either).
_PLAIN = rb'"([^"\\\x00-\x1f]*)"'
_PLAIN_NAME = rb'"([^"\\\x00-\x1f]+)"'
# How this code and the official server write a record's first fields, which name its entity or its ends: the
# pieces of text around the names, and a pattern finding the names of a line so written (without escapes, after a
# newline). Only the names are made into strings (a million entities' lines: 1M small strings, not 1M lines); the
# lines of those wanted are found again from their beginning.
_WRITTEN_PIECES = {
    "entity": (b'{"type":"entity","name":"', b'"'),
    "relation": (b'{"type":"relation","from":"', b'","to":"', b'"'),
}
_WRITTEN = {
    kind: re.compile(b"\n" + rb'([^"\\\n]*)'.join(re.escape(piece) for piece in pieces))
    for kind, pieces in _WRITTEN_PIECES.items()
}
# The keys that name a record of each kind, and its type: written once in each of its lines (JSON keeps a key's
# last value, so a line that holds one twice is read whole; a lesson's error pattern has a type too).
_NAMING_KEYS = {"entity": (b'"name":',), "relation": (b'"from":', b'"to":')}
_TYPE_KEY = b'"type":'
# What a line of each kind must hold unless written with an escape: the load takes a record's kind from its type's
# value ("entity" or "lesson", "relation") or, a line without one (or with a null), from its keys ("entityType",
# "relationType"). Each begins so after its opening quote (`Facts.of`).
_KIND_MARKS = {"entity": (b'"entity', b'"lesson"'), "relation": (b'"relation',)}
# A relation's line that holds nothing else, its values plain: the line is its record's one spelling, which the
# load reads as it is (its values, as written, are the relation's key).
_PLAIN_RELATION = re.compile(
    rb'\{"type":"relation","from":' + _PLAIN_NAME + rb',"to":' + _PLAIN_NAME + rb',"relationType":' + _PLAIN + rb"\}\r?"
)
# ... and the same first fields with escapes in the names, matched at a line's start.
_LEADING_FIELDS = {
    "entity": re.compile(rb'\{"type":"entity","name":' + _VALUE),
    "relation": re.compile(rb'\{"type":"relation","from":' + _VALUE + rb',"to":' + _VALUE),
}

Found = list[tuple[str, dict[str, Any]]]


class ShardScan:
    """`ReadsWhileLoading` over a files store's shards (the history left out: it holds no entity or relation)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._facts: dict[tuple[str, FileStat, int], Facts] = {}
        # Each file's windows once it has been read whole: (offset, length), for passes that need only some of them.
        self._read_whole: dict[tuple[str, FileStat], list[tuple[int, int]]] = {}
        # Whether a read may pass over every record (names of more than NAME_NEEDLES): about 2 s a pass at a million
        # entities, which pays beside a first load (45 s) and not beside a restore (8 s).
        self.every_record = True
        # The matches of a broad search whose relations its cut answer will count (`leading_matches`), and where
        # the count goes once the pass reading the relations of the ones it shows has taken it too.
        self._to_count: tuple[set[str], list[int]] | None = None

    def answering(self) -> AbstractContextManager[None]:
        return self._store.reads_beside.answering()

    # -- the reads -------------------------------------------------------------------------------------------
    def entities(self, names: list[str]) -> Found:
        wanted = set(names)
        return self._named(wanted, "entity", lambda record: record["name"] in wanted)

    def relations_touching(self, names: list[str]) -> Found:
        wanted = set(names)
        to_count = self._to_count
        if to_count is not None and self.every_record and wanted <= to_count[0]:
            # A broad search's shown matches: the pass over every relation that finds theirs counts those of all its
            # matches too, which its cut answer asks next (one pass instead of two: 2 s at a million entities).
            self._to_count = None
            found, count = self._touching_counted(wanted, to_count[0])
            to_count[1].append(count)
            return found
        return self._named(wanted, "relation", lambda record: _touches(record["from"], record["to"], wanted))

    def count_relations_touching(self, names: list[str]) -> int:
        """Counted without parsing the relations written the usual way (a broad search's matches touch more
        relations than a read parses: 130,000 for 33,000 matches at a million entities)."""
        wanted = set(names)
        if len(wanted) <= NAME_NEEDLES:
            return len({record_key(record) for _, record in self.relations_touching(names)})
        return self._touching_counted(set(), wanted)[1]

    def _touching_counted(self, shown: set[str], counted: set[str]) -> tuple[Found, int]:
        """The relation records touching `shown`, and how many touch `counted` (which holds `shown`), in one pass
        over every relation: a line written the usual way is counted from its three values without parsing, and
        parsed only when it touches `shown`."""
        self._may_read_every_record()
        written, written_shown = _spelled_all(counted), _spelled_all(shown)
        plain_keys: set[tuple[bytes, ...]] = set()  # (from, to, relationType) as written: each one relation
        lines: list[tuple[Collection, bytes]] = []
        for collection, window, facts in self._windows("relation"):
            found, others = _naming(window, "relation", counted, written, facts)
            for line in found:
                plain = _PLAIN_RELATION.fullmatch(line)
                if plain is None or plain.group(1) in written_shown or plain.group(2) in written_shown:
                    lines.append((collection, line))
                if plain is not None:
                    plain_keys.add(plain.groups())
            lines.extend((collection, line) for line in others)
        keys: set[Key] = set()  # of the relations read from other lines
        touching: Found = []
        for name, record in self._records(_at_most(lines)):
            if record["type"] == "relation" and _touches(record["from"], record["to"], counted):
                key = record_key(record)
                if _plainly_written(key) not in plain_keys:
                    keys.add(key)
                if _touches(record["from"], record["to"], shown):
                    touching.append((name, record))
        return touching, len(keys) + _readable(plain_keys)

    def matching(self, fragments: list[str], limit: int) -> Found | None:
        try:
            found = self._holding(fragments, lambda text: all(fragment in text for fragment in fragments))
        except StorageError:
            return None  # more lines hold them than a read parses: more matches than `limit`, or near it
        return found if len(found) <= limit else None

    def leading_matches(
        self, words: list[str], phrase: str, take: int
    ) -> tuple[int, Callable[[], int], list[tuple[str, dict[str, Any]]]]:
        found = self._holding(words, lambda text: all(word in text for word in words))
        several = len(words) > 1

        def rank(place: int) -> tuple[bool, bool, bool, bool, int]:
            record = found[place][1]
            name = ascii_lower(record["name"])
            whole = phrase in search_text(record) if several else True
            return (not whole, name != phrase, not name.startswith(phrase), phrase not in name, place)

        # Names, not records: a shared lesson and this project's entity of one name are one entity of the graph
        # (which of them shows is the graph's to say, so both come).
        ranked = [found[place] for place in sorted(range(len(found)), key=rank)]
        chosen = set(list(dict.fromkeys(record["name"] for _, record in ranked))[:take])
        names = list(dict.fromkeys(record["name"] for _, record in found))
        leading = [(c, record) for c, record in ranked if record["name"] in chosen]
        counted: list[int] = []
        if len(names) > take:  # the answer is cut: it will count the relations of all of them
            self._to_count = (set(names), counted)
        return len(names), lambda: counted[0] if counted else self.count_relations_touching(names), leading

    # -- finding lines ---------------------------------------------------------------------------------------
    def _named(self, wanted: set[str], kind: str, keep: Callable[[dict[str, Any]], bool]) -> Found:
        """The records of `kind` that `keep` takes among those naming one of `wanted` (its entity, or an end)."""
        return self._records_taken(self._naming_lines(wanted, kind), kind, keep)

    def _records_taken(
        self, lines: list[tuple[Collection, bytes]], kind: str, keep: Callable[[dict[str, Any]], bool]
    ) -> Found:
        return [(c, record) for c, record in self._records(lines) if record["type"] == kind and keep(record)]

    def _naming_lines(self, wanted: set[str], kind: str) -> list[tuple[Collection, bytes]]:
        """Every line whose record of `kind` may name one of `wanted`, in file order (`_named`)."""
        written = _spelled_all(wanted)
        if len(wanted) <= NAME_NEEDLES:
            needles = [b'"' + name + b'"' for name in written]
            return list(self._lines(kind, lambda window, facts: _lines_holding_any(window, needles, facts.escaped)))
        self._may_read_every_record()
        return list(self._lines(kind, lambda window, facts: _lines_naming(window, kind, wanted, written, facts)))

    def _holding(self, words: list[str], holds: Callable[[str], bool]) -> Found:
        """The entity records whose searchable text (`search_text`, ASCII letters lower-cased) `holds`. A record
        can hold the words only if some line of it (a record may be written more than once: the load merges the
        copies) holds the longest word's spelling, ASCII letters compared without case: every copy of those lines'
        entities is found, and their merged records judged. Beside a restore, a search whose word more than a few
        lines hold stops at once (its names would be read over every record)."""
        needles = [spelled.lower() for spelled in _spelled_all(set(words))]
        if len(needles) < len(set(words)):
            return []  # (a word no UTF-8 text holds: a lone surrogate)
        # One word for every window (the longest, likely the rarest): a record's copies may lie in two windows,
        # each holding some of the words, and only a word the merged record holds in full is sure to be in one.
        needle = max(needles, key=len)
        limit = None if self.every_record else 4 * NAME_NEEDLES
        lines = list(
            self._lines("entity", lambda window, facts: _lines_holding_lowered(window, needle, facts.escaped), limit)
        )
        found = self._records_taken(lines, "entity", lambda record: True)
        names = {record["name"] for _, record in found}
        copies = self._naming_lines(names, "entity")
        # Their records as read already when every copy of them was among those lines (a name written once, as a
        # large memory's are: no second parse of them all); else as read from all their copies.
        if not set(copies) <= set(lines):
            found = self._records_taken(copies, "entity", lambda record: record["name"] in names)
        # A name several collections hold is the first's record in the graph (this project's entity hides a shared
        # lesson of its name): that one is judged, and all come, for the graph to hide the others as it does.
        shown: dict[str, dict[str, Any]] = {}
        for _, record in found:
            shown.setdefault(record["name"], record)
        return [(c, record) for c, record in found if holds(search_text(shown[record["name"]]))]

    def _lines(
        self, kind: str, find: Callable[[Window, Facts], Iterable[bytes]], limit: int | None = None
    ) -> Iterator[tuple[Collection, bytes]]:
        """Each line `find` picks in each window of each shard that may hold a record of `kind`, in the order a load
        reads them (collection, shard, line); at most `limit` of them (SCAN_LINE_LIMIT), else StorageError. `find`
        is also given what is known of the window (`Facts`)."""
        return _at_most(
            ((collection, line) for collection, window, facts in self._windows(kind) for line in find(window, facts)),
            limit,
        )

    def _windows(self, kind: str) -> Iterator[tuple[Collection, Window, Facts]]:
        """Every shard of the graph's collections a window at a time, in the order a load reads them, with what is
        known of the window: found once per load (the files do not change while it holds their lock). A window
        known to hold no record of `kind` is left out, and once a file has been read whole, such a window is not
        even read (a file the official server wrote holds its entities, then its relations: each pass reads about
        half of it)."""
        for collection in self._store.collections.values():
            if collection.name == HISTORY:
                continue
            for index, stat in sorted(collection.on_disk().items()):
                path = str(collection.names.path(index))
                known = self._read_whole.get((path, stat))
                spans: list[tuple[int, int]] | None = None
                if known is None:
                    read, spans = _windows(path), []
                else:
                    needed = [span for span in known if kind in self._facts[path, stat, span[0]].kinds]
                    read = _windows_at(path, needed)
                for offset, window in read:
                    facts = self._facts.get((path, stat, offset))
                    if facts is None:
                        facts = self._facts[path, stat, offset] = Facts.of(window)
                    if spans is not None:
                        spans.append((offset, window.end - window.start))
                    if kind in facts.kinds:
                        yield collection, window, facts
                if spans is not None:  # (read whole: the next pass reads only the windows it needs)
                    self._read_whole[path, stat] = spans

    def _may_read_every_record(self) -> None:
        if not self.every_record:
            raise StorageError("a read over every record beside a restore: answering after it")

    def forget(self) -> None:
        """Let go of what was found once per load (the load has ended: the files may change from now on)."""
        self._facts.clear()
        self._read_whole.clear()
        self._to_count = None

    def _records(self, lines: Iterable[tuple[Collection, bytes]]) -> Found:
        """The records of these lines, read as a load reads them (`parse_text`: an unreadable line is left out, the
        load reports it), and the copies of one record (in one shard, or in several) merged in file order."""
        merged: dict[tuple[str, Key], dict[str, Any]] = {}
        for collection, group in groupby(lines, key=lambda item: item[0]):
            texts = []
            for _, line in group:
                with suppress(UnicodeDecodeError):  # (not UTF-8: a line the load reports, and leaves out)
                    texts.append(line.decode("utf-8"))
            parsed = parse_text(collection.names.main_path, "\n".join(texts), collection.check)
            for key, record, _ in parsed.records:
                held = merged.get((collection.name, key))
                merged[collection.name, key] = record if held is None else merge_records(held, record)
        return [(collection, record) for (collection, _), record in merged.items()]


@dataclass(frozen=True)
class Window:
    """Whole lines of a file: `data[start:end]`, after a newline (`data[start - 1]`: one is put before a file's
    first line), so a pattern beginning with one finds the window's first line too, without a copy of the window."""

    data: bytes
    start: int
    end: int

    def count(self, needle: bytes) -> int:
        return self.data.count(needle, self.start - 1, self.end)

    def find(self, needle: bytes, position: int) -> int:
        return self.data.find(needle, position, self.end)

    def line_at(self, position: int) -> tuple[int, int]:
        """Where the line holding `position` starts, and where it ends (its newline, or the window's end)."""
        start = max(self.start, self.data.rfind(b"\n", self.start, position) + 1)
        end = self.data.find(b"\n", position, self.end)
        return start, self.end if end == -1 else end


Spans = dict[int, int]  # a line's start -> its end


@dataclass
class Facts:
    """What a window of a file holds, found by the first read that needs it and kept for the load's time."""

    escaped: Spans  # its lines holding a JSON escape
    kinds: frozenset[str]  # the kinds of record it may hold (`of`)
    # kind -> how many lines start as this code and the official server write a record of the kind
    heads: dict[str, int] = field(default_factory=dict)
    # kind -> whether every line starts so and holds its type and each naming key of the kind once (`_naming`; its
    # lines of the kind are then those its pattern finds, when it finds as many as start so)
    usual: dict[str, bool] = field(default_factory=dict)

    @classmethod
    def of(cls, window: Window) -> Facts:
        """A window's facts as first read: its lines with an escape, and the kinds of record it may hold. A record's
        kind is read from its type's value or, without one, from its keys (`_KIND_MARKS`), each written plainly or
        with an escape (which may spell anything): a window holding neither a kind's marks nor an escape holds no
        record of that kind. (A name or a word beginning as a mark only makes the window read for both.)"""
        # (One search for a backslash first: most windows hold none, and then one pass, not one for each escape.)
        escaped = dict(_spans(window, ESCAPES)) if window.find(b"\\", window.start) != -1 else {}
        kinds = frozenset(
            kind
            for kind, marks in _KIND_MARKS.items()
            if escaped or any(window.find(mark, window.start) != -1 for mark in marks)
        )
        return cls(escaped, kinds)

    def count_heads(self, window: Window) -> None:
        """`heads` and `usual`: a pass over the window for each count, only those that can tell something (a
        window of one kind's lines, as most are: 4 or 5 passes, not 7)."""
        lines = window.count(b"\n") - (window.data[window.end - 1 : window.end] == b"\n")
        # The kind of the first line first: once the heads counted are as many as the lines, the others are none.
        first = window.data.startswith(_WRITTEN_PIECES["relation"][0], window.start)
        left = lines
        for kind in sorted(_WRITTEN_PIECES, key=lambda kind: (kind == "relation") != first):
            self.heads[kind] = window.count(b"\n" + _WRITTEN_PIECES[kind][0]) if left else 0
            left -= self.heads[kind]
        written_usually = not left and window.count(_TYPE_KEY) == lines
        for kind, keys in _NAMING_KEYS.items():
            heads = self.heads[kind]
            self.usual[kind] = written_usually and all(window.count(key) == heads for key in keys if heads)


def _windows(path: str) -> Iterator[tuple[int, Window]]:
    """A file read CHUNK_BYTES at a time (plain reads, not a map: a file cut short by a hand edit meanwhile would
    kill the process with SIGBUS), each window ending after a line's end (the last may end without), with its
    place in the file."""
    with _reading(path) as handle:
        rest = handle.read(len(UTF8_BOM)).removeprefix(UTF8_BOM)
        offset = 0
        while piece := handle.read(CHUNK_BYTES):
            data = b"".join((b"\n", rest, piece))
            cut = data.rfind(b"\n") + 1
            if cut > 1:
                yield offset, Window(data, 1, cut)
                offset += cut - 1
            rest = data[cut:]
        if rest:
            yield offset, Window(b"\n" + rest, 1, len(rest) + 1)


def _windows_at(path: str, spans: list[tuple[int, int]]) -> Iterator[tuple[int, Window]]:
    """The windows of a file (`_windows`) at these (offset, length), read alone: the same bytes, the others not read."""
    with _reading(path) as handle:
        base = len(UTF8_BOM) if handle.read(len(UTF8_BOM)) == UTF8_BOM else 0
        for offset, length in spans:
            # (A window after the first begins after a newline: read with it, not copied after one.)
            handle.seek(base + offset - (offset > 0))
            data = handle.read(length + (offset > 0))
            if len(data) != length + (offset > 0) or (offset and data[:1] != b"\n"):
                raise StorageError(f"{path} changed beside the load: answering after the load")
            yield offset, Window(data if offset else b"\n" + data, 1, length + 1)


@contextmanager
def _reading(path: str) -> Iterator[BinaryIO]:
    """The file open for reading; a failure to read it a StorageError (the call then waits for the load)."""
    try:
        with open(path, "rb") as handle:
            yield handle
    except OSError as exc:  # (the load holds the lock: only a hand edit or the disk can make this happen)
        raise StorageError(f"cannot read {path} beside the load ({exc.strerror}): answering after the load") from exc


def _spans(window: Window, needles: Iterable[bytes]) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of the window holding one of the needles (once per needle it holds)."""
    for needle in needles:
        position = window.find(needle, window.start)
        while position != -1:
            start, end = window.line_at(position)
            yield start, end
            position = window.find(needle, end)


def _lines_holding_any(window: Window, needles: Iterable[bytes], escaped: Spans) -> list[bytes]:
    """The lines of the window holding any of the needles, or a JSON escape (which may spell one otherwise)."""
    spans = {**escaped, **dict(_spans(window, needles))}
    return [window.data[start : spans[start]] for start in sorted(spans)]


def _lines_holding_lowered(window: Window, needle: bytes, escaped: Spans) -> list[bytes]:
    """The lines of the window holding the (lower-case) needle, ASCII letters compared without case, or a JSON
    escape (which may spell it otherwise)."""
    # (ASCII only: the same length, so a place in it is a place in the window.)
    lowered = Window(window.data.lower(), window.start, window.end)
    spans = {**escaped, **dict(_spans(lowered, [needle]))}
    return [window.data[start : spans[start]] for start in sorted(spans)]


def _at_most(lines: Iterable[tuple[Collection, bytes]], limit: int | None = None) -> Iterator[tuple[Collection, bytes]]:
    """The lines, `limit` (SCAN_LINE_LIMIT) at most, else StorageError (the call then waits for the load)."""
    limit = SCAN_LINE_LIMIT if limit is None else limit
    for count, line in enumerate(lines, start=1):
        if count > limit:
            raise StorageError(f"more than {limit} lines to read: answering after the load")
        yield line


def _spelled_all(texts: set[str]) -> set[bytes]:
    """Each text as this code (`dump_line`) and the official server write it inside a JSON string; a text no UTF-8
    file can hold (a lone surrogate: the load reads one as U+FFFD) is left out, as it matches nothing."""
    spelled = set()
    for text in texts:
        with suppress(UnicodeEncodeError):
            # (json.dumps only for a text it escapes something of: a broad search at a million entities spells
            # its 32,000 names three times)
            written = json.dumps(text, ensure_ascii=False)[1:-1] if _ESCAPED.search(text) else text
            spelled.add(written.encode("utf-8"))
    return spelled


def _lines_naming(window: Window, kind: str, wanted: set[str], written: set[bytes], facts: Facts) -> list[bytes]:
    """The lines of the window whose record of `kind` names one of `wanted` (`written`: as this code writes them),
    and every line written otherwise than this code and the official server write records (`_naming`)."""
    found, others = _naming(window, kind, wanted, written, facts)
    return [*found, *others]


def _naming(
    window: Window, kind: str, wanted: set[str], written: set[bytes], facts: Facts
) -> tuple[list[bytes], list[bytes]]:
    """(the lines of `kind` written the usual way that name one of `wanted`, the other lines to read whole), one of
    the two empty.

    When every line of the window starts as this code and the official server write a record, every line of
    `kind` was found by its pattern (`_WRITTEN`: no place kept, three times faster than a match object each) and
    holds its type and each naming key once, the lines of the names wanted. Else the window is read line by line:
    the lines of `kind` whose leading fields name one of `wanted` (escapes read), and every line written otherwise
    (by hand, by another tool)."""
    data, start, end = window.data, window.start - 1, window.end  # (`data[start]`: a newline)
    if not facts.heads:  # (once per load, for both kinds)
        facts.count_heads(window)
    if facts.usual[kind] and not facts.heads[kind]:
        return [], []  # (no line of the kind: half the windows of a file the official server wrote)
    found = _WRITTEN[kind].findall(data, start, end)
    if facts.usual[kind] and len(found) == facts.heads[kind]:
        # The beginnings of the lines wanted, after their newline: the pieces, each name after its piece (one test
        # per kind, not a loop over the names: this runs for every record of the window).
        # (The names wanted picked by a set's own test, called from C: half the time of a Python test per record.)
        head, *pieces = _WRITTEN_PIECES[kind]
        if kind == "relation":
            middle, tail = pieces
            named = [b"".join((b"\n", head, a, middle, b, tail)) for a, b in filterfalse(written.isdisjoint, found)]
        else:
            named = [b"".join((b"\n", head, name, *pieces)) for name in filter(written.__contains__, found)]
        # Each wanted line found again from its beginning, in file order (a line written twice: its next copy).
        naming, place = [], start
        for beginning in named:
            line_start = data.index(beginning, place, end) + 1
            place = data.find(b"\n", line_start, end)
            place = end if place == -1 else place
            naming.append(data[line_start:place])
        return naming, []
    head = _WRITTEN_PIECES[kind][0]
    others = tuple(pieces[0] for other, pieces in _WRITTEN_PIECES.items() if other != kind)
    naming = []
    for line in data[start + 1 : end].split(b"\n"):
        if line.startswith(head):
            match = _LEADING_FIELDS[kind].match(line)
            if (
                match is None
                or any(line.count(key) > 1 for key in (_TYPE_KEY, *_NAMING_KEYS[kind]))
                or any(_value(raw) in wanted for raw in match.groups())
            ):
                naming.append(line)
        elif line.strip() and not (line.startswith(others) and line.count(_TYPE_KEY) == 1):
            naming.append(line)  # (written otherwise, or another kind's beginning with a second type)
    return [], naming


def _plainly_written(key: Key) -> tuple[bytes, ...] | None:
    """A relation's values as a plain line writes them (None: a lone surrogate, which no UTF-8 line holds)."""
    try:
        return tuple(value.encode("utf-8") for value in key[1:])
    except UnicodeEncodeError:
        return None


def _readable(plain_keys: set[tuple[bytes, ...]]) -> int:
    """How many of these relations (values as written) the load reads: those whose values are UTF-8."""
    if _is_utf8(b"\n".join(chain.from_iterable(plain_keys))):  # (one call for all, as is the rule)
        return len(plain_keys)
    return sum(_is_utf8(b"\n".join(values)) for values in plain_keys)


def _is_utf8(text: bytes) -> bool:
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _touches(start: str, end: str, names: set[str]) -> bool:
    """Whether a relation from `start` to `end` has an end among `names`."""
    return start in names or end in names


def _value(raw: bytes) -> str | None:
    """A name as the load reads it (a lone surrogate escape made U+FFFD), or None when it is not readable."""
    try:
        value = json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8")
    except ValueError:
        return None
    return without_lone_surrogates(value)
