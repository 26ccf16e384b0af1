"""History: every change dated and kept, and the tools that use it (get_history, restore_entity).

- **Event**: one change of one record, recorded by the store in the same commit as the change (see
  storage/store.py): `id` (time-ordered), `at` (UTC ISO 8601), `op` (the tool or service method), `actor`,
  `collection`, `key` (the record's identity) and `before`/`after` (the full records, null when absent). A
  rename or merge notes on the deleted entity's event where it went (`movedTo`); update_observations notes
  the texts it superseded (`superseded`).
- **HistoryIndex**: event keys by entity name (an entity's own events and those of relations touching it),
  fed by the store's history notifications, so get_history for one entity reads only that entity's events.

The graph stays free of history: replaying every event's `after` in id order rebuilds the current records.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field, StrictStr

from memory_graph.errors import ConflictError, InvalidInputError, NotFoundError
from memory_graph.model import ENVELOPE_CHARS, Entity, EntityName, Relation, json_size, relation_view
from memory_graph.search import without_accents
from memory_graph.storage import HISTORY, Key, StoreEngine

if TYPE_CHECKING:
    from memory_graph.graph import GraphService

MAX_HISTORY_LIMIT = 1000


# -- the tools' models ----------------------------------------------------------------------------------------
class ObservationUpdate(BaseModel):
    entityName: EntityName = Field(description="The entity holding the observation")
    old: StrictStr = Field(description="The observation's current text, exactly")
    new: StrictStr = Field(min_length=1, description="The text that replaces it (same position)")


class UpdatedObservations(BaseModel):
    """The observations replaced; the old texts stay in the history (get_history) as superseded."""

    updated: list[ObservationUpdate]


class RenamedEntity(BaseModel):
    name: str
    newName: str
    relationsUpdated: int = Field(description="Relations that now point at the new name")


class MergedEntities(BaseModel):
    into: Entity = Field(description="The entity the others were merged into, as stored now")
    merged: list[str] = Field(description="The entities that were merged in and no longer exist")
    relationsMoved: int = Field(description="Relations moved to the merged entity")
    relationsDropped: int = Field(description="Relations dropped: duplicates, or now from the entity to itself")


class HistoryEvent(BaseModel):
    at: str = Field(description="When the change was made (UTC, ISO 8601)")
    op: str = Field(description="The tool or operation that made it")
    actor: str | None = None
    entity: str = Field(description="The entity changed, or the relation's source")
    kind: str = Field(description="entity, lesson or relation")
    before: dict[str, Any] | None = Field(default=None, description="The record before (absent: it did not exist)")
    after: dict[str, Any] | None = Field(default=None, description="The record after (absent: it was deleted)")
    movedTo: str | None = Field(default=None, description="Renamed or merged into this entity")
    superseded: list[dict[str, str]] | None = Field(
        default=None, description="Observations replaced by update_observations: old, new, and when old was stated"
    )
    observationsAdded: list[str] | None = Field(
        default=None, description="An edit's observations that `after` has and `before` had not"
    )
    observationsRemoved: list[str] | None = Field(
        default=None, description="An edit's observations that `before` had and `after` has not"
    )
    recordsOmitted: bool | None = Field(
        default=None,
        description="true: `before` and `after` were left out to fit the response budget; an edit's observations "
        "added and removed, when they fit, say what it changed (open_nodes shows the entity as it is now)",
    )


HISTORY_TRUNCATION_HINT = (
    "The events were cut to fit the response budget, newest first; a change of a large record may come without "
    "its records (recordsOmitted). Ask for fewer (limit), one entity (name), later ones (since), use open_nodes for "
    "an entity as it is now, or raise MEMORY_MAX_RESPONSE_CHARS."
)


class HistoryTruncation(BaseModel):
    """Present only when the events were cut to fit the response budget."""

    returnedEvents: int
    withoutRecords: int = Field(description="Events returned without their records (recordsOmitted)")
    maxResponseChars: int
    hint: str


class History(BaseModel):
    events: list[HistoryEvent] = Field(description="Newest first")
    total: int = Field(description="Events matching, before the limit")
    truncated: HistoryTruncation | None = None


class RestoredEntity(BaseModel):
    entity: Entity
    asOf: str = Field(description="The moment whose state was restored (UTC, ISO 8601)")
    relations: list[Relation] = Field(description="Relations restored with it")
    skippedRelations: list[Relation] = Field(description="Relations left out because their other end is gone")


Since = Annotated[str | None, Field(description="Only changes at or after this UTC ISO 8601 time")]


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MOVING_OPS = ("rename_entity", "merge_entities")  # the calls that write an entity under a new name
LAST_MILLISECOND = datetime.max.replace(microsecond=999_000, tzinfo=UTC)


def parse_moment(raw: str, field: str) -> datetime:
    """An ISO 8601 time; one without a zone is taken as UTC."""
    try:
        moment = datetime.fromisoformat(raw.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            f"{field}: not an ISO 8601 time (got {raw!r}); send e.g. 2026-12-01T08:00:00Z"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def id_prefix(moment: datetime) -> str:
    """The id prefix of events made at `moment`: ids start with the time in nanoseconds, zero-padded."""
    since_epoch = moment - EPOCH  # (whole numbers: a float of the seconds is off by a few hundred nanoseconds)
    return f"{(since_epoch.days * 86_400 + since_epoch.seconds) * 1_000_000_000 + since_epoch.microseconds * 1000:020d}"


def millisecond_after(moment: datetime) -> datetime:
    """The end of the millisecond `moment` falls in: events are shown to the millisecond (their `at`), so a moment
    copied from an event's `at` holds that event and whatever else was made within the same millisecond."""
    start = moment.replace(microsecond=moment.microsecond - moment.microsecond % 1000)
    return start + timedelta(milliseconds=1) if start < LAST_MILLISECOND else moment


