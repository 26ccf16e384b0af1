"""GraphService: the nine knowledge-graph operations, with the reference's semantics and our fixes.

The service keeps the whole graph in memory (entities by name, relations by endpoint, a search index) and
keeps it equal to the files through the store's change notifications, whether the change is ours or another
process's. Each write validates everything first, then commits once: a failed call changes nothing.
"""

from __future__ import annotations

import base64
import heapq
import json
import logging
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain, islice
from operator import add, itemgetter
from sys import intern
from typing import Any, TypeVar, overload

from memory_graph import search as search_module
from memory_graph.errors import ConflictError, InvalidInputError, NotFoundError, StorageError
from memory_graph.history import MergedEntities, ObservationUpdate, RenamedEntity, UpdatedObservations
from memory_graph.model import (
    ENVELOPE_CHARS,
    AddedObservations,
    AddedObservationsResult,
    ConnectedEntity,
    CreatedEntities,
    CreatedRelations,
    CutEntity,
    DeletionResult,
    Entity,
    EntityPage,
    EntitySummary,
    GraphSummary,
    KnowledgeGraph,
    Neighbor,
    Neighborhood,
    ObservationAddition,
    ObservationDeletion,
    Relation,
    Truncation,
    TypeCount,
    entity_view,
    json_size,
    relation_view,
)
from memory_graph.search import (
    FIELD_SEPARATOR,
    PlaceMap,
    SubstringIndex,
    check_query,
    closest_name,
    fuse,
    int_array,
    narrowing_fragments,
    prepare,
    substring_words,
    table_places,
    without_accents,
)
from memory_graph.semantic import SemanticIndex
from memory_graph.storage import (
    Key,
    ReadsWhileLoading,
    SnapshotStream,
    StoreEngine,
    Transaction,
    code_tag,
    entity_key,
    merge_records,
    relation_key,
    searchable_fields,
)

MEMORY = "memory"
LESSONS = "lesson"
RelationKey = tuple[str, str, str]
TRUNCATION_HINT = (
    "The result was cut to fit the response budget; the best matches come first, each with its relations. "
    "Narrow it with search_nodes (a more specific query) or open_nodes (exact names), or raise "
    "MEMORY_MAX_RESPONSE_CHARS."
)
CUT_ENTITY_HINT = (
    " An entity too large for the budget comes with part of its observations (cutEntities): nothing is lost, "
    "search_nodes with words of what you look for returns its observations holding them."
)

log = logging.getLogger(__name__)


def deduplicated(record: dict[str, Any]) -> dict[str, Any]:
    """An entity record as create_entities stores it: each observation once, in first-seen order."""
    return {**record, "observations": list(dict.fromkeys(record["observations"]))}


def _plain(name: str) -> str:
    """A name without case and accents (`suggest`); an ASCII name, most of them, without the Unicode pass."""
    return name.casefold() if name.isascii() else without_accents(name.casefold())


@dataclass
class ImportSummary:
    """What an import did, counted as it goes; `on_progress(done)` hears of each batch."""

    entities: int = 0
    lessons: int = 0
    relations: int = 0
    merged: int = 0
    duplicates: int = 0
    dangling: int = 0
    problems: list[str] = field(default_factory=list)  # records skipped on purpose, each with the reason
    invalid: list[str] = field(default_factory=list)  # records that could not be taken as they are
    on_progress: Callable[[int], None] | None = None

    def progress(self, done: int) -> None:
        if self.on_progress is not None:
            self.on_progress(done)


@dataclass
class ExportedGraph:
    entities: list[dict[str, Any]]
    lessons: list[dict[str, Any]]
    relations: list[dict[str, Any]]


# A search made while a store loads answers from at most this many entities the storage finds, else waits for the
# load: past it, fetching and ordering them takes as long as a good part of the load.
LOADING_MATCH_LIMIT = 20_000
# ... and a broad one (a single word past that limit) from the entities leading by name: more than an answer holds.
LOADING_LEADING = 1_000
SMALL_DEGREE = 8
DEGREE_SAMPLE = 64  # names whose relations estimate how many a set of names touches (count_relations_touching)


@dataclass
class Matched:
    """How much a search matched when the answer is built from its leading entities only."""

    entities: int
    relations: Callable[[], int]  # asked only when the answer is cut


PLAIN_FIELDS = frozenset({"type", "name", "entityType", "observations"})
OBSERVATION_SEPARATOR = "\x00"  # (JSON allows it in a string: see EntityTable for an observation holding it)


def _observations(held: tuple[Any, ...]) -> list[str]:
    """A plain entity's observations from its held tuple, in either of its forms (`EntityTable`)."""
    if len(held) == 3:
        return held[2].split(OBSERVATION_SEPARATOR)
    return list(held[2:])


def _packed(held: tuple[Any, ...]) -> tuple[Any, ...]:
    """A plain entity of several observations held packed, when none holds the separator (`EntityTable`)."""
    joined = OBSERVATION_SEPARATOR.join(held[2:])
    return (held[0], held[1], joined) if joined.count(OBSERVATION_SEPARATOR) == len(held) - 3 else held


