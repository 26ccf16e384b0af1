"""A server on PostgreSQL answers open_nodes and search_nodes from the database's indexes while its load is still
under way (issue 12: a large memory's first search must not wait for the whole load). The load is held at its
first read of the rows, on a real database, so the reads below provably did not wait for it."""

from __future__ import annotations

import gc
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memory_graph import graph as graph_module
from memory_graph.app import Services, services_for_folder
from memory_graph.errors import StoreClosedError
from memory_graph.model import Entity, KnowledgeGraph
from memory_graph.server import App, build_app
from memory_graph.storage import PostgresStore
from tests.conftest import Engine, open_services, settings_in
from tests.memory_graph.loading import (
    QUERIES,
    fill,
    names,
    relation,
    relations,
    searches_like_a_loaded_server,
    substring_tier,
)
from tests.memory_graph.test_postgres import sql

pytestmark = [
    pytest.mark.usefixtures("each_engine"),
    pytest.mark.parametrize("each_engine", ["postgres"], indirect=True),
]

WAIT = 10.0  # seconds a test waits for something that should happen at once


class HeldLoad:
    """A second server on the same database whose load waits, in its first read of the rows, until released."""

    def __init__(self, folder: Path, monkeypatch: pytest.MonkeyPatch, max_response_chars: int = 80_000) -> None:
        self.reached, self.release = threading.Event(), threading.Event()
        original = PostgresStore._reload_all

        def held(store: PostgresStore, conn: Any) -> None:
            self.reached.set()
            assert self.release.wait(WAIT * 3), "the test never released the load"
            original(store, conn)

        monkeypatch.setattr(PostgresStore, "_reload_all", held)
        url = Engine.database_url(folder)
        self.services = services_for_folder(folder, max_response_chars=max_response_chars, database_url=url)
        self.loader = threading.Thread(target=self.services.store.open, daemon=True)
        self.loader.start()
        assert self.reached.wait(WAIT), "the load never started"
        assert self.services.store.reads_while_loading() is not None

    def finish(self) -> None:
        self.release.set()
        self.loader.join(WAIT)
        assert not self.loader.is_alive()
        assert self.services.store.reads_while_loading() is None


@pytest.fixture
def held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Services, HeldLoad]]:
    loaded = open_services(tmp_path)
    fill(loaded)
    load = HeldLoad(tmp_path, monkeypatch)
    try:
        yield loaded, load
    finally:
        load.release.set()
        load.loader.join(WAIT)  # before the stores are closed under it


def test_reads_while_a_server_loads_are_answered_from_the_database_like_a_loaded_server(
    held: tuple[Services, HeldLoad],
) -> None:
    loaded, load = held
    early = load.services.graph
    searches_like_a_loaded_server(early, loaded)
    wanted = ["Teapot", "Alice", "missing", "PORT_IN_USE", "Alice"]
    assert early.open_nodes(wanted) == loaded.graph.open_nodes(wanted)
    assert relations(early.open_nodes(["Teapot"])) == {("Teapot", "Alice", "belongs to")}
    assert load.loader.is_alive()  # all of it answered while the load was held
    load.finish()
    for query in QUERIES:
        assert early.search_nodes(query) == loaded.graph.search_nodes(query), query


def test_a_read_while_loading_sees_what_another_server_committed_since(held: tuple[Services, HeldLoad]) -> None:
    loaded, load = held
    loaded.graph.create_entities([Entity(name="Carol", entityType="person", observations=["joined in May"])])
    loaded.graph.delete_entities(["Bob"])
    early = load.services.graph
    assert sorted(names(early.search_nodes("person"))) == ["Alice", "Carol", "Zoë"]
    assert names(early.open_nodes(["Bob", "Carol"])) == ["Carol"]
    assert relations(early.open_nodes(["Alice"])) == {
        ("Alice", "Deploy tool", "maintains"),
        ("Teapot", "Alice", "belongs to"),
    }
    assert load.loader.is_alive()


