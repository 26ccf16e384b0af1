"""GraphService: the nine knowledge-graph operations, with the reference's semantics and our fixes.

The service keeps the whole graph in memory (entities by name, relations by endpoint, a search index) and
keeps it equal to the files through the store's change notifications, whether the change is ours or another
process's. Each write validates everything first, then commits once: a failed call changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz, process

from memory_graph.errors import NotFoundError
from memory_graph.model import (
    AddedObservations,
    AddedObservationsResult,
    CreatedEntities,
    CreatedRelations,
    DeletionResult,
    Entity,
    KnowledgeGraph,
    ObservationAddition,
    ObservationDeletion,
    Relation,
    Truncation,
    entity_view,
    relation_view,
)
from memory_graph.search import SubstringIndex, match_tier
from memory_graph.storage import Key, Store, Transaction, entity_key, merge_records, relation_key

MEMORY = "memory"
LESSONS = "lesson"
RelationKey = tuple[str, str, str]
# What a cut response holds besides its entities and relations: the envelope and the `truncated` notice.
ENVELOPE_CHARS = 800
TRUNCATION_HINT = (
    "The result was cut to fit the response budget; the best matches come first, each with its relations. "
    "Narrow it with search_nodes (a more specific query) or open_nodes (exact names), or raise "
    "MEMORY_MAX_RESPONSE_CHARS."
)


def searchable_fields(record: dict[str, Any]) -> list[str]:
    """What search_nodes looks at: name, type, observations, and a lesson's error pattern."""
    fields = [record["name"], record["entityType"], *record["observations"]]
    pattern = record.get("errorPattern")
    if isinstance(pattern, dict):
        fields.extend(str(pattern.get(k) or "") for k in ("type", "message", "context"))
    return fields


def deduplicated(record: dict[str, Any]) -> dict[str, Any]:
    """An entity record as create_entities stores it: each observation once, in first-seen order."""
    return {**record, "observations": list(dict.fromkeys(record["observations"]))}


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


class GraphState:
    """The in-memory graph and its indexes, fed by the store (a `ChangeListener`)."""

    def __init__(self) -> None:
        self.entities: dict[str, dict[str, Any]] = {}
        self.home: dict[str, str] = {}
        self.relations: dict[RelationKey, int] = {}  # key -> creation ordinal
        self.by_node: dict[str, set[RelationKey]] = {}
        self.index = SubstringIndex()
        self._ordinal: dict[str, int] = {}
        self._next_ordinal = 0

    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        for key in removed:
            if key[0] == "relation":
                self._drop_relation((key[1], key[2], key[3]))
            elif self.home.get(key[1]) == collection:
                self._drop_entity(key[1])
        for record in upserted:
            if record["type"] == "relation":
                self._add_relation((record["from"], record["to"], record["relationType"]))
            else:
                name = record["name"]
                self.entities[name] = record
                self.home[name] = collection
                if name not in self._ordinal:
                    self._ordinal[name] = self._next_ordinal
                    self._next_ordinal += 1
                self.index.put(name, searchable_fields(record))

    def _drop_entity(self, name: str) -> None:
        del self.entities[name]
        del self.home[name]
        del self._ordinal[name]
        self.index.remove(name)

    def _add_relation(self, key: RelationKey) -> None:
        if key in self.relations:
            return
        self.relations[key] = self._next_ordinal
        self._next_ordinal += 1
        self.by_node.setdefault(key[0], set()).add(key)
        self.by_node.setdefault(key[1], set()).add(key)

    def _drop_relation(self, key: RelationKey) -> None:
        if key not in self.relations:
            return
        del self.relations[key]
        for end in (key[0], key[1]):
            touching = self.by_node.get(end)
            if touching is not None:
                touching.discard(key)
                if not touching:
                    del self.by_node[end]

    def ordinal(self, name: str) -> int:
        return self._ordinal[name]

    def relations_touching(self, names: Iterable[str]) -> list[RelationKey]:
        found: set[RelationKey] = set()
        for name in names:
            found.update(self.by_node.get(name, ()))
        return sorted(found, key=self.relations.__getitem__)  # creation order, like the reference


