"""The knowledge graph's vocabulary, as the official `server-memory` defines it.

- **Entity**: a node with a unique, exact, case-sensitive `name`, an `entityType` (person, organization,
  project, lesson, ...) and `observations`, an ordered list of short facts about it.
- **Relation**: a directed edge `from` -> `to` labelled with a `relationType` in active voice
  ("works_at", "knows"). A relation is identified by the whole triple.
- **Observation**: one string fact attached to one entity; an entity never holds the same one twice.
- **Lesson**: an entity of type "lesson" that also carries an error pattern and its fix (see `lessons/`).

These pydantic models are the tool boundary: they validate input and describe output. Inside the service,
records are plain dicts in the stored line format, which keeps a 100k-entity graph cheap.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, StrictStr, model_serializer

EntityName = Annotated[StrictStr, Field(min_length=1, description="Exact, case-sensitive entity name")]


class Entity(BaseModel):
    """A node of the graph."""

    model_config = ConfigDict(extra="ignore")

    name: EntityName = Field(description="The name of the entity")
    entityType: StrictStr = Field(description="The type of the entity")
    observations: list[StrictStr] = Field(description="An array of observation contents associated with the entity")


class Relation(BaseModel):
    """A directed, labelled edge between two entities."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    from_: EntityName = Field(alias="from", description="The name of the entity where the relation starts")
    to: EntityName = Field(description="The name of the entity where the relation ends")
    relationType: StrictStr = Field(description="The type of the relation")

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.from_, self.to, self.relationType)


class ObservationAddition(BaseModel):
    model_config = ConfigDict(extra="ignore")

    entityName: EntityName = Field(description="The name of the entity to add the observations to")
    contents: list[StrictStr] = Field(description="An array of observation contents to add")


class ObservationDeletion(BaseModel):
    model_config = ConfigDict(extra="ignore")

    entityName: EntityName = Field(description="The name of the entity containing the observations")
    observations: list[StrictStr] = Field(description="An array of observations to delete")


class AddedObservations(BaseModel):
    entityName: str
    addedObservations: list[str]


class CreatedEntities(BaseModel):
    entities: list[Entity]


class CreatedRelations(BaseModel):
    relations: list[Relation]


class AddedObservationsResult(BaseModel):
    results: list[AddedObservations]


class DeletionResult(BaseModel):
    success: bool
    message: str


# What a cut response holds besides its items: the envelope and the `truncated` notice.
ENVELOPE_CHARS = 800


def json_size(value: Any) -> int:
    """The characters a value takes in a response's compact JSON (what the response budget counts)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":"))) + 1


class CutEntity(BaseModel):
    """An entity too large for the response budget, returned with the observations that fit."""

    name: str
    observations: int = Field(description="Its observations in all")
    returnedObservations: int = Field(
        description="Those returned, in their stored order: for a search, those holding its words first; then "
        "the newest"
    )
    relations: int = Field(description="Its relations not returned with an entity before it")
    returnedRelations: int = Field(description="Those returned, the newest")


class Truncation(BaseModel):
    """Present only when a read was cut to fit the response budget."""

    totalEntities: int = Field(description="Entities that matched before the cut")
    totalRelations: int = Field(description="Relations that matched before the cut")
    returnedEntities: int
    returnedRelations: int
    maxResponseChars: int
    hint: str
    cutEntities: list[CutEntity] | None = Field(
        default=None, description="Entities returned with part of their observations (too large for the budget)"
    )


class KnowledgeGraph(BaseModel):
    """A graph or a part of one: entities, then the relations touching them."""

    entities: list[Entity]
    relations: list[Relation]
    truncated: Truncation | None = Field(
        default=None, description="Set when the result was cut to fit the response budget"
    )


def entity_view(record: dict[str, Any]) -> dict[str, Any]:
    """The plain-entity face of a stored record (lessons included): name, entityType, observations."""
    return {
        "name": record["name"],
        "entityType": record["entityType"],
        "observations": record["observations"],
    }


def relation_view(key: tuple[str, str, str]) -> dict[str, str]:
    return {"from": key[0], "to": key[1], "relationType": key[2]}


# -- browsing: list_entities, get_neighbors, graph_summary ----------------------------------------------------------
class EntitySummary(BaseModel):
    """One line of a listing: what an entity is, without its observations."""

    name: str
    entityType: str
    observationCount: int
    lastChanged: str | None = Field(
        default=None,
        description="When the entity last changed (ISO 8601 UTC), from the change history; null for an entity "
        "unchanged since before history was kept",
    )

    @model_serializer(mode="wrap")
    def _keep_null_last_changed(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Results are dumped without None fields; this one is shown as null so clients see it exists.
        data: dict[str, Any] = handler(self)
        data.setdefault("lastChanged", self.lastChanged)
        return data


class EntityPage(BaseModel):
    """A page of entities in name order; pass `nextCursor` back as `cursor` for the next one."""

    entities: list[EntitySummary]
    nextCursor: str | None = Field(default=None, description="Absent on the last page")
    total: int = Field(description="Entities matching the filter, over all pages")


class Neighbor(BaseModel):
    """An entity near the one asked about: `depth` relations away, with `degree` relations in all."""

    name: str
    entityType: str
    observations: list[str]
    depth: int
    degree: int
    observationCount: int | None = Field(
        default=None,
        description="Set when too large for the response budget: its observations in all (the newest are shown)",
    )


class Neighborhood(BaseModel):
    """The entities within some relations of one entity, best connected first, and the relations among them."""

    name: str
    entities: list[Neighbor]
    relations: list[Relation]
    totalEntities: int = Field(description="Entities within the depth (and relation type), before the limit")
    truncated: bool = Field(default=False, description="True when the limit or the response budget left some out")


class TypeCount(BaseModel):
    type: str
    count: int


class ConnectedEntity(BaseModel):
    name: str
    entityType: str
    degree: int = Field(description="Relations touching the entity")


class GraphSummary(BaseModel):
    """The shape of the graph at a glance."""

    entities: int
    relations: int
    entityTypes: list[TypeCount] = Field(description="Entity types, most common first")
    relationTypes: list[TypeCount] = Field(description="Relation types, most common first")
    mostConnected: list[ConnectedEntity] = Field(description="The entities with the most relations")
    typesLeftOut: int | None = Field(
        default=None, description="Set when the rarest types were left out to fit the response budget: how many"
    )
