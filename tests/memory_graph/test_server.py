"""The MCP layer: tools through the SDK's Client, in process (both modes) and over real stdio."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from memory_graph.config import Settings
from memory_graph.server import build_app
from tests.conftest import settings_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("each_engine")]

GRAPH_TOOLS = {
    "create_entities": (["entities"], False, False, False),
    "create_relations": (["relations"], False, False, False),
    "add_observations": (["observations"], False, False, False),
    "delete_entities": (["entityNames"], False, True, True),
    "delete_observations": (["deletions"], False, True, True),
    "delete_relations": (["relations"], False, True, True),
    "read_graph": ([], True, False, True),
    "search_nodes": (["query"], True, False, True),
    "open_nodes": (["names"], True, False, True),
}


def settings_for(folder: Path, **overrides: Any) -> Settings:
    return settings_in(folder, **{"MEMORY_SHARD_LINES": "3", **overrides})


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, tmp_path: Path):
    app = build_app(settings_for(tmp_path))
    async with Client(app.server, mode=request.param) as connected:
        yield connected


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result


async def test_tools_keep_the_reference_names_schemas_and_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert GRAPH_TOOLS.keys() <= tools.keys()
    for name, (properties, read_only, destructive, idempotent) in GRAPH_TOOLS.items():
        tool = tools[name]
        assert sorted(tool.input_schema.get("properties", {})) == sorted(properties)
        assert tool.input_schema.get("required", []) == properties
        assert tool.output_schema is not None
        hints = tool.annotations
        assert (
            hints.read_only_hint,
            hints.destructive_hint,
            hints.idempotent_hint,
            hints.open_world_hint,
        ) == (
            read_only,
            destructive,
            idempotent,
            False,
        )


async def test_a_round_trip_gives_structured_content_and_compact_text(client: Client) -> None:
    created = await call(
        client,
        "create_entities",
        entities=[
            {"name": "Alice", "entityType": "person", "observations": ["likes tea"]},
            {"name": "Acme", "entityType": "org", "observations": []},
        ],
    )
    assert created.structured_content == {
        "entities": [
            {"name": "Alice", "entityType": "person", "observations": ["likes tea"]},
            {"name": "Acme", "entityType": "org", "observations": []},
        ]
    }
    assert json.loads(created.content[0].text) == created.structured_content["entities"]
    assert " " not in created.content[0].text.replace("likes tea", "")
    await call(client, "create_relations", relations=[{"from": "Alice", "to": "Acme", "relationType": "works_at"}])
    found = await call(client, "search_nodes", query="TEA")
    assert found.structured_content == {
        "entities": [{"name": "Alice", "entityType": "person", "observations": ["likes tea"]}],
        "relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}],
    }
    deleted = await call(client, "delete_entities", entityNames=["Acme"])
    assert deleted.structured_content == {"success": True, "message": "Entities deleted successfully"}
    assert deleted.content[0].text == "Entities deleted successfully"
    graph = await call(client, "read_graph")
    assert graph.structured_content["relations"] == []


async def test_domain_errors_arrive_as_tool_errors_that_say_how_to_fix(client: Client) -> None:
    result = await client.call_tool(
        "create_relations", {"relations": [{"from": "Ghost", "to": "Nobody", "relationType": "knows"}]}
    )
    assert result.is_error
    text = result.content[0].text
    assert '"Ghost"' in text and '"Nobody"' in text and "create_entities" in text


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("create_entities", {"entities": [{"name": "Bad", "entityType": "person"}]}, "observations"),
        ("create_entities", {"entities": [{"name": 5, "entityType": "x", "observations": []}]}, "name"),
        ("create_entities", {"entities": [{"name": "", "entityType": "x", "observations": []}]}, "name"),
        ("add_observations", {"observations": [{"entityName": "Alice", "contents": "str"}]}, "contents"),
        ("search_nodes", {"query": 42}, "query"),
        ("open_nodes", {"names": "Alice"}, "names"),
    ],
)
async def test_bad_input_names_the_field_and_writes_nothing(
    client: Client, tmp_path: Path, tool: str, arguments: dict, field: str
) -> None:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert field in result.content[0].text
    assert not list(tmp_path.glob("memory*.json"))


async def test_a_truncated_read_says_so(tmp_path: Path) -> None:
    app = build_app(settings_for(tmp_path, MEMORY_MAX_RESPONSE_CHARS=2000))
    async with Client(app.server) as client:
        entities = [{"name": f"E{i:03d}", "entityType": "t", "observations": ["o" * 40]} for i in range(100)]
        await call(client, "create_entities", entities=entities)
        result = await call(client, "read_graph")
        truncated = result.structured_content["truncated"]
        assert truncated["totalEntities"] == 100
        assert truncated["returnedEntities"] == len(result.structured_content["entities"]) < 100
        assert len(result.content[0].text) < 2600


async def test_over_real_stdio(tmp_path: Path) -> None:
    env = {"MEMORY_FILE_PATH": str(tmp_path / "data" / "memory.json"), "PATH": os.environ.get("PATH", "")}
    env["MEMORY_SEMANTIC"] = "off"
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_graph"], env=env, cwd=str(tmp_path))
    async with Client(params) as client:
        await call(
            client,
            "create_entities",
            entities=[{"name": "Alice", "entityType": "person", "observations": ["x"]}],
        )
        result = await call(client, "open_nodes", names=["Alice", "Nobody"])
        assert [e["name"] for e in result.structured_content["entities"]] == ["Alice"]
    lines = (tmp_path / "data" / "memory.json").read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {
        "type": "entity",
        "name": "Alice",
        "entityType": "person",
        "observations": ["x"],
    }


async def test_relative_memory_path_resolves_against_the_working_directory(tmp_path: Path) -> None:
    env = {"MEMORY_FILE_PATH": "rel/memory.json", "PATH": os.environ.get("PATH", ""), "MEMORY_SEMANTIC": "off"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memory_graph"], env=env, cwd=str(tmp_path))
    async with Client(params) as client:
        await call(
            client,
            "create_entities",
            entities=[{"name": "Alice", "entityType": "person", "observations": []}],
        )
    assert (tmp_path / "rel" / "memory.json").exists()


async def test_an_unknown_prompt_or_prompt_argument_is_invalid_params_saying_what_there_is(client: Client) -> None:
    with pytest.raises(MCPError) as unknown:
        await client.get_prompt("nope", {})
    assert unknown.value.error.code == INVALID_PARAMS and "personalization" in unknown.value.error.message
    with pytest.raises(MCPError) as argument:
        await client.get_prompt("personalization", {"nope": "x"})
    assert argument.value.error.code == INVALID_PARAMS
    assert "user_name" in argument.value.error.message and "nope" in argument.value.error.message


async def test_tool_descriptions_carry_no_source_indentation(client: Client) -> None:
    tools = (await client.list_tools()).tools
    indented = [t.name for t in tools if any(line.startswith(" ") for line in (t.description or "").splitlines())]
    assert tools and indented == []


async def test_prompts_and_the_graph_resource(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert {"personalization", "lesson-workflow"} <= prompts.keys()
    default = await client.get_prompt("personalization", {})
    text = default.messages[0].content.text
    assert "interacting with default_user" in text and '"Remembering..."' in text and "3 degrees" in text
    named = await client.get_prompt("personalization", {"user_name": "Ada"})
    assert "interacting with Ada" in named.messages[0].content.text
    workflow = (await client.get_prompt("lesson-workflow", {})).messages[0].content.text
    assert (
        workflow.index("find_similar_errors")
        < workflow.index("create_lesson")
        < workflow.index("update_lesson_success")
    )
    await call(client, "create_entities", entities=[{"name": "Alice", "entityType": "person", "observations": []}])
    resources = (await client.list_resources()).resources
    assert [str(r.uri) for r in resources] == ["memory://knowledge-graph"]
    content = (await client.read_resource("memory://knowledge-graph")).contents[0]
    assert content.mime_type == "application/json"
    assert json.loads(content.text)["entities"] == [{"name": "Alice", "entityType": "person", "observations": []}]


async def test_twenty_concurrent_creates_keep_twenty_entities(client: Client) -> None:
    """The official server keeps 1 of 20 concurrent creates; the SDK runs our sync tools in parallel threads."""

    async def create(i: int) -> None:
        entity = {"name": f"Parallel {i}", "entityType": "t", "observations": [f"o{i}"]}
        await call(client, "create_entities", entities=[entity])
        await call(client, "add_observations", observations=[{"entityName": "Parallel 0", "contents": [f"from {i}"]}])

    await call(client, "create_entities", entities=[{"name": "Parallel 0", "entityType": "t", "observations": []}])
    async with anyio.create_task_group() as group:
        for i in range(1, 21):
            group.start_soon(create, i)
    graph = (await call(client, "read_graph")).structured_content
    assert len(graph["entities"]) == 21
    first = next(e for e in graph["entities"] if e["name"] == "Parallel 0")
    assert sorted(first["observations"]) == sorted(f"from {i}" for i in range(1, 21))