class GraphService:
    def __init__(self, store: Store, max_response_chars: int) -> None:
        self.store = store
        self.state = GraphState()
        self.max_response_chars = max_response_chars
        store.add_listener(self.state)

    # -- helpers -----------------------------------------------------------------------------------------
    def _missing_entity(self, name: str) -> NotFoundError:
        return NotFoundError(f"Entity with name {name} not found.{self.suggest(name)}")

    def suggest(self, name: str) -> str:
        """A 'did you mean' for a name that does not exist (names are exact and case-sensitive)."""
        entities = self.state.entities
        folded = [n for n in entities if n.casefold() == name.casefold() or n.strip() == name.strip()]
        if not folded and entities:
            best = process.extractOne(name, entities.keys(), scorer=fuzz.WRatio, score_cutoff=85)
            folded = [best[0]] if best else []
        if folded:
            return f" Did you mean {json.dumps(folded[0], ensure_ascii=False)}? Names are exact and case-sensitive."
        return " Names are exact and case-sensitive; search_nodes finds entities by part of their name."

    def _upsert_entities(self, tx: Transaction, records: Iterable[dict[str, Any]]) -> None:
        """Write changed entities back to the collection that holds them (a lesson stays a lesson)."""
        for record in records:
            tx.upsert(self.state.home.get(record["name"], MEMORY), record)

    def entity_type(self, name: str) -> str | None:
        """The type of an entity or lesson with this exact name, or None (the read interface lessons use; call it
        inside a store read or transaction, as the lesson service does)."""
        record = self.state.entities.get(name)
        return None if record is None else record["entityType"]

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
                tx.delete(self.state.home[name], entity_key(name))
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
                    home = self.state.home.get(name, MEMORY)
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
                entities=[state.entities[n] for n in names if state.home[n] == MEMORY],
                lessons=[state.entities[n] for n in names if state.home[n] == LESSONS],
                relations=[{"type": "relation", **relation_view(key)} for key in state.relations],
            )

    # -- reads -------------------------------------------------------------------------------------------
    def warm_up(self, slice_size: int = 2000) -> None:
        """Build the search index now rather than on the first search (the server calls it after loading),
        in slices, so tool calls arriving meanwhile wait for one slice at most, not the whole index."""
        more = True
        while more:
            with self.store.reading():
                more = self.state.index.index_some(slice_size)

    def read_graph(self) -> KnowledgeGraph:
        with self.store.reading():
            state = self.state
            return self._respond(list(state.entities), all_relations=True)

    def search_nodes(self, query: str) -> KnowledgeGraph:
        with self.store.reading():
            state = self.state
            names = state.index.matching(query)
            entities = state.entities

            def rank(name: str) -> tuple[int, int]:
                record = entities[name]
                tier = match_tier(query, name, record["entityType"], record["observations"])
                return (tier, state.ordinal(name))

            names.sort(key=rank if query else state.ordinal)
            return self._respond(names, all_relations=False)

    def open_nodes(self, names: Sequence[str]) -> KnowledgeGraph:
        with self.store.reading():
            found = [n for n in dict.fromkeys(names) if n in self.state.entities]
            return self._respond(found, all_relations=False)

    def _respond(self, names: Sequence[str], all_relations: bool) -> KnowledgeGraph:
        """Entities in the given order with the relations touching them, cut to the response budget.

        Each entity is taken together with its relations not yet taken, so a cut result is still a connected
        piece of the graph (never every entity and no relation); room is kept for the envelope and the notice.
        """
        state = self.state
        budget = self.max_response_chars - ENVELOPE_CHARS
        used = 0
        entities: list[Entity] = []
        taken: dict[RelationKey, None] = {}
        for name in names:
            view = entity_view(state.entities[name])
            touching = [k for k in state.by_node.get(name, ()) if k not in taken]
            cost = _json_size(view) + sum(_json_size(relation_view(k)) for k in touching)
            if used + cost > budget:
                break
            used += cost
            entities.append(Entity.model_construct(**view))
            taken.update(dict.fromkeys(touching))
        cut = len(entities) < len(names)
        keys = sorted(taken, key=state.relations.__getitem__)
        if all_relations and not cut:
            # read_graph also returns relations whose ends are missing (official files can hold them).
            for key in state.relations:
                if key not in taken:
                    used += _json_size(relation_view(key))
                    if used > budget:
                        cut = True
                        break
                    keys.append(key)
            keys.sort(key=state.relations.__getitem__)
        truncated = None
        if cut:
            matching = len(state.relations) if all_relations else len(state.relations_touching(names))
            truncated = Truncation(
                totalEntities=len(names),
                totalRelations=matching,
                returnedEntities=len(entities),
                returnedRelations=len(keys),
                maxResponseChars=self.max_response_chars,
                hint=TRUNCATION_HINT,
            )
        return KnowledgeGraph(entities=entities, relations=[relation_model(k) for k in keys], truncated=truncated)


def relation_model(key: RelationKey) -> Relation:
    """A Relation from a stored (trusted) key, without revalidating it."""
    return Relation.model_construct(from_=key[0], to=key[1], relationType=key[2])


def _json_size(value: dict[str, Any]) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) + 1
