"""The PostgreSQL engine: the same store interface as the JSON Lines files, for a team or a fleet of servers on one
database (`MEMORY_DATABASE_URL=postgresql://...`, the `postgres` extra: psycopg 3 and its pool).

Tables (created and migrated by the server, versioned in `memory_graph_migrations`):
- `memory_graph_records`: every record of every collection (graph, lessons, history) of every named store, one
  row per record identity: `(store, collection, key)` is the primary key, so no entity or relation is ever
  stored twice, and a partial unique index keeps an entity name to one collection (an entity and a lesson never
  share a name). `record` is the record as JSON text (key order kept, as the files keep it); `position` orders
  records by first creation, as the official server orders its array.
- `memory_graph_changes`: the change log, one row per record a commit changed (`seq` from a sequence). Every
  server remembers the last `seq` it applied; at each call it asks for the newest (one index lookup) and reads
  only the rows after it. A server behind the log's pruned part reloads.
- `memory_graph_stores`: one row per named store (when it was created, how far its change log was pruned).

The rules:
- one database transaction per call, committed all or nothing when the `transaction()` block ends; writers of
  one store take a transaction-scoped advisory lock first, so they apply one after another, each on the data
  the one before committed (no serialization failure can happen between our writers, and change-log order is
  commit order). The lock, the catching up and every read are retried once on a lost connection, so a database
  restart costs at most the one call that was writing when it went down, and that call changes nothing;
- `pg_notify('memory_graph', store)` after each commit wakes idle subscribers of other servers (LISTEN), who
  then read the change log as any call would;
- the services keep their indexes in memory, fed by the same change notifications as with the files: a server
  loads its store once at start (one ordered scan, or its start snapshot and the change log since), then follows
  the change log. While that load runs, `open_nodes` and `search_nodes` are answered from the tables' own
  indexes (`DatabaseReads`: entity names, relation ends, and a trigram index on each entity's searchable text
  when the `pg_trgm` extension can be created), so a large memory's first calls need not wait for it.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from memory_graph.errors import InvalidInputError, StorageError, StoreClosedError
from memory_graph.storage.check import CheckReport
from memory_graph.storage.codec import (
    HISTORY,
    SURROGATE_ESCAPE,
    Key,
    RecordCheck,
    checked_record,
    dump_line,
    event_check,
    parse_all_at_once,
    record_key,
)
from memory_graph.storage.engine import (
    LOCK_TIMEOUT_SECONDS,
    ReadsBesideLoad,
    ReadsWhileLoading,
    StoreEngine,
    Taken,
    Transaction,
    lock_held_too_long,
    public_caller,
)

log = logging.getLogger(__name__)

CHANNEL = "memory_graph"
CONNECT_TIMEOUT_SECONDS = 5
# Rows a load fetches at a time: small enough that reads answered meanwhile from another thread get their turn
# between two (each fetch is one call that holds the interpreter), large enough that round trips do not count.
LOAD_BATCH_ROWS = 2_000
READ_WHILE_LOADING_SECONDS = 60.0  # the longest one read answered from the database while loading may run
CLOSE_WAIT_SECONDS = 10.0  # the longest close() waits for a running load to stop at its next batch
BULK_ROWS = 500  # from this many rows a commit copies them in (COPY) instead of one statement per row
IDLE_POLL_SECONDS = 30.0  # an idle subscriber also looks this often, in case a notification was missed
CHANGE_LOG_HOURS = 24  # `compact` keeps a day of the change log: a server idle for longer reads the store again
# Trigger: a writer's process stops (SIGSTOP, a hang) while its transaction holds the store's lock; its kernel
# still answers keepalives. Why: every other writer would wait for it forever. Outcome: the database ends a write
# transaction left idle this long (a real one is idle only while Python computes its rows: seconds, even for a
# million-record migrate), which lets the lock go.
IDLE_WRITE_SECONDS = 600
# Every connection: a dead peer (a host gone, a cable pulled) is noticed within about a minute by TCP keepalives,
# not after the kernel's two hours; text goes both ways as UTF-8 whatever PGCLIENTENCODING says.
CONNECTION_OPTIONS: dict[str, Any] = {
    "connect_timeout": CONNECT_TIMEOUT_SECONDS,
    "application_name": "memory-graph",
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "client_encoding": "UTF8",
}

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "records, change log and stores",
        """
        CREATE TABLE memory_graph_stores (
            store text PRIMARY KEY,
            created_at timestamptz NOT NULL DEFAULT now(),
            pruned_through bigint NOT NULL DEFAULT 0
        );
        CREATE SEQUENCE memory_graph_position;
        CREATE TABLE memory_graph_records (
            store text NOT NULL REFERENCES memory_graph_stores (store),
            collection text NOT NULL,
            key text NOT NULL,
            entity_name text,
            position bigint NOT NULL,
            record json NOT NULL,
            PRIMARY KEY (store, collection, key)
        );
        CREATE UNIQUE INDEX memory_graph_one_entity_per_name
            ON memory_graph_records (store, entity_name) WHERE entity_name IS NOT NULL;
        CREATE INDEX memory_graph_records_order ON memory_graph_records (store, position);
        CREATE TABLE memory_graph_changes (
            seq bigserial PRIMARY KEY,
            store text NOT NULL,
            collection text NOT NULL,
            key text NOT NULL
        );
        CREATE INDEX memory_graph_changes_by_store ON memory_graph_changes (store, seq);
        CREATE TABLE memory_graph_rejected (
            store text NOT NULL,
            collection text NOT NULL,
            key text NOT NULL,
            record text NOT NULL,
            reason text NOT NULL,
            rejected_at timestamptz NOT NULL DEFAULT now()
        );
        """,
    ),
    (
        2,
        "when each change was committed (list_projects shows each store's last change)",
        """
        ALTER TABLE memory_graph_changes ADD COLUMN changed_at timestamptz NOT NULL DEFAULT now();
        """,
    ),
    (
        3,
        "indexes to answer reads while a server loads (relation ends, entities' searchable text)",
        # The searchable text is what search_nodes looks at (codec.search_text, which the files compute), its ASCII
        # letters lower-cased here (translate, not lower(): lower() follows the database's locale), kept in a column
        # (computing it again for each row a search finds cost more than the search).
        """
        CREATE OR REPLACE FUNCTION memory_graph_search_text(record json) RETURNS text
            LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT translate(
                concat_ws(' ', record->>'name', record->>'entityType',
                    (SELECT string_agg(value, ' ') FROM json_array_elements_text(
                        CASE WHEN json_typeof(record->'observations') = 'array'
                        THEN record->'observations' ELSE '[]'::json END)),
                    record->'errorPattern'->>'type', record->'errorPattern'->>'message',
                    record->'errorPattern'->>'context'),
                'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
        $$;
        ALTER TABLE memory_graph_records
            ADD COLUMN IF NOT EXISTS search_text text GENERATED ALWAYS AS
                (CASE WHEN entity_name IS NULL THEN NULL ELSE memory_graph_search_text(record) END) STORED,
            ADD COLUMN IF NOT EXISTS relation_from text GENERATED ALWAYS AS
                (CASE WHEN record->>'type' = 'relation' THEN record->>'from' END) STORED,
            ADD COLUMN IF NOT EXISTS relation_to text GENERATED ALWAYS AS
                (CASE WHEN record->>'type' = 'relation' THEN record->>'to' END) STORED;
        CREATE INDEX IF NOT EXISTS memory_graph_relations_from ON memory_graph_records (relation_from)
            INCLUDE (store, collection, relation_to) WHERE relation_from IS NOT NULL;
        CREATE INDEX IF NOT EXISTS memory_graph_relations_to ON memory_graph_records (relation_to)
            INCLUDE (store, collection) WHERE relation_to IS NOT NULL;
        """,
    ),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]
SEARCH_INDEX_VERSION = 3  # the migration after which the trigram index is tried (it needs pg_trgm)
SEARCH_INDEX = (
    "CREATE INDEX IF NOT EXISTS memory_graph_search ON memory_graph_records "
    "USING gin (search_text gin_trgm_ops) WHERE search_text IS NOT NULL"
)


def store_usage(url: str) -> dict[str, tuple[int, int, float | None]]:
    """Every store of a database: (records, bytes of record text, when it last changed in seconds since the epoch
    or None), as `folder_usage` gives a folder's (the caller formats the time, one way for both engines)."""
    try:
        with psycopg.connect(url, **CONNECTION_OPTIONS) as conn:
            rows = conn.execute(
                "SELECT s.store, "
                "(SELECT count(*) FROM memory_graph_records r WHERE r.store = s.store AND r.collection <> %s), "
                "(SELECT coalesce(sum(length(r.record::text)), 0) FROM memory_graph_records r "
                "WHERE r.store = s.store), "
                "(SELECT max(c.changed_at) FROM memory_graph_changes c WHERE c.store = s.store) "
                "FROM memory_graph_stores s ORDER BY s.store",
                (HISTORY,),
            ).fetchall()
    except psycopg.errors.UndefinedTable:
        return {}
    except psycopg.ProgrammingError:
        raise StorageError("MEMORY_DATABASE_URL is not a valid PostgreSQL URL (see the README's Team setup)") from None
    except psycopg.Error as exc:
        raise StorageError(f"cannot list the stores of {safe_url(url)}: {exc}") from exc
    return {
        store: (int(count), int(size), changed.timestamp() if changed else None) for store, count, size, changed in rows
    }


def _store_lock(store: str) -> str:
    """The name whose hash is a store's advisory write lock."""
    return f"memory-graph:{store}"


def described(key: Key) -> str:
    """A record's identity as a message names it: its names cut to a readable length."""

    def shown(text: Any) -> str:
        text = str(text)
        return repr(text) if len(text) <= 60 else f"{text[:40]!r}... ({len(text)} characters)"

    if key[0] == "relation" and len(key) == 4:
        return f"the relation {shown(key[1])} -> {shown(key[2])} of type {shown(key[3])}"
    if key[0] == "event" and len(key) == 2:
        return f"the history event {key[1]}"
    return f"the {key[0]} {shown(key[1])}" if len(key) == 2 else f"the record {shown(key)}"


def nul_path(value: Any, path: str = "") -> str | None:
    """Where in a record a text holds U+0000 (`observations[2]`, `name`, `name (a key)`), or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for name, item in value.items():
            if isinstance(name, str) and "\x00" in name:
                return f"{path + '.' if path else ''}{name!r} (a field name)"
            found = nul_path(item, f"{path}.{name}" if path else str(name))
            if found is not None:
                return found
    if isinstance(value, list):
        for number, item in enumerate(value):
            found = nul_path(item, f"{path}[{number}]")
            if found is not None:
                return found
    return None


def encode_key(key: Key) -> str:
    return json.dumps(list(key), ensure_ascii=False, separators=(",", ":"))


def safe_url(url: str) -> str:
    """The database URL as it may be shown: host, port, database and user, never the password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the database named by MEMORY_DATABASE_URL"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    user = f"{parts['user']}@" if parts.get("user") else ""
    return f"postgresql://{user}{host}:{port}/{parts.get('dbname') or ''}"


class TableCollection:
    """One collection's records as this server last read them from the database (a `RecordSource`)."""

    def __init__(self, name: str, check: RecordCheck | None) -> None:
        self.name = name
        self.check = check
        self.texts: dict[Key, str] = {}
        self.unreadable: dict[str, str] = {}  # key column -> why (reported by check, never loaded)

    @property
    def locations(self) -> Mapping[Key, str]:
        return self.texts

    def record(self, key: Key) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.texts[key])
        return result

    def all_records(self) -> Iterator[dict[str, Any]]:
        for text in self.texts.values():
            yield json.loads(text)

    def readable(self, key_text: str, text: str) -> tuple[Key, dict[str, Any]] | None:
        """The row's record, checked by the same rules as a line of a file, or None (and remembered) if unusable."""
        why = self.problem(key_text, text)
        if isinstance(why, str):
            self.unreadable[key_text] = why
            return None
        self.unreadable.pop(key_text, None)
        return why

    def readable_rows(self, rows: dict[str, str]) -> Iterator[tuple[Key, dict[str, Any], str]]:
        """(key, record, text) of every usable row (key column -> record text), in order; the others are
        remembered as unreadable (a load starts from none). All rows are parsed in one call (the files' parser)
        and the key columns compared with the records' keys as one list; only when that fails is each row read on
        its own, to say which one is wrong."""
        texts = list(rows.values())
        items = parse_all_at_once(texts)
        if items is not None:
            repair = SURROGATE_ESCAPE.search("".join(texts)) is not None
            checked = [checked_record(item, self.check, repair_text=repair) for item in items]
            if all(record is not None for record, _ in checked):
                records = [record for record, _ in checked if record is not None]
                keys = [record_key(record) for record in records]
                if [encode_key(key) for key in keys] == list(rows):
                    yield from zip(keys, records, texts, strict=True)
                    return
        for key_text, text in rows.items():
            readable = self.readable(key_text, text)
            if readable is not None:
                yield (*readable, text)

    def problem(self, key_text: str, text: str) -> tuple[Key, dict[str, Any]] | str:
        try:
            item = json.loads(text)
        except ValueError as exc:
            return f"not JSON ({exc})"
        record, why = checked_record(item, self.check, repair_text=SURROGATE_ESCAPE.search(text) is not None)
        if record is None:
            return why
        key = record_key(record)
        if encode_key(key) != key_text:
            return f"its key column says {key_text} but the record is {encode_key(key)}"
        return key, record


