"""Random, often malformed calls to every tool through MCP: every failure is a message a person can act on
(never the SDK's masked "Error executing tool X"), and the files reload to what the server shows."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_graph.config import Settings
from memory_graph.server import build_app
from tests.conftest import open_graph

pytestmark = pytest.mark.anyio

TEXTS = ["", " ", "a", "Alice", "a\nb", "\u2028", "x" * 3000, "💥", "\\", '"', "null", "0", "[]", "ŝ̂"]
KEYS = [
    "name",
    "entityType",
    "observations",
    "from",
    "to",
    "relationType",
    "entityName",
    "contents",
    "type",
    "message",
    "context",
    "entities",
    "relations",
    "names",
    "query",
    "lesson",
    "errorPattern",
    "success",
]


def text(rng: random.Random) -> str:
    return rng.choice(TEXTS)


def junk(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 2 or roll < 0.4:
        return rng.choice([text(rng), 1, -1, 0.5, True, False, None])
    if roll < 0.7:
        return [junk(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(KEYS): junk(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def prior_counts(rng: random.Random) -> dict[str, Any]:
    """A lesson's prior history: attempts and a rate of them that is a whole count (to two decimals), or not."""
    frequency = rng.randint(0, 5)
    rate = round(rng.randint(0, frequency) / frequency, 2) if frequency else 0.0
    return {"frequency": frequency, "successRate": rate if rng.random() < 0.9 else rng.random()}


def plausible(tool: str, rng: random.Random) -> dict[str, Any]:
    def name() -> str:
        return text(rng) or "n"

    def relation() -> dict[str, str]:
        return {"from": name(), "to": name(), "relationType": text(rng)}

    makers = {
        "create_entities": lambda: {
            "entities": [{"name": name(), "entityType": text(rng), "observations": [text(rng)]}]
        },
        "create_relations": lambda: {"relations": [relation()]},
        "add_observations": lambda: {"observations": [{"entityName": name(), "contents": [text(rng)]}]},
        "delete_entities": lambda: {"entityNames": [text(rng)]},
        "delete_observations": lambda: {"deletions": [{"entityName": name(), "observations": [text(rng)]}]},
        "delete_relations": lambda: {"relations": [relation()]},
        "read_graph": lambda: {},
        "search_nodes": lambda: {"query": text(rng)},
        "open_nodes": lambda: {"names": [text(rng), name()]},
        "create_lesson": lambda: {
            "lesson": {
                "name": name(),
                "errorPattern": {"type": name(), "message": name()},
                "metadata": prior_counts(rng),
            }
        },
        "find_similar_errors": lambda: {"errorPattern": {"type": text(rng), "message": name(), "context": text(rng)}},
        "update_lesson_success": lambda: {"lessonName": text(rng), "success": rng.choice([True, False])},
        "update_lesson": lambda: {
            "name": name(),
            **rng.choice([{}, {"addObservations": [text(rng)]}, {"severity": rng.choice(["low", "high", "x"])}]),
        },
        "get_lesson_recommendations": lambda: {"context": text(rng)},
        "list_projects": lambda: {},
        "list_entities": lambda: {"entityType": text(rng) or None, "limit": rng.randint(1, 5)},
        "get_neighbors": lambda: {"name": name(), "depth": rng.randint(1, 3), "limit": rng.randint(1, 5)},
        "graph_summary": lambda: {},
        "update_observations": lambda: {"updates": [{"entityName": name(), "old": text(rng), "new": name()}]},
        "rename_entity": lambda: {"name": name(), "newName": name()},
        "merge_entities": lambda: {"names": [name(), name()], "into": name()},
        "get_history": lambda: {"name": name(), "limit": rng.randint(1, 20)},
        "restore_entity": lambda: {"name": name()},
        "find_duplicates": lambda: {"limit": rng.randint(1, 20)},
    }
    return makers[tool]()


async def test_random_calls_fail_clearly_and_leave_consistent_files(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    unlimited = 10**9  # compare whole graphs, not budget-cut ones
    settings = Settings.from_env(
        {
            "MEMORY_FILE_PATH": str(tmp_path / "memory.json"),
            "MEMORY_SHARD_LINES": "2",
            "MEMORY_MAX_RESPONSE_CHARS": str(unlimited),
        }
    )
    async with Client(build_app(settings).server) as client:
        tools = [t.name for t in (await client.list_tools()).tools]
        for _ in range(800):
            tool = rng.choice(tools)
            arguments = {rng.choice(KEYS): junk(rng)} if rng.random() < 0.25 else plausible(tool, rng)
            result = await client.call_tool(tool, arguments)
            if result.is_error:
                message = result.content[0].text.strip()
                assert message != f"Error executing tool {tool}", (tool, arguments)
        shown = (await client.call_tool("read_graph", {})).structured_content
        assert "truncated" not in shown
    reloaded = open_graph(tmp_path, shard_lines=2, max_response_chars=unlimited)
    assert reloaded.store.problems() == []
    graph = reloaded.read_graph().model_dump(by_alias=True, exclude_none=True)
    assert sorted(map(str, graph["entities"])) == sorted(map(str, shown["entities"]))
    assert sorted(map(str, graph["relations"])) == sorted(map(str, shown["relations"]))