def answered_at_once(read: Any) -> Any:
    """The read's answer, which must come within WAIT (a read that waited for a held load would not)."""
    done: list[Any] = []
    reader = threading.Thread(target=lambda: done.append(read()), daemon=True)
    reader.start()
    reader.join(WAIT)
    assert done, "the read waited for the load"
    return done[0]


def test_a_read_made_before_the_load_has_connected_is_answered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The load holds the store's lock before it opens the pool: a read must open the pool itself, not wait.
    loaded = open_services(tmp_path)
    fill(loaded)
    reached, release = threading.Event(), threading.Event()
    original = PostgresStore._session

    def held(store: PostgresStore, write: bool) -> Any:
        if not reached.is_set():
            reached.set()
            assert release.wait(WAIT * 3), "the test never released the load"
        return original(store, write)

    monkeypatch.setattr(PostgresStore, "_session", held)
    early = services_for_folder(tmp_path, database_url=Engine.database_url(tmp_path))
    loader = threading.Thread(target=early.store.open, daemon=True)
    loader.start()
    try:
        assert reached.wait(WAIT)
        answer = answered_at_once(lambda: early.graph.search_nodes("deploy"))
        assert sorted(names(answer)) == sorted(substring_tier(loaded, "deploy"))
        assert loader.is_alive()
    finally:
        release.set()
        loader.join(WAIT)


def test_a_read_that_arrives_before_the_load_thread_begins_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server says the load is coming before it starts the thread: a call that is quicker than the thread is
    # answered from the database too, not made to wait for all of the load.
    loaded = open_services(tmp_path)
    fill(loaded)
    begin = threading.Event()
    original = App._load

    def late(app: App) -> None:
        assert begin.wait(WAIT * 3), "the test never let the load begin"
        original(app)

    monkeypatch.setattr(App, "_load", late)
    # Whoever loads (the call itself, if it took the load on) stops at the rows until the test ends.
    reload_all = PostgresStore._reload_all

    def held(store: PostgresStore, conn: Any) -> None:
        assert begin.wait(WAIT * 3)
        reload_all(store, conn)

    monkeypatch.setattr(PostgresStore, "_reload_all", held)
    app = build_app(settings_in(tmp_path))
    app.start_loading()
    try:
        answer = answered_at_once(lambda: app.graph.open_nodes(["Teapot", "Alice"]))
        assert answer == loaded.graph.open_nodes(["Teapot", "Alice"])
    finally:
        begin.set()


@pytest.mark.parametrize(
    ("query", "limit"),
    [
        ("zoë", None),  # no run of three ASCII word characters for the database to narrow with
        ("zoë teacher", 0),  # more matches than a search while loading takes, and a word the database cannot test
        ("likes coffee", None),  # no substring match: what ranks needs every entity's words
    ],
)
def test_a_search_the_database_cannot_answer_waits_for_the_load(
    held: tuple[Services, HeldLoad], monkeypatch: pytest.MonkeyPatch, query: str, limit: int | None
) -> None:
    loaded, load = held
    if limit is not None:
        monkeypatch.setattr(graph_module, "LOADING_MATCH_LIMIT", limit)
    done: list[KnowledgeGraph] = []
    waiting = threading.Thread(target=lambda: done.append(load.services.graph.search_nodes(query)), daemon=True)
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive() and not done, f"{query!r} was answered before the load"
    load.finish()
    waiting.join(WAIT)
    assert done == [loaded.graph.search_nodes(query)]


