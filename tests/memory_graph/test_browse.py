"""Progressive reads through MCP, in process: list_entities, get_neighbors, graph_summary."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_graph.config import Settings
from memory_graph.server import build_app
from tests.conftest import settings_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("each_engine")]

PEOPLE = ["Ana", "Bruno", "Carla", "Dora", "Emil"]
BROWSE_TOOLS = {"list_entities": [], "get_neighbors": ["name"], "graph_summary": []}


def settings_for(folder: Path, **overrides: Any) -> Settings:
    return settings_in(folder, **{"MEMORY_SHARD_LINES": "3", **overrides})


@pytest.fixture
async def client(tmp_path: Path):
    async with Client(build_app(settings_for(tmp_path)).server) as connected:
        entities = [{"name": n, "entityType": "person", "observations": [f"{n} fact"]} for n in PEOPLE]
        entities.append({"name": "Acme", "entityType": "organization", "observations": ["a", "b", "c"]})
        await ok(connected, "create_entities", entities=entities)
        chain = [("Ana", "Bruno", "knows"), ("Bruno", "Carla", "knows"), ("Carla", "Dora", "knows")]
        work = [(p, "Acme", "works_at") for p in ("Ana", "Bruno", "Dora", "Emil")]
        relations = [{"from": a, "to": b, "relationType": t} for a, b, t in chain + work]
        await ok(connected, "create_relations", relations=relations)
        yield connected


async def ok(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return str(result.content[0].text)


async def test_the_browse_tools_are_read_only_with_their_arguments(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name, required in BROWSE_TOOLS.items():
        tool = tools[name]
        assert tool.input_schema.get("required", []) == required
        assert tool.output_schema is not None
        hints = tool.annotations
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
            True,
            False,
            True,
            False,
        )
    assert sorted(tools["list_entities"].input_schema["properties"]) == ["cursor", "entityType", "limit"]
    assert sorted(tools["get_neighbors"].input_schema["properties"]) == ["depth", "limit", "name", "relationType"]


async def test_only_the_official_nine_with_memory_tools_graph(tmp_path: Path) -> None:
    async with Client(build_app(settings_for(tmp_path, MEMORY_TOOLS="graph")).server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
    assert len(tools) == 9 and not tools & BROWSE_TOOLS.keys()


async def test_list_entities_pages_in_name_order(client: Client) -> None:
    first = await ok(client, "list_entities", limit=4)
    assert [e["name"] for e in first["entities"]] == ["Acme", "Ana", "Bruno", "Carla"]
    acme = first["entities"][0]
    newest = (await ok(client, "get_history", name="Acme", limit=1))["events"][0]["at"]
    assert acme == {"name": "Acme", "entityType": "organization", "observationCount": 3, "lastChanged": newest}
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", newest)
    assert first["total"] == 6
    second = await ok(client, "list_entities", limit=4, cursor=first["nextCursor"])
    assert [e["name"] for e in second["entities"]] == ["Dora", "Emil"]
    assert "nextCursor" not in second


async def test_a_cursor_stays_valid_while_others_write(client: Client) -> None:
    first = await ok(client, "list_entities", limit=2)  # Acme, Ana
    await ok(client, "delete_entities", entityNames=["Acme", "Ana"])
    await ok(client, "create_entities", entities=[{"name": "Aaron", "entityType": "person", "observations": []}])
    second = await ok(client, "list_entities", limit=10, cursor=first["nextCursor"])
    assert [e["name"] for e in second["entities"]] == ["Bruno", "Carla", "Dora", "Emil"]


async def test_list_entities_filters_by_type_and_refuses_bad_arguments(client: Client) -> None:
    people = await ok(client, "list_entities", entityType="person")
    assert [e["name"] for e in people["entities"]] == PEOPLE and people["total"] == 5
    assert (await ok(client, "list_entities", entityType="Person"))["entities"] == []
    assert "cursor" in await refused(client, "list_entities", cursor="not a cursor")
    assert "limit" in await refused(client, "list_entities", limit=0)
    assert "limit" in await refused(client, "list_entities", limit=501)


async def test_get_neighbors_goes_as_deep_as_asked_best_connected_first(client: Client) -> None:
    near = await ok(client, "get_neighbors", name="Ana")
    assert [(e["name"], e["depth"]) for e in near["entities"]] == [("Acme", 1), ("Bruno", 1)]  # Acme: 3 relations
    assert {(r["from"], r["to"]) for r in near["relations"]} == {("Ana", "Bruno"), ("Ana", "Acme"), ("Bruno", "Acme")}
    deep = await ok(client, "get_neighbors", name="Ana", depth=3)
    assert [(e["name"], e["depth"]) for e in deep["entities"]] == [
        ("Acme", 1),
        ("Bruno", 1),
        ("Carla", 2),
        ("Dora", 2),
        ("Emil", 2),
    ]
    assert deep["totalEntities"] == 5 and deep["truncated"] is False


async def test_get_neighbors_follows_one_relation_type_and_limits(client: Client) -> None:
    known = await ok(client, "get_neighbors", name="Ana", depth=3, relationType="knows")
    assert [e["name"] for e in known["entities"]] == ["Bruno", "Carla", "Dora"]
    assert all(r["relationType"] == "knows" for r in known["relations"])
    cut = await ok(client, "get_neighbors", name="Ana", depth=2, limit=1)
    assert [e["name"] for e in cut["entities"]] == ["Acme"] and cut["truncated"] is True and cut["totalEntities"] == 5


async def test_get_neighbors_of_a_hub_returns_as_many_as_fit(tmp_path: Path) -> None:
    """Each neighbour was charged all its relations, returned or not: a user who knows 2,000 people (more
    relations than the budget holds) had no neighbour at all."""
    async with Client(build_app(settings_for(tmp_path, MEMORY_SHARD_LINES="1000")).server) as client:
        people = [{"name": f"Friend {i:04d}", "entityType": "person", "observations": []} for i in range(2000)]
        await ok(client, "create_entities", entities=[{"name": "User", "entityType": "person", "observations": []}])
        await ok(client, "create_entities", entities=people)
        knows = [{"from": "User", "to": f"Friend {i:04d}", "relationType": "knows"} for i in range(2000)]
        await ok(client, "create_relations", relations=knows)
        near = await ok(client, "get_neighbors", name="User", limit=50)
        assert len(near["entities"]) == 50 and near["truncated"] is True and near["totalEntities"] == 2000
        assert {(r["from"], r["to"]) for r in near["relations"]} == {("User", e["name"]) for e in near["entities"]}
        many = await client.call_tool("get_neighbors", {"name": "User", "limit": 500})
        entities = (many.structured_content or {})["entities"]
        assert 100 < len(entities) <= 500 and len(many.content[0].text) <= 80_000


async def test_get_neighbors_stays_within_the_budget_and_cuts_a_neighbour_larger_than_it(
    tmp_path: Path,
) -> None:
    """A neighbour too large for any answer (the user's own entity, holding most of the memory) comes with its
    newest observations that fit, and says how many it has; it was passed over, so never anyone's neighbour."""
    async with Client(build_app(settings_for(tmp_path, MEMORY_MAX_RESPONSE_CHARS="5000")).server) as client:
        centre = "C" * 1000  # its name is in the answer, and in each relation
        huge = [f"fact {i:03d}: an ordinary sentence" for i in range(300)]
        entities = [
            {"name": centre, "entityType": "person", "observations": []},
            {"name": "Huge", "entityType": "person", "observations": huge},
            *({"name": f"Friend {i:02d}", "entityType": "person", "observations": []} for i in range(40)),
        ]
        await ok(client, "create_entities", entities=entities)
        links = [{"from": centre, "to": "Huge", "relationType": "knows"}]
        links += [{"from": centre, "to": f"Friend {i:02d}", "relationType": "knows"} for i in range(40)]
        links += [{"from": centre, "to": centre, "relationType": f"is {i}"} for i in range(100)]  # to itself
        await ok(client, "create_relations", relations=links)
        result = await client.call_tool("get_neighbors", {"name": centre, "limit": 100})
        near = result.structured_content
        assert near is not None and len(result.content[0].text) <= 5000
        (huge_shown,) = [e for e in near["entities"] if e["name"] == "Huge"]
        assert huge_shown["observationCount"] == 300 and 0 < len(huge_shown["observations"]) < 300
        assert huge_shown["observations"] == huge[-len(huge_shown["observations"]) :]  # the newest, in order
        assert all("observationCount" not in e for e in near["entities"] if e["name"] != "Huge")
        assert near["truncated"] is True and near["totalEntities"] == 41


async def test_get_neighbors_refuses_unknown_names_and_depths(client: Client) -> None:
    message = await refused(client, "get_neighbors", name="ana")
    assert "not found" in message and '"Ana"' in message
    assert "depth" in await refused(client, "get_neighbors", name="Ana", depth=4)
    assert "depth" in await refused(client, "get_neighbors", name="Ana", depth=0)


async def test_graph_summary_counts_types_and_the_most_connected(client: Client) -> None:
    summary = await ok(client, "graph_summary")
    assert (summary["entities"], summary["relations"]) == (6, 7)
    assert summary["entityTypes"] == [{"type": "person", "count": 5}, {"type": "organization", "count": 1}]
    assert summary["relationTypes"] == [{"type": "works_at", "count": 4}, {"type": "knows", "count": 3}]
    top = [(e["name"], e["degree"]) for e in summary["mostConnected"][:3]]
    assert top == [("Acme", 4), ("Bruno", 3), ("Ana", 2)]


async def test_graph_summary_and_list_entities_stay_within_the_budget(tmp_path: Path) -> None:
    """Assistants coin types freely: 3,000 types made a graph_summary of 437 KB against a budget of 20,000; names
    full of control characters (6 characters each once escaped) made a list_entities page five times the budget."""
    async with Client(build_app(settings_for(tmp_path, MEMORY_MAX_RESPONSE_CHARS="20000")).server) as client:
        kinds = [f"kind of thing number {i}" for i in range(3000)]
        entities = [{"name": f"e{i}", "entityType": kind, "observations": []} for i, kind in enumerate(kinds)]
        await ok(client, "create_entities", entities=entities)
        result = await client.call_tool("graph_summary", {})
        summary = result.structured_content
        assert len(result.content[0].text) <= 20_000 and summary is not None
        assert summary["entities"] == 3000 and summary["typesLeftOut"] == 3000 - len(summary["entityTypes"])
        assert summary["entityTypes"]  # the most common ones, as many as fit
        names = [{"name": "\x01" * 200 + str(i), "entityType": "t", "observations": []} for i in range(100)]
        await ok(client, "create_entities", entities=names)
        page = await client.call_tool("list_entities", {"entityType": "t", "limit": 100})
        assert len(page.content[0].text) <= 20_000 and page.structured_content["nextCursor"]


async def test_a_cursor_nested_too_deep_is_refused_as_any_foreign_cursor(client: Client) -> None:
    forged = base64.urlsafe_b64encode(('{"x":' + "[" * 5000 + "]" * 5000 + "}").encode()).decode()
    assert "not a cursor list_entities returned" in await refused(client, "list_entities", cursor=forged)


async def test_the_users_own_large_entity_is_a_neighbour_cut_to_fit(tmp_path: Path) -> None:
    async with Client(build_app(settings_for(tmp_path, MEMORY_MAX_RESPONSE_CHARS="5000")).server) as client:
        notes = [f"note {i:03d}: something the user said once" for i in range(200)]
        entities = [
            {"name": "User", "entityType": "person", "observations": notes},
            {"name": "Acme", "entityType": "organization", "observations": []},
        ]
        await ok(client, "create_entities", entities=entities)
        await ok(client, "create_relations", relations=[{"from": "User", "to": "Acme", "relationType": "works_at"}])
        result = await client.call_tool("get_neighbors", {"name": "Acme"})
        near = result.structured_content or {}
        assert len(result.content[0].text) <= 5000 and near["truncated"] is True
        (user,) = near["entities"]
        assert user["name"] == "User" and user["observationCount"] == 200 and user["observations"][-1] == notes[-1]
        assert near["relations"] == [{"from": "User", "to": "Acme", "relationType": "works_at"}]
