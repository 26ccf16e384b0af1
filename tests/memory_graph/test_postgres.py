"""The PostgreSQL engine against a real PostgreSQL: schema versions, constraints, unreadable rows, an unreachable
or restarted database, and several servers on one database. (The graph, lesson and history suites run on this
engine too: see `each_engine` in conftest.py.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client

from lessons.model import LessonInput
from memory_graph.app import services_for_folder
from memory_graph.errors import InvalidInputError, StorageError
from memory_graph.graph import LESSONS, MEMORY
from memory_graph.history import replay_history
from memory_graph.model import Entity, ObservationAddition, Relation
from memory_graph.server import build_app
from memory_graph.storage import SCHEMA_VERSION, encode_key
from tests.conftest import Engine, open_services, settings_in

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("each_engine"),
    pytest.mark.parametrize("each_engine", ["postgres"], indirect=True),
]
ROOT = Path(__file__).resolve().parents[2]


def sql(url: str, query: str, *args: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, args or None)
        return cursor.fetchall() if cursor.description else []


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_schema_is_created_versioned_and_a_newer_one_refused(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    url = Engine.database_url(tmp_path)
    assert url is not None
    every = [(version,) for version in range(1, SCHEMA_VERSION + 1)]
    assert sql(url, "SELECT version FROM memory_graph_migrations ORDER BY version") == every
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=[])])
    services.store.close()
    open_services(tmp_path).store.close()  # reopening migrates nothing twice
    assert sql(url, "SELECT count(*) FROM memory_graph_migrations") == [(SCHEMA_VERSION,)]
    # A database left at version 1 by older code is brought up to date, its data kept.
    sql(url, "ALTER TABLE memory_graph_changes DROP COLUMN changed_at")
    sql(url, "DELETE FROM memory_graph_migrations WHERE version > 1")
    again = open_services(tmp_path)
    assert sql(url, "SELECT count(*) FROM memory_graph_migrations") == [(SCHEMA_VERSION,)]
    assert [e.name for e in again.graph.read_graph().entities] == ["Alice"]
    again.store.close()
    sql(url, "INSERT INTO memory_graph_migrations (version, description) VALUES (99, 'from the future')")
    with pytest.raises(StorageError) as refused:
        open_services(tmp_path)
    message = str(refused.value)
    assert "schema version 99" in message and f"up to {SCHEMA_VERSION}" in message and "upgrade" in message


def test_the_database_refuses_a_second_copy_of_an_entity_or_relation(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=[])])
    services.graph.create_relations([Relation.model_validate({"from": "Alice", "to": "Alice", "relationType": "is"})])
    url = Engine.database_url(tmp_path)
    assert url is not None
    record = json.dumps({"type": "entity", "name": "Alice", "entityType": "lesson", "observations": []})
    with pytest.raises(psycopg.errors.UniqueViolation):  # the same name in the lesson collection
        sql(
            url,
            "INSERT INTO memory_graph_records (store, collection, key, entity_name, position, record) "
            "VALUES ('default', %s, %s, 'Alice', 0, %s)",
            LESSONS,
            encode_key(("entity", "Alice")),
            record,
        )
    relation = ("relation", "Alice", "Alice", "is")
    with pytest.raises(psycopg.errors.UniqueViolation):
        sql(
            url,
            "INSERT INTO memory_graph_records (store, collection, key, position, record) "
            "VALUES ('default', %s, %s, 0, '{}')",
            MEMORY,
            encode_key(relation),
        )


async def test_an_unreadable_row_is_reported_kept_and_repaired_never_overwritten(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    url = Engine.database_url(tmp_path)
    assert url is not None
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=["tea"])])
    lesson = {"type": "entity", "name": "BROKEN", "entityType": "lesson", "observations": [], "verificationSteps": 1}
    sql(
        url,
        "INSERT INTO memory_graph_records (store, collection, key, entity_name, position, record) "
        "VALUES ('default', %s, %s, 'BROKEN', 0, %s)",
        LESSONS,
        encode_key(("entity", "BROKEN")),
        json.dumps(lesson),
    )
    problems = services.store.check().problems
    assert len(problems) == 1 and "BROKEN" in problems[0] and "verificationSteps" in problems[0]
    async with Client(build_app(settings_in(tmp_path)).server) as client:
        entity = {"name": "BROKEN", "entityType": "lesson", "observations": []}
        result = await client.call_tool("create_entities", {"entities": [entity]})
        assert (
            result.is_error
            and "unreadable" in result.content[0].text
            and "memory-graph repair" in result.content[0].text
        )
        ok = await client.call_tool("add_observations", {"observations": [{"entityName": "Alice", "contents": ["x"]}]})
        assert not ok.is_error  # other records keep taking writes
    assert (
        json.loads(sql(url, "SELECT record::text FROM memory_graph_records WHERE key LIKE '%BROKEN%'")[0][0]) == lesson
    )
    repaired = services.store.check(fix=True)
    assert repaired.ok and "memory_graph_rejected" in repaired.repaired[0]
    assert services.store.check().ok
    kept = sql(url, "SELECT record, reason FROM memory_graph_rejected")
    assert json.loads(kept[0][0]) == lesson and "verificationSteps" in kept[0][1]
    # Every server, not only the one that repaired, takes writes to that name again.
    other = open_services(tmp_path)
    assert other.store.check().ok
    entity = Entity(name="BROKEN", entityType="note", observations=[])
    services.graph.create_entities([entity])
    assert [e.name for e in other.graph.open_nodes(["BROKEN"]).entities] == ["BROKEN"]


async def test_an_unreachable_database_gets_a_clear_tool_error_and_the_server_keeps_answering(tmp_path: Path) -> None:
    port = closed_port()
    settings = settings_in(tmp_path, MEMORY_DATABASE_URL=f"postgresql://someone:secret@127.0.0.1:{port}/memory")
    async with Client(build_app(settings).server) as client:
        for _ in range(2):
            result = await client.call_tool("read_graph", {})
            assert result.is_error
            text = result.content[0].text
            assert f"127.0.0.1:{port}/memory" in text and "MEMORY_DATABASE_URL" in text and "running" in text
            assert "secret" not in text


async def test_a_database_restart_under_a_running_server(tmp_path: Path, postgres_server: Any) -> None:
    if isinstance(postgres_server, str):
        pytest.skip("the PostgreSQL server was given by URL only (MEMORY_TEST_PGDATA unset): cannot restart it")
    async with Client(build_app(settings_in(tmp_path)).server) as client:
        alice = {"name": "Alice", "entityType": "person", "observations": []}
        assert not (await client.call_tool("create_entities", {"entities": [alice]})).is_error
        postgres_server.restart()
        after = await client.call_tool("read_graph", {})  # the dropped connection is replaced, the call answered
        assert not after.is_error and [e["name"] for e in after.structured_content["entities"]] == ["Alice"]
        postgres_server.stop()
        try:
            down = await client.call_tool("create_entities", {"entities": [{**alice, "name": "Bob"}]})
            assert down.is_error and "cannot reach the PostgreSQL database" in down.content[0].text
        finally:
            postgres_server.start()
        back = await client.call_tool("create_entities", {"entities": [{**alice, "name": "Bob"}]})
        assert not back.is_error
        names = [e["name"] for e in (await client.call_tool("read_graph", {})).structured_content["entities"]]
        assert names == ["Alice", "Bob"]


def test_a_malformed_database_url_is_refused_without_quoting_it(tmp_path: Path) -> None:
    from memory_graph.app import open_database

    with pytest.raises(StorageError) as refused:
        open_database("postgresql://bob:s3cr%zzet@127.0.0.1:5432/memory")
    assert "s3cr" not in str(refused.value) and "percent-encoded" in str(refused.value)


def test_a_server_sees_another_servers_commits_at_its_next_call(tmp_path: Path) -> None:
    first, second = open_services(tmp_path), open_services(tmp_path)
    first.graph.create_entities([Entity(name="Alice", entityType="person", observations=["tea"])])
    assert [e.name for e in second.graph.search_nodes("tea").entities] == ["Alice"]
    second.graph.delete_entities(["Alice"])
    assert first.graph.read_graph().entities == []
    assert [e["op"] for e in first.store.events()] == ["create_entities", "delete_entities"]


def spawn(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.memory_graph.workers", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_eight_processes_times_two_hundred_parallel_writes_lose_nothing(tmp_path: Path) -> None:
    processes, writes, threads = 8, 200, 4
    services = open_services(tmp_path)
    services.graph.create_entities([Entity(name="shared", entityType="counter", observations=[])])
    url = Engine.database_url(tmp_path)
    assert url is not None
    env = {"MEMORY_DATABASE_URL": url}
    children = [
        spawn("concurrent", str(tmp_path), str(w), str(writes), str(threads), env=env) for w in range(processes)
    ]
    for child in children:
        out, _ = child.communicate(timeout=600)
        assert child.returncode == 0 and out.strip() == "done"
    tags = {f"w{w}-{i}" for w in range(processes) for i in range(writes)}
    again = open_services(tmp_path, max_response_chars=10**9)
    assert {e.name for e in again.graph.open_nodes(sorted(tags)).entities} == tags
    shared = again.graph.open_nodes(["shared"]).entities[0].observations
    assert len(shared) == len(set(shared)) == processes * writes and set(shared) == tags
    assert sql(url, "SELECT count(*) FROM memory_graph_records WHERE collection = 'memory'") == [(len(tags) + 1,)]
    replayed = replay_history(again.store)
    assert len(replayed[MEMORY]) == len(tags) + 1


def test_migrate_copies_files_to_the_database_and_back_verified_leaving_the_source_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from memory_graph.cli import main

    files = tmp_path / "files"
    source = services_for_folder(files, shard_lines=3)
    source.graph.create_entities([Entity(name=f"E{i}", entityType="t", observations=[f"o{i}"]) for i in range(8)])
    source.graph.create_relations([Relation.model_validate({"from": "E1", "to": "E2", "relationType": "knows"})])
    source.graph.delete_entities(["E5"])
    source.lessons.create_lesson(LessonInput(name="PORT", errorPattern={"type": "network", "message": "EADDRINUSE"}))
    before = {p.name: p.read_bytes() for p in files.iterdir()}
    url = Engine.database_url(tmp_path / "db")
    assert url is not None
    monkeypatch.setenv("MEMORY_FILE_PATH", str(files / "memory.json"))
    monkeypatch.setenv("MEMORY_SHARD_LINES", "3")
    assert main(["export"]) == 0
    exported = capsys.readouterr().out
    assert main(["migrate", "--to", url]) == 0
    assert "counts verified" in capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in files.iterdir()} == before
    assert main(["migrate", "--to", url]) == 1  # a copy goes into an empty store only
    assert "already holds" in capsys.readouterr().err
    monkeypatch.setenv("MEMORY_DATABASE_URL", url)
    assert main(["export"]) == 0
    assert capsys.readouterr().out == exported
    assert main(["check"]) == 0
    back = tmp_path / "back" / "memory.json"
    back.parent.mkdir()
    assert main(["migrate", "--to", str(back)]) == 0
    monkeypatch.delenv("MEMORY_DATABASE_URL")
    monkeypatch.setenv("MEMORY_FILE_PATH", str(back))
    capsys.readouterr()
    assert main(["export"]) == 0
    assert capsys.readouterr().out == exported
    restored = services_for_folder(back.parent)
    assert restored.store.events() == source.store.events()  # the history came along, event for event


def test_compact_prunes_the_change_log_and_a_server_behind_it_reads_the_store_again(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    first, second = open_services(tmp_path), open_services(tmp_path)
    first.graph.create_entities([Entity(name="Alice", entityType="person", observations=[])])
    assert [e.name for e in second.graph.read_graph().entities] == ["Alice"]
    first.graph.create_entities([Entity(name="Bob", entityType="person", observations=[])])
    first.graph.delete_entities(["Alice"])  # `second` has not seen these yet
    url = Engine.database_url(tmp_path)
    assert url is not None
    sql(url, "UPDATE memory_graph_changes SET changed_at = now() - interval '2 days'")
    first.store.prune_history(datetime(2000, 1, 1, tzinfo=UTC))
    assert sql(url, "SELECT count(*) FROM memory_graph_changes") == [(0,)]
    assert sql(url, "SELECT pruned_through > 0 FROM memory_graph_stores WHERE store = 'default'") == [(True,)]
    assert [e.name for e in second.graph.read_graph().entities] == ["Bob"]  # read again, Alice's delete included


def test_rows_sharing_a_position_load_with_their_own_keys(tmp_path: Path) -> None:
    # Restored or hand-made rows may share a position; the load must keep each key with its record even when the
    # database sorts them in little memory (a load that sorted keys and records apart once paired them at random).
    services = open_services(tmp_path)
    url = Engine.database_url(tmp_path)
    assert url is not None
    services.store.close()
    database = sql(url, "SELECT current_database()")[0][0]
    sql(url, f"ALTER DATABASE {database} SET work_mem = '64kB'")
    sql(
        url,
        "INSERT INTO memory_graph_records (store, collection, key, entity_name, position, record) "
        "SELECT 'default', %s, '[\"entity\",\"n' || i || '\"]', 'n' || i, i %% 3, json_build_object('type', "
        "'entity', 'name', 'n' || i, 'entityType', 't', 'observations', json_build_array('of n' || i)) "
        "FROM generate_series(1, 20000) i ORDER BY random()",
        MEMORY,
    )
    try:
        reopened = open_services(tmp_path)
        entities = reopened.graph.state.entities  # every one (read_graph would cut the answer to its budget)
        assert len(entities) == 20000
        assert all(entity["observations"] == [f"of {name}"] for name, entity in entities.items())
        assert reopened.store.check().ok
        reopened.store.close()
    finally:
        sql(url, f"ALTER DATABASE {database} RESET work_mem")


def test_key_columns_that_join_right_but_split_wrong_are_unreadable(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    url = Engine.database_url(tmp_path)
    assert url is not None
    services.store.close()
    for position, (name, key) in enumerate((("x", '["entity"'), ("y", '"x"],["entity","y"]'))):
        record = json.dumps({"type": "entity", "name": name, "entityType": "t", "observations": []})
        sql(
            url,
            "INSERT INTO memory_graph_records (store, collection, key, entity_name, position, record) "
            "VALUES ('default', %s, %s, %s, %s, %s)",
            MEMORY,
            key,
            name,
            position,
            record,
        )
    reopened = open_services(tmp_path)
    assert reopened.graph.read_graph().entities == []
    problems = reopened.store.check().problems
    assert len(problems) == 2 and all("its key column says" in p for p in problems)


def test_a_writer_stuck_holding_the_store_lock_gets_a_clear_error_naming_it_not_a_hang(tmp_path: Path) -> None:
    import threading

    services = open_services(tmp_path)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=[])])
    services.store.lock_timeout_seconds = 0.5  # type: ignore[attr-defined]
    url = Engine.database_url(tmp_path)
    assert url is not None
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            services.graph.create_entities([Entity(name="Bob", entityType="person", observations=[])])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    with psycopg.connect(url, application_name="stuck-writer") as holder:
        pid = holder.info.backend_pid
        holder.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-graph:default', 0))")
        writer = threading.Thread(target=write)
        writer.start()
        writer.join(timeout=20)
        if writer.is_alive():
            holder.rollback()  # let the writer go, so the test ends
            writer.join()
            pytest.fail("the write waited for the stuck writer's lock with no end")
        # Reads on the same server go on while the lock is held elsewhere.
        assert [e.name for e in services.graph.read_graph().entities] == ["Alice"]
        holder.rollback()
    refused = outcome[0]
    assert isinstance(refused, StorageError)
    message = str(refused)
    for said in ("store default", f"pid {pid}", "'stuck-writer'", "over 0.5 s", "Nothing was changed", "retry"):
        assert said in message
    assert f"pg_terminate_backend({pid})" in message
    services.graph.create_entities([Entity(name="Bob", entityType="person", observations=[])])  # lock gone: it goes
    assert [e.name for e in services.graph.read_graph().entities] == ["Alice", "Bob"]


def test_pooled_connections_have_tcp_keepalives(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    with services.store._connection() as conn:  # type: ignore[attr-defined]
        parameters = conn.info.get_parameters()
    assert (parameters["keepalives"], parameters["keepalives_idle"]) == ("1", "30")
    assert (parameters["keepalives_interval"], parameters["keepalives_count"]) == ("10", "3")


def test_a_name_too_long_for_the_index_is_refused_naming_the_record_and_the_fix(tmp_path: Path) -> None:
    import secrets

    services = open_services(tmp_path)
    services.graph.create_entities([Entity(name="Alice", entityType="person", observations=[])])
    long_name = secrets.token_hex(1500)  # 3,000 characters no compression shortens
    with pytest.raises(InvalidInputError) as refused:
        services.graph.create_entities([Entity(name=long_name, entityType="t", observations=[])])
    message = str(refused.value)
    assert f"the entity {long_name[:40]!r}... (3000 characters)" in message
    assert "longer than PostgreSQL can index" in message and "shorten" in message and "Nothing was written" in message
    assert "cannot reach" not in message and "running" not in message
    ends = [secrets.token_hex(700) for _ in range(2)]  # each end fits, the two together do not
    services.graph.create_entities([Entity(name=end, entityType="t", observations=[]) for end in ends])
    relation = Relation.model_validate({"from": ends[0], "to": ends[1], "relationType": "knows"})
    with pytest.raises(InvalidInputError, match=r"the relation .* of type 'knows'.*shorten"):
        services.graph.create_relations([relation])
    assert len(services.graph.read_graph().entities) == 3 and services.graph.read_graph().relations == []


def test_a_nul_character_is_refused_naming_the_record_and_the_field(tmp_path: Path) -> None:
    services = open_services(tmp_path)
    cases = [
        (Entity(name="nul\x00name", entityType="t", observations=[]), "the entity 'nul\\x00name'", "its name"),
        (Entity(name="Carl", entityType="per\x00son", observations=[]), "the entity 'Carl'", "its entityType"),
        (Entity(name="Bob", entityType="t", observations=["ok", "x\x00y"]), "the entity 'Bob'", "observations[1]"),
    ]
    for entity, record, field in cases:
        with pytest.raises(InvalidInputError) as refused:
            services.graph.create_entities([entity])
        message = str(refused.value)
        assert record in message and field in message, message
        assert "U+0000" in message and "remove that character" in message and "Nothing was written" in message
    services.graph.create_entities([Entity(name="Alice", entityType="t", observations=["a \\u0000 b"])])  # text
    with pytest.raises(InvalidInputError, match=r"the entity 'Alice'.*observations\[1\].*U\+0000"):
        services.graph.add_observations([ObservationAddition(entityName="Alice", contents=["x\x00y"])])
    assert [(e.name, e.observations) for e in services.graph.read_graph().entities] == [("Alice", ["a \\u0000 b"])]


def test_migrate_refuses_what_postgresql_cannot_hold_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import secrets

    from memory_graph.cli import main

    files = tmp_path / "files"
    url = Engine.database_url(tmp_path / "db")
    assert url is not None
    monkeypatch.setenv("MEMORY_FILE_PATH", str(files / "memory.json"))
    source = services_for_folder(files)
    long_name = secrets.token_hex(1500)
    source.graph.create_entities([Entity(name=long_name, entityType="t", observations=[])])
    assert main(["migrate", "--to", url]) == 1
    error = capsys.readouterr().err
    assert "longer than PostgreSQL can index" in error and "shorten" in error and "cannot reach" not in error
    source.graph.delete_entities([long_name])
    source.graph.create_entities([Entity(name="Bob", entityType="t", observations=["a\x00b"])])  # the files keep it
    assert main(["migrate", "--to", url]) == 1
    error = capsys.readouterr().err
    assert "the entity 'Bob'" in error and "observations[0]" in error and "U+0000" in error


def test_a_record_deleted_and_created_again_elsewhere_moves_to_the_end_here_too(tmp_path: Path) -> None:
    one, two = open_services(tmp_path), open_services(tmp_path)
    files = services_for_folder(tmp_path / "files")

    def names(services: Any) -> list[str]:
        return [e.name for e in services.graph.read_graph().entities]

    def entity(name: str) -> Entity:
        return Entity(name=name, entityType="t", observations=[])

    both = (one, files)
    for services in both:
        services.graph.create_entities([entity("A"), entity("B")])
    assert names(two) == ["A", "B"]
    for services in both:
        services.graph.delete_entities(["A"])
        services.graph.create_entities([entity("A")])
        services.graph.add_observations([ObservationAddition(entityName="B", contents=["in place"])])
    assert names(files) == names(one) == ["B", "A"]
    assert names(two) == ["B", "A"]  # caught up: moved, not updated in place
    # Records new to a server are placed by position, not by where the log first names them.
    for services in both:
        services.graph.create_entities([entity("X"), entity("Y")])
        services.graph.delete_entities(["X"])
        services.graph.create_entities([entity("X")])
    assert names(files) == names(one) == names(two) == ["B", "A", "Y", "X"]
    # An update in place keeps its place, and a server that reads the whole store agrees.
    two.graph.add_observations([ObservationAddition(entityName="A", contents=["still second"])])
    assert names(one) == names(two) == names(open_services(tmp_path)) == ["B", "A", "Y", "X"]


def test_a_database_not_in_utf8_is_refused_before_anything_is_made(tmp_path: Path, postgres_url: str) -> None:
    name = "t_latin1_" + str(os.getpid())
    sql(postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    sql(postgres_url, f"CREATE DATABASE {name} ENCODING 'LATIN1' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")
    url = postgres_url.rsplit("/", 1)[0] + "/" + name
    try:
        services = services_for_folder(tmp_path, database_url=url)
        with pytest.raises(StorageError) as refused:
            services.store.open()
        services.store.close()
        message = str(refused.value)
        assert "uses the encoding LATIN1" in message and "needs UTF8" in message and "ENCODING 'UTF8'" in message
        assert sql(url, "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'memory_graph%'") == [(0,)]
    finally:
        sql(postgres_url, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
