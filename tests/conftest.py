"""Shared fixtures: real stores on real files in tmp_path, at a tiny shard size so every path crosses shards."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memory_graph.app import Services, services_for_folder
from memory_graph.graph import GraphService

TINY_SHARD = 3
SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def needed(present: bool, what: str) -> None:
    """Skip a test whose outside part (../shared, the reference server, a container engine) is missing, except
    in CI (`CI=true`), where its absence is a broken setup and must fail rather than pass quietly."""
    if present:
        return
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{what} (CI must provide it)")
    pytest.skip(what)


def open_services(folder: Path, shard_lines: int = TINY_SHARD, max_response_chars: int = 80_000) -> Services:
    services = services_for_folder(folder, shard_lines, max_response_chars)
    services.store.open()
    return services


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


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
