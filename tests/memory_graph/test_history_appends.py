"""The history's events are appended to their shard (one flush per call), and what a crash leaves of an append
is moved aside: a torn last line, or a commit with fewer events than it wrote. Files engine only (the database
engine keeps events in rows)."""

from __future__ import annotations

import errno
import json
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lessons.model import LessonInput
from memory_graph.app import Services, build_services
from memory_graph.config import Settings
from memory_graph.errors import StorageError
from memory_graph.history import ObservationUpdate
from memory_graph.model import Entity, ObservationAddition, Relation
from tests.conftest import open_services
from tests.memory_graph.workers import replayed, snapshot


def person(name: str) -> Entity:
    return Entity(name=name, entityType="person", observations=[f"{name} is here"])


def test_a_call_appends_its_events_and_another_process_reads_them(tmp_path: Path) -> None:
    writer, reader = open_services(tmp_path, shard_lines=1000), open_services(tmp_path, shard_lines=1000)
    writer.graph.create_entities([person("Alice")])
    history, stamp = tmp_path / "history.json", tmp_path / "history.json.stamp"
    before, stamp_before = history.read_bytes(), stamp.read_bytes()
    assert [e.op for e in reader.history.get_history("Alice").events] == ["create_entities"]

    writer.graph.add_observations([ObservationAddition(entityName="Alice", contents=["moved to Porto"])])

    after = history.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    assert stamp.read_bytes() == stamp_before  # the graph's stamp told the reader
    assert [e.op for e in reader.history.get_history("Alice").events] == ["add_observations", "create_entities"]
    assert reader.graph.open_nodes(["Alice"]).entities[0].observations[-1] == "moved to Porto"