class EntityTable(Mapping[str, dict[str, Any]]):
    """Entity and lesson records by name, each with its creation ordinal. A plain entity (exactly the four fields a
    load gives it) is held as one tuple, (ordinal, entityType, *observations), and read back as a new record each
    time: at a million entities their dicts, observation lists and a map of the ordinals were about 240 MB of a
    restart's 2.1 GB. A restart holds it packed, (ordinal, entityType, observations joined by OBSERVATION_SEPARATOR)
    (`packed`): one string per entity instead of one per observation, 13 MB of a restart's 226 MB at 100k entities
    of 3 observations. The two forms differ only in length (2: none; 3: joined; 4 or more: one string each), so a
    single observation holding the separator, which would read as several, makes its record held whole. Any other
    record (a lesson, an entity with fields of its own) is held as (ordinal, record) and read back as that dict.

    Packed only in the snapshot: joined during a first load, the parsed observations freed in their thousands left
    the heap full of holes (the first load's RSS rose by what the restart's fell)."""

    __slots__ = ("held",)

    def __init__(self, held: dict[str, tuple[Any, ...]] | None = None) -> None:
        self.held = held if held is not None else {}

    def __getitem__(self, name: str) -> dict[str, Any]:
        held = self.held[name]
        rest = held[1]
        if isinstance(rest, dict):
            return rest
        return {"type": "entity", "name": name, "entityType": rest, "observations": _observations(held)}

    def get(self, name: str, default: Any = None) -> Any:  # (Mapping's goes through a raised KeyError)
        return self[name] if name in self.held else default

    def __contains__(self, name: object) -> bool:
        return name in self.held

    def __iter__(self) -> Iterator[str]:
        return iter(self.held)

    def __len__(self) -> int:
        return len(self.held)

    def put(self, name: str, record: dict[str, Any], ordinal: int) -> None:
        if record.keys() == PLAIN_FIELDS and record["type"] == "entity" and record["name"] == name:
            observations = record["observations"]
            if len(observations) != 1 or OBSERVATION_SEPARATOR not in observations[0]:
                self.held[name] = (ordinal, record["entityType"], *observations)
                return
        self.held[name] = (ordinal, record)

    def packed(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """The table as a restore holds it, entity by entity: each plain entity's observations joined in one
        string, unless one of them holds the separator (see the class)."""
        return ((name, _packed(held) if len(held) > 3 else held) for name, held in self.held.items())

    def remove(self, name: str) -> None:
        del self.held[name]

    def ordinal(self, name: str) -> int:
        """When the entity was created, among all entities and relations (creation order)."""
        ordinal: int = self.held[name][0]
        return ordinal

    def entity_type(self, name: str) -> str:
        """The record's entityType, without making the record."""
        rest = self.held[name][1]
        return rest["entityType"] if isinstance(rest, dict) else rest

    def view(self, name: str) -> dict[str, Any]:
        """The record's plain-entity face (`entity_view`), without making the record first."""
        held = self.held[name]
        rest = held[1]
        if isinstance(rest, dict):
            return entity_view(rest)
        return {"name": name, "entityType": rest, "observations": _observations(held)}


Touching = tuple[RelationKey, ...] | set[RelationKey]
T = TypeVar("T")


class RestoredRelations(Sequence[RelationKey]):
    """The relations a start snapshot kept, in creation order, as columns: each one's start, end and type. Its key
    is made when read: a tuple of its own per relation, and a dict of them with each one's ordinal, were 30 MB of a
    restart's 234 at 100k entities and 200k relations; the columns are 5 MB (lists of the names, not places in a
    table of them: a key made from places took twice as long, and relations are read a million at a time). Never
    changed once made (a relation gone since is marked by the `RelationTable` holding them), so copies share it."""

    __slots__ = ("_ends", "_starts", "_types")

    def __init__(self, names: list[str], starts: array[int], ends: array[int], types: list[str]) -> None:
        """From the snapshot's columns: the ends as places in `names` (an IndexError for one past them)."""
        if not len(starts) == len(ends) == len(types):
            raise ValueError("the graph's relation columns differ in length")
        if not set(map(type, types)) <= {str}:  # (a loop in C: a generator of 2M tests took 0.5 s of a 1M restart)
            raise TypeError("the snapshot holds a relation type that is no string")
        self._starts = list(map(names.__getitem__, starts))
        self._ends = list(map(names.__getitem__, ends))
        self._types = types

    def __len__(self) -> int:
        return len(self._types)

    @overload
    def __getitem__(self, place: int) -> RelationKey: ...
    @overload
    def __getitem__(self, place: slice) -> list[RelationKey]: ...
    def __getitem__(self, place: int | slice) -> RelationKey | list[RelationKey]:
        if isinstance(place, slice):
            return [self[at] for at in range(*place.indices(len(self)))]
        return (self._starts[place], self._ends[place], self._types[place])

    def __iter__(self) -> Iterator[RelationKey]:
        # (the columns are one length: checked when made, never changed)
        return zip(self._starts, self._ends, self._types, strict=True)

    def types(self) -> list[str]:
        """Each relation's type, by place."""
        return self._types

    def at(self, places: array[int]) -> Iterator[RelationKey]:
        """The keys of the relations at these places (without a call of `self[place]` each)."""
        starts, ends, types = self._starts, self._ends, self._types
        found = map(starts.__getitem__, places), map(ends.__getitem__, places), map(types.__getitem__, places)
        return zip(*found, strict=True)


# A graph not restored (shared: it never changes).
NO_RESTORED_RELATIONS = RestoredRelations([], array("i"), array("i"), [])


class RelationTable(Mapping[RelationKey, int]):
    """Relation key -> its creation ordinal, iterated in creation order. Restored from the start snapshot, the
    relations are `RestoredRelations` found by a `PlaceMap` (kept in the snapshot as it is), each one's ordinal its
    place among them: they are kept in creation order, and every ordinal given since is past them (the snapshot's
    next ordinal is at least their count). Relations added since are in a dict, and restored ones gone since are
    marked by place. Only the order of the ordinals means anything (`relations_touching` sorts by them)."""

    __slots__ = ("_added", "_gone", "_places", "_restored")

    def __init__(self, restored: RestoredRelations | None = None, places: PlaceMap | None = None) -> None:
        self._restored = restored if restored is not None else NO_RESTORED_RELATIONS
        self._places = places
        self._gone: set[int] = set()  # places of restored relations gone since
        self._added: dict[RelationKey, int] = {}

    def _restored_place(self, key: RelationKey) -> int | None:
        if self._places is None:
            return None
        place = self._places.get(key)
        return None if place is None or place in self._gone else place

    def __getitem__(self, key: RelationKey) -> int:
        ordinal = self._added.get(key)
        if ordinal is None:
            ordinal = self._restored_place(key)
            if ordinal is None:
                raise KeyError(key)
        return ordinal

    def __contains__(self, key: object) -> bool:
        if type(key) is not tuple or not all(type(part) is str for part in key):
            return False  # (as a dict of string triples answers; the table's hash joins strings only)
        return key in self._added or self._restored_place(key) is not None

    def _live(self, column: Iterable[T]) -> Iterator[T]:
        """A column of the restored relations (in place order) without the places gone since."""
        gone = self._gone
        return iter(column) if not gone else (item for place, item in enumerate(column) if place not in gone)

    def __iter__(self) -> Iterator[RelationKey]:
        return chain(self._live(self._restored), self._added)

    def __len__(self) -> int:
        return len(self._restored) - len(self._gone) + len(self._added)

    def types(self) -> Iterator[str]:
        """Each relation's type, in creation order (without making its key: graph_summary counts them)."""
        return chain(self._live(self._restored.types()), map(itemgetter(2), self._added))

    def add(self, key: RelationKey, ordinal: int) -> None:
        """A relation not held yet, with an ordinal past every one held."""
        self._added[key] = ordinal

    def remove(self, key: RelationKey) -> None:
        if self._added.pop(key, None) is None:
            place = self._restored_place(key)
            if place is None:
                raise KeyError(key)
            self._gone.add(place)

    def copy(self) -> RelationTable:
        """A copy that no later write reaches: the restored columns and their table are shared (never changed)."""
        copied = RelationTable()
        copied._restored, copied._places = self._restored, self._places
        copied._gone, copied._added = set(self._gone), dict(self._added)
        return copied

    def table(self, keys: list[RelationKey]) -> array[int]:
        """The table of places of `keys` (these relations, in their order) the snapshot keeps: the restored one
        while no relation came or went since; else made again (in the save's thread: 0.13 s at 200k)."""
        if self._places is not None and not self._gone and not self._added:
            return self._places.table()
        return PlaceMap.of(keys).table()


class RelationsByName(Mapping[str, Touching]):
    """name -> the relations touching it: a tuple up to SMALL_DEGREE of them, a set past that (hubs).

    Restored from a snapshot, it holds them as one array of relation places with each name's start and count, by
    the name's place (an entity's creation ordinal, or a place after those for a relation end that names no
    entity): a million tuples and the map of them took 2.3 s of a restart at a million entities, and ~100 MB. A
    name whose relations change afterwards is held in `changed`, as every name is in a graph that was not
    restored."""

    __slots__ = ("_degrees", "_entities", "_hubs", "_keys", "_limit", "_other", "_starts", "_touching", "changed")

    def __init__(self, entities: EntityTable) -> None:
        # () for a name that had relations when restored and has none left
        self.changed: dict[str, Touching] = {}
        # The names `changed` holds a set for: what `copy` copies.
        self._hubs: set[str] = set()
        self._entities = entities
        self._keys = NO_RESTORED_RELATIONS
        self._other: dict[str, int] = {}
        self._limit = 0
        self._starts = self._degrees = self._touching = array("i")

    def restore(
        self,
        keys: RestoredRelations,
        other_ends: list[str],
        limit: int,
        starts: array[int],
        degrees: array[int],
        touching: array[int],
    ) -> None:
        """Hold what `columns` gave (raises ValueError, changing nothing, when the columns do not fit together)."""
        if len(starts) != len(degrees) or len(starts) != limit + len(other_ends):
            raise ValueError("the graph's relations by name are not one place per name")
        if sum(degrees) != len(touching) or min(degrees, default=0) < 0 or min(starts, default=0) < 0:
            raise ValueError("the graph's relations by name do not add up")
        if max(map(add, starts, degrees), default=0) > len(touching) or not min(touching, default=0) >= 0:
            raise ValueError("the graph's relations by name point past their table")
        if max(touching, default=-1) >= len(keys):
            raise ValueError("the graph's relations by name point past the relations")
        self._keys, self._limit, self._starts, self._degrees, self._touching = keys, limit, starts, degrees, touching
        self._other = dict(zip(other_ends, range(limit, limit + len(other_ends)), strict=True))
        self.changed, self._hubs = {}, set()

    def columns(self, relations: list[RelationKey], next_ordinal: int) -> dict[str, Any]:
        """The snapshot's columns: the relation ends that name no entity, and each place's start and count in one
        array of places among `relations` (in their order). Places are ordinals, so the arrays hold 8 bytes for
        each ordinal given since the memory was last read in full (a new version of the code reads it so)."""
        position = dict(zip(relations, range(len(relations)), strict=True))
        other_ends = [name for name in self if name not in self._entities]
        other = dict(zip(other_ends, range(next_ordinal, next_ordinal + len(other_ends)), strict=True))
        size = next_ordinal + len(other_ends)
        starts, degrees, touching = array("i", bytes(4 * size)), array("i", bytes(4 * size)), array("i")
        ordinal = self._entities.ordinal
        for name, held in self.items():
            place = other[name] if name in other else ordinal(name)
            starts[place], degrees[place] = len(touching), len(held)
            touching.extend(map(position.__getitem__, held))
        return {
            "other_ends": other_ends,
            "starts": starts.tobytes(),
            "degrees": degrees.tobytes(),
            "touching": touching.tobytes(),
        }

    def copy(self, entities: EntityTable) -> RelationsByName:
        """A copy over `entities` (a copy of the table too) that no later write reaches, for a snapshot made with the
        store let go. The restored columns are shared: only `restore` sets them, never changed in place. A hub's
        set is copied: `add` and `discard` change it in place. (The hubs are known, so the copy walks them only: a
        walk of every name cost a save 60 ms of its hold after a first load at 100k.)"""
        copied = RelationsByName(entities)
        copied._keys, copied._other, copied._limit = self._keys, self._other, self._limit
        copied._starts, copied._degrees, copied._touching = self._starts, self._degrees, self._touching
        copied.changed = dict(self.changed)
        for name in self._hubs:
            copied.changed[name] = set(self.changed[name])
        copied._hubs = set(self._hubs)
        return copied

    def _place(self, name: str) -> int | None:
        place = self._other.get(name)
        if place is not None:
            return place
        held = self._entities.held.get(name)
        # (an entity created since the restore has an ordinal past the places)
        return held[0] if held is not None and held[0] < self._limit else None

    def _restored_span(self, name: str) -> tuple[int, int]:
        """Where the name's restored relations start in `_touching`, and how many they are (0: none)."""
        place = self._place(name)
        return (0, 0) if place is None else (self._starts[place], self._degrees[place])

    def _restored(self, name: str) -> Touching:
        start, degree = self._restored_span(name)
        if not degree:
            return ()
        keys = self._keys.at(self._touching[start : start + degree])
        return tuple(keys) if degree <= SMALL_DEGREE else set(keys)

    def _held(self, name: str) -> Touching:
        held = self.changed.get(name)
        return self._restored(name) if held is None else held

    def get(self, name: str, default: Any = None) -> Any:
        return self._held(name) or default

    def __getitem__(self, name: str) -> Touching:
        held = self._held(name)
        if not held:
            raise KeyError(name)
        return held

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self._held(name))

    def __iter__(self) -> Iterator[str]:
        changed, other, degrees, limit = self.changed, self._other, self._degrees, self._limit
        yield from (name for name, held in changed.items() if held)
        yield from (name for name, place in other.items() if degrees[place] and name not in changed)
        if not limit:
            return  # not restored: every name is in `changed`
        for name, held in self._entities.held.items():
            place = held[0]
            if place < limit and degrees[place] and name not in changed and name not in other:
                yield name

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def touching(self, names: Iterable[str]) -> tuple[array[int], list[RelationKey]]:
        """The relations touching the names: the restored relations of a name unchanged since the restore as their
        places among them (see `keys_at`), the others as keys (a relation may come twice, once by each end)."""
        places: array[int] = array("i")
        keys: list[RelationKey] = []
        changed, touching = self.changed, self._touching
        for name in names:
            held = changed.get(name)
            if held is not None:
                keys.extend(held)
                continue
            start, degree = self._restored_span(name)
            if degree:
                places.extend(touching[start : start + degree])
        return places, keys

    def keys_at(self, places: array[int]) -> Iterator[RelationKey]:
        """The keys of the restored relations at these places."""
        return self._keys.at(places)

    def degree(self, name: str) -> int:
        """How many relations touch the name, without making their tuple."""
        held = self.changed.get(name)
        return len(held) if held is not None else self._restored_span(name)[1]

    def add(self, name: str, key: RelationKey) -> None:
        held = self._held(name)
        if isinstance(held, set):
            held.add(key)
            self.changed[name] = held
            self._hubs.add(name)
        elif len(held) < SMALL_DEGREE:
            # Most entities have a few relations: a tuple holds them in a third of a set's memory.
            self.changed[name] = (*held, key)
        else:
            self.changed[name] = {*held, key}
            self._hubs.add(name)

    def discard(self, name: str, key: RelationKey) -> None:
        held = self._held(name)
        if isinstance(held, set):
            held.discard(key)
            self._hubs.add(name)
        else:
            held = tuple(other for other in held if other != key)
        if held:
            self.changed[name] = held
            return
        self._hubs.discard(name)  # (the only place a set gives way to no relations)
        if self._restored_span(name)[1]:
            self.changed[name] = ()
        else:
            self.changed.pop(name, None)

    def entity_leaving(self, name: str) -> None:
        """Called before an entity is removed from the entities: its restored relations are found by its ordinal,
        which goes with it, so they are held by name from then on."""
        if name not in self.changed and name not in self._other:
            held = self._restored(name)
            if held:
                self.changed[name] = held
                if isinstance(held, set):
                    self._hubs.add(name)


