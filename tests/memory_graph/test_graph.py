"""GraphService: the behaviours the reference's own tests pin down, plus our deliberate improvements."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_graph.errors import NotFoundError
from memory_graph.graph import GraphService, GraphState, RelationTable, RestoredRelations
from memory_graph.model import Entity, ObservationAddition, ObservationDeletion, Relation, entity_view
from memory_graph.search import PlaceMap
from memory_graph.storage import as_read_back
from tests.conftest import FILES_ONLY, open_graph

pytestmark = pytest.mark.usefixtures("each_engine")


def ent(name: str, entity_type: str = "person", *observations: str) -> Entity:
    return Entity(name=name, entityType=entity_type, observations=list(observations))


def rel(source: str, target: str, relation_type: str) -> Relation:
    return Relation.model_validate({"from": source, "to": target, "relationType": relation_type})


def names(result) -> list[str]:
    return [e.name for e in result.entities]


def triples(result) -> list[tuple[str, str, str]]:
    return [(r.from_, r.to, r.relationType) for r in result.relations]


# -- create_entities -----------------------------------------------------------------------------------------
def test_create_entities_returns_and_stores_them(graph: GraphService) -> None:
    created = graph.create_entities([ent("Alice", "person", "works at Acme Corp"), ent("Bob", "person", "x")])
    assert [e.model_dump() for e in created.entities] == [
        {"name": "Alice", "entityType": "person", "observations": ["works at Acme Corp"]},
        {"name": "Bob", "entityType": "person", "observations": ["x"]},
    ]
    assert names(graph.read_graph()) == ["Alice", "Bob"]


def test_existing_names_are_skipped_silently(graph: GraphService) -> None:
    graph.create_entities([ent("Alice", "person", "first")])
    again = graph.create_entities([ent("Alice", "robot", "second"), ent("Bob")])
    assert names(again) == ["Bob"]
    alice = graph.open_nodes(["Alice"]).entities[0]
    assert (alice.entityType, alice.observations) == ("person", ["first"])


def test_duplicates_inside_one_call_are_stored_once(graph: GraphService) -> None:
    created = graph.create_entities([ent("Alice", "person", "x", "x"), ent("Alice", "robot")])
    assert [(e.name, e.entityType, e.observations) for e in created.entities] == [("Alice", "person", ["x"])]
    assert len(graph.read_graph().entities) == 1


def test_empty_entity_list_is_fine(graph: GraphService) -> None:
    assert graph.create_entities([]).entities == []


def test_names_are_exact_and_case_sensitive(graph: GraphService) -> None:
    graph.create_entities([ent("Alice"), ent("alice"), ent(" Alice")])
    assert sorted(names(graph.read_graph())) == [" Alice", "Alice", "alice"]


# -- create_relations ----------------------------------------------------------------------------------------
def test_create_relations_and_skip_existing(graph: GraphService) -> None:
    graph.create_entities([ent("Alice"), ent("Bob")])
    first = graph.create_relations([rel("Alice", "Bob", "knows")])
    assert triples(first) == [("Alice", "Bob", "knows")]
    second = graph.create_relations([rel("Alice", "Bob", "knows"), rel("Alice", "Bob", "knows")])
    assert triples(second) == []
    assert triples(graph.read_graph()) == [("Alice", "Bob", "knows")]


def test_relations_to_missing_entities_are_refused_naming_each(graph: GraphService, tmp_path: Path) -> None:
    graph.create_entities([ent("Alice")])
    before = sorted(p.read_bytes() for p in tmp_path.glob("memory*.json"))
    with pytest.raises(NotFoundError) as caught:
        graph.create_relations([rel("Alice", "Ghost", "knows"), rel("Nobody", "Alice", "knows")])
    assert '"Ghost"' in str(caught.value) and '"Nobody"' in str(caught.value)
    assert "create_entities" in str(caught.value)
    assert graph.read_graph().relations == []
    assert sorted(p.read_bytes() for p in tmp_path.glob("memory*.json")) == before


def test_self_relation_is_allowed(graph: GraphService) -> None:
    graph.create_entities([ent("Alice")])
    graph.create_relations([rel("Alice", "Alice", "self")])
    assert triples(graph.read_graph()) == [("Alice", "Alice", "self")]


# -- add_observations ----------------------------------------------------------------------------------------
def test_add_observations_skips_present_ones(graph: GraphService) -> None:
    graph.create_entities([ent("Alice", "person", "works at Acme Corp")])
    graph.add_observations([ObservationAddition(entityName="Alice", contents=["likes coffee"])])
    result = graph.add_observations(
        [ObservationAddition(entityName="Alice", contents=["likes coffee", "has a dog", "has a dog"])]
    )
    assert [(r.entityName, r.addedObservations) for r in result.results] == [("Alice", ["has a dog"])]
    assert graph.open_nodes(["Alice"]).entities[0].observations == [
        "works at Acme Corp",
        "likes coffee",
        "has a dog",
    ]


def test_add_observations_to_missing_entity_fails_whole_call(graph: GraphService) -> None:
    graph.create_entities([ent("Alice")])
    with pytest.raises(NotFoundError, match="Entity with name alice not found") as caught:
        graph.add_observations(
            [
                ObservationAddition(entityName="Alice", contents=["saved?"]),
                ObservationAddition(entityName="alice", contents=["x"]),
            ]
        )
    assert 'Did you mean "Alice"' in str(caught.value)
    assert graph.open_nodes(["Alice"]).entities[0].observations == []


def test_same_entity_twice_in_one_call_accumulates(graph: GraphService) -> None:
    graph.create_entities([ent("Alice")])
    result = graph.add_observations(
        [
            ObservationAddition(entityName="Alice", contents=["a", "b"]),
            ObservationAddition(entityName="Alice", contents=["b", "c"]),
        ]
    )
    assert [r.addedObservations for r in result.results] == [["a", "b"], ["c"]]
    assert graph.open_nodes(["Alice"]).entities[0].observations == ["a", "b", "c"]


# -- deletes -------------------------------------------------------------------------------------------------
def test_delete_entities_cascades_to_relations(graph: GraphService) -> None:
    graph.create_entities([ent("Alice"), ent("Bob"), ent("Charlie")])
    graph.create_relations([rel("Alice", "Bob", "knows"), rel("Bob", "Charlie", "knows"), rel("Alice", "Charlie", "x")])
    result = graph.delete_entities(["Bob", "NonExistent"])
    assert (result.success, result.message) == (True, "Entities deleted successfully")
    assert names(graph.read_graph()) == ["Alice", "Charlie"]
    assert triples(graph.read_graph()) == [("Alice", "Charlie", "x")]


def test_delete_observations_ignores_missing(graph: GraphService) -> None:
    graph.create_entities([ent("Alice", "person", "works at Acme Corp", "likes coffee")])
    result = graph.delete_observations(
        [
            ObservationDeletion(entityName="Alice", observations=["likes coffee", "never said"]),
            ObservationDeletion(entityName="NonExistent", observations=["x"]),
        ]
    )
    assert result.message == "Observations deleted successfully"
    assert graph.open_nodes(["Alice"]).entities[0].observations == ["works at Acme Corp"]


def test_delete_relations_exact_triples_only(graph: GraphService) -> None:
    graph.create_entities([ent("Alice"), ent("Bob")])
    graph.create_relations([rel("Alice", "Bob", "knows"), rel("Alice", "Bob", "works_with")])
    graph.delete_relations([rel("Alice", "Bob", "knows"), rel("Bob", "Alice", "works_with")])
    assert triples(graph.read_graph()) == [("Alice", "Bob", "works_with")]


# -- reads ---------------------------------------------------------------------------------------------------
def test_missing_file_is_an_empty_graph(graph: GraphService, tmp_path: Path) -> None:
    result = graph.read_graph()
    assert (result.entities, result.relations, result.truncated) == ([], [], None)
    assert not (tmp_path / "memory.json").exists()


@pytest.fixture
def acme(graph: GraphService) -> GraphService:
    graph.create_entities(
        [
            ent("Alice", "person", "works at Acme Corp", "likes programming"),
            ent("Bob", "person", "works at TechCo"),
            ent("Acme Corp", "company", "tech company"),
            ent("Charlie", "person"),
        ]
    )
    graph.create_relations([rel("Alice", "Acme Corp", "works_at"), rel("Bob", "Acme Corp", "competitor")])
    graph.create_relations([rel("Bob", "Charlie", "knows")])
    return graph


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Alice", ["Alice"]),
        ("ALICE", ["Alice"]),
        ("company", ["Acme Corp"]),
        ("programming", ["Alice"]),
        ("NonExistent", []),
        ("co", ["Acme Corp", "Alice", "Bob"]),
    ],
)
def test_search_is_case_insensitive_over_name_type_and_observations(
    acme: GraphService, query: str, expected: list[str]
) -> None:
    assert sorted(names(acme.search_nodes(query))) == expected


def test_search_ranks_name_matches_first_and_returns_either_end_relations(acme: GraphService) -> None:
    result = acme.search_nodes("acme")
    assert names(result) == ["Acme Corp", "Alice"]
    assert sorted(triples(result)) == [("Alice", "Acme Corp", "works_at"), ("Bob", "Acme Corp", "competitor")]


def test_search_matches_several_words_in_any_order(acme: GraphService) -> None:
    assert names(acme.search_nodes("programming alice")) == ["Alice"]
    assert names(acme.search_nodes("techco BOB")) == ["Bob"]


def test_empty_query_returns_everything_like_the_reference(acme: GraphService) -> None:
    assert names(acme.search_nodes("")) == ["Alice", "Bob", "Acme Corp", "Charlie"]


def test_open_nodes_returns_relations_with_either_end_in_the_set(acme: GraphService) -> None:
    result = acme.open_nodes(["Bob", "NonExistent", "Bob"])
    assert names(result) == ["Bob"]
    assert sorted(triples(result)) == [("Bob", "Acme Corp", "competitor"), ("Bob", "Charlie", "knows")]
    assert acme.open_nodes([]).entities == []


def test_reads_are_cut_to_the_budget_and_say_so(tmp_path: Path) -> None:
    graph = open_graph(tmp_path, shard_lines=50, max_response_chars=1000)
    graph.create_entities([ent(f"Person {i:03d}", "person", "x" * 50) for i in range(100)])
    result = graph.read_graph()
    assert result.truncated is not None
    assert 0 < result.truncated.returnedEntities == len(result.entities) < 100
    assert result.truncated.totalEntities == 100
    assert "search_nodes" in result.truncated.hint
    assert len(result.model_dump_json(by_alias=True, exclude_none=True)) <= 1000  # the notice included
    assert names(result) == [f"Person {i:03d}" for i in range(len(result.entities))]
    searched = graph.search_nodes("person 095")
    assert names(searched) == ["Person 095"] and searched.truncated is None


def test_a_cut_read_keeps_the_relations_of_what_it_returns_within_the_budget(tmp_path: Path) -> None:
    """A graph far over the budget (relations created after all entities): the cut read_graph still returns
    the relations between the entities it returns, and the whole answer fits the budget."""
    graph = open_graph(tmp_path, shard_lines=1000, max_response_chars=20_000)
    graph.create_entities([ent(f"P{i:04d}", "person", "likes tea and long walks") for i in range(2000)])
    graph.create_relations([rel(f"P{i:04d}", f"P{i + 1:04d}", "knows") for i in range(1999)])
    for result in (graph.read_graph(), graph.search_nodes("person")):
        assert result.truncated is not None and 0 < len(result.entities) < 2000
        returned = set(names(result))
        assert {(f, t) for f, t, _ in triples(result)} >= {
            (f"P{i:04d}", f"P{i + 1:04d}")
            for i in range(2000)
            if f"P{i + 1:04d}" in returned and f"P{i:04d}" in returned
        }
        assert len(result.relations) == result.truncated.returnedRelations > 0
        assert len(result.model_dump_json(by_alias=True, exclude_none=True)) <= 20_000


def test_an_entity_too_large_for_the_budget_comes_with_the_observations_that_fit(tmp_path: Path) -> None:
    """The user's own entity, grown by a note at every chat, passes the budget: every read of it answered nothing
    (open_nodes, a search for it, read_graph). It now comes with the observations that fit, the newest first
    chosen, or for a search those holding its words; the notice says how many of how many."""
    graph = open_graph(tmp_path, shard_lines=1000, max_response_chars=3000)
    facts = [f"fact {i:03d}: an ordinary sentence about the user" for i in range(200)]  # about 10 KB
    facts[17] = "fact 017: the user is allergic to peanuts"
    graph.create_entities([ent("User", "person", *facts), ent("Bob", "person", "a friend")])
    graph.create_relations([rel("Bob", "User", "knows")])
    for result in (graph.open_nodes(["User"]), graph.read_graph(), graph.open_nodes(["User", "Bob"])):
        assert names(result)[0] == "User" and len(result.model_dump_json(by_alias=True, exclude_none=True)) <= 3000
        shown = result.entities[0].observations
        assert 10 < len(shown) < 200 and shown == facts[-len(shown) :]  # the newest, in their order
        assert result.truncated is not None and result.truncated.cutEntities is not None
        [cut] = result.truncated.cutEntities
        assert (cut.name, cut.observations, cut.returnedObservations) == ("User", 200, len(shown))
        assert (cut.relations, cut.returnedRelations) == (1, 1)  # Bob knows User
        assert triples(result) == [("Bob", "User", "knows")]  # its relations come with it
    # With more entities to come, it takes half the room: a read of the whole graph still shows the rest.
    whole = graph.read_graph()
    assert names(whole) == ["User", "Bob"] and whole.entities[1].observations == ["a friend"]
    assert len(whole.entities[0].observations) < len(graph.open_nodes(["User"]).entities[0].observations)
    small = open_graph(tmp_path / "small", shard_lines=1000, max_response_chars=1400)
    small.create_entities([ent("User", "person", *facts), ent("Bob", "person", "a friend")])
    assert names(small.read_graph())[0] == "User"  # half the room holds nothing: it takes the whole room then
    long_name = "U" * 400  # named again in the notice: the cut leaves room for it
    graph.create_entities([ent(long_name, "person", *facts)])
    assert len(graph.open_nodes([long_name]).model_dump_json(by_alias=True, exclude_none=True)) <= 3000
    searched = graph.search_nodes("allergic peanuts")
    assert (
        names(searched)[0] == "User"
        and "fact 017: the user is allergic to peanuts" in searched.entities[0].observations
    )
    assert searched.entities[0].observations == [f for f in facts if f in searched.entities[0].observations]
    assert graph.open_nodes(["Bob"]).truncated is None  # what fits is untouched
    # An ordinary entity at the edge of a cut read is left out whole, as before.
    graph.create_entities([ent(f"Person {i:03d}", "person", "x" * 50) for i in range(100)])
    later = graph.open_nodes(["Bob", *(f"Person {i:03d}" for i in range(100))])
    assert later.truncated is not None and later.truncated.cutEntities is None
    assert all(len(e.observations) == 1 for e in later.entities)


def test_an_entity_with_more_relations_than_fit_comes_with_the_newest_that_fit(tmp_path: Path) -> None:
    """A hub (the user who knows two hundred people) answered nothing either, its relations alone over the budget."""
    graph = open_graph(tmp_path, shard_lines=1000, max_response_chars=3000)
    graph.create_entities([ent("User", "person", "likes tea"), *(ent(f"Friend {i:03d}") for i in range(200))])
    graph.create_relations([rel("User", f"Friend {i:03d}", "knows") for i in range(200)])
    for result in (graph.open_nodes(["User"]), graph.search_nodes("User")):
        assert names(result)[0] == "User" and result.entities[0].observations == ["likes tea"]
        assert len(result.model_dump_json(by_alias=True, exclude_none=True)) <= 3000
        kept = triples(result)
        assert 10 < len(kept) < 200
        assert kept == [("User", f"Friend {i:03d}", "knows") for i in range(200 - len(kept), 200)]  # the newest
        assert result.truncated is not None and result.truncated.cutEntities is not None
        [cut] = result.truncated.cutEntities
        assert (cut.observations, cut.returnedObservations, cut.relations, cut.returnedRelations) == (
            1,
            1,
            200,
            len(kept),
        )


def test_persistence_across_instances(graph: GraphService, tmp_path: Path) -> None:
    graph.create_entities([ent("Alice", "person", "persistent data"), ent("Bob")])
    graph.create_relations([rel("Alice", "Bob", "knows")])
    again = open_graph(tmp_path)
    assert [e.model_dump() for e in again.read_graph().entities] == [
        e.model_dump() for e in graph.read_graph().entities
    ]
    assert triples(again.read_graph()) == [("Alice", "Bob", "knows")]


@FILES_ONLY
def test_file_lines_are_the_reference_format(graph: GraphService, tmp_path: Path) -> None:
    graph.create_entities([ent("Zoë", "person", "lives in 北京")])
    graph.create_relations([rel("Zoë", "Zoë", "self")])
    lines = (tmp_path / "memory.json").read_text(encoding="utf-8").splitlines()
    assert lines == [
        '{"type":"entity","name":"Zoë","entityType":"person","observations":["lives in 北京"]}',
        '{"type":"relation","from":"Zoë","to":"Zoë","relationType":"self"}',
    ]


def test_a_hub_keeps_every_relation_as_it_grows_past_a_few_and_shrinks_again(graph: GraphService) -> None:
    # An entity's relations are held in a tuple while they are few and in a set past that: both must agree with
    # the relations stored, through growth, a self-relation, deletions and the deletion of an end.
    names = [f"N{i}" for i in range(12)]
    graph.create_entities([ent("Hub"), *(ent(n) for n in names)])
    graph.create_relations([rel("Hub", "Hub", "is"), *(rel("Hub", n, "links") for n in names)])
    graph.create_relations([rel(names[0], "Hub", "back")])

    def touching(name: str) -> set[tuple[str, str, str]]:
        return {r.key for r in graph.open_nodes([name]).relations if name in (r.from_, r.to)}

    assert len(touching("Hub")) == 14 and len(touching(names[0])) == 2
    assert len(graph.state.by_node["Hub"]) == 14  # its degree counts the self-relation once
    graph.delete_relations([rel("Hub", n, "links") for n in names[:10]] + [rel("Hub", "Hub", "is")])
    assert touching("Hub") == {("Hub", names[10], "links"), ("Hub", names[11], "links"), (names[0], "Hub", "back")}
    assert touching(names[0]) == {(names[0], "Hub", "back")}
    graph.delete_entities(["Hub"])
    assert graph.read_graph().relations == [] and touching(names[11]) == set()
    assert not graph.state.by_node  # nothing left behind for any name
    # A few relations (a tuple): a self-relation counted once, one from the middle deleted.
    graph.create_entities([ent("Solo")])
    graph.create_relations([rel("Solo", "Solo", "is"), rel("Solo", names[1], "a"), rel(names[2], "Solo", "b")])
    assert len(graph.state.by_node["Solo"]) == 3
    graph.delete_relations([rel("Solo", names[1], "a")])
    assert touching("Solo") == {("Solo", "Solo", "is"), (names[2], "Solo", "b")}
    assert len(graph.state.by_node["Solo"]) == 2 and names[1] not in graph.state.by_node


def test_a_plain_entity_is_held_compactly_and_read_back_as_its_record() -> None:
    # A plain entity is held as one tuple (with its ordinal) and made a record again at each read; anything with
    # fields of its own is held as given. Reads must not tell the two apart, a read record must not be the held
    # state, and an entity keeps its creation ordinal through changes.
    state = GraphState()
    plain = {"type": "entity", "name": "Ada", "entityType": "person", "observations": ["math", "engines"]}
    bare = {"type": "entity", "name": "Bare", "entityType": "thing", "observations": []}
    extra = {"type": "entity", "name": "Tagged", "entityType": "note", "observations": ["x"], "source": "import"}
    lesson = {
        "type": "entity",
        "name": "KEY_MISSING",
        "entityType": "lesson",
        "observations": ["check the key"],
        "errorPattern": {"type": "runtime", "message": "KeyError: 'db'", "context": ""},
    }
    state.records_changed("memory", [], [dict(plain), dict(bare)])
    state.records_changed("memory", [], [{"type": "relation", "from": "Ada", "to": "Bare", "relationType": "owns"}])
    state.records_changed("memory", [], [dict(extra)])
    state.records_changed("lesson", [], [dict(lesson)])
    entities = state.entities
    assert [entities[n] for n in entities] == [plain, bare, extra, lesson]
    assert entities.get("Ada") == plain and entities.get("Nobody") is None and "Nobody" not in entities
    assert isinstance(entities.held["Ada"][1], str) and isinstance(entities.held["Bare"][1], str)
    assert entities.held["Tagged"][1] == extra and entities.held["KEY_MISSING"][1] == lesson
    assert [entities.entity_type(n) for n in entities] == ["person", "thing", "note", "lesson"]
    assert [entities.view(n) for n in entities] == [entity_view(r) for r in (plain, bare, extra, lesson)]
    assert [state.ordinal(n) for n in entities] == [0, 1, 3, 4]  # the relation took 2
    entities["Ada"]["observations"].append("changed by a caller")  # a copy: the held entity is unchanged
    assert entities["Ada"] == plain
    more = {**plain, "observations": ["math", "engines", "notes"]}
    state.records_changed("memory", [], [dict(more), {**bare, "source": "a field of its own"}])
    assert entities["Ada"] == more and entities["Bare"] == {**bare, "source": "a field of its own"}
    assert [state.ordinal(n) for n in entities] == [0, 1, 3, 4]  # changed, not created again
    renamed = {**plain, "name": "Someone else"}  # a record under another name's key is not taken as plain
    entities.put("Ada", renamed, 0)
    assert entities["Ada"] == renamed
    state.records_changed("memory", [("entity", "Bare")], [])
    assert list(entities) == ["Ada", "Tagged", "KEY_MISSING"] and len(entities) == 3
    state.records_changed("memory", [], [dict(bare)])  # created again: a new ordinal, after everything
    assert state.ordinal("Bare") == 5


def test_a_shared_lesson_behind_an_entity_of_the_same_name_shows_once_the_entity_is_gone() -> None:
    # Whichever is heard first (a load reads the memory, then the lessons; another process may write either),
    # the memory's entity is shown; the lesson is kept aside, follows its own changes, and shows once the entity
    # is deleted. A snapshot keeps it aside too.
    entity = {"type": "entity", "name": "PORT", "entityType": "note", "observations": ["mine"]}
    lesson = {"type": "entity", "name": "PORT", "entityType": "lesson", "observations": ["stop it"], "errorPattern": {}}
    changed = {**lesson, "observations": ["stop it", "or use another port"]}
    for first, then in ((("memory", entity), ("lesson", lesson)), (("lesson", lesson), ("memory", entity))):
        state = GraphState()
        for collection, record in (first, then):
            state.records_changed(collection, [], [dict(record)])
        assert state.entities["PORT"] == entity and state.home("PORT") == "memory"
        state.records_changed("lesson", [], [dict(changed)])
        assert state.entities["PORT"] == entity
        restored = GraphState()
        restored.restore_state(as_read_back(state.snapshot_state()))
        for each in (state, restored):
            each.records_changed("memory", [("entity", "PORT")], [])
            assert each.entities["PORT"] == changed and each.home("PORT") == "lesson"
            assert each.index.matching("another port") == ["PORT"]
    gone = GraphState()
    gone.records_changed("memory", [], [dict(entity)])
    gone.records_changed("lesson", [], [dict(lesson)])
    gone.records_changed("lesson", [("entity", "PORT")], [])  # the lesson deleted while aside
    gone.records_changed("memory", [("entity", "PORT")], [])
    assert "PORT" not in gone.entities


RELATION_KEYS = st.tuples(st.sampled_from("abc"), st.sampled_from("ab\u00e9"), st.sampled_from(["knows", "is", ""]))


@settings(max_examples=300, deadline=None)
@given(
    restored=st.lists(RELATION_KEYS, unique=True, max_size=12),
    steps=st.lists(st.tuples(st.booleans(), RELATION_KEYS), max_size=30),
)
def test_a_relation_table_answers_as_a_dict_of_creation_ordinals(
    restored: list[tuple[str, str, str]], steps: list[tuple[bool, tuple[str, str, str]]]
) -> None:
    """A RelationTable restored from columns (a restored relation's ordinal is its place) and then changed answers
    as a dict of each relation's creation ordinal does, in the same order; a copy is not reached by later changes,
    and the table it gives the snapshot finds its relations once restored again."""
    names = sorted({end for key in restored for end in key[:2]})
    place = {name: at for at, name in enumerate(names)}
    columns = RestoredRelations(
        names,
        array("i", (place[key[0]] for key in restored)),
        array("i", (place[key[1]] for key in restored)),
        [key[2] for key in restored],
    )
    assert list(columns) == restored and [columns[at] for at in range(len(restored))] == restored
    table = RelationTable(columns, PlaceMap.restored(columns, PlaceMap.of(restored).table().tobytes()))
    model = dict(zip(restored, range(len(restored)), strict=True))
    next_ordinal = len(restored) + 3  # (ordinals given to entities in between: only their order matters)
    copies: list[tuple[RelationTable, dict[tuple[str, str, str], int]]] = []
    for add, key in steps:
        if add and key not in model:
            table.add(key, next_ordinal)
            model[key] = next_ordinal
            next_ordinal += 2
        elif not add and key in model:
            table.remove(key)
            del model[key]
        elif not add:
            with pytest.raises(KeyError):
                table.remove(key)
        copies.append((table.copy(), dict(model)))
        assert list(table) == list(model) and len(table) == len(model)
    for key in {*restored, *(key for _, key in steps), ("a", "a", "absent")}:
        assert (key in table) == (key in model) and table.get(key) == model.get(key)
    assert ("a", "b") not in table and "a" not in table and ("a", None, "knows") not in table
    assert dict(table.items()) == model and sorted(table, key=table.__getitem__) == list(model)
    assert list(table.types()) == [key[2] for key in model]
    for copied, then in copies:
        assert dict(copied.items()) == then and list(copied) == list(then)
    keys = list(table)
    again = PlaceMap.restored(keys, table.table(keys).tobytes())
    assert [again.get(key) for key in keys] == list(range(len(keys)))