class DatabaseReads:
    """Reads answered from the tables' indexes, without the store's lock or what it holds (`ReadsWhileLoading`):
    each in one read-only transaction on a pooled connection, rows checked by the same rules as a load's."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def answering(self) -> AbstractContextManager[None]:
        return self._store._beside.answering()

    def entities(self, names: list[str]) -> list[tuple[str, dict[str, Any]]]:
        return self._records("entity_name = ANY(%s)", [names])

    def matching(self, fragments: list[str], limit: int) -> list[tuple[str, dict[str, Any]]] | None:
        held, patterns = _holding(fragments)
        found = self._records(held, patterns, limit=limit + 1)
        return found if len(found) <= limit else None

    def leading_matches(
        self, words: list[str], phrase: str, take: int
    ) -> tuple[int, Callable[[], int], list[tuple[str, dict[str, Any]]]]:
        held, patterns = _holding(words)
        literal = _like_literal(phrase)
        several = len(words) > 1
        # Fields are joined by a space here (by a separator no text holds in memory): a phrase found across two
        # fields only moves an entity up among those holding every word, which the service orders again.
        whole = "search_text LIKE %s" if several else "true"
        lowered = "translate(entity_name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
        order = "whole DESC, lowered = %s DESC, lowered LIKE %s DESC, lowered LIKE %s DESC, position, key"
        # One statement: the matches are found once (reading their rows is most of the cost), then ranked, counted
        # and the relations touching them counted from the ends' indexes.
        rows = self._query(
            "WITH m AS MATERIALIZED (SELECT store, collection, key, entity_name AS name, position, "
            f"{lowered} AS lowered, {whole} AS whole FROM memory_graph_records WHERE {self._scope()} AND {held}), "
            f"lead AS (SELECT store, collection, key, row_number() OVER (ORDER BY {order}) AS rank FROM m "
            f"ORDER BY {order} LIMIT {int(take)}) "
            f"SELECT r.store, r.collection, r.key, r.record::text, (SELECT count(*) FROM m), {self._touching('m')} "
            "FROM lead JOIN memory_graph_records r USING (store, collection, key) ORDER BY lead.rank",
            [
                *([f"%{literal}%"] if several else []),
                self._store.stores,
                *patterns,
                *[phrase, f"{literal}%", f"%{literal}%"] * 2,
                *self._touching_parameters,
            ],
        )
        if not rows:
            return 0, lambda: 0, []
        touching = int(rows[0][5])
        return int(rows[0][4]), lambda: touching, self._readable([row[:4] for row in rows])

    def relations_touching(self, names: list[str]) -> list[tuple[str, dict[str, Any]]]:
        # One query per end, so each end's index answers its half (an OR of the two scanned every relation).
        ends = [
            f"SELECT store, collection, key, position, record::text FROM memory_graph_records WHERE {self._scope()} "
            f"AND relation_{end} = ANY(%s)"
            for end in ("from", "to")
        ]
        both = f"{ends[0]} UNION ALL {ends[1]}"
        rows = self._query(
            f"SELECT store, collection, key, record FROM ({both}) touching ORDER BY position, key",
            [self._store.stores, names, self._store.stores, names],
        )
        once = {(row[0], row[1], row[2]): row for row in rows}  # a relation with both ends among them came twice
        return self._readable(list(once.values()))

    def count_relations_touching(self, names: list[str]) -> int:
        rows = self._query(
            f"WITH m (name) AS MATERIALIZED (SELECT unnest(%s::text[])) SELECT {self._touching('m')}",
            [names, *self._touching_parameters],
        )
        return int(rows[0][0])

    def _touching(self, names: str) -> str:
        """SQL for how many relations have an end among the `name` column of the CTE `names`: those from one, plus
        those to one, less those both from and to one (counted in the same pass as the first, joined to the names),
        each from an end's index alone: it holds the other end and the scope, so no row is read.

        The relations from a match are joined to the matches' names, not tested with `IN (SELECT ...)` beside the
        count: the planner hashes such a test only while the names fit in `work_mem`, and past that (a search
        matching 800,000 of 1M entities) it compared every relation with every match, which ran for hours. A join
        is hashed in batches at any size (that search: 9 s)."""
        scope = self._scope("r.")
        joined = f"FROM {names} JOIN memory_graph_records r ON {scope} AND r.relation_"
        both = f"LEFT JOIN (SELECT DISTINCT name FROM {names}) both_ends ON both_ends.name = r.relation_to"
        return (
            f"(SELECT count(*) - count(both_ends.name) {joined}from = {names}.name {both}) "
            f"+ (SELECT count(*) {joined}to = {names}.name)"
        )

    @property
    def _touching_parameters(self) -> list[Any]:
        return [self._store.stores] * 2

    def _scope(self, table: str = "") -> str:
        """The rows of this server's collections, each in its own store (never the history). Its parameter is the
        list of stores, the condition the indexes start with."""
        pairs = " OR ".join(
            f"({table}store = {_sql_literal(store)} AND {table}collection = {_sql_literal(name)})"
            for name, store in self._store.store_of.items()
            if name != HISTORY
        )
        return f"{table}store = ANY(%s) AND ({pairs})"

    def _records(
        self, condition: str, parameters: list[Any], limit: int | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        sql = (
            "SELECT store, collection, key, record::text FROM memory_graph_records "
            f"WHERE {self._scope()} AND ({condition}) ORDER BY position, key"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._readable(self._query(sql, [self._store.stores, *parameters]))

    def _query(self, sql: str, parameters: list[Any]) -> list[tuple[Any, ...]]:
        store = self._store
        # A bound on what a read can cost the database: past it the call waits for the load instead, and a server
        # killed while a broad read runs leaves the database busy for that long at most.
        bound = store.read_while_loading_seconds
        try:
            with store._connection() as conn:
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                conn.execute("SET LOCAL jit = off")  # compiling took longer than these short queries run
                conn.execute(f"SET LOCAL statement_timeout = {max(1, round(bound * 1000))}")
                rows = conn.execute(sql, parameters).fetchall()
                conn.commit()
                return rows
        except psycopg.errors.QueryCanceled as exc:
            raise StorageError(
                f"the database {safe_url(store.url)} took more than {bound:g} s to answer a read while the memory loads"
            ) from exc
        except psycopg.OperationalError as exc:
            raise store._unreachable(exc) from exc
        except psycopg.Error as exc:  # (a database the load has not migrated yet has no search function)
            raise StorageError(f"the database {safe_url(store.url)} could not answer a read: {exc}") from exc

    def _readable(self, rows: list[tuple[Any, ...]]) -> list[tuple[str, dict[str, Any]]]:
        found: list[tuple[str, dict[str, Any]]] = []
        for _, name, key_text, text in rows:
            readable = self._store.collections[name].problem(key_text, text)
            if not isinstance(readable, str):  # an unreadable row is the load's to report
                found.append((name, readable[1]))
        return found


def _holding(fragments: list[str]) -> tuple[str, list[str]]:
    """The condition that an entity's searchable text holds every fragment, and its parameters."""
    held = " AND ".join(["search_text LIKE %s"] * len(fragments))
    return held, [f"%{_like_literal(fragment)}%" for fragment in fragments]


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _like_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _parsed(texts: dict[Key, str]) -> list[dict[str, Any]]:
    return [json.loads(text) for text in texts.values()]


