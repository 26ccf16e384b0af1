"""The history from the command line: `stats` shows the oldest and newest change, `compact` prunes; and the
history's own store rules (a graph file never takes an event line, a store without history keeps working)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lessons.model import LessonInput
from memory_graph.app import Services, build_services
from memory_graph.config import Settings
from memory_graph.errors import StorageError
from memory_graph.graph import MEMORY
from memory_graph.model import Entity, ObservationAddition
from memory_graph.storage import Store
from tests.conftest import open_services
from tests.memory_graph.test_cli import Ran, run  # noqa: F401  (the fixture)


def test_stats_show_the_oldest_and_newest_change(tmp_path: Path, run) -> None:  # noqa: F811
    services = open_services(tmp_path / "store", shard_lines=3)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=[])])
    services.graph.delete_entities(["Alice"])
    ran: Ran = run(tmp_path, "stats")
    history = json.loads(ran.stdout)["history"]
    assert history["events"] == 2
    assert history["oldestChange"] <= history["newestChange"]
    assert history["newestChange"].endswith("Z")


def test_compact_keeps_recent_history_and_prunes_old(
    tmp_path: Path,
    run,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    services = open_services(tmp_path / "store", shard_lines=3)
    services.graph.create_entities([Entity(name=f"E{i}", entityType="t", observations=[]) for i in range(5)])
    assert "kept whole" in run(tmp_path, "compact").stdout
    assert "dropped 0" in run(tmp_path, "compact", "--days", "1").stdout
    monkeypatch.setenv("MEMORY_HISTORY_DAYS", "1")
    future = datetime.now(UTC) + timedelta(days=2)
    assert services.store.prune_history(future) == 5
    assert services.history.get_history().total == 0
    assert sorted(e.name for e in services.graph.read_graph().entities) == [f"E{i}" for i in range(5)]
    assert not list((tmp_path / "store").glob("history-*.json"))


def test_a_graph_file_never_takes_an_event_line(tmp_path: Path) -> None:
    event = {"type": "event", "id": "1", "at": "x", "op": "o", "collection": "memory", "key": ["entity", "A"]}
    (tmp_path / "memory.json").write_text(json.dumps(event) + "\n", encoding="utf-8")
    services = open_services(tmp_path)
    assert [p.line_number for p in services.store.problems()] == [1]


def test_a_store_without_history_keeps_working(tmp_path: Path) -> None:
    store = Store({MEMORY: tmp_path / "memory.json"})
    with store.transaction() as tx:
        tx.upsert(MEMORY, {"type": "entity", "name": "A", "entityType": "t", "observations": []})
    assert not store.keeps_history and store.events() == []
    assert not (tmp_path / "history.json").exists()
    with_history = open_services(tmp_path)
    assert [e.name for e in with_history.graph.read_graph().entities] == ["A"]
    with_history.graph.delete_entities(["A"])
    assert with_history.history.restore_entity("A").entity.name == "A"


def test_a_crash_between_the_history_and_the_graph_shard_is_rolled_forward(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=["a"])])
    graph_before = (tmp_path / "memory.json").read_bytes()
    untouched = (tmp_path / "memory.json").stat()
    services.graph.create_entities([Entity(name="Bob", entityType="person", observations=[])])
    # What a kill after the events were flushed and before the graph shard was replaced leaves behind: the file
    # as it was, last written before the events.
    (tmp_path / "memory.json").write_bytes(graph_before)
    os.utime(tmp_path / "memory.json", ns=(untouched.st_atime_ns, untouched.st_mtime_ns))

    reopened = open_services(tmp_path, shard_lines=1000)

    assert sorted(e.name for e in reopened.graph.read_graph().entities) == ["Alice", "Bob"]
    assert "Bob" in (tmp_path / "memory.json").read_text()
    assert [e.op for e in reopened.history.get_history().events] == ["create_entities", "create_entities"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_graph_shard_that_cannot_be_replaced_takes_its_events_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=["a"])])
    history_before = (tmp_path / "history.json").read_bytes()
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        if str(dst).endswith("memory.json"):
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(StorageError, match="Nothing was changed"):
        services.graph.create_entities([Entity(name="Bob", entityType="person", observations=[])])
    monkeypatch.setattr(os, "replace", real_replace)

    assert (tmp_path / "history.json").read_bytes() == history_before
    assert [e.name for e in services.graph.read_graph().entities] == ["Alice"]
    reopened = open_services(tmp_path, shard_lines=1000)
    assert [e.name for e in reopened.graph.read_graph().entities] == ["Alice"]
    assert len(reopened.history.get_history().events) == 1
    services.graph.create_entities([Entity(name="Carol", entityType="person", observations=[])])
    assert sorted(e.name for e in open_services(tmp_path, 1000).graph.read_graph().entities) == ["Alice", "Carol"]


def test_a_hand_edit_after_the_last_commit_is_not_rolled_back(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=["a"])])
    (tmp_path / "memory.json").write_text(
        '{"type":"entity","name":"Alice","entityType":"person","observations":["edited"]}\n', encoding="utf-8"
    )
    reopened = open_services(tmp_path, shard_lines=1000)
    assert reopened.graph.read_graph().entities[0].observations == ["edited"]


def test_a_record_deleted_by_hand_after_the_commit_that_created_it_stays_deleted(tmp_path: Path) -> None:
    """The newest commit's records back at their `before` by a hand edit look like a crash's leftovers, except
    that the file changed after the commit: not redone."""
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=["a"])])
    services.graph.create_entities([Entity(name="Bob", entityType="person", observations=[])])
    memory = tmp_path / "memory.json"
    memory.write_text("".join(line + "\n" for line in memory.read_text().splitlines() if '"Bob"' not in line))

    reopened = open_services(tmp_path, shard_lines=1000)

    assert [e.name for e in reopened.graph.read_graph().entities] == ["Alice"]
    assert "Bob" not in memory.read_text()


def test_events_are_labelled_with_the_service_method(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    lesson = {"name": "L", "errorPattern": {"type": "build", "message": "boom", "context": "ci"}}
    services.lessons.create_lesson(LessonInput.model_validate(lesson))
    services.graph.add_observations([ObservationAddition(entityName="L", contents=["fix: retry"])])
    events = services.history.get_history("L").events
    assert [(e.op, e.kind) for e in events] == [("add_observations", "lesson"), ("create_lesson", "lesson")]
    assert events[0].actor is not None and events[0].actor.startswith("memory-graph pid")


def test_two_memories_in_one_folder_keep_separate_histories(tmp_path: Path) -> None:
    def services_of(stem: str) -> Services:
        settings = Settings(memory_file=tmp_path / f"{stem}.json", lesson_file=tmp_path / "lesson.json")
        return build_services(settings)

    first, second = services_of("memory"), services_of("work")
    first.graph.create_entities([Entity(name="A", entityType="t", observations=[])])
    second.graph.create_entities([Entity(name="B", entityType="t", observations=[])])
    assert (tmp_path / "history.json").exists() and (tmp_path / "work-history.json").exists()
    reopened = services_of("memory")
    assert [e.name for e in reopened.graph.read_graph().entities] == ["A"]
    assert [e.entity for e in reopened.history.get_history().events] == ["A"]
