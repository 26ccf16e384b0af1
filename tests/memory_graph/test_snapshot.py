"""The start snapshot (storage/snapshot.py): a restart restores what a load built and catches up from the files
(or the database's change log), so it holds exactly what the server that wrote the snapshot holds once it has
followed the same changes, and the same memory as a fresh load, whatever happened since. The tests marked
`each_engine` run on the files and on a real PostgreSQL."""

from __future__ import annotations

import json
import logging
import marshal
import os
import random
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from lessons.model import ErrorQuery, LessonChanges, LessonInput
from lessons.service import LessonService
from memory_graph.app import Services, build_services
from memory_graph.config import Settings
from memory_graph.errors import NotFoundError, StaleShardError
from memory_graph.graph import GraphState
from memory_graph.model import Entity, ObservationAddition, ObservationDeletion, Relation
from memory_graph.search import SubstringIndex
from memory_graph.storage import Store, as_read_back, code_tag, read_snapshot, write_snapshot
from tests.conftest import Engine
from tests.memory_graph.test_stdio import INITIALIZE, INITIALIZED

ROOT = Path(__file__).resolve().parents[2]
SHARD = 40


def settings(folder: Path, cache: Path) -> Settings:
    return Settings(
        memory_file=folder / "memory.json",
        lesson_file=folder / "lesson.json",
        shard_lines=SHARD,
        cache_dir=cache,
        semantic="off",
        database_url=Engine.database_url(folder),
    )


def services(folder: Path, cache: Path) -> Services:
    built = build_services(settings(folder, cache))
    built.store.snapshot_min_records = 0  # every store here is small
    return built


def lesson(name: str, message: str) -> LessonInput:
    return LessonInput.model_validate(
        {
            "name": name,
            "entityType": "lesson",
            "errorPattern": {"type": "runtime", "message": message, "context": "running the tests"},
            "observations": [f"the fix for {message}"],
            "verificationSteps": [{"command": "make test", "expectedOutput": "ok"}],
        }
    )


def fill(built: Services, count: int = 150) -> None:
    graph = built.graph
    graph.create_entities(
        [Entity(name=f"Person {i}", entityType="person", observations=[f"likes topic{i % 7}"]) for i in range(count)]
    )
    graph.create_relations(
        [
            Relation.model_validate({"from": f"Person {i}", "to": f"Person {(i * 3) % count}", "relationType": "knows"})
            for i in range(count)
        ]
    )
    built.lessons.create_lesson(lesson("KEY_MISSING", "KeyError: 'database'"))
    built.lessons.create_lesson(lesson("PORT_TAKEN", "Error: listen EADDRINUSE: address already in use :::3000"))


def answers(built: Services) -> dict[str, Any]:
    """Everything a client can read, to compare two servers on the same files."""
    graph = built.graph
    state = graph.state
    return {
        "graph": graph.read_graph().model_dump(by_alias=True),
        "search": [graph.search_nodes(q).model_dump(by_alias=True) for q in ("topic3", "person likes", "Persn 12")],
        "open": graph.open_nodes(["Person 5", "Person 149", "KEY_MISSING"]).model_dump(by_alias=True),
        "order": list(state.entities),
        # (a restored relation's ordinal is its place among the relations: only their order is the same)
        "relation order": list(state.relations),
        "ordered by ordinal": sorted(state.relations, key=state.relations.__getitem__),
        "by_node": {name: sorted(keys) for name, keys in state.by_node.items()},
        "lessons": [
            m.name
            for m in built.lessons.find_similar_errors(
                ErrorQuery.model_validate({"type": "runtime", "message": "KeyError: 'user'"})
            ).matches
        ],
        "lesson records": built.lessons.records,
    }


def content(built: Services) -> dict[str, Any]:
    """What the memory holds, whatever the order it was heard in."""
    graph = built.graph.read_graph().model_dump(by_alias=True)
    return {
        "entities": sorted(json.dumps(e, sort_keys=True) for e in graph["entities"]),
        "relations": sorted(json.dumps(r, sort_keys=True) for r in graph["relations"]),
        "lesson records": built.lessons.records,
    }


def fresh_content(folder: Path, tmp_path: Path) -> dict[str, Any]:
    """A load from the files alone (an empty cache folder of its own)."""
    cache = tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}"
    return content(services(folder, cache))


def snapshot_written(folder: Path, cache: Path) -> Services:
    first = services(folder, cache)
    first.graph.warm_up()
    assert first.store.save_snapshot()
    assert len(list((cache / "snapshots").glob("*.bin"))) == 1
    return first


def restarted(folder: Path, cache: Path) -> Services:
    again = services(folder, cache)
    again.store.open()
    return again


@pytest.mark.usefixtures("each_engine")
def test_an_index_a_snapshot_left_unbuilt_is_built_once_and_kept_by_the_next_snapshot(tmp_path: Path) -> None:
    """A server closed before its index was built (a first start at 1M takes most of a minute to build it) saves
    a snapshot with the index pending. The restart builds it, and must keep it: else every start builds it again."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    cold = services(folder, cache)
    cold.store.open()
    assert not cold.graph.state.index.warm  # opened, not warmed up
    assert cold.store.save_snapshot()
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot and not again.graph.state.index.warm
    assert not again.store.save_snapshot()  # nothing changed yet
    again.graph.warm_up()
    assert again.graph.state.index.warm
    assert again.store.save_snapshot()  # the index built since the restore is worth keeping
    third = restarted(folder, cache)
    assert third.store.restored_from_snapshot and third.graph.state.index.warm
    third.graph.warm_up()
    assert not third.store.save_snapshot()  # a restore of a built index has nothing more to keep
    assert answers(third) == answers(again)


@pytest.mark.usefixtures("each_engine")
def test_a_restart_restores_the_snapshot_and_answers_as_a_fresh_load(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    assert Engine.name == "postgres" or len(list(folder.glob("memory*.json"))) > 3  # several shards
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    assert again.graph.state.index.warm  # the index came built
    assert answers(again) == answers(first) == answers(services(folder, tmp_path / "fresh"))
    assert not again.store.save_snapshot()  # nothing changed since it was written


@pytest.mark.usefixtures("each_engine")
def test_a_part_refusing_its_state_after_another_took_its_own_makes_the_start_read_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot is a cache: whichever part refuses its state (an old server's lessons saved under a tag that
    matched), the start reads the files instead of failing every call, and the parts restored before it let go
    of what they took (no record twice, none the files do not hold)."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    snapshot_written(folder, cache)
    expected = fresh_content(folder, tmp_path)

    def refusing(self: LessonService, state: Any) -> None:
        raise KeyError("records")

    monkeypatch.setattr(LessonService, "restore_state", refusing)
    again = restarted(folder, cache)
    assert not again.store.restored_from_snapshot
    monkeypatch.undo()
    assert content(again) == expected
    assert (
        again.graph.search_nodes("topic3").model_dump()
        == services(folder, tmp_path / "x").graph.search_nodes("topic3").model_dump()
    )


def test_a_snapshot_tag_names_the_code_this_process_runs_not_the_files_on_disk_now(tmp_path: Path) -> None:
    """A package upgraded under a running server changes its files, not its code: a snapshot the old code saves
    must keep the old code's tag, or the new code would take the old shapes for its own."""
    module = tmp_path / "module.py"
    module.write_text("SHAPE = 1\n", encoding="utf-8")
    before = code_tag([str(module)])
    module.write_text("SHAPE = 2\n", encoding="utf-8")
    assert code_tag([str(module)]) == before
    other = tmp_path / "other.py"
    other.write_text("SHAPE = 2\n", encoding="utf-8")
    assert code_tag([str(other)]) != before