class GraphState:
    """The in-memory graph and its indexes, fed by the store (a `ChangeListener`, kept in its start snapshot)."""

    snapshot_name = "graph"

    def __init__(self) -> None:
        self.hold_nothing()

    def hold_nothing(self) -> None:
        """Hold no graph (before a load, or to be restored again: `StoreEngine.hold_as_restored`)."""
        self.entities = EntityTable()
        # The entities a collection other than the memory's holds (lessons), by name: at a million entities a map
        # of every name to its collection took half a second of each restart to rebuild.
        self._elsewhere: dict[str, str] = {}
        # Shared lessons behind an entity of this memory under the same name, shown once that entity is gone.
        self._hidden_lessons: dict[str, dict[str, Any]] = {}
        self.relations = RelationTable()  # key -> creation ordinal
        # name -> the relations touching it: a tuple up to SMALL_DEGREE of them, a set past that (hubs)
        self.by_node = RelationsByName(self.entities)
        self.index = SubstringIndex()
        self._next_ordinal = 0

    def snapshot_version(self) -> str:
        # Arrays are kept as their bytes: native item size and byte order.
        return code_tag([__file__, search_module.__file__], str(array("i").itemsize), sys.byteorder)

    def snapshot_copy(self) -> GraphState:
        """A graph of copies of this one's containers, made with the store held, whose `snapshot_state` (with the
        store let go) is this one's as it was. Each map is copied: every write adds to or takes from them in place.
        What they hold is shared: names and keys are strings and tuples, an entity a tuple, and a record held whole
        (a lesson) a dict no write changes in place (a changed record is a new dict from the store)."""
        copied = GraphState()
        copied.entities = EntityTable(dict(self.entities.held))
        copied._elsewhere = dict(self._elsewhere)
        copied._hidden_lessons = dict(self._hidden_lessons)
        copied.relations = self.relations.copy()
        copied.by_node = self.by_node.copy(copied.entities)
        copied.index = self.index.snapshot_copy()
        copied._next_ordinal = self._next_ordinal
        return copied

    def snapshot_state(self) -> dict[str, Any]:
        """The tables as columns, names as their places in one table (the entities' names, then the relation ends
        that name no entity): the names' tables in the entities' order, the relations as their ends' places and
        types, and each name's relations as places among the relations (`RelationsByName.columns`). Kept as dicts
        of key tuples, every name's relations came back with copies of their keys, and reading the names again
        and again was most of a restart's restore (bench/restore_bench.py at 100k entities: 1.7 -> 1.1 s, RSS 307
        -> 273 MB with the search index's maps rebuilt too)."""
        keys = list(self.relations)  # in creation order: a restored relation's ordinal is its place among them
        by_name = self.by_node.columns(keys, self._next_ordinal)
        names = [*self.entities, *by_name["other_ends"]]  # every relation end is in one or the other
        place = dict(zip(names, range(len(names)), strict=True))
        return {
            "entities": SnapshotStream("dict", self.entities.packed()),  # packed as it is written
            "elsewhere": self._elsewhere,
            "hidden_lessons": self._hidden_lessons,
            "relation_from": array("i", map(place.__getitem__, map(itemgetter(0), keys))).tobytes(),
            "relation_to": array("i", map(place.__getitem__, map(itemgetter(1), keys))).tobytes(),
            "relation_type": [key[2] for key in keys],
            "relation_places": self.relations.table(keys).tobytes(),
            **by_name,
            "next_ordinal": self._next_ordinal,
            "index": self.index.snapshot_state(),
        }

    def restore_state(self, state: dict[str, Any]) -> None:
        index = SubstringIndex()
        index.restore_state(state["index"])
        entities, elsewhere = EntityTable(dict(state["entities"])), dict(state["elsewhere"])
        hidden_lessons = dict(state["hidden_lessons"])
        if not elsewhere.keys() <= entities.held.keys():
            raise ValueError("the graph's entity tables differ")
        other_ends = list(state["other_ends"])
        keys = RestoredRelations(
            [*entities, *other_ends],
            table_places(state["relation_from"], "relation starts", "i"),
            table_places(state["relation_to"], "relation ends", "i"),
            list(state["relation_type"]),
        )
        next_ordinal = int(state["next_ordinal"])
        if next_ordinal < len(keys):
            raise ValueError("the graph's next ordinal is not past its relations' places")
        by_node = RelationsByName(entities)
        by_node.restore(
            keys, other_ends, next_ordinal, *(int_array(state[field]) for field in ("starts", "degrees", "touching"))
        )
        relations = RelationTable(keys, PlaceMap.restored(keys, state["relation_places"]))
        # All read before any is taken: a state that fails leaves the graph as it was (empty).
        self.entities, self.index, self.by_node = entities, index, by_node
        self._elsewhere, self.relations, self._next_ordinal = elsewhere, relations, next_ordinal
        self._hidden_lessons = hidden_lessons

    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        for key in removed:
            if key[0] == "relation":
                self._drop_relation((key[1], key[2], key[3]))
            elif self.home(key[1]) == collection:
                self._drop_entity(key[1])
                hidden = self._hidden_lessons.pop(key[1], None) if collection == MEMORY else None
                if hidden is not None:  # the project's own entity is gone: the shared lesson shows again
                    self._put_entity(LESSONS, hidden)
            elif collection == LESSONS:
                self._hidden_lessons.pop(key[1], None)
        for record in upserted:
            if record["type"] == "relation":
                # Interned, the ends share the entities' name strings instead of holding copies of their own.
                self._add_relation((intern(record["from"]), intern(record["to"]), intern(record["relationType"])))
                continue
            home = self.home(record["name"])
            if collection == LESSONS and home == MEMORY:
                # Trigger: another project wrote a shared lesson under a name this project's memory uses.
                # Why: the project's own entity must not vanish behind it. Outcome: the entity stays; the
                # lesson is not shown here while it does (it is, in every project without that name).
                log.warning(
                    "the shared lesson %r is hidden here: this project has an entity of that name", record["name"]
                )
                self._hidden_lessons[record["name"]] = record
                continue
            if collection == MEMORY and home == LESSONS:  # (heard after the lesson: a load, another process)
                self._hidden_lessons[record["name"]] = self.entities[record["name"]]
            self._put_entity(collection, record)

    def _put_entity(self, collection: str, record: dict[str, Any]) -> None:
        name = record["name"] = intern(record["name"])
        record["entityType"] = intern(record["entityType"])
        if name in self.entities:
            ordinal = self.entities.ordinal(name)  # changed, not created: it keeps its place
        else:
            ordinal = self._next_ordinal
            self._next_ordinal += 1
        self.entities.put(name, record, ordinal)
        if collection == MEMORY:
            self._elsewhere.pop(name, None)
        else:
            self._elsewhere[name] = collection
        self.index.put(name, searchable_fields(record))

    def _drop_entity(self, name: str) -> None:
        self.by_node.entity_leaving(name)
        self.entities.remove(name)
        self._elsewhere.pop(name, None)
        self.index.remove(name)

    def _add_relation(self, key: RelationKey) -> None:
        if key in self.relations:
            return
        self.relations.add(key, self._next_ordinal)
        self._next_ordinal += 1
        for end in (key[0], key[1]) if key[0] != key[1] else (key[0],):
            self.by_node.add(end, key)

    def _drop_relation(self, key: RelationKey) -> None:
        if key not in self.relations:
            return
        self.relations.remove(key)
        for end in (key[0], key[1]) if key[0] != key[1] else (key[0],):
            self.by_node.discard(end, key)

    @classmethod
    def of(
        cls, entities: Iterable[tuple[str, dict[str, Any]]], relations: Iterable[tuple[str, dict[str, Any]]]
    ) -> GraphState:
        """A graph of just these records (collection, record), heard in the order given, as a load hears them."""
        state = cls()
        for collection, record in entities:
            state.records_changed(collection, [], [record])
        for collection, record in relations:
            state.records_changed(collection, [], [record])
        return state

    @overload
    def home(self, name: str) -> str | None: ...
    @overload
    def home(self, name: str, default: str) -> str: ...
    def home(self, name: str, default: str | None = None) -> str | None:
        """The collection holding the entity of this name (the memory's, or the lessons'), or `default`."""
        if name not in self.entities:
            return default
        return self._elsewhere.get(name, MEMORY)

    def ordinal(self, name: str) -> int:
        return self.entities.ordinal(name)

    def relations_touching(self, names: Iterable[str]) -> list[RelationKey]:
        found = self.touching_with_ordinals(names)
        return sorted(found, key=found.__getitem__)  # creation order, like the reference

    def count_relations_touching(self, names: Iterable[str]) -> int:
        """How many distinct relations touch the names (a cut response reports it for thousands of matches). When
        they touch more than half of all relations, one pass over every relation is cheaper than collecting theirs
        into a set (at 100k entities, 56 against 143 ms for three quarters of them); otherwise theirs are fewer."""
        chosen = set(names)
        # Estimated from a sample of the names (summing every name's degree cost a third of the pass it saves);
        # either way the count is exact.
        sample = list(islice(chosen, DEGREE_SAMPLE))
        touching = sum(map(self.by_node.degree, sample)) * len(chosen) / max(len(sample), 1)
        if 2 * touching > len(self.relations):
            return sum(1 for start, end, _ in self.relations if start in chosen or end in chosen)
        places, keys = self.by_node.touching(chosen)
        return len({*self.by_node.keys_at(places), *keys})  # (no ordinals: a count needs no order)

    def touching_with_ordinals(self, names: Iterable[str]) -> dict[RelationKey, int]:
        """The relations touching the names, each with its creation ordinal. A restored relation's ordinal is its
        place among the restored relations (`RelationTable`), so the ones `RelationsByName` holds by place need no
        lookup of their key (which made an open_nodes of a thousand names twice as slow)."""
        places, keys = self.by_node.touching(names)
        found = dict(zip(self.by_node.keys_at(places), places, strict=True))
        ordinal = self.relations.__getitem__
        for key in keys:
            if key not in found:
                found[key] = ordinal(key)
        return found


