"""The sharded, crash-safe JSON Lines store (see store.py for the protocol)."""

from memory_graph.storage.store import Changes, Store

__all__ = ["Changes", "Store"]