def test_an_edit_in_place_that_keeps_size_and_mtime_is_read_by_a_restart_and_a_running_server(tmp_path: Path) -> None:
    """`cp -p`, `rsync -t --inplace` and `touch -r` put the mtime back; the ctime still tells the edit, so a
    restart does not serve the snapshot's text, and a running server's next write does not put it back."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    running = snapshot_written(folder, cache)
    (shard,) = [p for p in folder.glob("memory*.json") if "likes topic1" in p.read_text(encoding="utf-8")][:1]
    before = os.stat(shard)
    shard.write_text(shard.read_text(encoding="utf-8").replace("likes topic1", "hates topic1"), encoding="utf-8")
    os.utime(shard, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (os.stat(shard).st_size, os.stat(shard).st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    expected = fresh_content(folder, tmp_path)
    assert any("hates topic1" in entity for entity in expected["entities"])
    assert content(restarted(folder, cache)) == expected
    running.graph.create_entities([Entity(name="Written after", entityType="person", observations=[])])
    assert any("hates topic1" in entity for entity in fresh_content(folder, tmp_path)["entities"])


@pytest.mark.usefixtures("each_engine")
def test_the_snapshot_tag_names_the_record_rules(tmp_path: Path) -> None:
    """A restored shard is not read again, so a snapshot is only valid for the rules its records passed: a rule
    from other code is another tag."""
    built = services(tmp_path / "memory", tmp_path / "cache")
    store, parts = built.store, built.store._snapshot_parts()
    lessons = store.collections["lesson"]
    tag = store._snapshot_tag(parts)
    lessons.check = a_rule_of_other_code
    assert store._snapshot_tag(parts) != tag


def a_rule_of_other_code(record: dict[str, Any]) -> str | None:
    return None


@pytest.mark.usefixtures("each_engine")
def test_a_restart_catches_up_with_what_changed_after_the_snapshot(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    # Another server, started without the snapshot, changes the memory afterwards.
    other = services(folder, tmp_path / "other-cache")
    other.graph.create_entities([Entity(name="Newcomer", entityType="person", observations=["arrived late"])])
    other.graph.create_entities([Entity(name=f"Later {i}", entityType="person", observations=[]) for i in range(60)])
    other.graph.delete_entities(["Person 7", "Person 90"])
    other.graph.add_observations([ObservationAddition(entityName="Person 12", contents=["now likes topic99"])])
    other.graph.delete_observations([ObservationDeletion(entityName="Person 13", observations=["likes topic6"])])
    other.graph.create_relations(
        [Relation.model_validate({"from": "Newcomer", "to": "Person 1", "relationType": "met"})]
    )
    other.graph.delete_entities(["PORT_TAKEN"])  # a lesson is an entity
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    # Exactly what the server that wrote the snapshot holds once it has followed the changes (new records come
    # after the ones it held, as for any server that hears of another's commit); the same memory as a fresh load.
    assert answers(again) == answers(first)
    assert content(again) == fresh_content(folder, tmp_path)
    assert "Person 7" not in again.graph.state.entities and "Later 59" in again.graph.state.entities  # a new shard
    assert again.graph.search_nodes("topic99").entities[0].name == "Person 12"
    assert again.store.save_snapshot()  # what it holds is newer than the snapshot


def test_a_shard_edited_by_hand_or_removed_after_the_snapshot_is_read(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    shards = sorted(folder.glob("memory-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    edited = shards[0]
    lines = edited.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["observations"] = ["edited by hand"]
    edited.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n", encoding="utf-8")
    removed = [json.loads(line) for line in shards[1].read_text(encoding="utf-8").splitlines()]
    gone = {record["name"] for record in removed if record["type"] == "entity"}
    assert gone
    shards[1].unlink()  # its records are gone from the memory
    again = restarted(folder, cache)
    assert isinstance(again.store, Store) and again.store.restored_from_snapshot
    assert isinstance(first.store, Store)
    first.store._hand_edit_interval = 0  # it looks for hand edits at its next read, not a second later
    assert answers(again) == answers(first)
    assert content(again) == fresh_content(folder, tmp_path)
    assert again.graph.state.entities[record["name"]]["observations"] == ["edited by hand"]
    assert gone.isdisjoint(again.graph.state.entities)


def test_a_file_with_twice_written_records_and_blank_lines_is_restored_as_loaded(tmp_path: Path) -> None:
    """The official server can write a record twice; a load holds it merged, and so does a restore."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    folder.mkdir()
    records = [{"type": "entity", "name": f"E{i}", "entityType": "thing", "observations": [f"o{i}"]} for i in range(30)]
    records.insert(10, {"type": "entity", "name": "E3", "entityType": "thing", "observations": ["another copy"]})
    records.insert(12, {"type": "relation", "from": "E1", "to": "E2", "relationType": "r"})
    records.insert(13, {"type": "relation", "from": "E1", "to": "E2", "relationType": "r"})
    text = "\n".join(json.dumps(r) for r in records[:20]) + "\n\n" + "\n".join(json.dumps(r) for r in records[20:])
    (folder / "memory.json").write_text(text, encoding="utf-8")  # no final newline, as the official server writes
    snapshot_written(folder, cache)
    again = restarted(folder, cache)
    assert isinstance(again.store, Store) and again.store.restored_from_snapshot
    assert again.graph.state.entities["E3"]["observations"] == ["o3", "another copy"]
    assert answers(again) == answers(services(folder, tmp_path / "fresh"))
    assert (folder / "memory.json").read_text(encoding="utf-8") == text  # a restore writes nothing


def test_a_first_commit_beside_a_file_no_commit_wrote_leaves_that_file_unread_by_every_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A memory the official server wrote has no generation until a commit lists it in the stamp. Listed with the
    commit's new token, every process that held it read it again whole at its next look: the writer itself,
    another server beside it, and a restart from a snapshot saved before (the start after an admin `import`:
    6.5 s at 100k entities). Only a commit that rewrites it, or a hand edit, makes it worth reading again."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    folder.mkdir()
    records = [{"type": "entity", "name": f"E{i}", "entityType": "thing", "observations": [f"o{i}"]} for i in range(60)]
    official = folder / "memory.json"  # over the shard limit (40 lines): a new record goes to a shard of its own
    official.write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    snapshot_written(folder, cache)
    beside = services(folder, tmp_path / "beside-cache")
    beside.store.open()
    writer = services(folder, tmp_path / "writer-cache")
    writer.graph.create_entities([Entity(name="Newcomer", entityType="person", observations=["arrived late"])])
    assert official.read_text(encoding="utf-8").count("\n") == 59  # not rewritten by the commit
    assert isinstance(writer.store, Store)
    collection_type = type(writer.store.collections["memory"])
    read: list[tuple[str, str]] = []
    real_read = collection_type.read

    def counted_read(collection: Any, index: int) -> Any:
        read.append((collection.name, collection.names.file_name(index)))
        return real_read(collection, index)

    monkeypatch.setattr(collection_type, "read", counted_read)
    again = restarted(folder, cache)
    assert isinstance(again.store, Store) and again.store.restored_from_snapshot
    everyone = (writer, beside, again)
    for built in everyone:
        assert isinstance(built.store, Store)
        built.store._hand_edit_interval = 0  # a full look at the files at every call
        assert {e.name for e in built.graph.open_nodes(["E7", "Newcomer"]).entities} == {"E7", "Newcomer"}
    assert ("memory", "memory.json") not in read, read
    # A hand edit of that file is still read by every process, and a commit that rewrites it is followed.
    official.write_text(official.read_text(encoding="utf-8").replace('"o7"', '"by hand"'), encoding="utf-8")
    for built in everyone:
        assert built.graph.open_nodes(["E7"]).entities[0].observations == ["by hand"]
    beside.graph.add_observations([ObservationAddition(entityName="E8", contents=["from beside"])])
    for built in everyone:
        assert built.graph.open_nodes(["E8"]).entities[0].observations == ["o8", "from beside"]
    assert content(again) == content(writer) == fresh_content(folder, tmp_path)