def record_view(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: v for k, v in record.items() if k != "type"}


def ends(key: Key) -> tuple[str, ...]:
    """The entity names an event concerns: an entity's name, or a relation's two ends."""
    if key[0] == "entity":
        return (key[1],)
    if key[0] == "relation":
        return (key[1], key[2]) if key[1] != key[2] else (key[1],)
    return ()


def replay_history(store: StoreEngine) -> dict[str, dict[tuple[str, ...], dict[str, Any]]]:
    """The records that replaying every event from empty gives, by collection (the history's own check: it must
    equal what the files hold)."""
    replayed: dict[str, dict[tuple[str, ...], dict[str, Any]]] = {}
    for event in store.events():
        records = replayed.setdefault(event["collection"], {})
        if event["after"] is None:
            records.pop(tuple(event["key"]), None)
        else:
            records[tuple(event["key"])] = event["after"]
    for name in store.collections:
        replayed.setdefault(name, {})
    return replayed


class HistoryIndex:
    """Event keys by entity name, in id order, and which names were renamed or merged into which."""

    def __init__(self) -> None:
        self.by_entity: dict[str, list[Key]] = {}
        # new name -> old name -> the id of the newest event moving the old name into it (a later entity of the old
        # name is another entity: its events are not the new name's past)
        self.moved_into: dict[str, dict[str, str]] = {}
        self.renamed_into: dict[str, dict[str, str]] = {}  # the same, of renames only (one entity, its old states)
        # old name -> (the moving event's id, the name it moved to), in id order: where an entity went
        self.moves_from: dict[str, list[tuple[str, str]]] = {}
        self.ordered: list[Key] = []  # every event, in id order (whole-memory history)
        # Each name's newest event and its `at`: list_entities' lastChanged without reading an event's line (an
        # older shard's lines are read back only when asked for, see Collection.load_deferred).
        self.newest: dict[str, tuple[Key, str]] = {}
        self._names: dict[Key, tuple[str, ...]] = {}

    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        if collection != HISTORY:
            return
        if removed:
            self._forget(set(removed))
        for event in upserted:
            key: Key = ("event", event["id"])
            if key in self._names:
                # An event read again (its shard changed on disk: a hand edit): its names' newest time follows.
                at = event.get("at")
                for name in self._names[key]:
                    if self.newest.get(name, (None,))[0] == key and isinstance(at, str):
                        self.newest[name] = (key, at)
                continue
            names = ends(tuple(event["key"]))
            self._names[key] = names
            at = event.get("at")
            for name in names:
                bisect.insort(self.by_entity.setdefault(name, []), key)
                newest = self.newest.get(name)
                if isinstance(at, str) and (newest is None or newest[0] < key):
                    self.newest[name] = (key, at)
            bisect.insort(self.ordered, key)
            if isinstance(event.get("movedTo"), str):
                old, new = event["key"][1], event["movedTo"]
                for table in (
                    (self.moved_into, self.renamed_into) if event.get("op") == "rename_entity" else (self.moved_into,)
                ):
                    moves = table.setdefault(new, {})
                    moves[old] = max(moves.get(old, ""), event["id"])
                bisect.insort(self.moves_from.setdefault(old, []), (event["id"], new))

    def _forget(self, gone: set[Key]) -> None:
        """Pruned events (compact): rebuilt lists, as pruning removes a large share at once."""
        for key in gone:
            for name in self._names.pop(key, ()):
                self.by_entity[name] = [k for k in self.by_entity.get(name, []) if k not in gone]
                if self.newest.get(name, (None,))[0] == key:
                    del self.newest[name]
        self.ordered = [k for k in self.ordered if k not in gone]

    def names_for(self, name: str, renames_only: bool = False) -> dict[str, str | None]:
        """The name and every name renamed or merged into it (`renames_only`: renamed), transitively, each with the
        id of the last event that is part of this entity's past (None: all of them): an old name's events up to
        its move."""
        found: dict[str, str | None] = {name: None}
        pending = [name]
        moves = self.renamed_into if renames_only else self.moved_into
        while pending:
            newer = pending.pop()
            for old, moved in moves.get(newer, {}).items():
                then = found[newer]
                cutoff = moved if then is None else min(moved, then)
                if old not in found or (found[old] is not None and cutoff > str(found[old])):
                    found[old] = cutoff
                    pending.append(old)
        return found

    def keys_for(self, names: Mapping[str, str | None] | Iterable[str]) -> list[Key]:
        """The event keys of these names (with `names_for`'s cutoffs, when given), in id order."""
        cutoffs = names if isinstance(names, Mapping) else dict.fromkeys(names)
        keys: set[Key] = set()
        for name, cutoff in cutoffs.items():
            held = self.by_entity.get(name, ())
            keys.update(held if cutoff is None else (key for key in held if key[1] <= cutoff))
        return sorted(keys)


