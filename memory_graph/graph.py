"""GraphService: the nine knowledge-graph operations, with the reference's semantics and our fixes.

The service keeps the whole graph in memory (entities by name, relations by endpoint, a search index) and
keeps it equal to the files through the store's change notifications, whether the change is ours or another
process's. Each write validates everything first, then commits once: a failed call changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
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
from memory_graph.storage.format import Key, entity_key, relation_key
from memory_graph.storage.store import Changes, Store, retry_if_stale

MEMORY = "memory"
LESSONS = "lesson"
RelationKey = tuple[str, str, str]


def searchable_fields(record: dict[str, Any]) -> list[str]:
    """What search_nodes looks at: name, type, observations, and a lesson's error pattern."""
    fields = [record["name"], record["entityType"], *record["observations"]]
    pattern = record.get("errorPattern")
    if isinstance(pattern, dict):
        fields.extend(str(pattern.get(k) or "") for k in ("type", "message", "context"))
    return fields


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

    def _entity_changes(self, records: Sequence[dict[str, Any]]) -> dict[str, Changes]:
        changes: dict[str, Changes] = {}
        for record in records:
            changes.setdefault(self.state.home.get(record["name"], MEMORY), Changes()).upserts.append(record)
        return changes

    # -- writes ------------------------------------------------------------------------------------------
    @retry_if_stale
    def create_entities(self, entities: Sequence[Entity]) -> CreatedEntities:
        with self.store.writing():
            created: dict[str, dict[str, Any]] = {}
            for entity in entities:
                if entity.name in self.state.entities or entity.name in created:
                    continue
                created[entity.name] = {
                    "type": "entity",
                    "name": entity.name,
                    "entityType": entity.entityType,
                    "observations": list(dict.fromkeys(entity.observations)),
                }
            self.store.commit({MEMORY: Changes(upserts=list(created.values()))})
        return CreatedEntities(entities=[Entity.model_construct(**entity_view(r)) for r in created.values()])

    @retry_if_stale
    def create_relations(self, relations: Sequence[Relation]) -> CreatedRelations:
        with self.store.writing():
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
            self.store.commit({MEMORY: Changes(upserts=[{"type": "relation", **relation_view(k)} for k in new])})
        return CreatedRelations(relations=[relation_model(k) for k in new])

    @retry_if_stale
    def add_observations(self, additions: Sequence[ObservationAddition]) -> AddedObservationsResult:
        with self.store.writing():
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
            self.store.commit(self._entity_changes(list(updated.values())))
        return AddedObservationsResult(results=results)

    @retry_if_stale
    def delete_entities(self, names: Sequence[str]) -> DeletionResult:
        with self.store.writing():
            changes: dict[str, Changes] = {}
            doomed = [n for n in dict.fromkeys(names) if n in self.state.entities]
            for name in doomed:
                changes.setdefault(self.state.home[name], Changes()).deletes.append(entity_key(name))
            relations = self.state.relations_touching(doomed)
            if relations:
                changes.setdefault(MEMORY, Changes()).deletes.extend(relation_key(*k) for k in relations)
            self.store.commit(changes)
        return DeletionResult(success=True, message="Entities deleted successfully")

    @retry_if_stale
    def delete_observations(self, deletions: Sequence[ObservationDeletion]) -> DeletionResult:
        with self.store.writing():
            updated: dict[str, dict[str, Any]] = {}
            for deletion in deletions:
                current = updated.get(deletion.entityName) or self.state.entities.get(deletion.entityName)
                if current is None:
                    continue
                unwanted = set(deletion.observations)
                kept = [o for o in current["observations"] if o not in unwanted]
                if len(kept) != len(current["observations"]):
                    updated[deletion.entityName] = {**current, "observations": kept}
            self.store.commit(self._entity_changes(list(updated.values())))
        return DeletionResult(success=True, message="Observations deleted successfully")

    @retry_if_stale
    def delete_relations(self, relations: Sequence[Relation]) -> DeletionResult:
        with self.store.writing():
            doomed = [k for k in dict.fromkeys(r.key for r in relations) if k in self.state.relations]
            self.store.commit({MEMORY: Changes(deletes=[relation_key(*k) for k in doomed])})
        return DeletionResult(success=True, message="Relations deleted successfully")

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
            return self._respond(state.entities.keys(), len(state.entities), all_relations=True)

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
            return self._respond(names, len(names), all_relations=False)

    def open_nodes(self, names: Sequence[str]) -> KnowledgeGraph:
        with self.store.reading():
            found = [n for n in dict.fromkeys(names) if n in self.state.entities]
            return self._respond(found, len(found), all_relations=False)

    def _respond(self, names: Iterable[str], total: int, all_relations: bool) -> KnowledgeGraph:
        """Entities in the given order, then the relations touching them, cut to the response budget."""
        state = self.state
        budget = self.max_response_chars
        used = 0
        entities: list[Entity] = []
        for name in names:
            view = entity_view(state.entities[name])
            cost = _json_size(view)
            if used + cost > budget:
                break
            used += cost
            entities.append(Entity.model_construct(**view))
        cut = len(entities) < total
        returned = [e.name for e in entities]
        keys = list(state.relations) if all_relations and not cut else state.relations_touching(returned)
        relations: list[Relation] = []
        for key in keys:
            cost = _json_size(relation_view(key))
            if used + cost > budget:
                cut = True
                break
            used += cost
            relations.append(relation_model(key))
        truncated = None
        if cut:
            truncated = Truncation(
                totalEntities=total,
                totalRelations=len(state.relations) if all_relations else len(keys),
                returnedEntities=len(entities),
                returnedRelations=len(relations),
                maxResponseChars=budget,
                hint=(
                    "The result was cut to fit the response budget; the best matches come first. Narrow it with "
                    "search_nodes (a more specific query) or open_nodes (exact names), or raise "
                    "MEMORY_MAX_RESPONSE_CHARS."
                ),
            )
        return KnowledgeGraph(entities=entities, relations=relations, truncated=truncated)


def relation_model(key: RelationKey) -> Relation:
    """A Relation from a stored (trusted) key, without revalidating it."""
    return Relation.model_construct(from_=key[0], to=key[1], relationType=key[2])


def _json_size(value: dict[str, Any]) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) + 1