def test_a_restore_finds_each_relation_and_keeps_relations_whose_ends_name_no_entity(tmp_path: Path) -> None:
    """The snapshot keeps the relations as columns and each name's relations as places among them: a restore
    finds every relation by its key (the restored table of places), keeps a hub's relations as a set, and keeps
    a relation to a name no entity has (official files can hold them), self-relations included."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    folder.mkdir()
    records: list[dict[str, Any]] = [
        {"type": "entity", "name": f"E{i}", "entityType": "thing", "observations": [f"o{i}"]} for i in range(30)
    ]
    records += [{"type": "relation", "from": "E0", "to": f"E{i}", "relationType": "owns"} for i in range(1, 20)]
    # More relations than one chunk of the snapshot holds (snapshot.CHUNK_ITEMS), between the other entities.
    records += [
        {"type": "relation", "from": f"E{20 + i % 10}", "to": f"E{20 + i * 7 % 10}", "relationType": f"r{i}"}
        for i in range(6_000)
    ]
    records += [
        {"type": "relation", "from": "E5", "to": "Nobody", "relationType": "cites"},
        {"type": "relation", "from": "Ghost", "to": "E6", "relationType": "haunts"},
        {"type": "relation", "from": "E7", "to": "E7", "relationType": "mirrors"},
    ]
    (folder / "memory.json").write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    snapshot_written(folder, cache)
    again = restarted(folder, cache)
    assert isinstance(again.store, Store) and again.store.restored_from_snapshot
    state = again.graph.state
    assert len(state.relations) == len(records) - 30
    assert all(key in state.relations for held in state.by_node.values() for key in held)
    assert ("E5", "Nobody", "other") not in state.relations and ("E5", "Nobody") not in state.relations
    assert isinstance(state.by_node["E0"], set) and len(state.by_node["E0"]) == 19
    assert state.by_node["Nobody"] == (("E5", "Nobody", "cites"),)
    assert state.by_node["E7"] == (("E0", "E7", "owns"), ("E7", "E7", "mirrors"))  # in the order they were made
    assert answers(again) == answers(services(folder, tmp_path / "fresh"))
    ghost = again.graph.read_graph().model_dump(by_alias=True)["relations"]
    assert {"from": "Ghost", "to": "E6", "relationType": "haunts"} in ghost


@pytest.mark.parametrize(
    "damage",
    [
        {"next_ordinal": None},
        {"relation_to": array("i", [0, 99]).tobytes()},  # a place past the name table
        {"relation_from": array("i", [0, -1]).tobytes()},  # a place before the name table
        {"relation_to": array("i", [0]).tobytes()},  # fewer ends than relations
        {"relation_type": ["knows", 7]},  # a type that is no string
        {"next_ordinal": 1},  # not past the relations' places (their ordinals once restored)
        {"relation_places": array("i", [0] * 2).tobytes()},  # a table of places too small to hold the relations
        {"relation_places": array("i", [3] + [0] * 15).tobytes()},  # a place past the relations
        {"degrees": array("i", [2, 2, 0]).tobytes()},  # not one count per place
        {"degrees": array("i", [2, 1, 0, 0]).tobytes()},  # not adding up to the relations held by name
        {"starts": array("i", [0, 3, 0, 0]).tobytes()},  # a name's relations past the end of their table
        {"touching": array("i", [0, 1, 0, 2]).tobytes()},  # a relation past the relations
        {"entities": ["A", "B"]},  # names without their records
        {"elsewhere": {"Nobody": "lesson"}},  # an entity the graph does not hold
    ],
)
def test_a_graph_state_that_cannot_be_restored_leaves_the_graph_as_it_was(damage: dict[str, Any]) -> None:
    live = GraphState()
    live.records_changed(
        "memory",
        [],
        [
            {"type": "entity", "name": "A", "entityType": "t", "observations": ["o"]},
            {"type": "entity", "name": "B", "entityType": "t", "observations": []},
            {"type": "relation", "from": "A", "to": "B", "relationType": "knows"},
            {"type": "relation", "from": "B", "to": "A", "relationType": "knows"},
        ],
    )
    state = as_read_back(live.snapshot_state())
    restored = GraphState()
    restored.restore_state(state)
    assert (restored.entities, restored.by_node) == (live.entities, live.by_node)
    assert relation_order(restored) == relation_order(live)
    untouched = GraphState()
    with pytest.raises((TypeError, ValueError, IndexError)):
        untouched.restore_state({**state, **damage})
    assert not untouched.entities and not untouched.relations and not untouched.by_node and not untouched._elsewhere
    assert not untouched.index.matching("o")


def random_graph(rng: random.Random) -> GraphState:
    """A graph heard through random changes, as a store feeds it: entities put again and removed (dead search
    documents), relations to names no entity has, self-relations, hubs that shrink back under SMALL_DEGREE."""
    state = GraphState()
    random_changes(state, rng, rng.randint(20, 300))
    state.index.index_some(rng.randint(0, len(state.entities)))
    return state


def random_changes(state: GraphState, rng: random.Random, count: int) -> None:
    names = [f"N{i}" for i in range(30)] + ["Ünïcode é", "sp ace", "Ghost"]
    # ("running" before or after "run", "deploys" before or after "deploy": a stem met first as another word's)
    words = ["deploy", "deploys", "kernel", "cache", "mocha", "running", "run", "data", "base", "spouse"]
    for _ in range(count):
        roll, name = rng.random(), rng.choice(names)
        if roll < 0.3:
            # (an empty observation, and one holding the separator EntityTable joins a plain entity's by)
            odd = ["", "held\x00apart", " ".join(rng.sample(words, 2))]
            observations = [rng.choice(odd) if rng.random() < 0.1 else " ".join(rng.sample(words, 2))]
            observations = observations[: rng.randint(0, 1)] + [" ".join(rng.sample(words, 2)) for _ in range(2)]
            del observations[rng.randint(0, 3) :]
            record = {
                "type": "entity",
                "name": name,
                "entityType": rng.choice(["t", "u"]),
                "observations": observations,
            }
            state.records_changed("memory", [], [record])
        elif roll < 0.65:
            end = name if rng.random() < 0.1 else rng.choice(names)
            relation = {"type": "relation", "from": rng.choice(names), "to": end, "relationType": rng.choice("ab")}
            state.records_changed("memory", [], [relation])
        elif roll < 0.8 and state.relations:
            start, end, kind = rng.choice(list(state.relations))
            state.records_changed("memory", [("relation", start, end, kind)], [])
        elif roll < 0.9:
            state.records_changed("memory", [("entity", name)], [])
        else:  # a hub, then some of its relations gone
            made = [{"type": "relation", "from": name, "to": f"H{i}", "relationType": "h"} for i in range(12)]
            state.records_changed("memory", [], made)
            gone = [("relation", name, f"H{i}", "h") for i in rng.sample(range(12), rng.randint(0, 12))]
            state.records_changed("memory", gone, [])


def _starts(state: dict[str, Any]) -> list[int]:
    return list(array("q", state["posting_starts"]))


def _with_starts(starts: list[int]) -> dict[str, bytes]:
    return {"posting_starts": array("q", starts).tobytes()}


INDEX_DAMAGES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "a stem placed past the words": lambda state: {"stem_places": array("q", [0, 99]).tobytes()},
    "a stem placed before them": lambda state: {"stem_places": array("q", [0, -1]).tobytes()},
    "a stem held twice": lambda state: {
        "stem_places": array("q", [*array("q", state["stem_places"])[:-1], 0]).tobytes()
    },
    "a stem from other words placed past the stems": lambda state: {
        "stems_from_other_words": array("q", [99]).tobytes()
    },
    "a stem from other words placed before them": lambda state: {"stems_from_other_words": array("q", [-1]).tobytes()},
    "a stem from other words named twice": lambda state: {"stems_from_other_words": array("q", [0, 0]).tobytes()},
    "counts that are no numbers": lambda state: {"counts": ("x", 0, 0, 0)},
    "pending documents that are no list": lambda state: {"pending": 5},
    "postings ending past their end": lambda state: _with_starts([*_starts(state)[:-1], _starts(state)[-1] + 1]),
    "postings going back": lambda state: _with_starts([0, 5, 4, *_starts(state)[3:]]),
    "fewer postings than stems": lambda state: _with_starts(_starts(state)[:-1]),
    "texts ending past their end": lambda state: {"texts": state["texts"][:-1]},
    "texts going back": lambda state: {"text_starts": array("q", [0, 9, 5, len(state["texts"])]).tobytes()},
    "fewer texts than documents": lambda state: {"text_starts": array("q", [0, len(state["texts"])]).tobytes()},
    "a block of texts of another length": lambda state: {
        "text_block_bytes": array("q", [len(state["texts"]) - 1]).tobytes(),
        "texts": state["texts"][:-1],
    },
    "a table of places of another size": lambda state: {"doc_places": array("i", [0] * 3).tobytes()},
    "a table of places pointing past its words": lambda state: {"word_places": array("i", [99] * 16).tobytes()},
}


@pytest.mark.parametrize("damage", INDEX_DAMAGES.values(), ids=INDEX_DAMAGES)
def test_a_search_index_state_that_cannot_be_restored_leaves_the_index_as_it_was(
    damage: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    live = SubstringIndex()
    live.put("A", ["A", "t", "deploys the api"])
    live.put("B", ["B", "t", "api keys"])
    live.index_some(2)
    state = as_read_back(live.snapshot_state())
    restored = SubstringIndex()
    restored.restore_state(state)
    assert as_read_back(restored.snapshot_state()) == state and restored.matching("api") == live.matching("api")
    untouched = SubstringIndex()
    with pytest.raises((TypeError, ValueError, IndexError)):
        untouched.restore_state({**state, **damage(state)})
    assert as_read_back(untouched.snapshot_state()) == as_read_back(SubstringIndex().snapshot_state())


@pytest.mark.parametrize("seed", range(40))
def test_a_graph_state_restored_from_its_snapshot_holds_what_was_snapshotted(seed: int) -> None:
    live = random_graph(random.Random(seed))
    restored = GraphState()
    restored.restore_state(as_read_back(live.snapshot_state()))  # as the snapshot file holds it
    assert list(restored.entities.items()) == list(live.entities.items())
    assert restored._elsewhere == live._elsewhere
    assert [restored.ordinal(n) for n in restored.entities] == [live.ordinal(n) for n in live.entities]
    assert relation_order(restored) == relation_order(live)
    assert restored._next_ordinal == live._next_ordinal
    assert restored.by_node.keys() == live.by_node.keys()
    for name, held in live.by_node.items():
        # A tuple keeps its order (creation order); a hub's set its members (one shrunk to 8 or fewer may come
        # back as a tuple, which every reader takes alike).
        assert restored.by_node[name] == held if isinstance(held, tuple) else set(restored.by_node[name]) == held
    assert all(key in restored.relations for held in restored.by_node.values() for key in held)
    assert as_read_back(restored.index.snapshot_state()) == as_read_back(live.index.snapshot_state())
    index, again = live.index, restored.index
    assert list(again._doc_of.items()) == list(index._doc_of.items())
    assert list(again._word_ids.items()) == list(index._word_ids.items())
    assert again._stems_from_other_words == index._stems_from_other_words
    assert [again._stem_id(text) for text in again._stems] == list(range(len(index._stems)))
    for query in ("deploy", "N1", "sp", "Ghost", "data base"):
        assert again.matching(query) == index.matching(query)
    # Writes after the restore: a packed stem grows an array of its own, a new stem starts one, a removal only
    # marks its document dead; both indexes then hold and answer the same.
    for each in (index, again):
        each.put("Fresh", ["Fresh", "t", "deploys to the data base", "zebra crossing"])
        each.remove(next(iter(live.entities), "none"))
        each.index_some(len(live.entities) + 1)
    assert as_read_back(again.snapshot_state()) == as_read_back(index.snapshot_state())
    assert [again._stem_id(text) for text in again._stems] == list(range(len(index._stems)))
    for query in ("deploy", "zebra", "data base", "fresh"):
        assert again.matching(query) == index.matching(query)


@pytest.mark.parametrize(
    "observations", [[], [""], ["", ""], ["one"], ["a", "b", "c"], ["a\x00b"], ["x", "a\x00b"], ["\x00"], ["x", ""]]
)
def test_an_entity_reads_back_its_observations_exactly_also_after_a_restore(observations: list[str]) -> None:
    """A plain entity's observations are held joined by a separator; an observation holding it is held whole."""
    live = GraphState()
    record = {"type": "entity", "name": "E", "entityType": "t", "observations": observations}
    live.records_changed("memory", [], [dict(record)])
    restored = GraphState()
    restored.restore_state(as_read_back(live.snapshot_state()))
    for state in (live, restored):
        assert state.entities["E"] == record
        assert state.entities.view("E") == {"name": "E", "entityType": "t", "observations": observations}
        assert state.entities.entity_type("E") == "t"
    # A restore holds one string for all of them (the memory a restart saves), unless one holds the separator.
    assert len(restored.entities.held["E"]) <= 3 or any("\x00" in observation for observation in observations)


