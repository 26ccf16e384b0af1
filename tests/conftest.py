"""Shared fixtures: real stores on real files in tmp_path, at a tiny shard size so every path crosses shards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memory_graph.graph import LESSONS, MEMORY, GraphService
from memory_graph.storage import Store

TINY_SHARD = 3


def open_graph(folder: Path, shard_lines: int = TINY_SHARD, max_response_chars: int = 80_000) -> GraphService:
    store = Store({MEMORY: folder / "memory.json", LESSONS: folder / "lesson.json"}, shard_lines=shard_lines)
    service = GraphService(store, max_response_chars)
    store.open()
    return service


@pytest.fixture
def graph_factory(tmp_path: Path) -> Callable[..., GraphService]:
    def make(**kwargs: int) -> GraphService:
        return open_graph(tmp_path, **kwargs)

    return make


@pytest.fixture
def graph(graph_factory: Callable[..., GraphService]) -> GraphService:
    return graph_factory()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
