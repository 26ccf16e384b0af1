"""The sharded, crash-safe JSON Lines store. This is the package's face: nothing outside `storage/` imports
its modules directly (tests/test_project.py checks it).

- codec.py: the one line parser and writer; record identity; the merge rule for copies of a record
- layout.py: the one naming rule for shards and the stamp and journal files
- lock.py: the inter-process lock (flock on the data folder)
- files.py: atomic replace and the commit journal
- stamp.py: each collection's manifest of shards and generations (how processes tell each other's commits)
- collection.py: one collection's shards in memory, and reloading what changed on disk
- placement.py: which shards a change rewrites
- check.py: check and repair
- history_log.py: the change events a transaction records, and finishing a commit from them
- engine.py: what every engine offers the services (StoreEngine, Transaction, ChangeListener) and their shared rules
- store.py: the JSON Lines engine: locking, transactions, commits, check
- postgres.py: the PostgreSQL engine (the `postgres` extra), imported only when MEMORY_DATABASE_URL is set
- sources.py: reading other memories' files for import
- side_cache.py, vectors.py: the services' side caches (lesson signatures, embeddings), never trusted
- snapshot.py: the start snapshot (what a load built, restored by the next start, which reads only what changed)
"""

from typing import Any

from memory_graph.storage.check import CheckReport
from memory_graph.storage.codec import (
    HISTORY,
    Key,
    RecordCheck,
    SplitText,
    entity_key,
    merge_records,
    parse_slices,
    read_shard_file,
    read_split,
    record_key,
    relation_key,
    searchable_fields,
)
from memory_graph.storage.engine import (
    ChangeListener,
    ReadsWhileLoading,
    Refillable,
    SnapshotCopy,
    Snapshotting,
    StoreEngine,
    Taken,
    Transaction,
    copy_records,
    return_freed_memory,
)
from memory_graph.storage.files import atomic_write
from memory_graph.storage.layout import folder_usage
from memory_graph.storage.side_cache import read_side_cache, write_side_cache
from memory_graph.storage.snapshot import SnapshotStream, as_read_back, code_tag, read_snapshot, write_snapshot
from memory_graph.storage.sources import SourceRecord, files_to_import, read_source
from memory_graph.storage.store import Store
from memory_graph.storage.vectors import read_vectors, write_vectors

__all__ = [
    "HISTORY",
    "ChangeListener",
    "CheckReport",
    "Key",
    "ReadsWhileLoading",
    "RecordCheck",
    "Refillable",
    "SnapshotCopy",
    "SnapshotStream",
    "Snapshotting",
    "SourceRecord",
    "SplitText",
    "Store",
    "StoreEngine",
    "Taken",
    "Transaction",
    "as_read_back",
    "atomic_write",
    "code_tag",
    "copy_records",
    "entity_key",
    "files_to_import",
    "folder_usage",
    "merge_records",
    "parse_slices",
    "read_shard_file",
    "read_side_cache",
    "read_snapshot",
    "read_source",
    "read_split",
    "read_vectors",
    "record_key",
    "relation_key",
    "return_freed_memory",
    "searchable_fields",
    "write_side_cache",
    "write_snapshot",
    "write_vectors",
]

POSTGRES_NAMES = ("PostgresStore", "SCHEMA_VERSION", "encode_key", "store_usage")


def __getattr__(name: str) -> Any:
    """The PostgreSQL engine's names, imported at first use: the `postgres` extra (psycopg) may not be installed,
    and a server on the files never pays for importing it."""
    if name in POSTGRES_NAMES:
        from memory_graph.storage import postgres

        return getattr(postgres, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