def relation_order(state: GraphState) -> list[tuple[str, str, str]]:
    """The relations in creation order, their ordinals checked to rise with it. (A restored relation's ordinal is
    its place among the relations, so a restore's ordinals differ from those of the graph it was made from: only
    their order means anything.)"""
    keys = list(state.relations)
    ordinals = [state.relations[key] for key in keys]
    assert ordinals == sorted(set(ordinals)) and len(keys) == len(state.relations)
    assert all(key in state.relations for key in keys)
    return keys


def relations_by_name(state: GraphState) -> dict[str, set[tuple[str, str, str]]]:
    """Each name's relations as the readers take them: a set (they order them themselves)."""
    return {name: set(held) for name, held in state.by_node.items()}


@pytest.mark.parametrize("seed", range(40))
def test_a_restored_graph_changed_after_the_restore_holds_what_the_live_one_does(seed: int) -> None:
    """A restore holds each name's relations by place (RelationsByName); the changes that follow (entities gone
    and made again, relations to names no entity has, hubs) are held by name. Live and restored must agree on
    every name's relations and degree through them, and through a second snapshot."""
    live = random_graph(random.Random(seed))
    restored = GraphState()
    restored.restore_state(as_read_back(live.snapshot_state()))
    for each in (live, restored):
        random_changes(each, random.Random(seed + 1000), 150)
    for graph in (restored, again := GraphState()):
        if graph is again:
            again.restore_state(as_read_back(restored.snapshot_state()))
        assert relations_by_name(graph) == relations_by_name(live)
        for name, held in live.by_node.items():  # a few relations keep their order (a hub's set, or a tuple
            if isinstance(held, tuple) and isinstance(graph.by_node[name], tuple):  # from a set shrunk, has none)
                assert graph.by_node[name] == held
        assert sorted(graph.by_node) == sorted(live.by_node) and len(graph.by_node) == len(live.by_node)
        assert relation_order(graph) == relation_order(live)
        assert graph.relations_touching(live.entities) == live.relations_touching(live.entities)
        assert list(graph.entities.items()) == list(live.entities.items())
        assert [graph.ordinal(n) for n in graph.entities] == [live.ordinal(n) for n in live.entities]
        for name in [*live.entities, *live.by_node, "Nobody"]:
            assert graph.by_node.degree(name) == len(live.by_node.get(name, ()))
            assert (name in graph.by_node) == (name in live.by_node)
        assert graph.count_relations_touching(live.entities) == live.count_relations_touching(live.entities)