@dataclass
class _Rows:
    """A commit's rows, deletes before upserts (a name moved between collections frees its place first)."""

    deletes: dict[str, list[str]] = field(default_factory=dict)
    upserts: list[tuple[str, str, str, str | None, str]] = field(default_factory=list)  # store, collection, key...
    changed: list[tuple[str, Key, dict[str, Any] | None, str | None]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.changed)


class PostgresStore(StoreEngine):
    def __init__(
        self,
        url: str,
        collections: Sequence[str],
        store_name: str = "default",
        collection_stores: dict[str, str] | None = None,
        record_checks: dict[str, RecordCheck] | None = None,
        history: bool = True,
        actor: str | None = None,
        pool_size: int = 4,
    ) -> None:
        super().__init__(actor)
        try:
            conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            # The driver's message quotes the bad part, which may be the password: never shown.
            raise StorageError(
                "MEMORY_DATABASE_URL is not a valid PostgreSQL URL; check it has the form "
                "postgresql://user:password@host:5432/dbname and that special characters in the password are "
                "percent-encoded (%40 for @, %25 for %)"
            ) from None
        self.url = url
        self.store_name = store_name
        checks = {**(record_checks or {}), HISTORY: event_check}
        names = [*collections, *([HISTORY] if history else [])]
        self.collections: dict[str, TableCollection] = {name: TableCollection(name, checks.get(name)) for name in names}
        # A collection may live in another store (the lessons every project shares): each collection's store, and
        # the change-log position applied for each store (one store's log order is its commit order).
        self.store_of = {name: (collection_stores or {}).get(name, store_name) for name in names}
        self.stores = sorted(set(self.store_of.values()))
        self._pool = ConnectionPool(
            url,
            # Two at once: a read answered while the load holds one finds the other connected and ready.
            min_size=2,
            max_size=max(2, pool_size),
            open=False,
            timeout=CONNECT_TIMEOUT_SECONDS,
            reconnect_timeout=0,
            kwargs=CONNECTION_OPTIONS,
            name="memory-graph",
        )
        self._pool_open = False
        self._pool_lock = threading.Lock()
        self._thread_lock = threading.RLock()
        self._opened = False
        self._applied_seq: dict[str, int] = dict.fromkeys(self.stores, 0)
        self._pending_seq: dict[str, int] = {}
        # The highest record position the held records reflect: each held record's position is at most this, and a
        # record created (or deleted and created again) since has a higher one, from the sequence (`_catch_up`).
        self._position_seen = 0
        self._pending_position = 0
        self._notified = threading.Event()
        self._listening: threading.Thread | None = None
        self._last_poll = 0.0
        self._closed = threading.Event()
        self._store_births: list[str] = []
        self._loading = False
        self._database_reads = DatabaseReads(self)
        self._beside = ReadsBesideLoad()  # reads while loading now running (the load gives way to them)
        self.read_while_loading_seconds = READ_WHILE_LOADING_SECONDS
        self.lock_timeout_seconds = LOCK_TIMEOUT_SECONDS

    @property
    def location(self) -> str:
        shared = [f"{name} in store {store}" for name, store in self.store_of.items() if store != self.store_name]
        return f"{safe_url(self.url)} (store {self.store_name}{'; ' + ', '.join(shared) if shared else ''})"

    def paths(self) -> set[Path]:
        return set()

    # -- connections -----------------------------------------------------------------------------------------
    def _unreachable(self, exc: Exception) -> StorageError:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StorageError(
            f"cannot reach the PostgreSQL database {safe_url(self.url)}: {reason}. Nothing was changed. Check that "
            "the database server is running and reachable from this machine, and the host, port, database, user "
            "and password in MEMORY_DATABASE_URL; this server keeps answering and reconnects by itself."
        )

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection; left in a transaction it is rolled back, broken it is replaced."""
        if self._closed.is_set():
            raise self._closed_error()
        if not self._pool_open:
            # A lock of its own, not the store's: a read answered while a load holds that one may be the first
            # to need the pool.
            with self._pool_lock:
                if not self._pool_open:
                    self._pool.open(wait=False)
                    self._pool_open = True
        try:
            conn = self._pool.getconn()
        except PoolTimeout as exc:
            raise self._unreachable(exc) from exc
        except PoolClosed as exc:
            raise self._closed_error() from exc
        try:
            yield conn
        finally:
            if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                with suppress(psycopg.Error):
                    conn.rollback()
            self._pool.putconn(conn)

    @contextmanager
    def _session(self, write: bool) -> Iterator[psycopg.Connection[Any]]:
        """A connection in a transaction, caught up with the change log (after the store's lock when `write`).

        Trigger: the pool may hand out a connection the database dropped (it restarted). Why: the first
        statement is where that shows. Outcome: one retry on a fresh connection, before anything was decided."""
        for attempt in (1, 2):
            if attempt == 2:
                self._pool.check()  # drop every pooled connection the database closed, not just this one
            with self._connection() as conn:
                try:
                    if not self._opened:
                        self._load(conn)
                    if write:
                        self._lock_stores(conn)
                    self._catch_up(conn)
                except psycopg.errors.LockNotAvailable as exc:
                    raise self._lock_timed_out(conn, None) from exc
                except psycopg.OperationalError as exc:
                    if attempt == 2 or (conn.closed is False and conn.info.status == psycopg.pq.ConnStatus.OK):
                        raise self._unreachable(exc) from exc
                    log.info("retrying on a new connection: %s", exc)
                    continue
                except psycopg.Error as exc:
                    raise StorageError(f"the database {safe_url(self.url)} refused a read: {exc}") from exc
                yield conn
                return

    def _lock_stores(self, conn: psycopg.Connection[Any]) -> None:
        """Take each store's write lock (for this transaction), waiting at most `lock_timeout_seconds` for it."""
        conn.execute(
            "SELECT set_config('lock_timeout', %s, true), set_config('idle_in_transaction_session_timeout', %s, true)",
            (self._lock_wait(), f"{IDLE_WRITE_SECONDS}s"),
        )
        for store in self.stores:  # always in one order: two writers never deadlock
            try:
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_store_lock(store),))
            except psycopg.errors.LockNotAvailable as exc:
                raise self._lock_timed_out(conn, store) from exc

    def _lock_wait(self) -> str:
        return f"{max(1, round(self.lock_timeout_seconds * 1000))}ms"

    def _lock_timed_out(self, conn: psycopg.Connection[Any], store: str | None) -> StorageError:
        """The error of a wait for a lock that ran out: for a store's write lock, naming the session holding it
        when the database says (a user without pg_read_all_stats sees other users' pid and application only)."""
        with suppress(psycopg.Error):
            conn.rollback()
        if store is None:
            # (A lock on the tables themselves: an administrator's ALTER TABLE, LOCK TABLE or VACUUM FULL.)
            return lock_held_too_long(f"on the memory-graph tables of {safe_url(self.url)}", self.lock_timeout_seconds)
        holder, remedy = "another memory-graph server", ""
        with suppress(psycopg.Error):
            row = conn.execute(
                "SELECT a.pid, a.application_name, host(a.client_addr), "
                "extract(epoch FROM now() - a.xact_start)::bigint, a.state "
                "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(%s, 0)",
                (_store_lock(store),),
            ).fetchone()
            conn.rollback()
            if row is not None:
                pid, application, address, seconds, state = row
                seen = [f"pid {pid}"]
                seen += [f"application {application!r}"] if application else []
                seen += [f"from {address}"] if address else []
                seen += [f"in its transaction for {seconds} s"] if seconds is not None else []
                seen += [f"now {state}"] if state else []
                holder = f"the database session {', '.join(seen)}"
                remedy = f", or if that session is stuck end it (SELECT pg_terminate_backend({pid}))"
        return lock_held_too_long(
            f"of store {store} in {safe_url(self.url)}", self.lock_timeout_seconds, holder=holder, remedy=remedy
        )

    # -- lifecycle -------------------------------------------------------------------------------------------
    def opening(self) -> None:
        if not self._opened:
            self._loading = True

    def open(self) -> None:
        if self._opened:
            return
        # Said before the lock and the connection, so a read arriving while they are taken is answered too.
        self._loading = True
        try:
            with self._thread_lock:
                if self._opened:
                    return
                with self._session(write=False) as conn:
                    self._commit_read(conn)
                log.info("memory opened: %s", self.location)
        finally:
            self._loading = False

    def close(self) -> None:
        with suppress(StorageError):
            self.save_snapshot()
        self._closed.set()
        # A load still running stops at its next batch of rows (`_give_way`) and lets its connection and server
        # cursor go: the pool is closed after it, never under it (a cursor left open there was a ResourceWarning
        # when the thread's frame went, and its connection was closed mid-fetch).
        self._beside.wake()
        if self._thread_lock.acquire(timeout=CLOSE_WAIT_SECONDS):
            self._thread_lock.release()
        else:
            log.warning(
                "the load of %s did not stop within %s s; closing its connections", self.location, CLOSE_WAIT_SECONDS
            )
        if self._pool_open:
            self._pool.close()
            self._pool_open = False

    def _closed_error(self) -> StoreClosedError:
        return StoreClosedError(f"the store {self.location} was closed; open a new one")

    # -- the start snapshot (snapshot.py; the shared rules are the engine's) -----------------------------------
    history_in_snapshot = True

    def _held(self) -> threading.RLock:
        return self._thread_lock

    def _snapshot_identity(self) -> list[str]:
        return [safe_url(self.url), *(f"{name}@{store}" for name, store in self.store_of.items()), *self._store_births]

    def _record_count(self) -> int:
        return sum(len(c.texts) for name, c in self.collections.items() if name != HISTORY)

    def _collection_copy(self) -> Taken:
        """Each collection's record texts as last read, and how far into each store's change log they are: copies
        (every write changes these maps in place; the texts are shared), so the state is made right here."""
        return Taken(
            {
                "texts": {name: dict(c.texts) for name, c in self.collections.items()},
                "unreadable": {name: dict(c.unreadable) for name, c in self.collections.items()},
                "applied": dict(self._applied_seq),
                "position": self._position_seen,
            }
        )

    def _restore_collections(self, state: Any) -> dict[str, Callable[[], list[dict[str, Any]]]]:
        texts, unreadable, applied = state["texts"], state["unreadable"], state["applied"]
        if set(texts) != set(self.collections) or set(unreadable) != set(self.collections):
            raise ValueError("it holds other collections")
        if set(applied) != set(self.stores):
            raise ValueError("it holds other stores")
        restored = {name: dict(texts[name]) for name in self.collections}
        self._applied_seq = {store: int(applied[store]) for store in self.stores}
        self._position_seen = int(state["position"])
        for name, collection in self.collections.items():
            collection.texts, collection.unreadable = restored[name], dict(unreadable[name])
        return {name: functools.partial(_parsed, collection.texts) for name, collection in self.collections.items()}

    def _forget_collections(self) -> None:
        for collection in self.collections.values():
            collection.texts, collection.unreadable = {}, {}
        self._applied_seq = dict.fromkeys(self.stores, 0)
        self._position_seen = 0

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Bring the schema to this code's version (one migration at a time, under a lock); refuse a newer one."""
        row = conn.execute("SHOW server_encoding").fetchone()
        encoding = str(row[0]) if row else "unknown"
        if encoding.upper() not in ("UTF8", "UTF-8"):
            # Trigger: a database made in another encoding (LATIN1, SQL_ASCII). Why: memory holds any Unicode
            # text; such a database refuses (or, SQL_ASCII, garbles) what it cannot encode, one write at a time.
            # Outcome: refused at once, before any table is made, with how to get a UTF-8 database.
            raise StorageError(
                f"the database {safe_url(self.url)} uses the encoding {encoding}; memory-graph needs UTF8 (it stores "
                "any Unicode text). Nothing was changed. Create a UTF-8 database (CREATE DATABASE memory ENCODING "
                "'UTF8' TEMPLATE template0) and point MEMORY_DATABASE_URL at it; `memory-graph migrate --to` copies "
                "a memory into it."
            )
        conn.execute(
            "CREATE TABLE IF NOT EXISTS memory_graph_migrations (version integer PRIMARY KEY, "
            "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute("SELECT set_config('lock_timeout', %s, true)", (self._lock_wait(),))
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-graph:migrations', 0))")
        row = conn.execute("SELECT coalesce(max(version), 0) FROM memory_graph_migrations").fetchone()
        current = int(row[0]) if row else 0
        if current > SCHEMA_VERSION:
            raise StorageError(
                f"the database {safe_url(self.url)} holds memory-graph schema version {current}, newer than this "
                f"memory-graph knows (up to {SCHEMA_VERSION}). Nothing was changed; upgrade memory-graph on this "
                "machine (pip install -U 'memory-graph[postgres]') to use this database."
            )
        for version, description, sql in MIGRATIONS:
            if version > current:
                conn.execute(sql)
                conn.execute(
                    "INSERT INTO memory_graph_migrations (version, description) VALUES (%s, %s)",
                    (version, description),
                )
                log.warning("database %s: schema migrated to version %d (%s)", safe_url(self.url), version, description)
                if version == SEARCH_INDEX_VERSION:
                    self._add_search_index(conn)
        for store in self.stores:
            conn.execute("INSERT INTO memory_graph_stores (store) VALUES (%s) ON CONFLICT DO NOTHING", (store,))
        conn.commit()

    def _add_search_index(self, conn: psycopg.Connection[Any]) -> None:
        """The trigram index that answers searches while a server loads. It needs the pg_trgm extension (shipped
        with PostgreSQL, and trusted: a database owner may create it); without it those searches scan the table."""
        try:
            with conn.transaction():  # a savepoint: refused, the migration goes on without it
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                conn.execute(SEARCH_INDEX)
        except psycopg.Error as exc:
            log.warning(
                "database %s: no trigram index for searches made while a server loads (%s); they scan the table "
                "instead. To add it, have the database owner run CREATE EXTENSION pg_trgm, then %s",
                safe_url(self.url),
                exc.diag.message_primary or exc,
                SEARCH_INDEX,
            )

    def _load(self, conn: psycopg.Connection[Any]) -> None:
        """Migrate, then read the whole store in one snapshot (the change log position included)."""
        loading, self._loading = self._loading, True
        self._beside.load_begins()
        try:
            self._load_all(conn)
        finally:
            self._loading = loading

    def reads_while_loading(self) -> ReadsWhileLoading | None:
        return self._database_reads if self._loading else None

    def _give_way(self) -> None:
        """Between batches of a load: stop if the store was closed; let reads answered beside it go first."""
        if self._closed.is_set():
            raise self._closed_error()
        self._beside.give_way(self._closed.is_set)
        if self._closed.is_set():
            raise self._closed_error()

    def _load_all(self, conn: psycopg.Connection[Any]) -> None:
        try:
            self._migrate(conn)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:
            raise StorageError(f"could not prepare the database {safe_url(self.url)}: {exc}") from exc
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")  # one snapshot for the whole read
        # A store's creation time tells a database recreated under the same URL (its change log starts again)
        # from the one a start snapshot was made of.
        rows = conn.execute(
            "SELECT store, created_at::text FROM memory_graph_stores WHERE store = ANY(%s) ORDER BY store",
            (self.stores,),
        ).fetchall()
        self._store_births = [f"{store}@{born}" for store, born in rows]
        if not self._restore_snapshot():  # else the catch-up that follows applies the change log since it
            self._reload_all(conn)
        conn.commit()
        self._opened = True
        for collection in self.collections.values():
            for key_text, why in collection.unreadable.items():
                log.error("unreadable record (kept, never overwritten): %s %s: %s", collection.name, key_text, why)

    def _positions(self, conn: psycopg.Connection[Any]) -> dict[str, tuple[int, int]]:
        """For each of this server's stores: the newest change-log seq, and how far the log was pruned."""
        rows = conn.execute(
            "SELECT s.store, coalesce((SELECT max(seq) FROM memory_graph_changes c WHERE c.store = s.store), 0), "
            "s.pruned_through FROM memory_graph_stores s WHERE s.store = ANY(%s)",
            (self.stores,),
        ).fetchall()
        found = {store: (int(newest), int(pruned)) for store, newest, pruned in rows}
        return {store: found.get(store, (0, 0)) for store in self.stores}

    def _reload_all(self, conn: psycopg.Connection[Any]) -> None:
        """Read every record and tell listeners what differs from what this server held."""
        positions = self._positions(conn)
        position_seen = self._newest_position(conn)
        found = self._all_rows(conn)
        for name, rows in found.items():
            collection = self.collections[name]
            collection.unreadable = {}  # read again from scratch below
            fresh: dict[Key, str] = {}
            upserted: list[dict[str, Any]] = []
            for key, record, text in collection.readable_rows(rows):
                fresh[key] = text
                if collection.texts.get(key) != text:
                    upserted.append(record)
            removed = [key for key in collection.texts if key not in fresh]
            collection.texts = fresh
            self._notify(name, removed, upserted)
        self._applied_seq = {store: newest for store, (newest, _) in positions.items()}
        self._position_seen = position_seen

    def _newest_position(self, conn: psycopg.Connection[Any]) -> int:
        """The highest position of any record of this server's stores (each store's from the end of its index)."""
        row = conn.execute(
            "SELECT coalesce(max((SELECT max(position) FROM memory_graph_records r WHERE r.store = s)), 0) "
            "FROM unnest(%s::text[]) s",
            (self.stores,),
        ).fetchone()
        return int(row[0]) if row else 0

    def _all_rows(self, conn: psycopg.Connection[Any]) -> dict[str, dict[str, str]]:
        """collection -> key column -> record text, in position order (then key: restored or hand-made rows may
        share a position), streamed through a server-side cursor, one store after another. (PostgreSQL joining each
        collection's rows into one text measured no faster, and a text value stops at 1 GB.)

        Trigger: a server starts on a large database and a first search arrives while this runs. Why: ordered
        over several stores at once (`store = ANY`), no index gives the order, so the first fetch sorted every row
        in parallel workers with JIT: 5.6 s of both cores at 1M entities, under the search that was answered from
        the database meanwhile. Outcome: one store at a time, in the order of the (store, position) index, which
        streams from the first row; no JIT, no parallel workers. A collection lives in one store, so each
        collection's rows keep their position order."""
        found: dict[str, dict[str, str]] = {name: {} for name in self.collections}
        conn.execute("SET LOCAL jit = off")
        conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        for store in self.stores:
            with conn.cursor(name="memory_graph_load") as cursor:
                cursor.itersize = LOAD_BATCH_ROWS
                cursor.execute(
                    "SELECT collection, key, record::text FROM memory_graph_records WHERE store = %s "
                    "ORDER BY position, key",
                    (store,),
                )
                for number, (collection, key_text, text) in enumerate(cursor):
                    if self.store_of.get(collection) == store:
                        found[collection][key_text] = text
                    if number % LOAD_BATCH_ROWS == 0:
                        self._give_way()
        return found

    def _catch_up(self, conn: psycopg.Connection[Any]) -> None:
        """Apply the change log rows after the last one this server applied (other servers' commits)."""
        positions = self._positions(conn)
        behind = {store: newest for store, (newest, _) in positions.items() if newest != self._applied_seq[store]}
        if not behind:
            return
        if any(
            newest < self._applied_seq[store] or positions[store][1] > self._applied_seq[store]
            for store, newest in behind.items()
        ):
            # Trigger: the log was pruned past us, or the database was restored from an older backup. Why: the
            # rows we would need are gone. Outcome: read everything again and tell listeners the difference.
            self._reload_all(conn)
            return
        latest: dict[tuple[str, str], tuple[str | None, int]] = {}
        for store, newest in behind.items():
            rows = conn.execute(
                "SELECT c.collection, c.key, r.record::text, r.position FROM memory_graph_changes c LEFT JOIN "
                "memory_graph_records r ON r.store = c.store AND r.collection = c.collection AND r.key = c.key "
                "WHERE c.store = %s AND c.seq > %s AND c.seq <= %s ORDER BY c.seq",
                (store, self._applied_seq[store], newest),
            ).fetchall()
            for collection_name, key_text, text, position in rows:
                if self.store_of.get(collection_name) == store:
                    latest[(collection_name, key_text)] = (text, 0 if position is None else int(position))
        by_collection: dict[str, tuple[list[Key], list[dict[str, Any]]]] = {}
        created: list[tuple[int, str, Key, str, dict[str, Any]]] = []  # position, collection, key, text, record
        for (name, key_text), (text, position) in latest.items():
            collection = self.collections[name]
            removed, upserted = by_collection.setdefault(name, ([], []))
            if text is None:
                collection.unreadable.pop(key_text, None)  # the row is gone (deleted, or moved aside by repair)
            readable = collection.readable(key_text, text) if text is not None else None
            if readable is None:
                with suppress(ValueError, TypeError):
                    if collection.texts.pop(tuple(json.loads(key_text)), None) is not None:
                        removed.append(tuple(json.loads(key_text)))
                continue
            key, record = readable
            if key in collection.texts and position > self._position_seen:
                # Trigger: a record held here has a position newer than any this server had seen. Why: another
                # server deleted it and created it again since (an update in place keeps its position), and the
                # order of records is the order of creation. Outcome: removed, then created again at its place.
                del collection.texts[key]
                removed.append(key)
            if key not in collection.texts:
                created.append((position, name, key, text, record))  # type: ignore[arg-type]
            elif collection.texts[key] != text:
                collection.texts[key] = text  # type: ignore[assignment]
                upserted.append(record)
        # Records new here are added in position order (that of a load), not in the order the log names them: a
        # key named early in the log may have been deleted and created again after others.
        for position, name, key, text, record in sorted(created, key=lambda item: (item[0], encode_key(item[2]))):
            self.collections[name].texts[key] = text
            by_collection[name][1].append(record)
            self._position_seen = max(self._position_seen, position)
        self._applied_seq.update(behind)
        for name, (removed, upserted) in by_collection.items():
            self._notify(name, removed, upserted)

    # -- reading and writing ---------------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._thread_lock:
            with self._session(write=False) as conn:
                self._commit_read(conn)
            yield

    def _commit_read(self, conn: psycopg.Connection[Any]) -> None:
        """End a read-only transaction; a connection lost at that point is reported like any other."""
        try:
            conn.commit()
        except psycopg.Error as exc:
            raise self._unreachable(exc) from exc

    def poll(self) -> None:
        """Catch up when another server said it committed (LISTEN), or every IDLE_POLL_SECONDS in any case."""
        self._listen()
        if self._notified.is_set() or time.monotonic() - self._last_poll >= IDLE_POLL_SECONDS:
            self._notified.clear()
            self._last_poll = time.monotonic()
            with self.reading():
                pass

    @contextmanager
    def transaction(
        self, operation: str | None = None, actor: str | None = None, record_history: bool = True
    ) -> Iterator[Transaction]:
        label = operation or public_caller()
        with self._thread_lock, self._session(write=True) as conn:
            tx = Transaction(operation=label, actor=actor or self.actor, record_history=record_history)
            yield tx
            self._record_events(tx)
            rows = self._rows(tx)
            if not rows:
                return
            try:
                self._write(conn, rows)
            except psycopg.errors.LockNotAvailable as exc:
                raise self._lock_timed_out(conn, None) from exc
            except psycopg.errors.ProgramLimitExceeded as exc:  # (an OperationalError: the database is fine)
                raise self._too_long(rows, exc) from exc
            except UnicodeError as exc:  # (the driver encodes the text; the connection is always UTF-8)
                raise StorageError(
                    f"a text of this change cannot be sent to the database {safe_url(self.url)} as UTF-8 "
                    f"({exc}); nothing was changed. Remove the character it names and try again."
                ) from exc
            except psycopg.OperationalError as exc:
                raise self._unreachable(exc) from exc
            except psycopg.Error as exc:
                raise self._refused(exc) from exc
            try:
                conn.commit()
            except psycopg.OperationalError as exc:
                # The commit was sent: whether the database applied it before the connection went is unknown.
                raise StorageError(
                    f"the connection to the PostgreSQL database {safe_url(self.url)} was lost while committing; the "
                    "change may or may not have been saved. Read it back (open_nodes, read_graph) before retrying."
                ) from exc
            except psycopg.Error as exc:
                raise self._refused(exc) from exc
            self._applied(rows)

    def _refused(self, exc: psycopg.Error) -> StorageError:
        return StorageError(
            f"the database {safe_url(self.url)} refused the change ({exc.diag.message_primary or exc}); "
            "nothing was changed"
        )

    def _rows(self, tx: Transaction) -> _Rows:
        rows = _Rows()
        for name, changes in tx.changes.items():
            collection = self.collections[name]
            for key, after in changes.final().items():
                key_text = encode_key(key)
                unreadable = self._unreadable_row(key_text) if name != HISTORY else None
                if unreadable is not None:
                    # Trigger: a stored row with this identity could not be read, so the services never saw it.
                    # Why: writing would overwrite (or collide with) what someone may still want back.
                    # Outcome: refused, naming the row, until it is repaired.
                    raise StorageError(
                        f"cannot change {key_text} in {self.location}: a stored {unreadable[0]} row with that "
                        f"identity is unreadable ({unreadable[1]}). Nothing was written. Fix the row by hand, or run "
                        "`memory-graph repair` (it moves the row to the table memory_graph_rejected, kept whole)."
                    )
                if after is None:
                    if key in collection.texts:
                        rows.deletes.setdefault(name, []).append(key_text)
                        rows.changed.append((name, key, None, None))
                    continue
                text = dump_line(after)
                if collection.texts.get(key) == text:
                    continue
                if "\\u0000" in text:  # (dump_line writes U+0000 so; a text holding a backslash and u0000 too)
                    self._refuse_nul(name, key, after)
                entity_name = after["name"] if after.get("type") == "entity" and name != HISTORY else None
                rows.upserts.append((self.store_of[name], name, key_text, entity_name, text))
                rows.changed.append((name, key, after, text))
        return rows

    def _refuse_nul(self, name: str, key: Key, record: dict[str, Any]) -> None:
        """Trigger: a text holds U+0000, which the files keep. Why: PostgreSQL text (and json read as text)
        cannot hold it, and its own refusal ("unsupported Unicode escape sequence") names neither the record nor
        the fix. Outcome: refused before anything is sent, naming the record and the field."""
        where = nul_path(record)
        if where is None:
            return
        if name == HISTORY:
            key, where = tuple(record.get("key") or key), f"history event's {where}"
        raise InvalidInputError(
            f"cannot store {described(key)} in the PostgreSQL database {safe_url(self.url)}: its {where} holds the "
            "character U+0000 (NUL), which PostgreSQL text cannot hold. Nothing was written; remove that character "
            "and try again."
        )

    def _too_long(self, rows: _Rows, exc: psycopg.Error) -> InvalidInputError:
        """Trigger: the database refused a row too large for an index (`ProgramLimitExceeded`: a B-tree entry
        holds at most about 2,700 bytes, after compression). Why: the database does not say which row; the row
        with the longest identity is the one (names, relation ends and type are what the indexes hold). Outcome:
        the record named, and what to shorten."""
        if not rows.upserts:
            return InvalidInputError(f"{self._refused(exc)}; a value is longer than PostgreSQL can index")
        _, name, key_text, _, _ = max(rows.upserts, key=lambda row: len(row[2].encode("utf-8", "replace")))
        key = next((key for n, key, _, _ in rows.changed if n == name and encode_key(key) == key_text), None)
        size = len(key_text.encode("utf-8", "replace"))
        what = described(key) if key is not None else f"the record {key_text[:80]}..."
        return InvalidInputError(
            f"cannot store {what} in the PostgreSQL database {safe_url(self.url)}: its name (for a relation, its "
            f"two ends and type together, {size:,} bytes as stored) is longer than PostgreSQL can index (about "
            f"2,700 bytes; the database said: {exc.diag.message_primary or exc}). Nothing was written; shorten "
            "the name, or the relation's ends or type."
        )

    def _unreadable_row(self, key_text: str) -> tuple[str, str] | None:
        """The collection and the problem of an unreadable row with this key, in any graph collection (an entity's
        name is one identity across the graph and the lessons)."""
        for name, collection in self.collections.items():
            if name != HISTORY and key_text in collection.unreadable:
                return name, collection.unreadable[key_text]
        return None

    def _write(self, conn: psycopg.Connection[Any], rows: _Rows) -> None:
        upsert = (
            "INSERT INTO memory_graph_records (store, collection, key, entity_name, position, record) "
            "{source} ON CONFLICT (store, collection, key) DO UPDATE SET record = EXCLUDED.record"
        )
        with conn.cursor() as cursor:
            for name, keys in rows.deletes.items():
                cursor.execute(
                    "DELETE FROM memory_graph_records WHERE store = %s AND collection = %s AND key = ANY(%s)",
                    (self.store_of[name], name, keys),
                )
            if len(rows.upserts) >= BULK_ROWS:
                cursor.execute(
                    "CREATE TEMP TABLE memory_graph_incoming (n bigint, store text, collection text, key text, "
                    "entity_name text, record json) ON COMMIT DROP"
                )
                with cursor.copy(
                    "COPY memory_graph_incoming (n, store, collection, key, entity_name, record) FROM STDIN"
                ) as copy:
                    for n, row in enumerate(rows.upserts):
                        copy.write_row((n, *row))
                source = (
                    "SELECT store, collection, key, entity_name, nextval('memory_graph_position'), record "
                    "FROM memory_graph_incoming ORDER BY n"
                )
                cursor.execute(upsert.format(source=source))
            elif rows.upserts:
                source = "VALUES (%s, %s, %s, %s, nextval('memory_graph_position'), %s)"
                cursor.executemany(upsert.format(source=source), rows.upserts)
            changed = [(self.store_of[name], name, encode_key(key)) for name, key, _, _ in rows.changed]
            cursor.execute(
                "INSERT INTO memory_graph_changes (store, collection, key) SELECT s, c, k "
                "FROM unnest(%s::text[], %s::text[], %s::text[]) WITH ORDINALITY AS t(s, c, k, n) ORDER BY n",
                ([s for s, _, _ in changed], [c for _, c, _ in changed], [k for _, _, k in changed]),
            )
            touched = sorted({store for store, _, _ in changed})
            for store in touched:
                cursor.execute("SELECT pg_notify(%s, %s)", (CHANNEL, store))
            newest = cursor.execute(
                "SELECT store, max(seq) FROM memory_graph_changes WHERE store = ANY(%s) GROUP BY store", (touched,)
            ).fetchall()
            self._pending_position = self._newest_position(conn) if rows.upserts else self._position_seen
        self._pending_seq = {store: int(seq) for store, seq in newest}

    def _applied(self, rows: _Rows) -> None:
        """After the commit: hold what was written, and tell listeners."""
        by_collection: dict[str, tuple[list[Key], list[dict[str, Any]]]] = {}
        for name, key, after, text in rows.changed:
            removed, upserted = by_collection.setdefault(name, ([], []))
            collection = self.collections[name]
            if after is None or text is None:
                collection.texts.pop(key, None)
                removed.append(key)
            else:
                collection.texts[key] = text
                upserted.append(after)
        self._applied_seq.update(self._pending_seq)
        self._position_seen = max(self._position_seen, self._pending_position)
        for name, (removed, upserted) in by_collection.items():
            self._notify(name, removed, upserted)

    # -- idle subscribers ------------------------------------------------------------------------------------
    def _listen(self) -> None:
        """Start the LISTEN thread once: a notification for this store makes the next `poll` catch up."""
        with self._thread_lock:
            if self._listening is not None:
                return
            self._listening = threading.Thread(target=self._listen_loop, name="memory-graph-listen", daemon=True)
            self._listening.start()

    def _listen_loop(self) -> None:
        backoff = 1.0
        while not self._closed.is_set():
            try:
                with psycopg.connect(self.url, autocommit=True, **CONNECTION_OPTIONS) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    backoff = 1.0
                    self._notified.set()  # anything committed while we were not listening
                    while not self._closed.is_set():
                        for note in conn.notifies(timeout=1.0):
                            if note.payload in self.stores:
                                self._notified.set()
            except psycopg.Error as exc:
                log.warning("not hearing of other servers' changes (%s); retrying in %.0f s", exc, backoff)
                self._closed.wait(backoff)
                backoff = min(backoff * 2, 30.0)

    # -- administration --------------------------------------------------------------------------------------
    def prune_history(self, older_than: datetime) -> int:
        """Drop old change events (as the files do), and the change log's rows older than CHANGE_LOG_HOURS: a
        server that has not caught up past them reads the whole store again instead (`pruned_through`)."""
        dropped = super().prune_history(older_than)
        try:
            with self._thread_lock, self._session(write=True) as conn:
                for store in self.stores:
                    row = conn.execute(
                        "SELECT max(seq) FROM memory_graph_changes WHERE store = %s "
                        "AND changed_at < now() - make_interval(hours => %s)",
                        (store, CHANGE_LOG_HOURS),
                    ).fetchone()
                    if row is None or row[0] is None:
                        continue
                    conn.execute("DELETE FROM memory_graph_changes WHERE store = %s AND seq <= %s", (store, row[0]))
                    conn.execute(
                        "UPDATE memory_graph_stores SET pruned_through = greatest(pruned_through, %s) WHERE store = %s",
                        (row[0], store),
                    )
                conn.commit()
        except psycopg.Error as exc:
            raise StorageError(f"could not prune the change log of {self.location}: {exc}") from exc
        return dropped

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        with self.reading(), self._connection() as conn:
            rows = conn.execute(
                "SELECT store, collection, count(*), coalesce(sum(length(record::text)), 0) "
                "FROM memory_graph_records WHERE store = ANY(%s) GROUP BY store, collection",
                (self.stores,),
            ).fetchall()
            conn.commit()
        sizes = {(store, name): (int(count), int(size)) for store, name, count, size in rows}
        described = {}
        for name, store in self.store_of.items():
            count, size = sizes.get((store, name), (0, 0))
            described[name] = [
                {"table": f"memory_graph_records (store {store}, collection {name})", "rows": count, "bytes": size}
            ]
        return described

    def check(self, fix: bool = False, now: float | None = None) -> CheckReport:
        """Read every row of this store with the record rules of the files; with `fix`, move the unusable rows to
        `memory_graph_rejected` (kept whole, with the reason) in one transaction."""
        found = CheckReport()
        try:
            with self._thread_lock, self._session(write=fix) as conn:
                bad: list[tuple[str, str, str, str, str]] = []  # store, collection, key, record, why
                rows = conn.execute(
                    "SELECT store, collection, key, record::text FROM memory_graph_records WHERE store = ANY(%s)",
                    (self.stores,),
                ).fetchall()
                ours = [row for row in rows if self.store_of.get(row[1], self.store_name) == row[0]]
                for store, name, key_text, text in ours:
                    collection = self.collections.get(name)
                    if collection is None:
                        bad.append((store, name, key_text, text, f"unknown collection {name!r}"))
                        continue
                    why = collection.problem(key_text, text)
                    if isinstance(why, str):
                        bad.append((store, name, key_text, text, why))
                rows = ours
                found.problems = [f"{self.location}: {name} record {key}: {why}" for _, name, key, _, why in bad]
                found.notes.append(
                    f"{self.location}: schema version {SCHEMA_VERSION}, {len(rows)} records, "
                    "change log at " + ", ".join(f"{store} {seq}" for store, seq in sorted(self._applied_seq.items()))
                )
                if fix and bad:
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            "INSERT INTO memory_graph_rejected (store, collection, key, record, reason) "
                            "VALUES (%s, %s, %s, %s, %s)",
                            bad,
                        )
                        cursor.executemany(
                            "DELETE FROM memory_graph_records WHERE store = %s AND collection = %s AND key = %s",
                            [(store, name, key) for store, name, key, _, _ in bad],
                        )
                        cursor.executemany(
                            "INSERT INTO memory_graph_changes (store, collection, key) VALUES (%s, %s, %s)",
                            [(store, name, key) for store, name, key, _, _ in bad],
                        )
                    for _, name, key, _, _ in bad:
                        if name in self.collections:
                            self.collections[name].unreadable.pop(key, None)
                    found.repaired.append(
                        f"moved {len(bad)} unusable record(s) to the table memory_graph_rejected (kept whole, with "
                        "the reason)"
                    )
                    found.problems = []
                conn.commit()
        except psycopg.Error as exc:
            raise StorageError(f"could not check {self.location}: {exc}") from exc
        return found