@pytest.mark.parametrize("limit", [1_000, 10])  # all matches fetched; only the 30 leading by name
def test_a_cut_answer_while_loading_counts_what_a_loaded_server_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    monkeypatch.setattr(graph_module, "LOADING_MATCH_LIMIT", limit)
    monkeypatch.setattr(graph_module, "LOADING_LEADING", 30)
    loaded = open_services(tmp_path, max_response_chars=2_000)
    many = [Entity(name=f"Service {i}", entityType="service", observations=[f"port {8000 + i}"]) for i in range(60)]
    loaded.graph.create_entities(many)
    loaded.graph.create_relations([relation(f"Service {i}", f"Service {i + 1}", "calls") for i in range(59)])
    load = HeldLoad(tmp_path, monkeypatch, max_response_chars=2_000)
    try:
        answer, expected = load.services.graph.search_nodes("service"), loaded.graph.search_nodes("service")
        assert expected.truncated is not None and answer.truncated == expected.truncated
        assert names(answer) == names(expected)  # the same words everywhere: the name rules and creation order
        assert answer.relations == expected.relations
        # A name that is the query itself comes first, however late it was made.
        loaded.graph.create_entities([Entity(name="service", entityType="word", observations=[])])
        assert names(load.services.graph.search_nodes("SERVICE"))[:2] == ["service", "Service 0"]
        assert load.services.graph.search_nodes("SERVICE").truncated.totalEntities == 61  # type: ignore[union-attr]
        # Several words, more entities holding them than a search while loading fetches: answered all the same,
        # counting the substring matches (what ranks without holding every word, here the entity "service", is
        # the loaded server's alone).
        with loaded.store.reading():
            every_relation = set(loaded.graph.state.relations)  # (read_graph's answer is cut too)
        for query in ["service port", "port 80 service", "Service 5"]:
            answer, expected = load.services.graph.search_nodes(query), loaded.graph.search_nodes(query)
            tier = set(substring_tier(loaded, query))
            assert answer.truncated is not None and expected.truncated is not None, query
            assert answer.truncated.totalEntities == len(tier) <= expected.truncated.totalEntities, query
            touching = {r for r in every_relation if r[0] in tier or r[1] in tier}
            assert answer.truncated.totalRelations == len(touching), query
            assert answer.truncated.returnedEntities == expected.truncated.returnedEntities, query
            assert names(answer) == names(expected), query
            assert answer.relations == expected.relations, query
        assert load.loader.is_alive()
    finally:
        load.finish()


def test_a_search_while_loading_cuts_an_entity_too_large_for_the_budget_as_a_loaded_server_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = open_services(tmp_path, max_response_chars=3_000)
    facts = [f"fact {i:03d}: an ordinary sentence about the user" for i in range(200)]
    loaded.graph.create_entities([Entity(name="User", entityType="person", observations=facts)])
    loaded.graph.create_entities(
        [Entity(name=n, entityType="person", observations=[f"{n} knows the user"]) for n in ("Bob", "Carol")]
    )
    load = HeldLoad(tmp_path, monkeypatch, max_response_chars=3_000)
    try:
        for query in ["user", "the user"]:
            answer, expected = load.services.graph.search_nodes(query), loaded.graph.search_nodes(query)
            assert names(expected) == ["User", "Bob", "Carol"], query  # the large one cut, the others after it
            assert names(answer) == names(expected) and answer.entities == expected.entities, query
            assert answer.truncated == expected.truncated, query
        assert load.loader.is_alive()
    finally:
        load.finish()