def test_a_first_start_holds_its_shards_by_their_keys_once_the_snapshot_is_written(tmp_path: Path) -> None:
    """As a restart does: the lines are read back from the file when a write needs them, twice-written records
    and blank lines included, and another server follows the writes."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    folder.mkdir()
    records = [{"type": "entity", "name": f"E{i}", "entityType": "thing", "observations": [f"o{i}"]} for i in range(30)]
    records.insert(10, {"type": "entity", "name": "E3", "entityType": "thing", "observations": ["another copy"]})
    text = "\n".join(json.dumps(r) for r in records[:20]) + "\n\n" + "\n".join(json.dumps(r) for r in records[20:])
    (folder / "memory.json").write_text(text, encoding="utf-8")
    follower = services(folder, tmp_path / "follower-cache")
    follower.store.open()
    first = snapshot_written(folder, cache)
    assert all(shard.unread_lines() is not None for shard in memory_shards(first).values())
    first.graph.add_observations([ObservationAddition(entityName="E3", contents=["new"])])
    first.graph.create_entities([Entity(name="New", entityType="thing", observations=[])])
    assert first.graph.open_nodes(["E3"]).entities[0].observations == ["o3", "another copy", "new"]
    assert content(first) == fresh_content(folder, tmp_path) == content(follower)


def entity_line(name: str, *observations: str) -> str:
    return json.dumps({"type": "entity", "name": name, "entityType": "thing", "observations": list(observations)})


RELATION = {"type": "relation", "from": "E0", "to": "E1", "relationType": "knows"}
FIRST_LOAD_FILES = {
    # file text, whether a first load holds its shard by keys
    "plain": ("\n".join(entity_line(f"E{i}", f"o{i}") for i in range(8)) + "\n", True),
    "no final newline": ("\n".join(entity_line(f"E{i}", f"o{i}") for i in range(8)), True),
    "blank lines, a record twice": (
        "\n".join([entity_line("E0", "o0"), "", entity_line("E1", "o1"), entity_line("E0", "again"), "  "])
        + "\n\n"
        + entity_line("E2", "o2")
        + "\n",
        True,
    ),
    "a relation twice": (
        "\n".join([entity_line("E0"), entity_line("E1"), *[json.dumps(RELATION)] * 2, entity_line("E2")]) + "\n",
        True,
    ),
    "CRLF": ("\r\n".join(entity_line(f"E{i}", f"o{i}") for i in range(8)) + "\r\n", False),
    "a bad line": ("\n".join([entity_line("E0", "o0"), "{not json", entity_line("E1", "o1")]) + "\n", False),
}


@pytest.mark.parametrize("shape", list(FIRST_LOAD_FILES))
def test_a_first_load_holds_a_shard_by_its_keys_when_its_file_gives_each_line_back(shape: str, tmp_path: Path) -> None:
    """Before any snapshot: a shard whose lines the file gives back by position (blank lines and records written
    twice included) holds only its keys, as a restart does; one with a line ending in "\r" or an unreadable line
    holds its lines. Writes read the lines back exactly, and another server follows them."""
    text, by_keys = FIRST_LOAD_FILES[shape]
    folder = tmp_path / "memory"
    folder.mkdir()
    (folder / "memory.json").write_text(text, encoding="utf-8", newline="")
    follower = services(folder, tmp_path / "follower-cache")
    follower.store.open()
    first = services(folder, tmp_path / "cache")
    first.store.open()
    (shard,) = memory_shards(first).values()
    assert (shard.unread_lines() is not None) == by_keys
    if shape == "a bad line":
        return  # (a shard with an unreadable line is never rewritten: test_storage covers it)
    before = content(first)
    first.graph.add_observations([ObservationAddition(entityName="E1", contents=["new"])])
    first.graph.create_entities([Entity(name="New", entityType="thing", observations=[])])
    assert first.graph.open_nodes(["E1"]).entities[0].observations[-1] == "new"
    assert content(first) == fresh_content(folder, tmp_path) == content(follower)
    assert len(content(first)["entities"]) == len(before["entities"]) + 1
    if shape == "blank lines, a record twice":
        assert first.graph.open_nodes(["E0"]).entities[0].observations == ["o0", "again"]


@pytest.mark.parametrize("damage", ["flipped byte", "cut short", "other code", "garbage"])
@pytest.mark.usefixtures("each_engine")
def test_a_damaged_or_foreign_snapshot_is_ignored(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    snapshot_written(folder, cache)
    path = next((cache / "snapshots").glob("*.bin"))
    data = bytearray(path.read_bytes())
    if damage == "flipped byte":
        data[len(data) // 2] ^= 0x55
    elif damage == "cut short":
        del data[len(data) // 3 :]
    elif damage == "other code":
        header, _, body = bytes(data).partition(b"\n")
        fields = header.split(b" ")  # memory-graph snapshot <tag> <crc32> <length>
        fields[2] = b"0123456789abcdef"
        data = bytearray(b" ".join(fields) + b"\n" + body)
    else:
        data = bytearray(b"\x00\xffnot a snapshot at all")
    path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        again = restarted(folder, cache)
    assert not again.store.restored_from_snapshot
    assert answers(again) == answers(services(folder, tmp_path / "fresh"))
    if damage in ("flipped byte", "cut short"):
        assert "damaged start snapshot" in caplog.text
    assert again.store.save_snapshot()  # replaced by a good one


def test_no_snapshot_of_a_store_with_unreadable_lines_or_too_few_records(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache), count=30)
    shard = next(folder.glob("memory-*.json"))
    shard.write_text(shard.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    broken = services(folder, cache)
    broken.store.open()
    assert not broken.store.save_snapshot()  # its problems must be found by every start
    assert broken.store.problems()
    small = build_services(settings(tmp_path / "small", cache))
    small.graph.create_entities([Entity(name="Only", entityType="one", observations=[])])
    assert not small.store.save_snapshot()  # under SNAPSHOT_MIN_RECORDS
    assert not (cache / "snapshots").exists()


def test_the_server_writes_the_snapshot_and_its_next_start_restores_it(tmp_path: Path) -> None:
    """Over stdio, as clients run it: the first server writes the snapshot after loading; the second restores it
    (it says so in its log) and answers the same."""
    folder, cache = tmp_path / "memory", tmp_path / "cache-home"
    folder.mkdir()
    with open(folder / "memory.json", "w", encoding="utf-8") as out:
        for i in range(21_000):
            out.write(json.dumps({"type": "entity", "name": f"N{i}", "entityType": "t", "observations": [f"x{i}"]}))
            out.write("\n")
    env = {
        **os.environ,
        "MEMORY_FILE_PATH": str(folder / "memory.json"),
        "XDG_CACHE_HOME": str(cache),
        "MEMORY_LOG_LEVEL": "info",
        "PYTHONPATH": str(ROOT),
    }
    open_last = {"name": "open_nodes", "arguments": {"names": ["N20999"]}}
    calls = [INITIALIZE, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": open_last}]
    stdin = "".join(json.dumps(c) + "\n" for c in calls)

    def run() -> tuple[dict[str, Any], str]:
        done = subprocess.run(
            [sys.executable, "-m", "memory_graph"], input=stdin, capture_output=True, text=True, env=env, timeout=120
        )
        answer = next(json.loads(line) for line in done.stdout.splitlines() if json.loads(line).get("id") == 2)
        return answer["result"], done.stderr

    first, _ = run()
    assert len(list((cache / "memory-graph" / "snapshots").glob("*.bin"))) == 1
    second, log_text = run()
    assert second == first and "N20999" in json.dumps(second)
    assert "restored from the start snapshot" in log_text


def test_an_http_project_store_saves_its_snapshot_at_exit_when_the_session_changed_it(tmp_path: Path) -> None:
    """A project served at /mcp/<project> is closed at shutdown as the base store is: its snapshot, first written
    after its load, is written again because a call changed the memory."""
    from tests.memory_graph.test_http import TOKEN, client_for, free_port, serve, wait_for_port

    project = tmp_path / "projects" / "work"
    project.mkdir(parents=True)
    with open(project / "memory.json", "w", encoding="utf-8") as out:
        for i in range(21_000):
            out.write(json.dumps({"type": "entity", "name": f"N{i}", "entityType": "t", "observations": []}) + "\n")
    snapshots = tmp_path / "cache-home" / "memory-graph" / "snapshots"
    os.environ["XDG_CACHE_HOME"] = str(tmp_path / "cache-home")
    try:
        port = free_port()
        process = serve(tmp_path, "--port", str(port))
    finally:
        del os.environ["XDG_CACHE_HOME"]
    try:
        wait_for_port(process, port)
        url = f"http://127.0.0.1:{port}/mcp/work"

        async def call(name: str, arguments: dict[str, Any]) -> None:
            async with client_for(url, TOKEN) as client:
                assert not (await client.call_tool(name, arguments)).is_error

        anyio.run(call, "open_nodes", {"names": ["N1"]})
        deadline = time.monotonic() + 60
        while not list(snapshots.glob("*.bin")):  # written after the project's load, off the request path
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        (first,) = snapshots.glob("*.bin")
        written = first.stat().st_mtime_ns
        anyio.run(call, "create_entities", {"entities": [{"name": "New", "entityType": "t", "observations": []}]})
    finally:
        process.terminate()
        process.communicate(timeout=60)
    (saved,) = snapshots.glob("*.bin")
    assert saved.stat().st_mtime_ns > written


def test_a_save_removes_what_a_writer_killed_mid_write_left_long_ago(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    path = next((cache / "snapshots").glob("*.bin"))
    old, young = path.with_name(f".{path.name}.aaaa.tmp"), path.with_name(f".{path.name}.bbbb.tmp")
    old.write_bytes(b"half a snapshot")
    young.write_bytes(b"another process writing now")
    os.utime(old, (1_000_000, 1_000_000))
    first.graph.create_entities([Entity(name="One more", entityType="person", observations=[])])
    assert first.store.save_snapshot()
    assert not old.exists() and young.exists()


def recreate_database(folder: Path) -> None:
    url = Engine.database_url(folder)
    assert url is not None and Engine.server_url is not None
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(Engine.server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")


@pytest.mark.parametrize("each_engine", ["postgres"], indirect=True)
def test_a_database_recreated_under_the_same_url_is_read_not_restored(tmp_path: Path, each_engine: str) -> None:
    """Its change log starts again at 1: a snapshot of the old one would take the new rows for ones it has."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    first.store.close()
    recreate_database(folder)
    fill(services(folder, tmp_path / "other-cache"), count=20)
    again = restarted(folder, cache)
    assert not again.store.restored_from_snapshot
    assert len(again.graph.state.entities) == 22
    assert content(again) == fresh_content(folder, tmp_path)


@pytest.mark.parametrize("each_engine", ["postgres"], indirect=True)
def test_a_change_log_pruned_past_the_snapshot_makes_the_restart_read_everything(
    tmp_path: Path, each_engine: str
) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    other = services(folder, tmp_path / "other-cache")
    other.graph.delete_entities(["Person 3"])
    other.graph.create_entities([Entity(name="After pruning", entityType="person", observations=[])])
    url = Engine.database_url(folder)
    assert url is not None
    with psycopg.connect(url, autocommit=True) as conn:  # what `memory-graph compact` does to an old log
        conn.execute("UPDATE memory_graph_stores SET pruned_through = (SELECT max(seq) FROM memory_graph_changes)")
        conn.execute("DELETE FROM memory_graph_changes")
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    assert "Person 3" not in again.graph.state.entities and "After pruning" in again.graph.state.entities
    assert content(again) == content(first) == fresh_content(folder, tmp_path)


def memory_shards(built: Services) -> dict[int, Any]:
    assert isinstance(built.store, Store)
    return built.store.collections["memory"].shards


