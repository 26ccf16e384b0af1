"""A collection: one logical data file (`memory.json`, `lesson.json`) held as shards, and how it follows the disk.

The collection keeps each shard's lines as strings keyed by record identity, so a commit re-joins a few
1000-line shards and never re-serializes the graph. Reloading compares what changed on disk with what was held
and reports the difference as removed keys and upserted records, in file order.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable, Iterable, Iterator, KeysView
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from memory_graph.errors import LineProblem, StaleShardError, StorageError
from memory_graph.storage.codec import (
    UTF8_BOM,
    Key,
    ParsedFile,
    RecordCheck,
    checked_record,
    dump_line,
    merge_records,
    parse_slices,
    parse_text,
    read_shard_file,
    read_split,
    record_key,
)
from memory_graph.storage.layout import FileStat, ShardNames, bookkeeping_file, file_stat, stat_of
from memory_graph.storage.stamp import Manifest, StampFile, same_generation, stat_generation

ShardLines = dict[Key, str]
T = TypeVar("T")


class Shard:
    """A shard as held: its lines by key, its file's stat and generation, its unreadable lines, and how many lines
    its file has (good and bad: what the shard limit counts).

    A shard restored from a start snapshot holds only its keys until its lines are first needed (a commit that
    rewrites it, a record read back for the history): they are then read from its file, which must still have
    the stat it was restored with. Most shards of a big memory are never rewritten in a session, so their lines
    (as much memory as the file) are never held."""

    __slots__ = (
        "_digests",
        "_key_list",
        "_keys",
        "_lines",
        "_unread",
        "generation",
        "line_count",
        "problems",
        "stat",
    )

    def __init__(
        self,
        lines: ShardLines | None,
        stat: FileStat | None,
        generation: str | None,
        problems: list[LineProblem] | None = None,
        line_count: int = 0,
        unread: UnreadLines | None = None,
        keys: list[Key] | None = None,
        digests: array[int] | None = None,
    ) -> None:
        self._lines = lines
        self._unread = unread if lines is None else None
        # An unread shard's keys: the list it was restored with, made a dict when first asked (most never are).
        self._key_list = keys if lines is None else None
        # The `hash` of each of those keys' lines, when they were held in this process (a first load): when
        # another process replaces the file, what changed is told from them instead of taking every line for
        # changed. (Two different lines share a 64-bit hash once in 2^64: such a change would go unheard here
        # until the next start; the file itself is always written from what is read back from it.)
        self._digests = digests if lines is None else None
        self._keys: dict[Key, None] | None = None
        self.stat = stat
        self.generation = generation
        self.problems = problems if problems is not None else []
        self.line_count = line_count

    @property
    def lines(self) -> ShardLines:
        if self._lines is None:
            assert self._unread is not None
            self._lines = self._unread()
            self._unread = self._keys = self._key_list = self._digests = None
        return self._lines

    def line_digests(self) -> dict[Key, int] | None:
        """Each key's line's `hash`, while the lines are unread and their hashes known."""
        if self._lines is not None or self._digests is None or self._key_list is None:
            return None
        return dict(zip(self._key_list, self._digests, strict=True))

    def unread_lines(self) -> UnreadLines | None:
        """How its lines will be read, while they are not yet."""
        return self._unread if self._lines is None else None

    def held_keys(self) -> KeysView[Key]:
        """The keys held, without reading the lines of a shard not read yet."""
        if self._lines is not None:
            return self._lines.keys()
        if self._keys is None:
            self._keys = dict.fromkeys(self._key_list or ())
        return self._keys.keys()

    def forget_lines(self) -> None:
        """Its file changed before its lines were read: hold each key with an empty line, which no real line
        equals (the reload that reads the file reports every difference). Its stat is forgotten too, so it is
        read before any commit could write what it holds."""
        if self._lines is None:
            self._lines = dict.fromkeys(self.held_keys(), "")
            self._unread = self._keys = self._key_list = self._digests = None
            self.stat = None


class UnreadLines:
    """The lines of a restored shard, read from its file when first needed, as a load of it would hold them."""

    __slots__ = ("collection", "index", "keys", "merged", "stat")

    def __init__(
        self, collection: Collection, index: int, stat: FileStat, keys: list[Key | None], merged: ShardLines
    ) -> None:
        self.collection, self.index, self.stat, self.keys, self.merged = collection, index, stat, keys, merged

    def __call__(self) -> ShardLines:
        path = self.collection.names.path(self.index)
        read = self.collection._read_lines(self.index)
        texts = read[0] if read is not None and read[1] == self.stat else None
        if (texts is None or len(texts) != len(self.keys)) and self.collection.lazy and not self.merged:
            # An older history shard (only ever read: appends go to the newest) whose file was touched or edited
            # by hand: its lines are taken by their keys from the file as it is now, when it still holds exactly
            # those keys. Its stat stays the old one, so the next look for hand edits reads it in and tells the
            # history's index. (Else a retry would fail the same way until that look, a second later.)
            lines = self.collection.lines_by_key(self.index)
            if lines is not None and lines.keys() == {key for key in self.keys if key is not None}:
                return lines
        if texts is None or len(texts) != len(self.keys):
            # Trigger: the file changed after the last look at it (a hand edit in the last instant). Why: its
            # lines can no longer be told from it. Outcome: this call fails, changing nothing; the next one reads
            # the file in (its stat differs) and goes on.
            raise StaleShardError(
                f"{path} changed on disk since it was last read (edited by hand?). Nothing was written; retry the "
                "call, which reads the change in first."
            )
        return _lines_of(self.keys, texts, self.merged)


class Plan(dict[int, ShardLines]):
    """The complete new lines of every shard a commit rewrites (empty: the shard is removed), made by
    `placement.plan_changes` from copies of the held lines; `moved` says, per shard, the keys it put in or took
    out (every other key is as held)."""

    def __init__(self) -> None:
        super().__init__()
        self.moved: dict[int, set[Key]] = {}

    def edited(self, index: int, key: Key) -> None:
        self.moved.setdefault(index, set()).add(key)


def _changed_while_read(path: Path) -> StaleShardError:
    return StaleShardError(
        f"{path} changed on disk while it was read (edited by hand?). Nothing was written; retry the call, which "
        "reads it again."
    )


class Copies(NamedTuple):
    """A record a shard holds more than once (`Collection._merge_copies`): merged, its merged line, its first copy
    (the one a first load heard) and the text of its last line in the file."""

    record: dict[str, Any]
    line: str
    first: dict[str, Any]
    last_line: str


@dataclass
class Reloaded:
    """What a reload found changed: keys gone, records new or different (file order)."""

    removed: list[Key] = field(default_factory=list)
    upserted: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Deferred:
    """A shard on disk that a lazy collection has not read yet: what it was when last seen."""

    stat: FileStat
    generation: str | None


def lines_size(lines: ShardLines) -> int:
    """About the bytes the lines take in a file (characters, not UTF-8 bytes: a bound, not an account)."""
    return sum(map(len, lines.values())) + len(lines)


def listed_generation(shard: Shard | Deferred, token: str) -> str:
    """A shard's generation in the stamp a commit writes (`token`: the commit's own) when the commit leaves it as
    it is: the one it was read with, else one made from its stat (`stamp.stat_generation`)."""
    if shard.generation is not None:
        return shard.generation
    return stat_generation(shard.stat) if shard.stat is not None and shard.stat != CHANGED_SINCE else token


def _lines_of(keys: list[Key | None], texts: list[str], merged: dict[Key, str]) -> ShardLines:
    """A shard's held lines from its file's lines and their keys, as a load holds them: each key at its first line,
    a key met twice holding its merged line."""
    lines: ShardLines = {}
    for key, text in zip(keys, texts, strict=True):
        if key is not None:
            lines[key] = text
    lines.update(merged)
    return lines


# The stat a snapshot gives a shard whose file was replaced after the copy: no file has it, so a restore holds the
# shard as changed since and reads it, as it does any file changed after its snapshot.
CHANGED_SINCE: FileStat = (-1, -1, -1, -1)


@dataclass(frozen=True)
class FrozenShard:
    """A shard as it was when a snapshot's copy was taken (`Collection.snapshot_copy`): its lines copied, or how
    they are read while still unread (a restored shard's keys, never changed in place)."""

    index: int
    stat: FileStat
    generation: str | None
    line_count: int
    unread: UnreadLines | None
    lines: ShardLines | None


class CollectionCopy:
    """A collection's shards as copied with the store held; `snapshot_state` reads their files with it let go."""

    def __init__(self, collection: Collection, shards: list[FrozenShard]) -> None:
        self._collection = collection  # for its file names and record rule only (neither changes)
        self._shards = shards

    def snapshot_state(self) -> list[tuple[Any, ...]] | None:
        """What a snapshot keeps of the collection, per shard: index, stat, generation, line count, the key of each
        line of the file (None for a blank line) and the held lines that are no line of the file (a record written
        twice, held merged). The lines themselves are read back from the unchanged file. A shard whose file was
        replaced since the copy (a commit of this or another process) is kept with the keys it held and a stat no
        file has (`CHANGED_SINCE`): the restore reads it and reports what changed, as for any file changed after
        its snapshot. None when the collection cannot be kept: a file that has the stat the shard was read with
        but lines a load of it would hold otherwise."""
        state: list[tuple[Any, ...]] = []
        for shard in self._shards:
            kept = self._shard_state(shard)
            if kept is None:
                return None
            state.append(kept)
        return state

    def _shard_state(self, shard: FrozenShard) -> tuple[Any, ...] | None:
        collection, index = self._collection, shard.index
        head = (index, shard.stat, shard.generation, shard.line_count)
        changed = (index, CHANGED_SINCE, shard.generation, shard.line_count)
        if shard.unread is not None:  # still as restored: kept as it was
            unread = shard.unread
            return (
                *(head if file_stat(collection.names.path(index)) == shard.stat else changed),
                unread.keys,
                unread.merged,
            )
        lines = shard.lines
        assert lines is not None
        read = collection._read_lines(index)
        if read is None or read[1] != shard.stat:  # replaced (or gone) since the copy
            return (*changed, list(lines), {})
        texts = read[0]
        if texts == list(lines.values()):  # the usual case: one line per record, as held
            return (*head, list(lines), {})
        key_of = {line: key for key, line in lines.items()}
        path = collection.names.path(index)
        keys: list[Key | None] = []
        for text in texts:
            key = key_of.get(text)
            if key is None:  # a duplicate, a blank line, a line ending in \r: parsed to tell its key
                records = parse_text(path, text, collection.check).records
                key = records[0][0] if records else None
            keys.append(key)
        in_file = set(texts)
        merged = {key: line for key, line in lines.items() if line not in in_file}
        if list(_lines_of(keys, texts, merged).items()) != list(lines.items()):
            return None  # held otherwise than a load of the file would hold it: not restorable from it
        return (*head, keys, merged)


MANY_SHARDS = 8
"""A commit of this process that writes more shards of one collection than this holds them by their keys
(`Collection.apply`)."""

APPEND_SHARD_BYTES = 4 << 20
"""Where an append-only shard (the history's) also ends, beside the line limit: a start reads and holds the newest
whole. Each event holds its record before and after, so 1000 events of an entity of 2,000 observations (the
user's own, which a personalization prompt adds to at every chat) made that shard 250 MB."""


class Collection:
    def __init__(
        self, name: str, names: ShardNames, shard_lines: int, check: RecordCheck | None = None, lazy: bool = False
    ) -> None:
        self.name = name
        self.names = names
        self.shard_lines = shard_lines
        self.check = check
        self.stamp = StampFile(bookkeeping_file(names.main_path, "stamp"))
        self.seen_stamp: bytes | None = None
        self.shards: dict[int, Shard] = {}
        # key -> the shards holding it, in index order: almost always one, so a tuple shared by every key of that
        # shard (`_only_in`) instead of a list per key (19 MB at 100k entities).
        self.locations: dict[Key, tuple[int, ...]] = {}
        self._alone_in: dict[int, tuple[int]] = {}
        # A lazy collection (the history: append-only, new records go after the newest shard) reads at its first
        # load only the shards written last; the older ones wait in `deferred` until `load_deferred`.
        self.lazy = lazy
        self.shard_bytes = APPEND_SHARD_BYTES if lazy else None
        self.deferred: dict[int, Deferred] = {}

    def on_disk(self) -> dict[int, FileStat]:
        """This collection's shard files as they are now (the stamp says which files are ours)."""
        return self._discover(self.stamp.manifest(self.stamp.read()))

    def _discover(self, manifest: Manifest | None, indexes: set[int] | None = None) -> dict[int, FileStat]:
        try:
            return self.names.discover(manifest, indexes)
        except OSError as exc:
            raise StorageError(
                f"cannot list the data folder {self.names.folder} ({exc.strerror}); check that this user may "
                "read it, or point MEMORY_FILE_PATH elsewhere"
            ) from exc

    def behind(self) -> bool:
        """Whether another process committed to this collection since it was last read."""
        return self.stamp.read() != self.seen_stamp

    def next_manifest(self, plan: dict[int, ShardLines], token: str) -> Manifest:
        """The stamp to write before committing `plan`: every shard held now and every shard the plan creates,
        rewritten ones with the new generation. A shard the plan removes stays listed until the next commit:
        if the commit dies before removing it, it must still be read (its records are still current)."""
        file_name = self.names.file_name
        manifest = {file_name(i): listed_generation(shard, token) for i, shard in self.shards.items()}
        manifest.update((file_name(i), listed_generation(unread, token)) for i, unread in self.deferred.items())
        for index, lines in plan.items():
            if lines or index in self.shards:  # a shard being removed too: its token tells the commit wrote it
                manifest[file_name(index)] = token
        return manifest

    def lines_by_key(self, index: int) -> ShardLines | None:
        """A shard's lines as its file holds them now, by key; None when it is gone or holds an unreadable line or
        a key twice."""
        parsed = self._read_if_there(index)
        if parsed is None or parsed.problems:
            return None
        lines = {key: line for key, _, line in parsed.records}
        return lines if len(lines) == len(parsed.records) else None

    def full(self, line_count: int, size: int) -> bool:
        """Whether a shard of `line_count` lines and `size` bytes takes no more lines."""
        return line_count >= self.shard_lines or (self.shard_bytes is not None and size >= self.shard_bytes)

    def shard_size(self, index: int) -> int:
        """The bytes of a held shard: its file's, or (its stat unknown) what its lines take."""
        shard = self.shards[index]
        if shard.stat is not None and shard.stat != CHANGED_SINCE:
            return shard.stat[0]
        return lines_size(shard.lines)

    def read(self, index: int) -> ParsedFile:
        """Parse one shard from disk with this collection's record rule (the one parser, for loads and checks)."""
        return read_shard_file(self.names.path(index), self.check)

    def problems(self) -> list[LineProblem]:
        return [p for index in sorted(self.shards) for p in self.shards[index].problems]

    def all_lines(self, key: Key) -> str | None:
        """Every stored copy of a record (usually one), to tell whether any of them changed."""
        where = self.locations.get(key)
        if not where:
            return None
        return "\n".join(self.shards[index].lines[key] for index in where)

    def shard_known(self, index: int) -> bool:
        """Whether the shard's lines are what its file holds, as far as this process knows: not a shard a start
        snapshot restored after its file changed (`restore_state` holds it with a placeholder line per key), nor
        one a followed commit left to be read whole. Either is read by the reload that follows; nothing may be
        replayed onto it meanwhile (an absent shard: nothing to know)."""
        shard = self.shards.get(index)
        return shard is None or shard.stat is not None

    def lines_known(self, key: Key) -> bool:
        """Whether every shard holding the key is `shard_known` (an absent key: nothing to know)."""
        return all(self.shard_known(index) for index in self.locations.get(key, ()))

    def record(self, key: Key, parsed: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
        """The record for a key, merging copies that several shards hold (an old fork's split duplicated them)."""
        known = parsed or {}
        where = self.locations[key]
        if len(where) == 1:  # the usual case, on every load: no list, no merge
            line = self.shards[where[0]].lines[key]
            return known.get(line) or json.loads(line)
        records = [known.get(line) or json.loads(line) for line in (self.shards[i].lines[key] for i in where)]
        merged = records[0]
        for other in records[1:]:
            merged = merge_records(merged, other)
        return merged

    def all_records(self) -> Iterator[dict[str, Any]]:
        """Every record once, in file order, copies in several shards merged."""
        for index in sorted(self.shards):
            for key in self.shards[index].held_keys():
                if self.locations[key][0] == index:
                    yield self.record(key)

    def edited_by_hand(self) -> bool:
        """Whether a shard this collection holds is no longer the file it read (edited by hand or deleted).

        One stat per held shard and nothing else, since every write asks: other processes' commits are told by
        the stamp, and a file the stamp does not list is not ours, so no directory scan is needed."""
        for index, shard in self.shards.items():
            try:
                st = os.stat(self.names.path_text(index))
            except FileNotFoundError:
                return True
            if stat_of(st) != shard.stat:
                return True
        return False

    # -- following the disk --------------------------------------------------------------------------------
    def reload(
        self,
        hand_edits: bool = True,
        hear: Callable[[list[dict[str, Any]]], None] | None = None,
        give_way: Callable[[], None] = lambda: None,
    ) -> Reloaded:
        """Reread the shards that changed on disk (by generation or by stat) and say what changed.

        Without `hand_edits`, only the shards a commit can have changed are looked at: those the stamp lists
        with a new generation, those it added or dropped, any whose stat is unknown, and a lazy (append-only)
        collection's newest shard, which appends grow without renewing the stamp. A hand edit elsewhere waits
        for the next full reload.

        With `hear`, a first load (not the history's) gives it each shard's records as soon as that shard is read,
        in file order, and returns none (`_load_shard_by_shard`); it calls `give_way` while it reads a file's text
        (`SplitText.of_bytes`)."""
        raw = self.stamp.read()
        generations = self.stamp.manifest(raw)
        suspects = None if hand_edits or generations is None else self._suspects(generations)
        on_disk = self._changed_shards(generations, suspects)
        self.seen_stamp = raw
        if not on_disk:
            return Reloaded()
        first_load = not self.locations
        if first_load and hear is not None and not self.lazy:
            self._load_shard_by_shard(on_disk, generations, hear, give_way)
            return Reloaded()
        changed = {index: self._read_if_there(index) if there else None for index, there in on_disk.items()}
        if first_load:
            # Everything read is new: no comparison with what was held, and when no record is held twice (the
            # usual case) the records come out in file order as they were parsed. A shard whose file gives back
            # each line by position is held by its keys, as a restart holds it (see `Shard`): its lines (as much
            # memory as the file) are read again only when a commit rewrites it. They are let go before the
            # listeners hear the records, which then take the room they held.
            # (Not the history: appends grow its files, which a shard held by keys could not be read back from.)
            fresh, alone, in_order = self._install(changed, generations, by_keys=not self.lazy)
            if alone:
                return Reloaded(upserted=in_order)
            keys = {key for index in changed if index in self.shards for key in self.shards[index].held_keys()}
            return Reloaded(upserted=self._in_file_order(changed, keys, fresh))
        affected: set[Key] = set()
        digest_of: dict[Key, int] = {}  # a key's line's hash, for a key only an unread shard held
        for index, parsed in changed.items():
            old = self.shards.get(index)
            if old is not None:
                digests = old.line_digests()
                if digests is not None:
                    digest_of.update((key, digest) for key, digest in digests.items() if len(self.locations[key]) == 1)
                old.forget_lines()  # (when not read yet: its file is no longer what it was read or restored from)
                affected.update(old.held_keys())
            if parsed is not None:
                affected.update(key for key, _, _ in parsed.records)
        before = {key: self.all_lines(key) for key in affected}
        fresh, _, _ = self._install(changed, generations)
        removed: list[Key] = []
        different: set[Key] = set()
        for key in affected:
            now = self.all_lines(key)
            if now is None:
                self.locations.pop(key, None)
                if before.get(key) is not None:
                    removed.append(key)
            elif key in digest_of:
                if hash(now) != digest_of[key]:
                    different.add(key)
            elif now != before.get(key):
                different.add(key)
        return Reloaded(removed, self._in_file_order(changed, different, fresh))

    def _suspects(self, generations: Manifest) -> set[int]:
        listed: dict[int, str] = {}
        for name, generation in generations.items():
            index = self.names.index_of(name)
            if index is not None:
                listed[index] = generation
        suspects = {i for i in (*self.shards, *self.deferred) if i not in listed}
        for index, generation in listed.items():
            known = self.shards.get(index) or self.deferred.get(index)
            if known is None or not same_generation(generation, known.generation, known.stat):
                suspects.add(index)
        suspects.update(i for i, shard in self.shards.items() if shard.stat is None)
        if self.lazy and self.shards:
            suspects.add(max(self.shards))
        return suspects

    def _load_shard_by_shard(
        self,
        on_disk: dict[int, bool],
        generations: Manifest | None,
        hear: Callable[[list[dict[str, Any]]], None],
        give_way: Callable[[], None],
    ) -> None:
        """A first load, a slice of lines at a time: each shard's lines are parsed PARSE_SLICE at a time, each
        slice's records heard, and its lines and records let go before the next slice is parsed; the shard is then
        held by its keys, as `reload` holds a first load's. Why: parsed all at once, a million entities' records
        (1.1 GB of dicts and lists) and lines (the file again, as strings) were alive together before the
        listeners heard the first, and a memory the official server wrote is one file: the load's peak was twice
        what it settles at, and what the listeners built went into the room the records had held only after.
        A shard that cannot be held by its keys (an unreadable line, a line ending in "\r", a record held twice
        in it) is read again whole and held by its lines; a record held twice (in one shard by an old writer, or
        in two by an old fork's split) is heard at its first line as read, and once the shard is held, merged
        with its other copies, as the upsert it is."""
        for index in sorted(on_disk):
            read = self._if_there(index, lambda i: read_split(self.names.path(i), give_way)) if on_disk[index] else None
            if read is None:  # gone, or not all UTF-8 (read whole, each bad line a problem)
                parsed = self._read_if_there(index) if on_disk[index] else None
                fresh, alone, in_order = self._install({index: parsed}, generations, by_keys=True)
                if not alone and index in self.shards:
                    shard = self.shards[index]
                    in_order = [
                        self._merged_with_earlier(key, index, own)[0] if len(self.locations[key]) > 1 else own
                        for key, own in ((key, fresh[shard.lines[key]]) for key in shard.held_keys())
                    ]
                hear(in_order)
                continue
            split, stat = read
            path = self.names.path(index)
            keys: list[Key] = []
            digests = array("q")
            line_keys: list[Key | None] = [None] * split.lines_in_file
            twice: dict[Key, None] = {}  # keys this shard holds more than once (an old writer's duplicates)
            elsewhere: dict[Key, dict[str, Any]] = {}  # keys an earlier shard holds too (a fork's split): own copy
            problems: list[LineProblem] = []  # (then read again whole: a shard with problems is held by its lines)
            records = 0  # every record's line, copies too: what the shard limit counts
            for part in parse_slices(path, split, self.check, let_go=True):
                records += len(part.records)
                heard = []
                for (key, record, line), number in zip(part.records, part.record_lines, strict=True):
                    line_keys[number - 1] = key
                    where = self.locations.get(key)
                    if where is None:
                        self.locations[key] = self._only_in(index)
                        keys.append(key)
                        digests.append(hash(line))
                        heard.append(record)
                    elif index in where:
                        twice[key] = None
                    else:
                        self._locate(key, index)
                        keys.append(key)
                        digests.append(hash(line))
                        elsewhere[key] = record
                problems.extend(part.problems)
                del part
                hear(heard)
                del heard
            if problems or not split.lines_as_written:
                own, heard_copy = self._hold_read_again(index, stat, generations, set(twice))
            else:
                generation = (generations or {}).get(path.name)
                merged = self._merge_copies(index, stat, line_keys, twice, split.repair_text)
                if merged:
                    place = {key: position for position, key in enumerate(keys) if key in merged}
                    for key, copies in merged.items():
                        digests[place[key]] = hash(copies.line)
                # (Only a merged line that is not the key's last line in the file, as `_install` keeps them: a
                # restore of a shard with none takes its keys as they are.)
                apart = {key: copies.line for key, copies in merged.items() if copies.line != copies.last_line}
                unread = UnreadLines(self, index, stat, line_keys, apart)
                self.shards[index] = Shard(
                    None, stat, generation, [], records, unread=unread, keys=keys, digests=digests
                )
                own = {key: copies.record for key, copies in merged.items()}
                heard_copy = {key: copies.first for key, copies in merged.items()}
            del split, line_keys, keys, digests
            # A record written twice in the shard, merged; told again only when that changed it (the official server
            # writes a relation twice when one call names it twice: the same record). One an earlier shard holds too
            # is told below, merged with that copy as well: told alone, it would replace it.
            hear([record for key, record in own.items() if key not in elsewhere and record != heard_copy[key]])
            for key, copy in elsewhere.items():
                merged_all, told = self._merged_with_earlier(key, index, own.get(key, copy))
                if merged_all != told:
                    hear([merged_all])

    def _merged_with_earlier(self, key: Key, index: int, own: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(`_load_shard_by_shard`, rare: an old fork's split.) A record shard `index` holds (`own`, as read) merged
        with the copies earlier shards hold, each read as a load reads it (made canonical, a lone surrogate
        replaced), in shard order as `record` merges them; and the first shard's copy (the one heard)."""
        copies = []
        for where in self.locations[key]:
            if where == index:
                copies.append(own)
                continue
            read = json.loads(self.shards[where].lines[key])
            copy, _ = checked_record(read, self.check, repair_text=True)
            copies.append(copy if copy is not None else read)
        merged = copies[0]
        for copy in copies[1:]:
            merged = merge_records(merged, copy)
        return merged, copies[0]

    def _merge_copies(
        self, index: int, stat: FileStat, line_keys: list[Key | None], twice: dict[Key, None], repair_text: bool
    ) -> dict[Key, Copies]:
        """(`_load_shard_by_shard`.) The records a shard holds more than once, each merged from its copies in file
        order as `_install` merges them: the copies' lines read again from the file, one at a time (the file it was
        just read from, else the call fails and the next one reads what changed)."""
        if not twice:
            return {}
        wanted = {number: key for number, key in enumerate(line_keys, start=1) if key in twice}
        merged: dict[Key, dict[str, Any]] = {}
        first: dict[Key, dict[str, Any]] = {}
        last: dict[Key, str] = {}
        path = self.names.path(index)
        with open(path, "rb") as handle:
            st = os.fstat(handle.fileno())
            if stat_of(st) != stat:
                raise _changed_while_read(path)
            for number, raw in enumerate(handle, start=1):
                key = wanted.get(number)
                if key is None:
                    continue
                text = (raw.removeprefix(UTF8_BOM) if number == 1 else raw).decode("utf-8").removesuffix("\n")
                copy, _ = checked_record(json.loads(text), self.check, repair_text)
                assert copy is not None  # (it was read as one a moment ago)
                if key in merged:
                    merged[key] = merge_records(merged[key], copy)
                else:
                    merged[key] = first[key] = copy
                last[key] = text
        return {key: Copies(record, dump_line(record), first[key], last[key]) for key, record in merged.items()}

    def _hold_read_again(
        self, index: int, stat: FileStat, generations: Manifest | None, twice: set[Key]
    ) -> tuple[dict[Key, dict[str, Any]], dict[Key, dict[str, Any]]]:
        """(`_load_shard_by_shard`, rare: an unreadable line, a line ending in "\r".) A shard whose records were
        heard, held by its lines: read whole again, the file it was just read from (else the call fails, and the
        next one reads what changed), and installed as any reload installs it. Returns, for the keys of `twice`,
        their merged records and their first copies (the ones heard)."""
        parsed = read_shard_file(self.names.path(index), self.check)
        if parsed.stat != stat:
            raise _changed_while_read(self.names.path(index))
        first: dict[Key, dict[str, Any]] = {}
        for key, record, _ in parsed.records:
            if key in twice:
                first.setdefault(key, record)
        _, _, in_order = self._install({index: parsed}, generations)
        merged = {key: record for record in in_order if (key := record_key(record)) in twice}
        return merged, first

    def _changed_shards(self, generations: Manifest | None, suspects: set[int] | None = None) -> dict[int, bool]:
        """The shards that changed on disk (among `suspects` only, when given), each with whether it is there to
        be read (False: it is gone)."""
        on_disk = self._discover(generations, suspects)
        if self.lazy and not self.shards and not self.deferred:
            self._defer_older(on_disk, generations)
        for index in list(self.deferred):
            if suspects is not None and index not in suspects:
                continue
            if index in on_disk:  # nothing of it is held, so a change to it is only noted
                self.deferred[index] = Deferred(on_disk[index], (generations or {}).get(self.names.file_name(index)))
            else:
                del self.deferred[index]
        changed: dict[int, bool] = {}
        candidates = (set(on_disk) | set(self.shards)) - set(self.deferred)
        for index in candidates if suspects is None else candidates & suspects:
            known = self.shards.get(index)
            if index not in on_disk:
                changed[index] = False
                continue
            path = self.names.path(index)
            generation = (generations or {}).get(path.name)
            if (
                known is None
                or known.stat != on_disk[index]
                or (generation is not None and not same_generation(generation, known.generation, known.stat))
            ):
                changed[index] = True
        return changed

    def _read_if_there(self, index: int) -> ParsedFile | None:
        return self._if_there(index, self.read)

    def _if_there(self, index: int, read: Callable[[int], T]) -> T | None:
        """`read(index)`, or None when the shard's file is gone."""
        try:
            return read(index)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {self.names.path(index)}: {exc.strerror}") from exc

    def _defer_older(self, on_disk: dict[int, FileStat], generations: Manifest | None) -> None:
        """At a lazy collection's first load: leave unread every shard but the newest (the highest index) and
        any written at the same time or after it (a store made before new shards always went last)."""
        if len(on_disk) < 2:
            return
        newest = max(on_disk)
        written = on_disk[newest][1]
        for index, stat in on_disk.items():
            if index != newest and stat[1] < written:
                self.deferred[index] = Deferred(stat, (generations or {}).get(self.names.file_name(index)))

    def load_deferred(self, indexes: list[int] | None = None) -> Reloaded:
        """Read shards left unread (all, or these), and say what they hold (file order).

        They are held by their keys, their lines read again when an event of theirs is asked for: older shards
        are never appended to, and a whole history's lines held after one list_entities or get_history (which
        read every shard to index it) made a server of 80 MB hold 370."""
        chosen = sorted(self.deferred if indexes is None else (i for i in indexes if i in self.deferred))
        if not chosen:
            return Reloaded()
        generations = {self.names.file_name(i): self.deferred[i].generation for i in chosen}
        changed: dict[int, ParsedFile | None] = {}
        for index in chosen:
            del self.deferred[index]
            changed[index] = self._read_if_there(index)
        manifest = {name: generation for name, generation in generations.items() if generation is not None}
        fresh, alone, in_order = self._install(changed, manifest, by_keys=True)
        if alone:  # (the usual case: each event in one shard) the records as parsed, no line read back
            return Reloaded(upserted=in_order)
        keys = {key for index in chosen if index in self.shards for key in self.shards[index].held_keys()}
        return Reloaded(upserted=self._in_file_order(changed, keys, fresh))

    def _install(
        self, changed: dict[int, ParsedFile | None], generations: Manifest | None, by_keys: bool = False
    ) -> tuple[dict[str, dict[str, Any]], bool, list[dict[str, Any]]]:
        """Replace the changed shards with what was read. Returns the parsed records by line (to skip reparsing),
        whether no record is held by two shards (an old fork's split left copies; one shard's own duplicates are
        merged here), and every record held, shard by shard in file order. `by_keys`: a shard whose file gives
        back each held line by position (`ParsedFile.line_keys`) is held by its keys, its lines not kept (its
        records are not in the first map)."""
        fresh: dict[str, dict[str, Any]] = {}
        in_order: list[dict[str, Any]] = []
        alone = True
        for index, parsed in sorted(changed.items()):
            self._forget_shard(index)
            if parsed is None:
                continue
            path = self.names.path(index)
            count = len(parsed.records) + len(parsed.problems)
            generation = (generations or {}).get(path.name)
            stat = parsed.stat or file_stat(path)
            keys, records, texts = zip(*parsed.records, strict=True) if parsed.records else ((), (), ())
            lines: ShardLines = dict(zip(keys, texts, strict=True))
            merged: ShardLines = {}
            if len(lines) == len(keys):
                fresh.update(zip(texts, records, strict=True))
            else:
                lines = {}
                for key, record, line in parsed.records:
                    if key in lines:
                        # The same record twice in one shard (the official server's in-call duplicates, a hand
                        # edit): merged, so no observation is lost; `check` reports it, the next write keeps one.
                        record = merge_records(fresh[lines[key]], record)
                        line = dump_line(record)
                    lines[key] = line
                    fresh[line] = record
                # What reading the file back by position cannot give: a merged line that is not the key's last.
                last = dict(zip(keys, texts, strict=True))
                merged = {key: line for key, line in lines.items() if line != last[key]}
            in_order.extend(fresh[line] for line in lines.values())
            line_keys = parsed.line_keys() if by_keys and stat is not None else None
            if line_keys is not None and stat is not None:
                self.shards[index] = self._held_by_keys(index, stat, generation, lines, line_keys, merged, count)
            else:
                self.shards[index] = Shard(lines, stat, generation, parsed.problems, count)
            alone = self._locate_all(lines, index) and alone
        return fresh, alone, in_order

    def _held_by_keys(
        self,
        index: int,
        stat: FileStat,
        generation: str | None,
        lines: ShardLines,
        line_keys: list[Key | None],
        merged: ShardLines,
        line_count: int,
    ) -> Shard:
        """A shard held by its keys and its lines' hashes, the lines read back from its file by position
        (`line_keys`: each line's key, None for a blank one) when next needed."""
        unread = UnreadLines(self, index, stat, line_keys, merged)
        digests = array("q", map(hash, lines.values()))
        return Shard(None, stat, generation, [], line_count, unread=unread, keys=list(lines), digests=digests)

    def _locate_all(self, keys: Iterable[Key], index: int) -> bool:
        """Locate a new shard's keys; whether none of them was held by another shard."""
        if not self.locations:
            self.locations = dict.fromkeys(keys, self._only_in(index))
            return True
        held = len(self.locations)
        added = 0
        for key in keys:
            self._locate(key, index)
            added += 1
        return len(self.locations) == held + added

    def _forget_shard(self, index: int) -> None:
        old = self.shards.pop(index, None)
        if old is None:
            return
        for key in old.held_keys():
            where = self.locations.get(key)
            if where is not None and index in where:
                self.locations[key] = tuple(i for i in where if i != index)

    def _locate(self, key: Key, index: int) -> None:
        where = self.locations.get(key)
        if where is None:
            self.locations[key] = self._only_in(index)
        elif index not in where:
            self.locations[key] = tuple(sorted((*where, index)))

    def _only_in(self, index: int) -> tuple[int]:
        """The one location tuple of the keys held by shard `index` alone (shared: tuples are never changed)."""
        only = self._alone_in.get(index)
        if only is None:
            only = self._alone_in[index] = (index,)
        return only

    def _in_file_order(
        self, changed: dict[int, ParsedFile | None], keys: set[Key], fresh: dict[str, dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Records for `keys`, in file order, so a fresh load keeps the graph's insertion order."""
        upserted: list[dict[str, Any]] = []
        for index in sorted(i for i in changed if i in self.shards):
            for key in self.shards[index].held_keys():
                if key in keys and self.locations[key][0] == index:
                    keys.discard(key)
                    upserted.append(self.record(key, fresh))
        # A copy in another, unchanged shard changed or vanished.
        upserted.extend(self.record(key, fresh) for key in keys)
        return upserted

    # -- the start snapshot (snapshot.py) ---------------------------------------------------------------------
    def snapshot_copy(self) -> CollectionCopy | None:
        """With the store held: what `CollectionCopy.snapshot_state` needs, copied (a shard's lines dict grows in
        place when lines are appended to it; a commit replaces the shard). None when the collection cannot be
        kept: shards left unread (a lazy collection), or a shard with unreadable lines or no known stat."""
        if self.deferred:
            return None
        shards: list[FrozenShard] = []
        for index in sorted(self.shards):
            shard = self.shards[index]
            if shard.problems or shard.stat is None:
                return None
            unread = shard.unread_lines()
            lines = dict(shard.lines) if unread is None else None
            shards.append(FrozenShard(index, shard.stat, shard.generation, shard.line_count, unread, lines))
        return CollectionCopy(self, shards)

    def hold_keys_only(self, state: list[tuple[Any, ...]]) -> None:
        """After `CollectionCopy.snapshot_state` (which checked each shard's file against its lines), with the
        store held again: hold every shard still as it was then as a restart holds it, by its keys, its lines read
        back from the file when a commit first needs them. Why: at a first start the lines are as much memory as
        the files (50 MB at 100k entities), and most shards of a big memory are never rewritten in a session."""
        for index, stat, _generation, _line_count, keys, merged in state:
            shard = self.shards.get(index)
            # (a shard written since the copy, or kept as changed, has another stat: it stays as it is)
            if shard is None or shard.unread_lines() is not None or shard.stat != stat:
                continue
            held = list(shard.lines)
            unread = UnreadLines(self, index, stat, keys, merged)
            self.shards[index] = Shard(None, stat, shard.generation, [], shard.line_count, unread=unread, keys=held)

    def restore_state(self, state: list[tuple[Any, ...]]) -> set[int]:
        """Hold the shards a snapshot kept (before any load). A shard whose file still has the snapshot's stat is
        held by its keys, its lines read from the file when first needed (`Shard`); one that changed since is
        held with an empty line for each key, which no real line equals, and no stat, so the reload that follows
        reads it and reports every difference. Returns the indexes of the shards held that way."""
        shards: dict[int, Shard] = {}
        changed: set[int] = set()
        order: dict[int, list[Key]] = {}
        for index, saved, generation, line_count, keys, merged in state:
            size, mtime_ns, inode, ctime_ns = map(int, saved)
            stat: FileStat = (size, mtime_ns, inode, ctime_ns)
            merged = dict(merged)
            # The keys `_lines_of` will hold, in its order (a plain shard: the file's keys as they are).
            plain = not merged and None not in keys
            held = keys if plain else list(dict.fromkeys([*(key for key in keys if key is not None), *merged]))
            order[index] = held
            if file_stat(self.names.path(index)) == stat:
                unread = UnreadLines(self, index, stat, keys, merged)
                shards[index] = Shard(None, stat, generation, [], line_count, unread=unread, keys=held)
            else:
                changed.add(index)
                shards[index] = Shard(dict.fromkeys(held, ""), None, generation, [], line_count)
        self.shards = shards
        self.locations = {}
        for index in sorted(shards):
            lines = order[index]
            if not self.locations:
                self.locations = dict.fromkeys(lines, self._only_in(index))
                continue
            for key in lines:
                self._locate(key, index)
        return changed

    def restored_records(self, changed: set[int]) -> list[dict[str, Any]]:
        """Every record held after `restore_state` except those of shards that changed since (the reload reports
        those), in file order: for listeners that keep no snapshot of their own."""
        records: list[dict[str, Any]] = []
        for index in sorted(set(self.shards) - changed):
            for key in self.shards[index].lines:
                where = self.locations[key]
                if where[0] == index and changed.isdisjoint(where):
                    records.append(self.record(key))
        return records

    def _read_lines(self, index: int) -> tuple[list[str], FileStat] | None:
        """A shard file's lines as the parser reads them (without a BOM; a last line may lack its newline) and
        the stat of the file they were read from (not of a file that replaced it meanwhile), or None."""
        try:
            with open(self.names.path(index), "rb") as handle:
                data = handle.read()
                st = os.fstat(handle.fileno())
            text = data.removeprefix(UTF8_BOM).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return lines, stat_of(st)

    # -- after a commit -------------------------------------------------------------------------------------
    def read_appended(self, index: int) -> list[dict[str, Any]] | None:
        """Records another process appended to a held shard since it was read, read from where the held content
        ends instead of from the start (the history, appended to at every call). None when the shard did not
        just grow (replaced, cut, unchanged) or what was added is not only new, readable records: then it is
        read whole, as any other change."""
        shard = self.shards.get(index)
        path = self.names.path(index)
        now = file_stat(path)
        if shard is None or shard.stat is None or shard.problems or now is None:
            return None
        if now[2] != shard.stat[2] or now[0] <= shard.stat[0]:
            return None
        try:
            with open(path, "rb") as handle:
                handle.seek(shard.stat[0] - 1)
                data = handle.read()
                stat = os.fstat(handle.fileno())
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if not text.startswith("\n"):
            return None
        parsed = parse_text(path, text[1:], self.check)
        lines = {key: line for key, _, line in parsed.records}
        held = shard.held_keys()
        if parsed.problems or len(lines) != len(parsed.records) or any(key in held for key in lines):
            return None
        self.appended(index, lines, stat_of(stat))
        return [record for _, record, _ in parsed.records]

    def holds_on_disk(self, index: int) -> bool:
        """Whether a shard's file holds exactly the lines held for it (or is absent, when none are held)."""
        shard = self.shards.get(index)
        try:
            data: bytes | None = self.names.path(index).read_bytes()
        except FileNotFoundError:
            data = None
        if shard is None or not shard.lines:
            return data is None
        return data == ("\n".join(shard.lines.values()) + "\n").encode("utf-8")

    def taken_back(self, path: Path) -> None:
        """After a failed append was cut back off: the shard holds the bytes it was read with again (its size
        tells), only its times changed, so it is not taken for a hand edit. Still longer: left to be reread."""
        index = self.names.index_of(path.name)
        shard = self.shards.get(index) if index is not None else None
        now = file_stat(path)
        if shard is not None and shard.stat is not None and now is not None and now[0] == shard.stat[0]:
            shard.stat = now

    def appended(self, index: int, lines: ShardLines, stat: FileStat | None = None) -> None:
        """Hold lines appended to a shard, by this process or read from another's append (its generation stays:
        the stamp is not renewed for an append)."""
        shard = self.shards[index]
        shard.lines.update(lines)
        shard.stat = stat or file_stat(self.names.path(index))
        shard.line_count += len(lines)
        for key in lines:
            self._locate(key, index)

    def apply(self, plan: Plan, token: str, by_keys: bool = False) -> None:
        """Hold the shards a commit wrote (the plan), without reading them back. `by_keys`: this process wrote them
        (not a replay of another's commit, whose files may hold other lines) and they are many."""
        for index, lines in plan.items():
            old = self.shards.get(index)
            if old is None:
                gone, added = [], list(lines)
            else:
                # Only the keys the commit placed or took out can have come or gone: a commit changes a line or
                # two of a shard, and every other process replays every commit (`Store._follow_appended_events`).
                old_keys, moved = old.held_keys(), plan.moved.get(index, ())
                gone = [key for key in moved if key in old_keys and key not in lines]
                added = [key for key in moved if key in lines and key not in old_keys]
            for key in gone:
                rest = tuple(i for i in self.locations[key] if i != index)
                if rest:
                    self.locations[key] = rest
                else:
                    del self.locations[key]
            for key in added:
                self._locate(key, index)
            if not lines:
                self.shards.pop(index, None)
                continue
            stat = file_stat(self.names.path(index))
            if by_keys and not self.lazy and stat is not None:
                # A commit that wrote many shards (the split of a legacy file, the rename of a hub) holds them by
                # their keys, their lines read back from the file when next needed, as a load holds them: it held
                # every line of a 38 MB official file split at its first write (+190 MB until a restart). Its
                # lines are as written, "\n"-separated, so the file gives each back by its position.
                self.shards[index] = self._held_by_keys(index, stat, token, lines, list(lines), {}, len(lines))
            else:
                self.shards[index] = Shard(lines, stat, token, [], len(lines))
