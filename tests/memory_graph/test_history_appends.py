"""The history's events are appended to their shard (one flush per call), and what a crash leaves of an append
is moved aside: a torn last line, or a commit with fewer events than it wrote. Files engine only (the database
engine keeps events in rows)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_graph.model import Entity, ObservationAddition
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