def test_a_restored_shard_reads_its_lines_only_when_a_write_needs_them(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    again = restarted(folder, cache)
    shards = memory_shards(again)
    assert all(shard.unread_lines() is not None for shard in shards.values())  # nothing of their lines is held
    again.graph.add_observations([ObservationAddition(entityName="Person 2", contents=["a new fact"])])
    read = [index for index, shard in memory_shards(again).items() if shard.unread_lines() is None]
    assert len(read) == 1  # the one shard the write rewrote
    first.graph.read_graph()  # follows the write
    assert answers(again) == answers(first)
    assert content(again) == fresh_content(folder, tmp_path)


def test_a_restored_shard_changed_before_its_lines_are_read_fails_the_call_and_is_then_read(tmp_path: Path) -> None:
    """A hand edit in the instant after the last look at the files: the lines can no longer be told from the
    file, so the call that needs them fails, writing nothing; the next call reads the edit in."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    snapshot_written(folder, cache)
    again = restarted(folder, cache)
    index, shard = next(iter(memory_shards(again).items()))
    path = folder / ("memory.json" if index == 0 else f"memory-{index}.json")
    before = path.read_bytes()
    lines = path.read_text(encoding="utf-8").splitlines()
    edited = json.loads(lines[0])
    edited["observations"] = ["changed by hand"]
    path.write_text("\n".join([json.dumps(edited), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(StaleShardError, match="changed on disk"):
        _ = shard.lines
    assert path.read_bytes() != before  # the edit stands
    assert isinstance(again.store, Store)
    again.store._hand_edit_interval = 0
    assert again.graph.open_nodes([edited["name"]]).entities[0].observations == ["changed by hand"]
    again.graph.add_observations([ObservationAddition(entityName=edited["name"], contents=["and more"])])
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0])["observations"] == [
        "changed by hand",
        "and more",
    ]


def test_another_servers_commits_to_restored_shards_are_followed(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    again = restarted(folder, cache)
    other = services(folder, tmp_path / "other-cache")
    for i in range(0, 150, 13):  # in every shard
        other.graph.add_observations([ObservationAddition(entityName=f"Person {i}", contents=[f"seen {i}"])])
    other.graph.delete_entities(["Person 40"])
    other.graph.create_relations([Relation.model_validate({"from": "Person 1", "to": "Person 2", "relationType": "x"})])
    assert answers(again) == answers(first)
    assert content(again) == fresh_content(folder, tmp_path)
    again.graph.add_observations([ObservationAddition(entityName="Person 13", contents=["mine"])])
    assert content(again) == content(other) == fresh_content(folder, tmp_path)


def test_a_record_held_only_merged_is_reported_gone_after_a_restart(tmp_path: Path) -> None:
    """A one-record file saved with a BOM (a Windows editor): deleted after the snapshot, it must not come back
    in the restored server, let alone be written back by its next change."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    folder.mkdir()
    line = json.dumps({"type": "entity", "name": "Ghost", "entityType": "t", "observations": ["boo"]})
    (folder / "memory.json").write_bytes(b"\xef\xbb\xbf" + line.encode() + b"\n")
    snapshot_written(folder, cache)
    services(folder, tmp_path / "other").graph.delete_entities(["Ghost"])
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    assert "Ghost" not in again.graph.state.entities and not again.graph.search_nodes("boo").entities
    assert content(again) == fresh_content(folder, tmp_path)


def test_a_shard_replaced_while_the_snapshot_is_made_is_kept_as_changed(tmp_path: Path, monkeypatch: Any) -> None:
    """The snapshot's files are read with the store let go: another process (or this one) may replace a shard
    between the copy and the read. What was read must be the file the shard was read from; one replaced since is
    kept as changed (a stat no file has), so the restart reads it and holds what a load of the files holds."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    writer = services(folder, tmp_path / "w")
    writer.graph.create_entities([Entity(name=f"E{i}", entityType="t", observations=[]) for i in range(6)])
    first = services(folder, cache)
    first.graph.warm_up()
    other = services(folder, tmp_path / "other")
    other.store.open()
    assert isinstance(first.store, Store)
    collection_class = type(first.store.collections["memory"])  # (storage's modules are its own: not imported)
    original = collection_class._read_lines
    fired: list[int] = []

    def racing(self: Any, index: int) -> Any:
        if not fired and self.name == "memory":
            fired.append(index)
            other.graph.delete_entities(["E2"])  # the other process commits now
        return original(self, index)

    monkeypatch.setattr(collection_class, "_read_lines", racing)
    assert first.store.save_snapshot()
    monkeypatch.setattr(collection_class, "_read_lines", original)
    assert fired
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    assert "E2" not in again.graph.state.entities and content(again) == fresh_content(folder, tmp_path)


def test_snapshots_unused_for_a_month_are_let_go_and_a_restore_keeps_its_own(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    mine = next((cache / "snapshots").glob("*.bin"))
    gone, recent = mine.with_name("0000000000000000.bin"), mine.with_name("1111111111111111.bin")
    gone.write_bytes(b"a memory deleted long ago")
    recent.write_bytes(b"another memory, used last week")
    os.utime(gone, (1_000_000, 1_000_000))
    week_ago = time.time() - 7 * 86_400
    os.utime(recent, (week_ago, week_ago))
    os.utime(mine, (1_000_000, 1_000_000))
    restarted(folder, cache)  # restoring it marks it used
    assert mine.stat().st_mtime > week_ago
    first.graph.create_entities([Entity(name="One more", entityType="person", observations=[])])
    assert first.store.save_snapshot()
    assert not gone.exists() and recent.exists() and mine.exists()


def test_a_snapshot_with_large_containers_is_written_in_chunks_and_restored_as_loaded(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    first = services(folder, cache)
    fill(first, count=6_000)  # past the 5,000 items a chunk holds: the graph's tables are written in chunks
    first.graph.warm_up()
    assert first.store.save_snapshot()
    path = next((cache / "snapshots").glob("*.bin"))
    assert b"\x00memory-graph chunked container" in path.read_bytes()  # (marshal writes a repeated string once)
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    assert answers(again) == answers(first)
    # A snapshot cut short inside its chunks (its header made to match) is read as none, and the files are read.
    header, _, data = path.read_bytes().partition(b"\n")
    short = data[: len(data) - 1000]
    fields = header.split(b" ")
    fields[-2:] = [str(zlib.crc32(short)).encode(), str(len(short)).encode()]
    path.write_bytes(b" ".join(fields) + b"\n" + short)
    cut = restarted(folder, cache)
    assert not cut.store.restored_from_snapshot
    assert answers(cut) == answers(services(folder, tmp_path / "fresh"))


def test_a_snapshot_is_written_chunk_by_chunk_without_holding_its_bytes_whole(tmp_path: Path) -> None:
    payload = {"parts": {"graph": [f"record {i} of the memory" for i in range(300_000)], "small": {"k": [1, 2]}}}
    path = tmp_path / "snapshots" / "memory.bin"
    tracemalloc.start()
    try:
        size = write_snapshot(path, "tag1", payload)[0]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size == path.stat().st_size > 5_000_000
    assert peak < size / 10  # a chunk at a time (encoded whole and joined, the bytes were held three times over)
    assert read_snapshot(path, "tag1") == payload
    assert read_snapshot(path, "other code") is None


def test_large_arrays_and_bytes_are_written_as_they_are_and_read_back_as_bytes(tmp_path: Path) -> None:
    """A big array (the graph's columns, the index's postings) or bytes value is written in place among the chunks,
    not copied into the skeleton: the save holds no second copy of it, and a restore reads its bytes back."""
    column = array("q", range(2_000_000))  # 16 MB
    payload = {"parts": {"columns": column, "packed": column.tobytes()[:1000], "raw": bytes(range(256)) * 1000}}
    path = tmp_path / "snapshots" / "memory.bin"
    tracemalloc.start()
    try:
        write_snapshot(path, "tag1", payload)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000  # (marshalled in the skeleton, the 16 MB were copied whole)
    expected = {
        "parts": {"columns": column.tobytes(), "packed": column.tobytes()[:1000], "raw": payload["parts"]["raw"]}
    }
    assert read_snapshot(path, "tag1") == expected == as_read_back(payload)


def mapped_file_mb() -> float:
    """This process's resident pages of mapped files (Linux's RssFile)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("RssFile:")).split()[1]) / 1024


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads Linux's /proc")
def test_a_snapshot_read_back_lets_go_of_the_mapped_pages_it_has_read(tmp_path: Path) -> None:
    """The file is mapped: its pages count in the process's memory as the checksum and the chunks touch them, and
    at a million entities the whole 650 MB file did. Pages already read are let go as the read goes on."""
    payload = {"parts": {"column": array("q", range(16_000_000)), "rows": [f"row {i}" for i in range(400_000)]}}
    path = tmp_path / "snapshots" / "memory.bin"
    size_mb = write_snapshot(path, "tag1", payload)[0] / 1e6
    assert size_mb > 130
    start = mapped_file_mb()
    seen: list[float] = []
    restored = read_snapshot(path, "tag1", between_chunks=lambda: seen.append(mapped_file_mb() - start))
    assert restored is not None and restored["parts"]["column"] == payload["parts"]["column"].tobytes()
    assert max(seen) < 3 * 16 + 8 < size_mb / 2  # a piece or two (16 MB each) at a time, never the file