class GraphService:
    def __init__(self, store: StoreEngine, max_response_chars: int, semantic: SemanticIndex | None = None) -> None:
        self.store = store
        self.state = GraphState()
        self.semantic = semantic  # recall by meaning (the semantic extra), ranked below the lexical tiers
        # When an entity last changed, for list_entities: the history's answer once the composition root connects
        # it (the history service is built on this one).
        self.last_change: Callable[[str], str | None] = lambda name: None
        self.max_response_chars = max_response_chars
        store.add_listener(self.state)

    # -- helpers -----------------------------------------------------------------------------------------
    def _missing_entity(self, name: str) -> NotFoundError:
        return NotFoundError(f"Entity with name {name} not found.{self.suggest(name)}")

    def suggest(self, name: str) -> str:
        """A 'did you mean' for a name that does not exist (names are exact and case-sensitive).

        Callers hold the store's lock: the fuzzy match sees only names of comparable, bounded length (see
        `closest_name`), so it stays short however long the name or the graph's names are."""
        entities = self.state.entities
        folded_name, stripped_name = _plain(name), name.strip()
        # (Case and accents: "Zoe" for "Zoë" is the likeliest mistype, and one letter of three is under the cutoff.)
        folded = [n for n in entities if _plain(n) == folded_name or n.strip() == stripped_name]
        if not folded and entities:
            best = closest_name(name, entities, cutoff=85)
            folded = [best] if best else []
        if folded:
            return f" Did you mean {json.dumps(folded[0], ensure_ascii=False)}? Names are exact and case-sensitive."
        return " Names are exact and case-sensitive; search_nodes finds entities by part of their name."

    def _upsert_entities(self, tx: Transaction, records: Iterable[dict[str, Any]]) -> None:
        """Write changed entities back to the collection that holds them (a lesson stays a lesson)."""
        for record in records:
            tx.upsert(self.state.home(record["name"], MEMORY), record)

    def entity_type(self, name: str) -> str | None:
        """The type of an entity or lesson with this exact name, or None (the read interface lessons use; call it
        inside a store read or transaction, as the lesson service does)."""
        entities = self.state.entities
        return entities.entity_type(name) if name in entities else None

    def entity_record(self, name: str) -> dict[str, Any] | None:
        """A plain entity's stored record with every field it was written with (`createdAt`, `tags`, ...: what
        export writes), or None when no plain entity has this name."""
        with self.store.reading():
            if self.state.home(name) != MEMORY:
                return None
            return dict(self.state.entities[name])

    # -- writes ------------------------------------------------------------------------------------------
    def create_entities(self, entities: Sequence[Entity]) -> CreatedEntities:
        with self.store.transaction() as tx:
            created: dict[str, dict[str, Any]] = {}
            for entity in entities:
                if entity.name in self.state.entities or entity.name in created:
                    continue
                created[entity.name] = deduplicated(
                    {
                        "type": "entity",
                        "name": entity.name,
                        "entityType": entity.entityType,
                        "observations": entity.observations,
                    }
                )
            for record in created.values():
                tx.upsert(MEMORY, record)
        return CreatedEntities(entities=[Entity.model_construct(**entity_view(r)) for r in created.values()])

    def create_relations(self, relations: Sequence[Relation]) -> CreatedRelations:
        with self.store.transaction() as tx:
            missing = list(
                dict.fromkeys(
                    end
                    for relation in relations
                    for end in (relation.from_, relation.to)
                    if end not in self.state.entities
                )
            )
            if missing:
                names = ", ".join(json.dumps(n, ensure_ascii=False) for n in missing)
                raise NotFoundError(
                    f"No relation was created: these entities do not exist: {names}. Create them first with "
                    f"create_entities (names are exact and case-sensitive).{self.suggest(missing[0])}"
                )
            new = list(dict.fromkeys(r.key for r in relations if r.key not in self.state.relations))
            for key in new:
                tx.upsert(MEMORY, {"type": "relation", **relation_view(key)})
        return CreatedRelations(relations=[relation_model(k) for k in new])

    def add_observations(self, additions: Sequence[ObservationAddition]) -> AddedObservationsResult:
        with self.store.transaction() as tx:
            updated: dict[str, dict[str, Any]] = {}
            results: list[AddedObservations] = []
            for addition in additions:
                current = updated.get(addition.entityName) or self.state.entities.get(addition.entityName)
                if current is None:
                    raise self._missing_entity(addition.entityName)
                present = set(current["observations"])
                added = [c for c in dict.fromkeys(addition.contents) if c not in present]
                if added:
                    updated[addition.entityName] = {
                        **current,
                        "observations": [*current["observations"], *added],
                    }
                results.append(AddedObservations(entityName=addition.entityName, addedObservations=added))
            self._upsert_entities(tx, updated.values())
        return AddedObservationsResult(results=results)

    def delete_entities(self, names: Sequence[str]) -> DeletionResult:
        with self.store.transaction() as tx:
            doomed = [n for n in dict.fromkeys(names) if n in self.state.entities]
            for name in doomed:
                tx.delete(self.state.home(name, MEMORY), entity_key(name))
            for key in self.state.relations_touching(doomed):
                tx.delete(MEMORY, relation_key(*key))
        return DeletionResult(success=True, message="Entities deleted successfully")

    def delete_observations(self, deletions: Sequence[ObservationDeletion]) -> DeletionResult:
        with self.store.transaction() as tx:
            updated: dict[str, dict[str, Any]] = {}
            for deletion in deletions:
                current = updated.get(deletion.entityName) or self.state.entities.get(deletion.entityName)
                if current is None:
                    continue
                unwanted = set(deletion.observations)
                kept = [o for o in current["observations"] if o not in unwanted]
                if len(kept) != len(current["observations"]):
                    updated[deletion.entityName] = {**current, "observations": kept}
            self._upsert_entities(tx, updated.values())
        return DeletionResult(success=True, message="Observations deleted successfully")

    def delete_relations(self, relations: Sequence[Relation]) -> DeletionResult:
        with self.store.transaction() as tx:
            for key in dict.fromkeys(r.key for r in relations):
                if key in self.state.relations:
                    tx.delete(MEMORY, relation_key(*key))
        return DeletionResult(success=True, message="Relations deleted successfully")

    # -- edits: update, rename, merge (each one dated in the history) ------------------------------------
    def update_observations(self, updates: Sequence[ObservationUpdate]) -> UpdatedObservations:
        """Replace observation texts in place; every unknown entity or text is named, and nothing is changed."""
        with self.store.transaction(operation="update_observations") as tx:
            updated: dict[str, dict[str, Any]] = {}
            problems: list[str] = []
            for update in updates:
                current = updated.get(update.entityName) or self.state.entities.get(update.entityName)
                if current is None:
                    problems.append(str(self._missing_entity(update.entityName)))
                    continue
                observations = current["observations"]
                if update.old not in observations:
                    problems.append(
                        f"Entity {update.entityName} has no observation {json.dumps(update.old, ensure_ascii=False)}."
                    )
                    continue
                replaced = [update.new if o == update.old else o for o in observations]
                updated[update.entityName] = {**current, "observations": list(dict.fromkeys(replaced))}
                superseded = tx.notes.get(entity_key(update.entityName), {}).get("superseded", [])
                tx.note(entity_key(update.entityName), superseded=[*superseded, {"old": update.old, "new": update.new}])
            if problems:
                raise NotFoundError("Nothing was updated: " + " ".join(problems))
            self._upsert_entities(tx, updated.values())
        return UpdatedObservations(updated=list(updates))

    def _require_plain(self, names: Iterable[str], what: str) -> None:
        lessons = [n for n in names if self.state.home(n, MEMORY) != MEMORY]
        if lessons:
            raise ConflictError(f"{', '.join(lessons)}: lessons cannot be {what}; only plain entities can.")

    def rename_entity(self, name: str, new_name: str) -> RenamedEntity:
        with self.store.transaction(operation="rename_entity") as tx:
            if name not in self.state.entities:
                raise self._missing_entity(name)
            if new_name in self.state.entities:
                raise ConflictError(
                    f"Cannot rename {name} to {new_name}: an entity named {new_name} exists. "
                    "merge_entities joins two entities into one."
                )
            self._require_plain([name], "renamed")
            tx.delete(MEMORY, entity_key(name))
            tx.note(entity_key(name), movedTo=new_name)
            tx.upsert(MEMORY, {**self.state.entities[name], "name": new_name})
            moved = self._move_relations(tx, {name: new_name})
        return RenamedEntity(name=name, newName=new_name, relationsUpdated=moved[0])

    def _move_relations(self, tx: Transaction, renamed: dict[str, str]) -> tuple[int, int]:
        """Point every relation touching a renamed entity at its new name; returns (moved, dropped): a relation
        that becomes a self-relation, or one that already exists, is dropped."""
        moved = dropped = 0
        placed: set[RelationKey] = set()
        for key in self.state.relations_touching(renamed):
            tx.delete(MEMORY, relation_key(*key))
            new = (renamed.get(key[0], key[0]), renamed.get(key[1], key[1]), key[2])
            if (new[0] == new[1] and key[0] != key[1]) or new in placed or new in self.state.relations:
                dropped += 1
                continue
            placed.add(new)
            tx.upsert(MEMORY, {"type": "relation", **relation_view(new)})
            moved += 1
        return moved, dropped

    def merge_entities(self, names: Sequence[str], into: str) -> MergedEntities:
        with self.store.transaction(operation="merge_entities") as tx:
            missing = [n for n in dict.fromkeys(names) if n not in self.state.entities]
            if missing:
                raise NotFoundError("Nothing was merged: " + " ".join(str(self._missing_entity(n)) for n in missing))
            others = [n for n in dict.fromkeys(names) if n != into]
            self._require_plain([*others, into], "merged")
            first = self.state.entities[names[0]]
            target = self.state.entities.get(into) or {
                "type": "entity",
                "name": into,
                "entityType": first["entityType"],
                "observations": [],
            }
            observations = [*target["observations"]]
            for name in others:
                observations.extend(self.state.entities[name]["observations"])
                tx.delete(MEMORY, entity_key(name))
                tx.note(entity_key(name), movedTo=into)
            record = {**target, "observations": list(dict.fromkeys(observations))}
            tx.upsert(MEMORY, record)
            moved, dropped = self._move_relations(tx, dict.fromkeys(others, into))
        return MergedEntities(
            into=Entity.model_construct(**entity_view(record)),
            merged=others,
            relationsMoved=moved,
            relationsDropped=dropped,
        )

    # -- bulk: import and export -------------------------------------------------------------------------
    def import_entities(self, records: Sequence[dict[str, Any]], summary: ImportSummary, batch: int = 500) -> None:
        """Merge entity records in, a batch per transaction (decided and committed under the lock): a new name is
        created with its observations once each; a name already stored, or seen twice, keeps the union of the
        observations (the first copy's other fields)."""
        for start in range(0, len(records), batch):
            with self.store.transaction() as tx:
                pending: dict[str, dict[str, Any]] = {}
                for record in records[start : start + batch]:
                    name = record["name"]
                    home = self.state.home(name, MEMORY)
                    if home != MEMORY:
                        summary.problems.append(f"entity {name!r} skipped: the name is used by a lesson")
                        continue
                    current = pending.get(name) or self.state.entities.get(name)
                    merged = merge_records(current, record) if current is not None else deduplicated(record)
                    if current is None:
                        summary.entities += 1
                    elif merged["observations"] != current["observations"]:
                        summary.merged += 1
                    else:
                        summary.duplicates += 1
                    pending[name] = merged
                for record in pending.values():
                    tx.upsert(MEMORY, record)
            summary.progress(min(start + batch, len(records)))

    def import_relations(self, records: Sequence[dict[str, Any]], summary: ImportSummary, batch: int = 500) -> None:
        """Add relation records, a batch per transaction; existing ones are skipped, and so (reported) are
        relations whose ends do not exist, as create_relations refuses them."""
        for start in range(0, len(records), batch):
            with self.store.transaction() as tx:
                seen: set[RelationKey] = set()
                for record in records[start : start + batch]:
                    key = (record["from"], record["to"], record["relationType"])
                    missing = [end for end in key[:2] if end not in self.state.entities]
                    if missing:
                        summary.dangling += 1
                        ends = ", ".join(map(repr, missing))
                        summary.problems.append(f"relation {key[0]!r} -{key[2]}-> {key[1]!r} skipped: no entity {ends}")
                    elif key in self.state.relations or key in seen:
                        summary.duplicates += 1
                    else:
                        seen.add(key)
                        summary.relations += 1
                        tx.upsert(MEMORY, {"type": "relation", **relation_view(key)})
            summary.progress(min(start + batch, len(records)))

    def export(self) -> ExportedGraph:
        """Every record, in creation order: plain entities, lessons (entities of the lesson collection), relations."""
        with self.store.reading():
            state = self.state
            names = sorted(state.entities, key=state.ordinal)
            return ExportedGraph(
                entities=[state.entities[n] for n in names if state.home(n) == MEMORY],
                lessons=[state.entities[n] for n in names if state.home(n) == LESSONS],
                relations=[{"type": "relation", **relation_view(key)} for key in state.relations],
            )

    # -- reads -------------------------------------------------------------------------------------------
    def prepare(self) -> None:
        """Read what any search needs before the memory is loaded (the thesaurus of the ranked tiers): the server
        calls it as its load starts, so a first search answered while a database loads does not pay for it."""
        prepare()

    def warm_up(self, slice_size: int = 2000) -> None:
        """Build the search index now rather than on the first search (the server calls it after loading),
        in slices, so tool calls arriving meanwhile wait for one slice at most, not the whole index."""
        self.prepare()
        more = True
        while more:
            with self.store.reading():
                index = self.state.index
                if index.warm:
                    break
                more = index.index_some(slice_size)
                if not more:
                    # A snapshot saved before the index was built (a server closed within a minute of its first
                    # start at 1M) left it pending: without this, every restart built it again (10 s at 1M).
                    self.store.snapshot_outdated()

    def read_graph(self) -> KnowledgeGraph:
        with self.store.reading():
            state = self.state
            return self._respond(list(state.entities), all_relations=True)

    def search_nodes(self, query: str) -> KnowledgeGraph:
        """The reference's substring matches first, then entities ranked by words, spelling and one hop (see
        search.py); results carry no score, as the official output schema has none."""
        check_query(query)
        early = self._while_loading(partial(self._search_while_loading, query))
        if early is not None:
            return early
        # Outside the store's hold: the model may still be loading, and only this search should wait for it.
        meaning: list[tuple[str, float]] = []
        if self.semantic is not None and query.strip():
            self.store.open()  # the index hears of every entity before it is asked
            meaning = self.semantic.search(query)
        with self.store.reading():
            state = self.state
            first, ranked = state.index.search_tiers(query, partial(neighbours, state), state.ordinal)
            found = [(name, similarity) for name, similarity in meaning if name in state.entities]
            return self._respond(fuse(first, ranked, found), all_relations=False, query=query)

    def open_nodes(self, names: Sequence[str]) -> KnowledgeGraph:
        early = self._while_loading(partial(self._open_while_loading, names))
        if early is not None:
            return early
        with self.store.reading():
            found = [n for n in dict.fromkeys(names) if n in self.state.entities]
            return self._respond(found, all_relations=False)

    # -- reads while the store loads -------------------------------------------------------------------------
    def _while_loading(self, read: Callable[[ReadsWhileLoading], KnowledgeGraph | None]) -> KnowledgeGraph | None:
        """The answer from the storage itself while a load is under way (a database's indexes, the files' bytes),
        or None: then the call waits for the load.

        Trigger: a large memory loads for many seconds after a start (a database's; the files' first start, 45 s
        at a million entities). Why: a client's first search should not wait for all of it. Outcome: the same
        rules (matching, order, cut, relations) applied to just the entities the storage finds holding the query,
        so a search has the loaded server's substring matches, and differs only in what needs the whole graph:
        word scores (which order matches after the name rules) weigh words against the entities found, and the
        ranked entities that do not hold the query are left out. A search with no substring match waits for the
        load."""
        reads = self.store.reads_while_loading()
        if reads is None:
            return None
        try:
            with reads.answering():
                return read(reads)
        except StorageError as exc:
            log.info("answering after the load instead: %s", exc)
            return None

    def _search_while_loading(self, query: str, reads: ReadsWhileLoading) -> KnowledgeGraph | None:
        fragments = narrowing_fragments(query)
        if not fragments or FIELD_SEPARATOR in query:
            return None  # nothing the database can narrow with: a scan of every entity is the load's work
        counted: Matched | None = None
        phrase, words, _ = substring_words(query)
        if phrase.isascii() and (len(words) > 1 or words == [phrase]):
            # ASCII words, where the database's test is the substring rule itself (every word held; one word held
            # as it is): it sends the entities that lead by name, and counts the rest (a broad query's answer is
            # cut anyway). One word with spaces around it must be found whole inside one field: not a test the
            # database's joined text can make.
            total, touching, found = reads.leading_matches(words, phrase, LOADING_LEADING)
            if total > len({record["name"] for _, record in found}):  # (a name two collections hold is one entity)
                counted = Matched(total, touching)
        else:
            matching = reads.matching(fragments, LOADING_MATCH_LIMIT)
            if matching is None:
                return None
            found = matching
        # A shared lesson this project hides behind an entity of its own name holds the words, the entity may not:
        # the entity is heard too, so the state hides the lesson as a loaded one does.
        hidden_by = [record["name"] for collection, record in found if collection == LESSONS]
        if hidden_by:
            found = [*found, *((c, record) for c, record in reads.entities(hidden_by) if c != LESSONS)]
        state = GraphState.of(found, [])
        state.index.index_some(len(found))
        first, _ = state.index.search_tiers(query, lambda name: [], state.ordinal)
        if not first:
            return None  # what ranks without holding the query is found among all the words: the load's work
        # Relations only for the entities an answer can hold, by `_respond`'s rule: those whose records alone fit
        # the response budget, one too large for any response cut to half of what is left, and the first ordinary
        # one that does not fit, which ends it; the database counts those of the rest.
        whole = budget = self.max_response_chars - ENVELOPE_CHARS
        shown: list[str] = []
        for name in first[:LOADING_LEADING]:
            shown.append(name)
            size = json_size(state.entities.view(name))
            if size <= budget:
                budget -= size
                continue
            if _ends_the_read(len(shown) > 1, size, whole):
                break
            budget -= budget // 2
        for collection, record in reads.relations_touching(shown):
            state.records_changed(collection, [], [record])
        if counted is None and len(shown) < len(first):
            counted = Matched(len(first), partial(reads.count_relations_touching, first))
        return self._respond(shown, all_relations=False, state=state, matched=counted, query=query)

    def _open_while_loading(self, names: Sequence[str], reads: ReadsWhileLoading) -> KnowledgeGraph:
        wanted = list(dict.fromkeys(names))
        found = reads.entities(wanted)
        state = GraphState.of(found, reads.relations_touching([record["name"] for _, record in found]))
        return self._respond([n for n in wanted if n in state.entities], all_relations=False, state=state)

    # -- browsing ----------------------------------------------------------------------------------------------
    def list_entities(self, entity_type: str | None, cursor: str | None, limit: int) -> EntityPage:
        """A page of entities in name order (code point order, like Python's sort), after the cursor's name.

        The cursor names the last entity returned rather than an offset, so a page stays right while others
        create or delete entities: nothing is skipped or repeated that was there all along."""
        after = decode_cursor(cursor)
        with self.store.reading():
            entities = self.state.entities
            matching = [n for n in entities if entity_type is None or entities.entity_type(n) == entity_type]
            later = (n for n in matching if after is None or n > after)
            page = heapq.nsmallest(limit + 1, later)
            budget, used = self.max_response_chars - ENVELOPE_CHARS, 0
            rows: list[EntitySummary] = []
            for name in page[:limit]:
                record = entities[name]
                row = EntitySummary(
                    name=name,
                    entityType=record["entityType"],
                    observationCount=len(record["observations"]),
                    lastChanged=self.last_change(name),
                )
                used += json_size(row.model_dump(exclude_none=True))  # (escapes too: a control character is 6)
                if rows and used > budget:
                    break
                rows.append(row)
            more = len(rows) < len(page)
            next_cursor = encode_cursor(rows[-1].name) if more and rows else None
            return EntityPage(entities=rows, nextCursor=next_cursor, total=len(matching))

    def get_neighbors(self, name: str, depth: int, relation_type: str | None, limit: int) -> Neighborhood:
        """Entities within `depth` relations of `name` (following relations either way, of one type if given),
        nearest first and then best connected, and the relations among them."""
        with self.store.reading():
            state = self.state
            if name not in state.entities:
                raise self._missing_entity(name)
            found = _within(state, name, depth, relation_type)
            ranked = sorted(found, key=lambda n: (found[n], -state.by_node.degree(n), state.ordinal(n)))
            kept, loops, cut = _neighbours_within(
                name, ranked[:limit], found, state, relation_type, self.max_response_chars - ENVELOPE_CHARS
            )
            among = set(kept)
            keys = [
                k
                for k in state.relations_touching(kept)
                if k[0] in among
                and k[1] in among
                and (relation_type is None or k[2] == relation_type)
                and (k[0] != name or k[1] != name or k in loops)
            ]
            neighbors = [
                Neighbor(**state.entities.view(n), depth=found[n], degree=state.by_node.degree(n)) for n in kept[1:]
            ]
            for neighbor in neighbors:
                if neighbor.name in cut:
                    neighbor.observationCount = len(neighbor.observations)
                    neighbor.observations = cut[neighbor.name]
            return Neighborhood(
                name=name,
                entities=neighbors,
                relations=[relation_model(k) for k in keys],
                totalEntities=len(found),
                truncated=len(neighbors) < len(found) or bool(cut),
            )

    def graph_summary(self, top: int = 10) -> GraphSummary:
        """Counts by entity type and relation type, and the most connected entities; the types, most common first,
        as many as fit the response budget (assistants coin types freely: 1,800 made an answer past it)."""
        with self.store.reading():
            state = self.state
            types = Counter(map(state.entities.entity_type, state.entities))
            relation_types = Counter(state.relations.types())
            degree = {n: state.by_node.degree(n) for n in state.by_node if n in state.entities}
            busiest = heapq.nsmallest(top, degree, key=lambda n: (-degree[n], state.ordinal(n)))
            connected = [
                ConnectedEntity(name=n, entityType=state.entities.entity_type(n), degree=degree[n]) for n in busiest
            ]
            room = self.max_response_chars - ENVELOPE_CHARS - json_size([c.model_dump() for c in connected])
            entity_types = _counts_within(types.most_common(), room // 2)
            relation_types_kept = _counts_within(relation_types.most_common(), room - _size_of(entity_types))
            left_out = len(types) - len(entity_types) + len(relation_types) - len(relation_types_kept)
            return GraphSummary(
                entities=len(state.entities),
                relations=len(state.relations),
                entityTypes=entity_types,
                relationTypes=relation_types_kept,
                mostConnected=connected,
                typesLeftOut=left_out or None,
            )

    def _respond(
        self,
        names: Sequence[str],
        all_relations: bool,
        state: GraphState | None = None,
        matched: Matched | None = None,
        query: str | None = None,
    ) -> KnowledgeGraph:
        """Entities in the given order with the relations touching them, cut to the response budget.

        Each entity is taken together with its relations not yet taken, so a cut result is still a connected
        piece of the graph (never every entity and no relation); room is kept for the envelope and the notice.
        `matched` says how many matched when `names` are only the leading ones (a search while loading).
        """
        state = state or self.state
        budget = self.max_response_chars - ENVELOPE_CHARS
        used = 0
        entities: list[Entity] = []
        taken: dict[RelationKey, int] = {}  # -> its creation ordinal
        cut_entities: list[CutEntity] = []
        for place, name in enumerate(names):
            view = state.entities.view(name)
            touching = {k: o for k, o in state.touching_with_ordinals((name,)).items() if k not in taken}
            relations_cost = sum(json_size(relation_view(k)) for k in touching)
            cost = json_size(view) + relations_cost
            if used + cost > budget:
                if _ends_the_read(bool(entities), cost, budget):
                    break
                # The first entity, or one too large for any response (the user's own, grown by a note at every
                # chat; a hub, the user who knows two thousand people), comes with what fits: else every read of
                # it answered nothing at all. With half the room left when more follow, so that a read of the
                # whole graph still shows the rest.
                notice = _cut_notice_size(name)
                room = budget - used - notice
                picked = None
                if place + 1 < (len(names) if matched is None else max(len(names), matched.entities)):
                    picked = _cut_to_fit(view, touching, min(room, (budget - used) // 2 - notice), query)
                picked = picked or _cut_to_fit(view, touching, room, query)
                if picked is None:
                    break
                shown, kept, size = picked
                cut_entities.append(
                    CutEntity(
                        name=name,
                        observations=len(view["observations"]),
                        returnedObservations=len(shown),
                        relations=len(touching),
                        returnedRelations=len(kept),
                    )
                )
                entities.append(Entity.model_construct(**{**view, "observations": shown}))
                taken.update((key, touching[key]) for key in kept)
                used += size + notice
                continue
            used += cost
            entities.append(Entity.model_construct(**view))
            taken.update(touching)
        cut = bool(cut_entities) or len(entities) < (len(names) if matched is None else matched.entities)
        keys = sorted(taken, key=taken.__getitem__)
        if all_relations and not cut:
            # read_graph also returns relations whose ends are missing (official files can hold them), as many
            # as fit, with the ones taken, in creation order (the order the relations are held in).
            keys = []
            for key in state.relations:
                if key in taken:
                    keys.append(key)
                elif not cut:
                    used += json_size(relation_view(key))
                    cut = used > budget
                    if not cut:
                        keys.append(key)
        truncated = None
        if cut:
            if matched is not None:
                matching = matched.relations()
            else:
                matching = len(state.relations) if all_relations else state.count_relations_touching(names)
            truncated = Truncation(
                totalEntities=len(names) if matched is None else matched.entities,
                totalRelations=matching,
                returnedEntities=len(entities),
                returnedRelations=len(keys),
                maxResponseChars=self.max_response_chars,
                hint=TRUNCATION_HINT + (CUT_ENTITY_HINT if cut_entities else ""),
                cutEntities=cut_entities or None,
            )
        return KnowledgeGraph(entities=entities, relations=[relation_model(k) for k in keys], truncated=truncated)


def neighbours(state: GraphState, name: str) -> list[tuple[str, str]]:
    """(the other end, relation type) of every relation touching `name` whose ends both exist, in creation order."""
    keys = state.relations_touching((name,))
    return [(k[1] if k[0] == name else k[0], k[2]) for k in keys if k[0] in state.entities and k[1] in state.entities]


def encode_cursor(name: str) -> str:
    """An opaque list_entities cursor: the last name returned (so it survives other writers)."""
    return base64.urlsafe_b64encode(json.dumps({"after": name}).encode("utf-8")).decode("ascii")


def _counts_within(counts: list[tuple[str, int]], room: int) -> list[TypeCount]:
    """The leading (type, count) pairs whose answer fits `room` characters."""
    kept: list[TypeCount] = []
    used = 0
    for kind, count in counts:
        used += json_size({"type": kind, "count": count})
        if used > room:
            break
        kept.append(TypeCount(type=kind, count=count))
    return kept


def _size_of(counts: list[TypeCount]) -> int:
    return sum(json_size(c.model_dump()) for c in counts)


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        after = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))["after"]
    except (ValueError, KeyError, TypeError, UnicodeError, RecursionError) as exc:
        raise InvalidInputError(
            "cursor: not a cursor list_entities returned; pass its nextCursor unchanged, or omit cursor for the "
            "first page"
        ) from exc
    if not isinstance(after, str):
        raise InvalidInputError("cursor: not a cursor list_entities returned; pass its nextCursor unchanged")
    return after


def _within(state: GraphState, start: str, depth: int, relation_type: str | None) -> dict[str, int]:
    """Entity -> its distance from `start` (1..depth), breadth first over relations in either direction."""
    found: dict[str, int] = {}
    frontier = [start]
    for level in range(1, depth + 1):
        following: list[str] = []
        for name in frontier:
            for key in state.by_node.get(name, ()):
                if relation_type is not None and key[2] != relation_type:
                    continue
                other = key[1] if key[0] == name else key[0]
                if other != start and other not in found and other in state.entities:
                    found[other] = level
                    following.append(other)
        frontier = following
    return found


def _ends_the_read(taken_any: bool, cost: int, budget: int) -> bool:
    """Whether an entity that does not fit what is left of the response ends it (an ordinary one at the edge, the
    cut as ever), or comes cut (`_cut_to_fit`): the first of a read, or one larger than any response."""
    return taken_any and cost <= budget


def _cut_to_fit(
    view: dict[str, Any], touching: Mapping[RelationKey, int], room: int, query: str | None
) -> tuple[list[str], list[RelationKey], int] | None:
    """What of an entity too large for the response fits in `room` characters: its observations and its relations
    (new to the response), each given the room the other leaves, or half when both want more, and the characters
    they take. Observations keep their stored order and relations their creation order; chosen first among
    observations holding a word of the search (`query`), then newest first. None when not even its name and type
    fit."""
    observations: list[str] = view["observations"]
    room -= json_size({**view, "observations": []})
    if room < 0:
        return None
    words = [w for w in query.casefold().split() if len(w) > 1] if query else []
    observation_order = sorted(
        range(len(observations)), key=lambda i: (not any(w in observations[i].casefold() for w in words), -i)
    )
    observation_costs = {i: json_size(observations[i]) for i in observation_order}
    relation_order = sorted(touching, key=touching.__getitem__, reverse=True)
    relation_costs = {key: json_size(relation_view(key)) for key in relation_order}
    wanted_by_observations, wanted_by_relations = sum(observation_costs.values()), sum(relation_costs.values())
    if wanted_by_relations <= room // 2:
        observation_room = room - wanted_by_relations
    elif wanted_by_observations <= room // 2:
        observation_room = wanted_by_observations
    else:
        observation_room = room // 2
    shown = _taken_within(observation_order, observation_costs, observation_room)
    kept = _taken_within(relation_order, relation_costs, room - sum(observation_costs[i] for i in shown))
    kept_observations = [observations[i] for i in sorted(shown)]
    size = json_size({**view, "observations": kept_observations}) + sum(relation_costs[key] for key in kept)
    return kept_observations, sorted(kept, key=touching.__getitem__), size


def _cut_notice_size(name: str) -> int:
    """What a cut entity adds to the `truncated` notice beyond the envelope's room: its entry (its name again)
    and the hint's second sentence."""
    most = 10**12  # any count's digits
    entry = CutEntity(name=name, observations=most, returnedObservations=most, relations=most, returnedRelations=most)
    return json_size(entry.model_dump()) + len(CUT_ENTITY_HINT)


def _taken_within(order: list[T], costs: Mapping[T, int], room: int) -> list[T]:
    """The items, taken in `order`, that fit in `room` (an item too large is passed over for smaller ones)."""
    chosen: list[T] = []
    for item in order:
        if costs[item] <= room:
            chosen.append(item)
            room -= costs[item]
    return chosen


def _neighbours_within(
    name: str,
    ranked: list[str],
    depth_of: Mapping[str, int],
    state: GraphState,
    relation_type: str | None,
    budget: int,
) -> tuple[list[str], set[RelationKey], dict[str, list[str]]]:
    """`name` and the leading neighbours that fit the response budget with the relations among them all, the
    centre's relations to itself that are returned, and the observations shown of a neighbour too large for any
    answer (its newest that fit half the room left, as a read cuts an entity: the user's own entity, holding most of
    the memory, was never anyone's neighbour). Each neighbour is charged its relations to those taken before it
    (the relations a neighbourhood returns), not all of them: charging a hub's whole degree left a user who knows
    2,000 people with no neighbour at all."""
    kept, among = [name], {name}
    cut: dict[str, list[str]] = {}
    # The centre is returned by its name, and with its relations to itself: as many of those as half the room holds.
    centre = json_size({"name": name})
    loop_costs = {
        key: json_size(relation_view(key))
        for key in state.relations_touching([name])
        if key[0] == key[1] == name and (relation_type is None or key[2] == relation_type)
    }
    loops = _taken_within(list(loop_costs), loop_costs, (budget - centre) // 2)
    used = centre + sum(loop_costs[key] for key in loops)
    for neighbour in ranked:
        view = state.entities.view(neighbour)
        placed = {"depth": depth_of[neighbour], "degree": state.by_node.degree(neighbour)}
        links = 0
        for key in state.relations_touching([neighbour]):
            other = key[1] if key[0] == neighbour else key[0]
            if (other in among or other == neighbour) and (relation_type is None or key[2] == relation_type):
                links += json_size(relation_view(key))
        cost = json_size({**view, **placed}) + links
        if used + cost > budget:
            if cost <= budget - centre:
                break
            # Larger than any answer: its newest observations that fit half of what is left, the other half for the
            # neighbours after it (said by `truncated` and `observationCount`), or passed over when not even its
            # name, type and relations fit.
            observations: list[str] = view["observations"]
            count = {"observationCount": len(observations)}
            bare = json_size({**view, **placed, **count, "observations": []}) + links
            if used + bare > budget:
                continue
            costs = {i: json_size(observations[i]) for i in range(len(observations))}
            shown = _taken_within(list(reversed(range(len(observations)))), costs, (budget - used - bare) // 2)
            cut[neighbour] = [observations[i] for i in sorted(shown)]
            cost = bare + sum(costs[i] for i in shown)
        used += cost
        kept.append(neighbour)
        among.add(neighbour)
    return kept, set(loops), cut


def relation_model(key: RelationKey) -> Relation:
    """A Relation from a stored (trusted) key, without revalidating it."""
    return Relation.model_construct(from_=key[0], to=key[1], relationType=key[2])