def test_a_read_the_database_takes_too_long_over_is_cancelled_and_answered_after_the_load(
    held: tuple[Services, HeldLoad], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A read that runs past its bound (here: blocked by another session's lock on the records) is cancelled by the
    # database, not left running, and the call is answered once the load is done, as a loaded server answers it.
    loaded, load = held
    load.services.store.read_while_loading_seconds = 0.2  # type: ignore[attr-defined]
    url = Engine.database_url(tmp_path)
    assert url is not None
    blocker = psycopg.connect(url)
    try:
        blocker.execute("SET lock_timeout = '5s'")
        blocker.execute("LOCK TABLE memory_graph_records IN ACCESS EXCLUSIVE MODE")
        done: list[KnowledgeGraph] = []
        caller = threading.Thread(target=lambda: done.append(load.services.graph.search_nodes("deploy")), daemon=True)
        with caplog.at_level("INFO", logger="memory_graph.graph"):
            caller.start()
            deadline = time.monotonic() + WAIT
            while "answering after the load instead" not in caplog.text and time.monotonic() < deadline:
                time.sleep(0.05)
        assert "took more than 0.2 s to answer a read" in caplog.text
        assert not done  # it now waits for the load, which is still held
        waiting = sql(url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        assert waiting == [(0,)]  # the cancelled read no longer waits in the database
    finally:
        blocker.rollback()
        blocker.close()
    load.finish()
    caller.join(WAIT)
    assert done == [loaded.graph.search_nodes("deploy")]


def test_counting_the_relations_of_many_matches_joins_them_instead_of_testing_each_relation(
    held: tuple[Services, HeldLoad], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Relations with both ends among the matches were once counted by an `IN (SELECT ...)` test beside the count,
    # which the planner runs as a subplan: hashed while the matches' names fit in work_mem, and past that (a search
    # matching most of a 1M-entity memory) compared with every relation in turn, for hours. That size cannot be
    # built here, so the statement's plan is checked: no subplan at all, whatever work_mem allows.
    _, load = held
    statements: list[tuple[str, list[Any]]] = []
    reads = load.services.store.reads_while_loading()
    query = reads._query  # type: ignore[union-attr]

    def recorded(statement: str, parameters: list[Any]) -> list[tuple[Any, ...]]:
        statements.append((statement, parameters))
        return query(statement, parameters)

    monkeypatch.setattr(reads, "_query", recorded)
    answer = load.services.graph.search_nodes("deploy")
    assert answer.entities and load.loader.is_alive()
    counting = [(text, parameters) for text, parameters in statements if "count(" in text]
    assert counting, "the search counted nothing in the database"
    url = Engine.database_url(tmp_path)
    assert url is not None
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET work_mem = '64kB'")
        for text, parameters in counting:
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + text, parameters).fetchall())
            assert "SubPlan" not in plan, plan


def test_the_searchable_text_has_a_trigram_index_the_database_uses(tmp_path: Path) -> None:
    fill(open_services(tmp_path))
    url = Engine.database_url(tmp_path)
    assert url is not None
    with_index = "EXPLAIN SELECT key FROM memory_graph_records WHERE search_text LIKE '%deploy%'"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")  # a table this small is otherwise scanned
        plan = " ".join(row[0] for row in conn.execute(with_index).fetchall())
    assert "memory_graph_search" in plan, plan
    # ASCII letters lower-cased whatever the database's locale, every other letter left as it is.
    texts = sql(url, "SELECT search_text FROM memory_graph_records WHERE entity_name = 'Zoë'")
    assert texts == [("zoë person École teacher",)]
    assert sql(url, "SELECT count(*) FROM memory_graph_records WHERE search_text IS NOT NULL") == [(6,)]  # + lesson


def test_closing_a_store_while_it_loads_stops_the_load_and_leaves_nothing_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server told to stop (a client closing stdio, a test ending) while its load streams the rows: the load
    # stops at its next batch, with its server cursor closed, before the pool's connections are.
    filler = open_services(tmp_path)
    fill(filler)
    filler.store.close()
    in_the_rows = threading.Event()
    give_way = PostgresStore._give_way

    def between_batches(store: PostgresStore) -> None:
        in_the_rows.set()
        assert store._closed.wait(WAIT), "the test never closed the store"
        give_way(store)

    monkeypatch.setattr(PostgresStore, "_give_way", between_batches)
    url = Engine.database_url(tmp_path)
    assert url is not None
    store = services_for_folder(tmp_path, database_url=url).store
    stopped_by: list[type[BaseException]] = []  # the type only: the exception's frames would hold the cursor

    def load() -> None:
        try:
            store.open()
        except BaseException as exc:  # what stopped the load is the point of the test
            stopped_by.append(type(exc))

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    assert in_the_rows.wait(WAIT), "the load never reached the rows"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store.close()
        loader.join(WAIT)
        gc.collect()
    assert not loader.is_alive()
    assert stopped_by == [StoreClosedError]
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]
    database = url.rsplit("/", 1)[1]
    query = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'memory-graph'"
    deadline = time.monotonic() + WAIT  # a backend ends a moment after its client closed the connection
    while sql(url, query, database) != [(0,)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sql(url, query, database) == [(0,)]