def test_a_snapshot_that_cannot_be_written_leaves_the_earlier_one_and_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "snapshots" / "memory.bin"
    write_snapshot(path, "tag1", {"parts": list(range(20_000))})
    unwritable = {"parts": [*range(20_000), object()]}  # marshal refuses the object in the last chunk
    with pytest.raises(ValueError):
        write_snapshot(path, "tag1", unwritable)
    assert read_snapshot(path, "tag1") == {"parts": list(range(20_000))}
    assert [p.name for p in path.parent.iterdir()] == ["memory.bin"]


def _pause_outside_the_hold(built: Services, monkeypatch: Any) -> tuple[threading.Event, threading.Event]:
    """Make a save stop between its hold and its work with the store let go: (copied, resume). While it waits, the
    store is free; what the save then writes must be what was held when it copied."""
    copied, resume = threading.Event(), threading.Event()
    original = built.store._collection_copy

    def pausing() -> Any:
        taken = original()

        class Paused:
            def snapshot_state(self) -> Any:
                copied.set()
                assert resume.wait(60), "the test never let the save go on"
                return taken.snapshot_state() if taken is not None else None

        return Paused()

    monkeypatch.setattr(built.store, "_collection_copy", pausing)
    return copied, resume


def _racing_writes(built: Services) -> None:
    """Writes of every kind a part copies for: entities made, changed (observations, so the index's postings
    grow in place) and deleted; relations made (a hub's set grows in place) and deleted; lessons made, changed,
    deleted."""
    graph = built.graph
    graph.create_entities(
        [Entity(name=f"Late {i}", entityType="latecomer", observations=["arrived late"]) for i in range(5)]
    )
    graph.add_observations([ObservationAddition(entityName="Person 3", contents=["now likes topic99 and zebras"])])
    graph.delete_entities(["Person 4", "Late 1"])
    graph.create_relations(
        [
            Relation.model_validate({"from": f"Person {i}", "to": "Person 0", "relationType": "follows"})
            for i in range(5, 30)
        ]
    )
    graph.delete_relations([Relation.model_validate({"from": "Person 6", "to": "Person 18", "relationType": "knows"})])
    built.lessons.create_lesson(lesson("LATE_LESSON", "TimeoutError: the save took too long"))
    built.lessons.update_lesson(LessonChanges(name="KEY_MISSING", addObservations=["set DATABASE in the env"]))
    graph.delete_entities(["PORT_TAKEN"])  # a lesson goes as an entity does


@pytest.mark.usefixtures("each_engine")
@pytest.mark.parametrize("restored", [False, True], ids=["after-a-load", "after-a-restore"])
def test_a_save_made_while_others_write_restores_what_the_files_hold(
    tmp_path: Path, monkeypatch: Any, restored: bool
) -> None:
    """The save copies with the store held and makes its state with it let go. Writes of every kind run in between:
    the state written is each part's as it was at the copy (no write reached the copies), calls are answered
    while the save waits, and a restart restores it and, after its catch-up, holds what a load of the files holds
    (graph and searches). From a load (every shard's lines held, every stem's postings its own) and from a restore
    (shards held by keys, relations by name and postings as the restored columns)."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    if restored:
        snapshot_written(folder, cache)
        first = restarted(folder, cache)
        assert first.store.restored_from_snapshot
    else:
        first = services(folder, cache)
    first.graph.warm_up()
    # A hub before the copy: its relations are a set, which the racing writes then grow in place.
    first.graph.create_relations(
        [
            Relation.model_validate({"from": f"Person {i}", "to": "Person 0", "relationType": "admires"})
            for i in range(40, 52)
        ]
    )
    parts = first.store._snapshot_parts()
    at_copy: dict[str, bytes] = {}
    made: dict[str, bytes] = {}
    original_copy = first.store._collection_copy

    def recording_copy() -> Any:  # with the store held: what each part holds now, as the snapshot file keeps it
        at_copy.update({part.snapshot_name: marshal.dumps(as_read_back(part.snapshot_state())) for part in parts})
        return original_copy()

    monkeypatch.setattr(first.store, "_collection_copy", recording_copy)
    for part in parts:

        def recording(copy_of: Any = part.snapshot_copy, name: str = part.snapshot_name) -> Any:
            taken = copy_of()

            class Recorded:
                def snapshot_state(self) -> Any:
                    state = as_read_back(taken.snapshot_state())  # (its streams made once, here)
                    made[name] = marshal.dumps(state)
                    return state

            return Recorded()

        monkeypatch.setattr(part, "snapshot_copy", recording)
    copied, resume = _pause_outside_the_hold(first, monkeypatch)
    outcome: list[bool] = []
    saving = threading.Thread(target=lambda: outcome.append(first.store.save_snapshot()))
    saving.start()
    try:
        assert copied.wait(30)
        started = time.perf_counter()
        found = first.graph.search_nodes("topic3")  # answered while the save waits: it does not hold the store
        waited = time.perf_counter() - started
        assert saving.is_alive() and found.entities and waited < 5
        _racing_writes(first)
        assert saving.is_alive()
    finally:
        resume.set()
        saving.join(60)
    assert outcome == [True]
    # (compared as values: marshal's back-references depend on which objects are shared, not on what they hold)
    assert {n: marshal.loads(s) for n, s in made.items()} == {n: marshal.loads(s) for n, s in at_copy.items()}
    queries = ["topic3", "zebras", "latecomer", "Person 0", "KeyError database", "arrived late"]
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot
    fresh = services(folder, tmp_path / "fresh")
    assert content(again) == content(fresh)
    for query in queries:
        mine, theirs = again.graph.search_nodes(query), fresh.graph.search_nodes(query)
        # The restart answers as the process that wrote (its relations in the order it heard them); a load of the
        # files orders relations by where they are in them, so against it the same relations are compared.
        assert mine == first.graph.search_nodes(query), query
        assert mine.entities == theirs.entities, query
        assert sorted(map(str, mine.relations)) == sorted(map(str, theirs.relations)), query
    assert again.lessons.records == fresh.lessons.records
    # The writer goes on after its save (its checked shards now held by keys) and still holds what the files do.
    first.graph.add_observations([ObservationAddition(entityName="Person 7", contents=["after the save"])])
    assert content(first) == content(services(folder, tmp_path / "fresh-after"))


def snapshot_file(cache: Path) -> Path:
    (path,) = (cache / "snapshots").glob("*.bin")
    return path


@pytest.mark.usefixtures("each_engine")
def test_a_full_read_is_held_as_restored_from_its_snapshot_and_answers_the_same(tmp_path: Path) -> None:
    """`hold_as_restored`: a server that read the memory in full, once it has saved its snapshot, takes the graph
    and the collections' bookkeeping again from it (laid out as a restart's): every answer stays as it was, and
    the store goes on as any other."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    assert not first.store.restored_from_snapshot
    before = answers(first)
    assert first.graph.state.by_node.changed  # a full read holds every name's relations by name
    assert first.store.hold_as_restored()
    assert not first.graph.state.by_node.changed  # as a restore holds them: columns
    assert answers(first) == before
    assert not first.store.hold_as_restored()  # once
    first.graph.create_entities([Entity(name="After", entityType="person", observations=["came later"])])
    first.graph.create_relations([Relation.model_validate({"from": "After", "to": "Person 3", "relationType": "met"})])
    first.graph.delete_entities(["Person 8"])
    first.lessons.create_lesson(lesson("DISK_FULL", "OSError: [Errno 28] No space left on device"))
    assert content(first) == fresh_content(folder, tmp_path)
    assert first.store.save_snapshot()
    again = restarted(folder, cache)
    assert again.store.restored_from_snapshot and answers(again) == answers(first)
    assert not again.store.hold_as_restored()  # a restore is laid out as one already


