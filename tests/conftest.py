"""Shared fixtures: real stores on real files in tmp_path, at a tiny shard size so every path crosses shards, and
the same tests on a real PostgreSQL (`each_engine`: a module marked with it runs every test on both engines).

The PostgreSQL server is the one `.ci/run` started (MEMORY_TEST_DATABASE_URL), else one the tests start
themselves (tests/postgres_server.py); each test gets a database of its own, dropped when it ends.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_graph.app import Services, services_for_folder
from memory_graph.config import Settings
from memory_graph.graph import GraphService

TINY_SHARD = 3
# Recall by meaning loads a 90 MB model and torch in every server that searches: only the tests about it use it
# (marked `semantic`); every other test, in process or in a child process, runs as the default install does.
os.environ.setdefault("MEMORY_SEMANTIC", "off")
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def needed(present: bool, what: str) -> None:
    """Skip a test whose outside part (../shared, the reference server, a container engine) is missing, except
    in CI (`CI=true`), where its absence is a broken setup and must fail rather than pass quietly."""
    if present:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} (CI must provide it)")
    pytest.skip(what)


class Engine:
    """Which engine the running test uses, and on PostgreSQL the database of each folder it opens."""

    name = "files"
    server_url: str | None = None
    databases: dict[Path, str] = {}  # noqa: RUF012 (one test's folders; reset by each_engine)

    @classmethod
    def database_url(cls, folder: Path) -> str | None:
        """None on the files; on PostgreSQL a database of the folder's own (created at its first use)."""
        if cls.name == "files" or cls.server_url is None:
            return None
        folder = folder.resolve()
        if folder not in cls.databases:
            import psycopg

            name = "t_" + hashlib.sha1(f"{folder}-{os.getpid()}".encode()).hexdigest()[:20]
            with psycopg.connect(cls.server_url, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE {name}")
            cls.databases[folder] = cls.server_url.rsplit("/", 1)[0] + "/" + name
        return cls.databases[folder]


FILES_ONLY = pytest.mark.parametrize("each_engine", ["files"], indirect=True)
"""For a test of a module run on both engines that reads the files themselves."""


def engine_env(folder: Path) -> dict[str, str]:
    """The environment that puts a folder's memory on the running test's engine."""
    url = Engine.database_url(folder)
    return {"MEMORY_DATABASE_URL": url} if url else {}


def settings_in(folder: Path, **env: Any) -> Settings:
    """Settings for a memory in `folder` (on the test's engine) with these environment variables."""
    merged = {"MEMORY_FILE_PATH": str(folder / "memory.json"), **engine_env(folder)}
    merged.update({k: str(v) for k, v in env.items()})
    return Settings.from_env(merged, cwd=folder)


def open_services(folder: Path, shard_lines: int = TINY_SHARD, max_response_chars: int = 80_000) -> Services:
    services = services_for_folder(folder, shard_lines, max_response_chars, database_url=Engine.database_url(folder))
    services.store.open()
    return services


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A PostgreSQL server for the session: the one CI started, else a throwaway one of our own."""
    from tests import postgres_server as servers

    given = os.environ.get("MEMORY_TEST_DATABASE_URL", "").strip()
    if given:
        binaries = servers.bin_dir()
        data_dir = os.environ.get("MEMORY_TEST_PGDATA", "")
        port = int(os.environ.get("MEMORY_TEST_PGPORT", "0") or 0)
        yield servers.PostgresServer(Path(data_dir), port, binaries) if binaries and data_dir else given
        return
    try:
        server = servers.create()
    except (RuntimeError, OSError) as exc:
        needed(False, f"no PostgreSQL server for the tests: {exc}")
    try:
        yield server
    finally:
        server.remove("immediate")


@pytest.fixture(scope="session")
def postgres_url(postgres_server: Any) -> str:
    return postgres_server if isinstance(postgres_server, str) else str(postgres_server.url)


@pytest.fixture(params=["files", "postgres"])
def each_engine(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test on the JSON Lines files and on PostgreSQL; every store a test opened is closed after it."""
    opened: list[Any] = []
    if request.param == "postgres":
        from memory_graph.storage import PostgresStore

        Engine.server_url = request.getfixturevalue("postgres_url")
        original = PostgresStore.__init__

        def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
            original(self, *args, **kwargs)
            opened.append(self)

        request.getfixturevalue("monkeypatch").setattr(PostgresStore, "__init__", tracked)
    Engine.name, Engine.databases = request.param, {}
    try:
        yield request.param
    finally:
        for store in opened:
            store.close()
        if Engine.databases and Engine.server_url:
            import psycopg

            with psycopg.connect(Engine.server_url, autocommit=True) as conn:
                for url in Engine.databases.values():
                    conn.execute(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)")
        Engine.name, Engine.databases = "files", {}


def open_graph(folder: Path, shard_lines: int = TINY_SHARD, max_response_chars: int = 80_000) -> GraphService:
    return open_services(folder, shard_lines, max_response_chars).graph


@pytest.fixture
def graph_factory(tmp_path: Path) -> Callable[..., GraphService]:
    def make(**kwargs: int) -> GraphService:
        return open_graph(tmp_path, **kwargs)

    return make


@pytest.fixture
def graph(graph_factory: Callable[..., GraphService]) -> GraphService:
    return graph_factory()


@pytest.fixture(autouse=True)
def default_install_without_semantic(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside tests marked `semantic`, settings built from a dict (MEMORY_SEMANTIC unset: auto) also behave as
    without the semantic extra."""
    if request.node.get_closest_marker("semantic") is None:
        monkeypatch.setattr("memory_graph.app.semantic_available", lambda: False)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def shared_pids(runtime: Path) -> list[int]:
    """The pids of the shared servers running for this runtime folder (each writes its pid in its lock)."""
    found = []
    for lock in sorted((runtime / "memory-graph").glob("*.lock")):
        text = lock.read_text().strip()
        if text and alive(int(text)):
            found.append(int(text))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent, a client that exited, has not reaped it).
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


@pytest.fixture
def shared_runtime() -> Iterator[Path]:
    """A private runtime folder (short: a socket's path holds about 100 bytes, and pytest's folders are longer);
    every shared server started in it is stopped after the test."""
    folder = Path(tempfile.mkdtemp(prefix="mg-run-"))
    try:
        yield folder
    finally:
        for pid in shared_pids(folder):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while shared_pids(folder) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not shared_pids(folder), "a shared server outlived SIGTERM by 30 s"
        shutil.rmtree(folder)