@pytest.mark.parametrize("left", ["half of the first event", "the first event of two", "the first of two, torn"])
def test_what_a_crash_leaves_of_an_append_is_moved_aside(tmp_path: Path, left: str) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([person("Alice")])
    history, graph_file = tmp_path / "history.json", tmp_path / "memory.json"
    whole, graph_before = history.read_bytes(), graph_file.read_bytes()
    services.graph.create_entities([person("Bob"), person("Carol")])
    first, second = history.read_bytes()[len(whole) :].splitlines(keepends=True)
    torn = {
        "half of the first event": first[: len(first) // 2],
        "the first event of two": first,
        "the first of two, torn": first + second[:-5],
    }[left]
    # The state a kill during that append leaves: the events partly written, the graph shard never touched.
    history.write_bytes(whole + torn)
    graph_file.write_bytes(graph_before)

    reopened = open_services(tmp_path, shard_lines=1000)

    assert [e.name for e in reopened.graph.read_graph().entities] == ["Alice"]
    assert history.read_bytes() == whole
    aside = list(tmp_path.glob("history.json.rejected-*"))
    assert len(aside) == 1 and aside[0].read_bytes().rstrip(b"\n") == torn.rstrip(b"\n")
    assert reopened.store.problems() == []
    assert replayed(reopened.graph) == snapshot(reopened.graph)
    reopened.graph.create_entities([person("Dave")])
    again = open_services(tmp_path, shard_lines=1000)
    assert sorted(e.name for e in again.graph.read_graph().entities) == ["Alice", "Dave"]
    assert replayed(again.graph) == snapshot(again.graph)


def test_a_whole_commit_split_over_two_shards_is_never_taken_for_an_unfinished_one(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=3)
    services.graph.create_entities([person("Alice")])
    services.graph.create_entities([person("Bob")])
    services.graph.create_entities([person("Carol"), person("Dave")])  # one event in each of two shards
    tail = tmp_path / "history-1.json"
    events_before = tail.read_bytes()
    assert events_before.count(b"\n") == 1
    tail.write_bytes(events_before + b'{"type":"event","id":"9')  # a kill in the next append

    reopened = open_services(tmp_path, shard_lines=3)

    assert tail.read_bytes() == events_before
    assert sorted(e.name for e in reopened.graph.read_graph().entities) == ["Alice", "Bob", "Carol", "Dave"]
    assert replayed(reopened.graph) == snapshot(reopened.graph)
    assert len(reopened.history.get_history().events) == 4


def test_an_unreadable_line_inside_the_history_is_reported_not_moved(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([person("Alice")])
    history = tmp_path / "history.json"
    history.write_bytes(b"not an event\n" + history.read_bytes())

    reopened = open_services(tmp_path, shard_lines=1000)

    assert [p.line_number for p in reopened.store.problems()] == [1]
    assert history.read_bytes().startswith(b"not an event\n")
    assert not list(tmp_path.glob("history.json.rejected-*"))


def test_a_reopened_history_reads_its_older_shards_only_when_asked(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=3)
    for name in ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace"):
        services.graph.create_entities([person(name)])
    services.graph.add_observations([ObservationAddition(entityName="Alice", contents=["moved to Porto"])])

    reopened = open_services(tmp_path, shard_lines=3)
    history = reopened.store.collections["history"]
    assert len(history.deferred) == 2 and len(history.shards) == 1  # 8 events in shards of 3: the newest read
    assert [e.name for e in reopened.graph.search_nodes("Grace").entities] == ["Grace"]

    reopened.graph.create_entities([person("Heidi")])  # an append to the newest shard keeps the older ones listed
    other = open_services(tmp_path, shard_lines=3)
    assert [e.op for e in other.history.get_history("Alice").events] == ["add_observations", "create_entities"]
    assert [e.op for e in reopened.history.get_history("Alice").events] == ["add_observations", "create_entities"]
    assert not history.deferred
    assert replayed(other.graph) == snapshot(other.graph)
    assert other.history.get_history().total == 9


def test_new_history_shards_go_after_the_newest_even_after_a_prune(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=2)
    for name in ("Alice", "Bob", "Carol", "Dave"):
        services.graph.create_entities([person(name)])
    cutoff = datetime.now(UTC)
    services.graph.create_entities([person("Erin")])
    assert services.store.prune_history(cutoff) == 4  # shards 0 and 1 go, Erin's shard 2 stays

    services.graph.create_entities([person("Frank"), person("Grace"), person("Heidi")])

    assert sorted(p.name for p in tmp_path.glob("history*.json")) == ["history-2.json", "history-3.json"]
    reopened = open_services(tmp_path, shard_lines=2)
    assert [e.entity for e in reopened.history.get_history().events] == ["Heidi", "Grace", "Frank", "Erin"]


def test_a_newest_commit_spread_over_several_shards_is_read_whole_and_kept(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=3)
    services.graph.create_entities([person("Alice")])
    services.graph.create_entities([person(f"P{i}") for i in range(10)])  # one commit, four shards

    reopened = open_services(tmp_path, shard_lines=3)

    # The newest shard holds 2 of the commit's 10 events and starts with it: written whole, nothing to read back.
    assert len(reopened.store.collections["history"].deferred) == 3
    assert reopened.history.get_history().total == 11
    assert not list(tmp_path.glob("history*.rejected-*"))
    assert replayed(reopened.graph) == snapshot(reopened.graph)


def test_a_hole_a_power_loss_left_inside_an_append_takes_the_whole_commit_aside(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([person("Alice")])
    history, graph_file = tmp_path / "history.json", tmp_path / "memory.json"
    whole, graph_before = history.read_bytes(), graph_file.read_bytes()
    services.graph.create_entities([person("Bob"), person("Carol"), person("Dave")])
    first, second, third = history.read_bytes()[len(whole) :].splitlines(keepends=True)
    # A power loss kept the append's first and last pages and lost one between (it reads back as NULs).
    history.write_bytes(whole + first + b"\0" * (len(second) - 1) + b"\n" + third)
    graph_file.write_bytes(graph_before)

    reopened = open_services(tmp_path, shard_lines=1000)

    assert history.read_bytes() == whole
    assert [e.name for e in reopened.graph.read_graph().entities] == ["Alice"]
    assert replayed(reopened.graph) == snapshot(reopened.graph) and reopened.store.problems() == []


def failing_fsync(monkeypatch: pytest.MonkeyPatch, fails: Callable[[str], bool], error: int) -> None:
    """Make os.fsync fail for the files `fails` picks (by the path the descriptor is open on)."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if fails(os.readlink(f"/proc/self/fd/{fd}")):
            raise OSError(error, os.strerror(error))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_a_failed_folder_flush_after_the_replace_keeps_the_change_and_its_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([person("Alice")])
    failing_fsync(monkeypatch, lambda path: Path(path) == tmp_path, errno.EIO)

    services.graph.create_entities([person("Bob")])  # made: the replace happened; the failed flush is logged
    monkeypatch.undo()

    assert "flushing its folder failed" in caplog.text
    reopened = open_services(tmp_path, shard_lines=1000)
    assert sorted(e.name for e in reopened.graph.read_graph().entities) == ["Alice", "Bob"]
    assert replayed(reopened.graph) == snapshot(reopened.graph)


def test_events_that_cannot_be_taken_back_are_reported_as_pending_and_finished_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([person("Alice")])
    failing_fsync(monkeypatch, lambda path: Path(path).name.startswith(".memory.json."), errno.ENOSPC)

    def broken_truncate(fd: int, size: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "ftruncate", broken_truncate)
    with pytest.raises(StorageError, match="read the entities back before retrying"):
        services.graph.create_entities([person("Bob")])
    monkeypatch.undo()

    other = open_services(tmp_path, shard_lines=1000)
    assert sorted(e.name for e in other.graph.read_graph().entities) == ["Alice", "Bob"]
    assert replayed(other.graph) == snapshot(other.graph)


def test_event_ids_keep_the_order_of_commits_when_the_clock_steps_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    services = open_services(tmp_path, shard_lines=1000)
    services.graph.create_entities([person("Alice")])
    graph_file = tmp_path / "memory.json"
    graph_before, untouched = graph_file.read_bytes(), graph_file.stat()
    real = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real() - 3_600_000_000_000)  # an hour back
    services.graph.delete_entities(["Alice"])
    monkeypatch.undo()

    assert [e["op"] for e in services.store.events()] == ["create_entities", "delete_entities"]
    # An interrupted delete: its event flushed, the shard never replaced (as it was, with its time).
    graph_file.write_bytes(graph_before)
    os.utime(graph_file, ns=(untouched.st_atime_ns, untouched.st_mtime_ns))
    reopened = open_services(tmp_path, shard_lines=1000)
    assert reopened.graph.read_graph().entities == []  # the newest commit is the delete, and it is finished
    assert replayed(reopened.graph) == snapshot(reopened.graph)


def counting_reads(monkeypatch: pytest.MonkeyPatch, services: Services, collection: str) -> list[int]:
    """Count the shards a store reads whole from disk for one collection."""
    reads: list[int] = []
    target = services.store.collections[collection]
    real = target.read

    def read(index: int) -> object:
        reads.append(index)
        return real(index)

    monkeypatch.setattr(target, "read", read)
    return reads


def test_another_process_applies_a_commit_from_its_events_without_rereading_shards(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, follower = open_services(tmp_path, shard_lines=1000), open_services(tmp_path, shard_lines=1000)
    writer.graph.create_entities([person("Alice"), person("Bob")])
    follower.graph.read_graph()
    graph_reads, history_reads = (
        counting_reads(monkeypatch, follower, "memory"),
        counting_reads(monkeypatch, follower, "history"),
    )

    writer.graph.add_observations([ObservationAddition(entityName="Alice", contents=["moved to Porto"])])
    writer.graph.create_relations([Relation(**{"from": "Alice", "to": "Bob", "relationType": "knows"})])
    writer.graph.delete_entities(["Bob"])
    writer.graph.create_entities([person("Carol")])

    assert snapshot(follower.graph) == snapshot(writer.graph)
    assert graph_reads == [] and history_reads == []
    assert [e.op for e in follower.history.get_history("Alice").events][:2] == ["delete_entities", "create_relations"]
    follower.graph.create_entities([person("Dave")])  # and writes on top of what it followed
    assert snapshot(open_services(tmp_path, shard_lines=1000).graph) == snapshot(follower.graph)


def test_a_hand_edit_beside_a_commit_is_read_from_the_file_not_assumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, follower = open_services(tmp_path, shard_lines=1000), open_services(tmp_path, shard_lines=1000)
    writer.graph.create_entities([person("Alice"), person("Bob")])
    follower.graph.read_graph()
    graph = tmp_path / "memory.json"
    graph.write_text(graph.read_text().replace("Bob is here", "Bob was edited by hand"))
    writer.graph.add_observations([ObservationAddition(entityName="Alice", contents=["moved to Porto"])])
    graph_reads = counting_reads(monkeypatch, follower, "memory")

    seen = {e.name: e.observations for e in follower.graph.read_graph().entities}

    assert seen["Bob"] == ["Bob was edited by hand"] and seen["Alice"][-1] == "moved to Porto"
    assert graph_reads == [0]
    assert snapshot(follower.graph) == snapshot(open_services(tmp_path, shard_lines=1000).graph)


def test_two_processes_taking_turns_always_agree_with_the_files(tmp_path: Path) -> None:
    first, second = open_services(tmp_path, shard_lines=4), open_services(tmp_path, shard_lines=4)
    rng = random.Random(7)
    names = [f"N{i}" for i in range(12)]
    for step in range(120):
        services = (first, second)[rng.randrange(2)]
        name, other = rng.choice(names), rng.choice(names)
        kind = rng.randrange(5)
        if kind == 0:
            services.graph.create_entities([person(name)])
        elif kind == 1 and services.graph.open_nodes([name]).entities:
            services.graph.add_observations([ObservationAddition(entityName=name, contents=[f"fact {step}"])])
        elif kind == 2:
            services.graph.delete_entities([name])
        elif kind == 3 and name != other and len(services.graph.open_nodes([name, other]).entities) == 2:
            services.graph.create_relations([Relation(**{"from": name, "to": other, "relationType": "knows"})])
        elif kind == 4 and any(f"{name} is here" in e.observations for e in services.graph.open_nodes([name]).entities):
            services.graph.update_observations([ObservationUpdate(entityName=name, old=f"{name} is here", new="moved")])
        on_disk = snapshot(open_services(tmp_path, shard_lines=4).graph)
        assert snapshot(first.graph) == on_disk and snapshot(second.graph) == on_disk, step
    assert replayed(first.graph) == snapshot(first.graph)


def test_a_lesson_another_memory_deleted_is_not_taken_for_an_unfinished_create(tmp_path: Path) -> None:
    def memory(name: str) -> Services:
        settings = Settings(
            memory_file=tmp_path / name / "memory.json", lesson_file=tmp_path / "shared" / "lesson.json"
        )
        services = build_services(settings)
        services.store.open()
        return services

    (tmp_path / "shared").mkdir()
    first = memory("first")
    first.lessons.create_lesson(LessonInput(name="PIP_FAIL", errorPattern={"type": "build", "message": "no dist"}))
    memory("second").graph.delete_entities(["PIP_FAIL"])  # its before is the create's: "absent"

    for name in ("first", "second", "first"):  # each restart looks at its newest commit
        assert memory(name).graph.open_nodes(["PIP_FAIL"]).entities == []
    lessons = tmp_path / "shared" / "lesson.json"
    assert not lessons.exists() or "PIP_FAIL" not in lessons.read_text(encoding="utf-8")


def test_a_prune_is_seen_by_another_process_at_its_next_call(tmp_path: Path) -> None:
    first, second = open_services(tmp_path, shard_lines=2), open_services(tmp_path, shard_lines=2)
    for name in ("Alice", "Bob", "Carol", "Dave"):
        first.graph.create_entities([person(name)])
    assert second.history.get_history().total == 4
    assert first.store.prune_history(datetime.now(UTC)) == 4  # removes whole shards only
    assert second.history.get_history().total == 0


def test_the_events_of_a_large_record_end_a_history_shard_by_its_size_and_a_start_reads_only_the_newest(
    tmp_path: Path,
) -> None:
    """Every event holds its record before and after: an entity with many observations (the user's own, added to
    at every chat) fills a shard by bytes long before its line limit, and a start reads and holds the newest
    shard whole."""
    services = open_services(tmp_path, shard_lines=1000)
    services.store.collections["history"].shard_bytes = 20_000  # (4 MB by default)
    facts = [f"fact {i}: " + "a sentence of ordinary length" for i in range(120)]  # the record: about 5 KB
    services.graph.create_entities([Entity(name="User", entityType="person", observations=facts)])
    for k in range(12):
        services.graph.add_observations([ObservationAddition(entityName="User", contents=[f"new fact {k}"])])

    shards = list(tmp_path.glob("history*.json"))
    lines = [p.read_bytes().count(b"\n") for p in shards]
    assert len(shards) >= 5 and sum(lines) == 13, lines  # 13 events of about 10 KB: shards end at 20 KB
    assert max(lines) >= 2  # appended to until full, not a shard per event
    assert all(p.stat().st_size < 20_000 + 12_000 for p in shards)  # full once past the size: one event more
    reopened = open_services(tmp_path, shard_lines=1000)
    history = reopened.store.collections["history"]
    assert len(history.shards) == 1 and len(history.deferred) == len(shards) - 1  # a start reads the newest
    services.graph.add_observations([ObservationAddition(entityName="User", contents=["one more"])])
    assert reopened.graph.open_nodes(["User"]).entities[0].observations[-1] == "one more"  # followed
    assert reopened.history.get_history("User").total == 14
    assert [len(e.after["observations"]) for e in reopened.history.get_history("User", limit=3).events] == [
        133,
        132,
        131,
    ]
    assert replayed(reopened.graph) == snapshot(reopened.graph) == snapshot(open_services(tmp_path).graph)


def test_older_history_shards_once_read_are_held_by_their_keys_and_read_back_when_asked_for(tmp_path: Path) -> None:
    """list_entities and get_history read every history shard (to index it); their lines were then held for good,
    a whole history's worth of memory after one call."""
    services = open_services(tmp_path, shard_lines=3)
    for name in ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace"):
        services.graph.create_entities([person(name)])
    services.graph.add_observations([ObservationAddition(entityName="Alice", contents=["moved to Porto"])])
    services.graph.create_relations([Relation.model_validate({"from": "Bob", "to": "Carol", "relationType": "knows"})])

    reopened = open_services(tmp_path, shard_lines=3)
    history = reopened.store.collections["history"]
    assert history.deferred
    page = reopened.graph.list_entities(None, None, 100).entities
    assert not history.deferred
    older = [shard for index, shard in history.shards.items() if index != max(history.shards)]
    assert len(older) == 2 and all(shard.unread_lines() is not None for shard in older)  # keys only, no line
    newest = {e.name: services.history.get_history(e.name, limit=1).events[0].at for e in page}
    assert {e.name: e.lastChanged for e in page} == newest  # told without reading an event back
    assert all(shard.unread_lines() is not None for shard in older)
    assert [e.op for e in reopened.history.get_history("Alice").events] == ["add_observations", "create_entities"]
    assert reopened.history.get_history("Bob").total == 2  # its creation and the relation to Carol
    assert replayed(reopened.graph) == snapshot(reopened.graph) == snapshot(services.graph)


def test_an_older_history_shard_touched_on_disk_is_still_read_at_once(tmp_path: Path) -> None:
    """Held by its keys, an older shard whose file a backup or sync tool only touched (or a person edited) made
    every read of its events fail until the next look for hand edits; its lines are now taken by their keys."""
    services = open_services(tmp_path, shard_lines=3)
    for name in ("Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace"):
        services.graph.create_entities([person(name)])
    reopened = open_services(tmp_path, shard_lines=3)
    reopened.graph.list_entities(None, None, 100)  # every older shard read, held by its keys
    reopened.store._hand_edit_interval = 1e9  # that look not due
    history = reopened.store.collections["history"]
    older = history.names.path(min(history.shards))
    stat = older.stat()
    os.utime(older, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert [e.op for e in reopened.history.get_history("Alice").events] == ["create_entities"]


def test_last_changed_follows_an_event_edited_on_disk(tmp_path: Path) -> None:
    services = open_services(tmp_path, shard_lines=1000)
    services.store._hand_edit_interval = 0
    services.graph.create_entities([person("Alice")])
    history = tmp_path / "history.json"
    event = json.loads(history.read_text(encoding="utf-8"))
    event["at"] = "2001-01-01T00:00:00Z"
    history.write_text(json.dumps(event) + "\n", encoding="utf-8")
    assert services.history.get_history("Alice").events[0].at == "2001-01-01T00:00:00Z"
    assert services.graph.list_entities(None, None, 10).entities[0].lastChanged == "2001-01-01T00:00:00Z"
