"""Argument errors through MCP: the field as a path, what arrived, and what to send instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from memory_graph.config import Settings
from memory_graph.server import build_app

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "create_entities",
            {"entities": [{"name": "Bad", "entityType": "person"}]},
            "entities[0].observations: Field required; add it",
        ),
        (
            "create_entities",
            {"entities": [{"name": 5, "entityType": "x", "observations": []}]},
            "entities[0].name: Input should be a valid string (got 5); send a JSON string",
        ),
        (
            "update_lesson_success",
            {"lessonName": "L", "success": "false"},
            'success: Input should be a valid boolean (got "false"); send the JSON boolean true or false',
        ),
        (
            "create_lesson",
            {
                "lesson": {
                    "name": "L",
                    "errorPattern": {"type": "t", "message": "m"},
                    "metadata": {"severity": "urgent"},
                }
            },
            "lesson.metadata.severity:",
        ),
        ("open_nodes", {"names": "Alice"}, 'names: Input should be a valid list (got "Alice"); send a JSON array'),
    ],
)
async def test_argument_errors_say_which_field_what_and_how(
    tmp_path: Path, tool: str, arguments: dict, expected: str
) -> None:
    app = build_app(Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "memory.json")}))
    async with Client(app.server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    assert text.startswith(f"Invalid arguments for {tool} (1 problem); nothing was changed:")
    assert expected in text