@pytest.mark.usefixtures("each_engine")
def test_a_store_changed_since_its_snapshot_is_not_held_as_restored(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    first.graph.add_observations([ObservationAddition(entityName="Person 4", contents=["written after the save"])])
    assert not first.store.hold_as_restored()  # the snapshot no longer holds what the store does
    assert first.graph.state.by_node.changed  # nothing was let go
    assert content(first) == fresh_content(folder, tmp_path)


def history_of(built: Services) -> list[dict[str, Any]]:
    return [event.model_dump(by_alias=True) for event in built.history.get_history(limit=1000).events]


@pytest.mark.usefixtures("each_engine")
def test_another_servers_commit_not_yet_followed_is_heard_after_the_store_is_held_as_restored(tmp_path: Path) -> None:
    """A commit made while the server was idle, before the hold: the shard it rewrote no longer has the snapshot's
    stat, so the restore holds it to be read again (its lines unknown). The next call reads it, the commit's events
    reach the history, and later commits are followed as usual."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    other = services(folder, tmp_path / "other-cache")
    other.graph.add_observations([ObservationAddition(entityName="Person 12", contents=["now likes topic99"])])
    assert first.store.hold_as_restored()  # of what it held, the snapshot's; the commit is read next
    assert first.graph.search_nodes("topic99").entities[0].name == "Person 12"
    assert content(first) == content(other) == fresh_content(folder, tmp_path)
    assert history_of(first) == history_of(other)
    assert history_of(first)[0]["op"] == "add_observations"  # newest first
    other.graph.delete_entities(["Person 7"])
    other.graph.create_entities([Entity(name=f"Later {i}", entityType="person", observations=[]) for i in range(60)])
    first.graph.add_observations([ObservationAddition(entityName="Later 59", contents=["mine"])])
    assert content(first) == content(services(folder, tmp_path / "other-again")) == fresh_content(folder, tmp_path)
    assert history_of(first) == history_of(other)


@pytest.mark.parametrize("snapshot_kept", [True, False], ids=["reopened-from-the-snapshot", "snapshot-gone"])
@pytest.mark.parametrize("raised", [MemoryError, KeyboardInterrupt])
@pytest.mark.usefixtures("each_engine")
def test_a_hold_interrupted_after_letting_go_leaves_the_memory_to_be_read_again_not_written_empty(
    raised: type[BaseException], snapshot_kept: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anything raised once the parts are let go (memory running out in the graph's restore, an interrupt) must
    not leave a store that believes it holds the memory: an error is logged (an interrupt goes on up), and the
    next call reads the memory again, from the snapshot or, when that is gone, from the files. Either way every
    part agrees with the files, also about what another process deleted meanwhile (a lesson deleted elsewhere
    must not be written back), and a write keeps every record."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    other = services(folder, tmp_path / "other-cache")
    other.graph.delete_entities(["KEY_MISSING", "Person 9"])
    held = content(other)

    def failing(self: GraphState, state: Any) -> None:
        raise raised

    monkeypatch.setattr(GraphState, "restore_state", failing)
    if issubclass(raised, Exception):
        assert not first.store.hold_as_restored()
    else:
        with pytest.raises(raised):
            first.store.hold_as_restored()
    monkeypatch.undo()
    if not snapshot_kept:
        snapshot_file(cache).unlink()
    assert content(first) == held == fresh_content(folder, tmp_path)
    assert history_of(first) == history_of(other)
    with pytest.raises(NotFoundError):
        first.lessons.update_lesson(LessonChanges(name="KEY_MISSING", addObservations=["written back?"]))
    first.graph.create_entities([Entity(name="Written after", entityType="person", observations=[])])
    assert len(first.graph.read_graph().entities) == len(held["entities"]) + 1
    assert content(first) == fresh_content(folder, tmp_path)
    assert sorted(fresh_content(folder, tmp_path)["lesson records"]) == ["PORT_TAKEN"]


def test_commits_placed_in_a_shard_the_hold_left_to_be_read_are_read_not_replayed(tmp_path: Path) -> None:
    """Two commits by another process before the hold: a new lesson placed in the shard the hold then holds to be
    read again (its file changed), and a change to a lesson already there. Neither is replayed onto that shard's
    unknown lines: the reload reads it, and both commits' events reach the history."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    other = services(folder, tmp_path / "other-cache")
    other.lessons.create_lesson(lesson("DISK_FULL", "OSError: [Errno 28] No space left on device"))
    other.lessons.update_lesson(LessonChanges(name="PORT_TAKEN", addObservations=["try another port"]))
    assert first.store.hold_as_restored()
    assert content(first) == content(other) == fresh_content(folder, tmp_path)
    assert history_of(first) == history_of(other)
    assert [event["op"] for event in history_of(first)[:2]] == ["update_lesson", "create_lesson"]


def test_a_shard_that_cannot_be_statted_during_the_hold_leaves_the_memory_to_be_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error of the system after the let-go (the data folder made unreadable for an instant): the hold is given
    up, logged, and the next call reads the memory again; nothing on disk is lost."""
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    held = content(first)

    def unreadable(path: Path) -> None:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr("memory_graph.storage.collection.file_stat", unreadable)
    assert not first.store.hold_as_restored()
    monkeypatch.undo()
    first.graph.delete_entities(["Person 3"])
    assert len(content(first)["entities"]) == len(held["entities"]) - 1
    assert content(first) == fresh_content(folder, tmp_path)


def test_a_snapshot_replaced_or_damaged_since_it_was_saved_is_not_taken_and_nothing_is_let_go(tmp_path: Path) -> None:
    folder, cache = tmp_path / "memory", tmp_path / "cache"
    fill(services(folder, cache))
    first = snapshot_written(folder, cache)
    # Another server of the same memory saves its own snapshot over it (before this one follows its commit).
    other = restarted(folder, cache)
    other.graph.create_entities([Entity(name="Elsewhere", entityType="person", observations=[])])
    assert other.store.save_snapshot()
    assert not first.store.hold_as_restored()
    assert first.graph.state.by_node.changed  # nothing was let go
    assert content(first) == content(other) == fresh_content(folder, tmp_path)
    # Damaged in place with its stat kept (a disk's fault): the checksum refuses it before anything is let go.
    second = snapshot_written(tmp_path / "memory", tmp_path / "cache-2")
    path = snapshot_file(tmp_path / "cache-2")
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    held = answers(second)
    assert not second.store.hold_as_restored()
    assert answers(second) == held and second.graph.state.by_node.changed


def test_a_server_that_read_the_memory_in_full_holds_it_as_restored_once_no_request_comes(tmp_path: Path) -> None:
    """Over stdio: after its load and its snapshot, and MEMORY_COMPACT_IDLE_SECONDS with no request, the server
    takes the memory again from the snapshot (it says so in its log) and answers as before; not while calls come."""
    folder, cache = tmp_path / "memory", tmp_path / "cache-home"
    folder.mkdir()
    with open(folder / "memory.json", "w", encoding="utf-8") as out:
        for i in range(21_000):
            out.write(json.dumps({"type": "entity", "name": f"N{i}", "entityType": "t", "observations": [f"x{i}"]}))
            out.write("\n")
            out.write(json.dumps({"type": "relation", "from": f"N{i}", "to": f"N{i // 2}", "relationType": "r"}))
            out.write("\n")
    env = {
        **os.environ,
        "MEMORY_FILE_PATH": str(folder / "memory.json"),
        "XDG_CACHE_HOME": str(cache),
        "MEMORY_LOG_LEVEL": "info",
        "MEMORY_SEMANTIC": "off",
        "MEMORY_COMPACT_IDLE_SECONDS": "2",
        "PYTHONPATH": str(ROOT),
    }
    log_path = tmp_path / "server.log"

    def call(number: int) -> dict[str, Any]:
        arguments = {"names": ["N20999", "N10499"]}
        return {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": "open_nodes", "arguments": arguments},
        }

    with (
        open(log_path, "w", encoding="utf-8") as log_file,
        subprocess.Popen(
            [sys.executable, "-m", "memory_graph"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env=env,
        ) as server,
    ):
        try:
            assert server.stdin is not None and server.stdout is not None
            answers: dict[int, Any] = {}

            def ask(number: int) -> None:
                assert server.stdin is not None and server.stdout is not None
                server.stdin.write(json.dumps(call(number)) + "\n")
                server.stdin.flush()
                while number not in answers:
                    message = json.loads(server.stdout.readline())
                    if "id" in message:
                        answers[message["id"]] = message["result"]

            for message in (INITIALIZE, INITIALIZED):
                server.stdin.write(json.dumps(message) + "\n")
            server.stdin.flush()
            ask(2)
            deadline = time.monotonic() + 60
            while "start snapshot written" not in log_path.read_text(encoding="utf-8"):
                assert time.monotonic() < deadline, log_path.read_text(encoding="utf-8")
                ask(len(answers) + 2)
                time.sleep(0.3)
            busy_until = time.monotonic() + 3  # longer than the idle time, with a call every 0.3 s
            while time.monotonic() < busy_until:
                ask(len(answers) + 2)
                time.sleep(0.3)
            assert "held as restored" not in log_path.read_text(encoding="utf-8")
            while "held as restored" not in log_path.read_text(encoding="utf-8"):
                assert time.monotonic() < deadline, log_path.read_text(encoding="utf-8")
                time.sleep(0.2)
            last = len(answers) + 2
            ask(last)
        finally:
            server.kill()
    assert answers[last] == answers[2] and "N10499" in json.dumps(answers[last])
    logged = log_path.read_text(encoding="utf-8")
    assert logged.index("start snapshot written") < logged.index("held as restored")
