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

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr

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


class Truncation(BaseModel):
    """Present only when a read was cut to fit the response budget."""

    totalEntities: int = Field(description="Entities that matched before the cut")
    totalRelations: int = Field(description="Relations that matched before the cut")
    returnedEntities: int
    returnedRelations: int
    maxResponseChars: int
    hint: str


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