@dataclass
class HistorySpan:
    events: int
    oldest: str | None
    newest: str | None


class HistoryService:
    """get_history and restore_entity, on the store's change events."""

    def __init__(self, store: StoreEngine, graph: GraphService) -> None:
        self.store = store
        self.graph = graph
        self.index = HistoryIndex()
        store.add_history_listener(self.index)

    def _require_history(self) -> None:
        if not self.store.keeps_history:
            raise InvalidInputError("this memory is opened without a change history")

    def get_history(self, name: str | None = None, since: str | None = None, limit: int = 50) -> History:
        self._require_history()
        cutoff = id_prefix(parse_moment(since, "since")) if since else ""
        with self.store.reading():
            self.store.load_history()
            keys = self.index.keys_for(self.index.names_for(name)) if name is not None else self.index.ordered
            start = bisect.bisect_left(keys, ("event", cutoff)) if cutoff else 0
            chosen = keys[start:]
            newest = [self.store.event(k) for k in reversed(chosen[-limit:])] if limit else []
            views = [self._view(e) for e in newest]
        events, truncated = self._fit(views)
        return History(events=events, total=len(chosen), truncated=truncated)

    def _fit(self, views: list[HistoryEvent]) -> tuple[list[HistoryEvent], HistoryTruncation | None]:
        """The events, newest first, within the response budget: each whole while it fits, else without its records
        (an edit keeps its observations added and removed while they fit; a create or a delete is told by its op),
        else the cut. Every event holds its record before and after: five edits of an entity of 2,000
        observations were 2.7 MB, and a large entity's creation alone could hide every event older than it."""
        budget = self.graph.max_response_chars - ENVELOPE_CHARS
        fitted: list[HistoryEvent] = []
        omitted = 0

        def size(view: HistoryEvent) -> int:
            return json_size(view.model_dump(mode="json", exclude_none=True))

        for view in views:
            cost = size(view)
            if cost > budget and (view.before is not None or view.after is not None):
                view = view.model_copy(update={"before": None, "after": None, "recordsOmitted": True})
                cost = size(view)
                if cost > budget:
                    view = view.model_copy(update={"observationsAdded": None, "observationsRemoved": None})
                    cost = size(view)
            if cost > budget:
                break
            omitted += bool(view.recordsOmitted)
            budget -= cost
            fitted.append(view)
        if len(fitted) == len(views) and not omitted:
            return fitted, None
        return fitted, HistoryTruncation(
            returnedEvents=len(fitted),
            withoutRecords=omitted,
            maxResponseChars=self.graph.max_response_chars,
            hint=HISTORY_TRUNCATION_HINT,
        )

    def _view(self, event: dict[str, Any]) -> HistoryEvent:
        key = event["key"]
        kind = "relation" if key[0] == "relation" else ("lesson" if event["collection"] != "memory" else "entity")
        superseded = event.get("superseded")
        if superseded:
            superseded = [
                {**item, "statedAt": self._stated_at(key[1], item["old"], event["id"])} for item in superseded
            ]
        added, removed = _observation_changes(event["before"], event["after"])
        return HistoryEvent(
            at=event["at"],
            op=event["op"],
            actor=event.get("actor"),
            entity=key[1],
            kind=kind,
            before=record_view(event["before"]),
            after=record_view(event["after"]),
            movedTo=event.get("movedTo"),
            superseded=superseded or None,
            observationsAdded=added or None,
            observationsRemoved=removed or None,
        )

    def _stated_at(self, name: str, text: str, before_id: str) -> str:
        """When an observation text first appeared on the entity (the other date of a superseded fact), under any
        of its names: the record a rename or a merge made under a new name is not where its facts were stated."""
        for key in self.index.keys_for(self.index.names_for(name)):
            if key[1] >= before_id:
                break
            event = self.store.event(key)
            had = (event["before"] or {}).get("observations") or []
            has = (event["after"] or {}).get("observations") or []
            moved_here = event["before"] is None and event.get("op") in MOVING_OPS
            if event["key"][0] == "entity" and text in has and text not in had and not moved_here:
                return str(event["at"])
        return "unknown"

    def find_duplicates(self, limit: int = 50) -> Duplicates:
        with self.store.reading():
            entities = self.graph.state.entities
            return find_duplicates({name: entities.entity_type(name) for name in entities}, limit)

    def last_change(self, name: str) -> str | None:
        """When an entity (under this name) last changed, from its newest event; None without history (call it
        inside a store read)."""
        if not self.store.keeps_history:
            return None
        self.store.load_history()
        keys = self.index.by_entity.get(name)
        if not keys:
            return None
        newest = self.index.newest.get(name)
        if newest is not None and newest[0] == keys[-1]:
            return newest[1]
        at = self.store.event(keys[-1]).get("at")
        return at if isinstance(at, str) else None

    def span(self) -> HistorySpan:
        """How many changes are kept, and the dates of the oldest and the newest (`memory-graph stats`)."""
        if not self.store.keeps_history:
            return HistorySpan(0, None, None)
        with self.store.reading():
            self.store.load_history()
            ordered = self.index.ordered
            if not ordered:
                return HistorySpan(0, None, None)
            return HistorySpan(len(ordered), self.store.event(ordered[0])["at"], self.store.event(ordered[-1])["at"])

    # -- restore ---------------------------------------------------------------------------------------------
    def restore_entity(self, name: str, at: str | None = None) -> RestoredEntity:
        self._require_history()
        moment = parse_moment(at, "at") if at else None
        with self.store.transaction(operation="restore_entity") as tx:
            self.store.load_history()
            # At a moment, the entity's states under the names it was renamed from count too (a merged entity's do not:
            # they are another entity's).
            lineage = self.index.names_for(name, renames_only=True) if moment else {name: None}
            keys = self.index.keys_for(lineage)
            cutoff, event, names_then = self._state_event(name, lineage.keys(), keys, moment)
            record, collection = event["after"] if moment else event["before"], event["collection"]
            if record is None:
                raise NotFoundError(f"Entity with name {name} did not exist at {at}; get_history shows when it did.")
            home = self.graph.state.home(name, collection)
            if home != collection:
                raise ConflictError(f"{name} is now a {home} record; delete it before restoring the {collection} one.")
            record = {**record, "name": name}
            tx.upsert(collection, record)
            restored, skipped = self._relations_then(name, names_then, keys, cutoff)
            for relation in restored:
                tx.upsert("memory", relation)
        entity = Entity.model_construct(name=name, entityType=record["entityType"], observations=record["observations"])
        return RestoredEntity(
            entity=entity,
            asOf=event["at"] if moment is None else at or "",
            relations=[Relation.model_validate(relation_view(_triple(r))) for r in restored],
            skippedRelations=[Relation.model_validate(relation_view(_triple(r))) for r in skipped],
        )

    def _state_event(
        self, name: str, lineage: Set[str], keys: list[Key], moment: datetime | None
    ) -> tuple[str, dict[str, Any], Set[str]]:
        """The event that holds the state to restore, the id cutoff for the relations of that moment, and the names
        whose relations then are the entity's. `lineage`: the name and those it was renamed from, read when the
        name itself held nothing at the moment."""
        events = [self.store.event(k) for k in keys]
        own = [e for e in events if e["key"] == ["entity", name]]
        if moment is not None:
            cutoff = id_prefix(millisecond_after(moment))  # (an id of that instant is longer: it sorts after)
            then = [e for e in own if e["id"] < cutoff]
            if then and then[-1]["after"] is not None:
                return cutoff, then[-1], {name}
            # The name held nothing then: the entity it names now, under the name it had then (a rename's lineage;
            # a move-away ends a name, not the entity).
            states = [e for e in events if e["key"][0] == "entity" and e["key"][1] in lineage and not e.get("movedTo")]
            then = [e for e in states if e["id"] < cutoff] or then
            if not then:
                raise NotFoundError(f"Entity with name {name} has no history before {moment.isoformat()}.")
            return cutoff, then[-1], set(lineage)
        if name in self.graph.state.entities:
            raise ConflictError(
                f"Entity with name {name} exists; restore_entity brings back a deleted entity. "
                "Pass `at` to return it to an earlier state."
            )
        deletions = [e for e in own if e["after"] is None]
        if not deletions:
            raise NotFoundError(f"Entity with name {name} was never deleted (no history of it).")
        # The relations as they were just before the deleting call: ids of one commit share this prefix.
        return deletions[-1]["id"].rsplit("-", 1)[0], deletions[-1], {name}

    def _relations_then(
        self, name: str, lineage: Set[str], keys: list[Key], cutoff: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Relations touching `name` (or a name it was renamed from, `lineage`: given `name` now) that existed at the
        cutoff, split into restorable and other-end-gone."""
        latest: dict[tuple[str, ...], dict[str, Any] | None] = {}
        for key in keys:
            if key[1] >= cutoff:
                break
            event = self.store.event(key)
            if event["key"][0] == "relation":
                latest[tuple(event["key"])] = event["after"]
        restored, skipped = [], []
        renamed = (_renamed(r, lineage, name) for r in latest.values() if r)
        # (`keys` may hold an earlier name's events that are not the entity's then: only those touching it count.)
        then = {_triple(r): r for r in renamed if name in (r["from"], r["to"])}
        for record in then.values():
            other = record["to"] if record["from"] == name else record["from"]
            now = other if other == name else self._where_now(other, cutoff)
            if now is None:
                skipped.append(record)
                continue
            record = _renamed(record, {other}, now)  # (an end renamed or merged since: to the name it has now)
            if _triple(record) not in self.graph.state.relations:
                restored.append(record)
        return restored, skipped

    def _where_now(self, name: str, since: str) -> str | None:
        """The name an entity has now, following the renames and merges made after `since`; None if it is gone."""
        seen: set[str] = set()
        while name not in self.graph.state.entities:
            later = next((move for move in self.index.moves_from.get(name, ()) if move[0] > since), None)
            if later is None or name in seen:
                return None
            seen.add(name)
            since, name = later
        return name


def _renamed(relation: dict[str, Any], names: Set[str], name: str) -> dict[str, Any]:
    """A relation with each end among `names` (an entity's earlier names) given the name `name` it has now."""
    return {**relation, **{end: name for end in ("from", "to") if relation[end] in names}}


def _observation_changes(before: dict[str, Any] | None, after: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """An edit's observations added and removed, each in its record's order (none for a create or a delete: the
    record itself says it all)."""
    if before is None or after is None:
        return [], []
    had, has = before.get("observations"), after.get("observations")
    if not isinstance(had, list) or not isinstance(has, list):
        return [], []
    had = [o for o in had if isinstance(o, str)]  # (a history line edited by hand may hold anything)
    has = [o for o in has if isinstance(o, str)]
    had_set, has_set = set(had), set(has)
    return [o for o in has if o not in had_set], [o for o in had if o not in has_set]


def _triple(record: dict[str, Any]) -> tuple[str, str, str]:
    return (record["from"], record["to"], record["relationType"])


# -- find_duplicates: entities that look like the same thing --------------------------------------------------
class DuplicatePair(BaseModel):
    names: list[str] = Field(description="Two entities that look like the same thing")
    reason: str


class Duplicates(BaseModel):
    duplicates: list[DuplicatePair] = Field(
        description="Likely duplicates, most certain first; merge_entities joins them"
    )


def _folded_words(name: str) -> list[str]:
    """Lower case, no accents, no punctuation (inside a word too: "O'Brien", "e-mail", "Wi-Fi"), the last word
    singular (a name's plural is at its end: "Andreas Weber" is not "Andrea Weber"): "Zoë's Cafés" -> ["zoes",
    "cafe"]."""
    words = re.findall(r"\w+", _INSIDE_A_WORD.sub("", without_accents(name.casefold())))
    return [*words[:-1], _singular(words[-1])] if words else []


_INSIDE_A_WORD = re.compile(r"(?<=\w)[.'\u2019-](?=\w)")


def _singular(word: str) -> str:
    if len(word) <= 3:
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"  # companies
    if word.endswith("es") and word[:-2].endswith(("s", "x", "z", "ch", "sh")):
        return word[:-2]  # boxes, classes
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _initialled(a: list[str], b: list[str]) -> bool:
    """`J. Smith` and `John Smith`: same last words, and each first word an initial of the other's."""
    if len(a) != len(b) or len(a) < 2 or a[1:] != b[1:] or a[0] == b[0]:
        return False
    short, long = sorted((a[0], b[0]), key=len)
    return len(short) == 1 and long.startswith(short)


def find_duplicates(entity_types: Mapping[str, str], limit: int = 50) -> Duplicates:
    """Pairs of entities (name -> entityType) whose names differ only in case, accents, punctuation, plural or an
    initial."""
    by_folded: dict[tuple[str, ...], list[str]] = {}
    by_last: dict[tuple[str, str], list[str]] = {}
    for name, entity_type in entity_types.items():
        words = _folded_words(name)
        if not words:
            continue
        by_folded.setdefault(tuple(words), []).append(name)
        by_last.setdefault((words[-1], entity_type), []).append(name)
    found: list[DuplicatePair] = []
    for names in by_folded.values():
        for other in names[1:]:
            same_type = entity_types[names[0]] == entity_types[other]
            why = "same name but for case, accents, punctuation or plural"
            found.append(DuplicatePair(names=[names[0], other], reason=why + ("" if same_type else " (types differ)")))
    for (_, entity_type), names in by_last.items():
        if len(names) > 50:  # a common surname: pairwise checks would be quadratic and mostly noise
            continue
        for i, first in enumerate(names):
            for second in names[i + 1 :]:
                if _initialled(_folded_words(first), _folded_words(second)):
                    why = f"an initial of the same name, both of type {entity_type}"
                    found.append(DuplicatePair(names=[first, second], reason=why))
    return Duplicates(duplicates=found[:limit])
