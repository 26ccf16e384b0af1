"""What the tests of reads answered while a store loads share (test_postgres_loading.py, test_files_loading.py):
an answer given beside the load is compared with a server that loaded the same memory."""

from __future__ import annotations

from lessons.model import LessonInput
from memory_graph.app import Services
from memory_graph.graph import GraphService
from memory_graph.model import Entity, KnowledgeGraph, Relation

QUERIES = ["deploy", "Deploy tool", "TEA", "tea pot", "person", "address in use", "terraform go", "EADDRINUSE:"]


def relation(start: str, end: str, kind: str) -> Relation:
    return Relation.model_validate({"from": start, "to": end, "relationType": kind})


def fill(services: Services, escaped: bool = False) -> None:
    """A small memory and a lesson; `escaped`: also text this code writes with escapes (a quote, a backslash)."""
    graph = services.graph
    graph.create_entities(
        [
            Entity(name="Alice", entityType="person", observations=["Likes green tea", "works on the deploy tool"]),
            Entity(name="Bob", entityType="person", observations=["Deploys on Fridays"]),
            Entity(name="Deploy tool", entityType="project", observations=["written in Go", "uses Terraform"]),
            Entity(name="Teapot", entityType="thing", observations=["short and stout"]),
            Entity(
                name="Zoë", entityType="person", observations=["ÉCOLE teacher", *(['says "hi" \\ waves'] * escaped)]
            ),
        ]
    )
    graph.create_relations(
        [
            relation("Alice", "Deploy tool", "maintains"),
            relation("Bob", "Deploy tool", "uses"),
            relation("Alice", "Bob", "mentors"),
            relation("Teapot", "Alice", "belongs to"),
            *([relation("Zoë", "Alice", "teaches")] * escaped),
        ]
    )
    services.lessons.create_lesson(
        LessonInput(name="PORT_IN_USE", errorPattern={"type": "network", "message": "EADDRINUSE: address in use"})
    )


def names(answer: KnowledgeGraph) -> list[str]:
    return [e.name for e in answer.entities]


def relations(answer: KnowledgeGraph) -> set[tuple[str, str, str]]:
    return {(r.from_, r.to, r.relationType) for r in answer.relations}


def substring_tier(services: Services, query: str) -> list[str]:
    """What a loaded server finds holding the query (its first tier), before any ranked entity."""
    state = services.graph.state
    with services.store.reading():
        return state.index.search_tiers(query, lambda name: [], state.ordinal)[0]


def searches_like_a_loaded_server(early: GraphService, loaded: Services) -> None:
    """Each of QUERIES answered beside the load: the loaded server's substring matches (their order may differ
    where word scores decide it), each with the relations touching it; where names decide the order (the exact
    name, then a name's prefix), the loaded server's order."""
    for query in QUERIES:
        answer = early.search_nodes(query)
        assert sorted(names(answer)) == sorted(substring_tier(loaded, query)), query
        assert set(names(answer)) <= set(names(loaded.graph.search_nodes(query))), query
        shown = set(names(answer))
        touching = {r for r in relations(loaded.graph.read_graph()) if r[0] in shown or r[1] in shown}
        assert relations(answer) == touching, query
    assert names(early.search_nodes("Deploy tool"))[0] == "Deploy tool"
    assert names(early.search_nodes("tea"))[0] == names(loaded.graph.search_nodes("tea"))[0] == "Teapot"
