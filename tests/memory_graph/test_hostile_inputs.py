"""Lesson input at the edges: timestamps at the calendar's ends, numbers JSON cannot hold, numbers Python cannot
print. Each bad value is refused naming the field, before anything is stored; each good edge value round-trips.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver.exceptions import ToolError

from memory_graph.config import Settings
from memory_graph.server import build_app
from tests.memory_graph.test_stdio import Server, tool_call

pytestmark = pytest.mark.anyio

MASKED = "Error executing tool create_lesson"


def lesson(**metadata: Any) -> dict[str, Any]:
    return {
        "name": "EDGE",
        "errorPattern": {"type": "runtime", "message": "ValueError: year 0 is out of range"},
        "metadata": metadata,
    }


def settings_for(folder: Path) -> Settings:
    return Settings.from_env({"MEMORY_FILE_PATH": str(folder / "memory.json")}, cwd=folder)


def stored_files(folder: Path) -> dict[str, bytes]:
    """The data files (lock and stamp files carry no records)."""
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix == ".json"}


def stored_text(folder: Path) -> str:
    return "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("lesson*.json")))


async def refused(folder: Path, field: str, metadata: dict[str, Any]) -> str:
    """Sends the lesson through an in-process MCP client; asserts it is refused naming `field`, and that the
    lesson file, already holding another lesson, is left as it was."""
    async with Client(build_app(settings_for(folder)).server) as client:
        kept = await client.call_tool("create_lesson", {"lesson": {**lesson(), "name": "KEPT"}})
        assert not kept.is_error, kept.content[0].text
        before = stored_files(folder)
        assert "KEPT" in stored_text(folder)
        result = await client.call_tool("create_lesson", {"lesson": lesson(**metadata)})
    assert result.is_error
    text = result.content[0].text
    assert text != MASKED and f"lesson.metadata.{field}:" in text, text
    assert stored_files(folder) == before
    return text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("createdAt", "0001-01-01T00:00:00+23:59"),  # UTC is 0000-12-31T00:01
        ("createdAt", "0001-01-01T00:00:00+00:01"),
        ("createdAt", "9999-12-31T23:59:59-10:00"),  # UTC is 10000-01-01T09:59:59
        ("updatedAt", "9999-12-31T23:59:59.999-00:01"),
    ],
)
async def test_a_time_outside_the_utc_calendar_is_refused_naming_the_field(
    tmp_path: Path, field: str, value: str
) -> None:
    text = await refused(tmp_path, field, {field: value})
    assert f"metadata.{field} " in text and "years 1..9999" in text and "send an ISO 8601 time" in text


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00.000Z"),
        ("0001-01-01T00:00:00-23:59", "0001-01-01T23:59:00.000Z"),  # local midnight is still in year 1 in UTC
        ("0999-05-01T12:30:00.123456+02:00", "0999-05-01T10:30:00.123Z"),
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
        ("9999-12-31T23:59:59+10:00", "9999-12-31T13:59:59.000Z"),
        ("2024-02-29T08:00:00", "2024-02-29T08:00:00.000Z"),  # no offset: taken as UTC
    ],
)
async def test_edge_times_are_stored_as_iso_8601_utc_with_four_digit_years(
    tmp_path: Path, given: str, stored: str
) -> None:
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        result = await client.call_tool("create_lesson", {"lesson": lesson(createdAt=given, updatedAt=given)})
        assert not result.is_error, result.content[0].text
        meta = result.structured_content["metadata"]
        assert meta["createdAt"] == meta["updatedAt"] == stored
        found = await client.call_tool("find_similar_errors", {"errorPattern": lesson()["errorPattern"]})
        assert found.structured_content["matches"][0]["lesson"]["metadata"]["createdAt"] == stored
    assert f'"createdAt":"{stored}"' in stored_text(tmp_path)
    moment = datetime.fromisoformat(stored)
    sent = datetime.fromisoformat(given)
    sent = sent.replace(tzinfo=UTC) if sent.tzinfo is None else sent.astimezone(UTC)
    assert moment.tzinfo == UTC and moment == sent.replace(microsecond=sent.microsecond // 1000 * 1000)


@pytest.mark.parametrize(
    ("field", "metadata"),
    [
        ("environment.x", {"environment": {"x": 10**400}}),  # JavaScript reads it as Infinity
        ("environment.x", {"environment": {"x": -(10**400)}}),
        ("environment.x", {"environment": {"x": 10**5000}}),  # past Python's 4,300-digit str() limit
        ("environment.deps[1].size", {"environment": {"deps": ["a", {"size": 2**1024}]}}),
        ("frequency", {"frequency": 10**5000}),
        ("successCount", {"frequency": 10**401, "successCount": 10**400}),
    ],
)
async def test_a_whole_number_too_large_for_json_is_refused_naming_the_field(
    tmp_path: Path, field: str, metadata: dict[str, Any]
) -> None:
    text = await refused(tmp_path, field, metadata)
    assert "read back as Infinity" in text and "digits" in text


async def test_counts_beyond_what_javascript_reads_exactly_are_refused(tmp_path: Path) -> None:
    text = await refused(tmp_path, "frequency", {"frequency": 2**53, "successRate": 0.5})
    assert "9007199254740991" in text


async def test_the_largest_numbers_json_holds_are_kept(tmp_path: Path) -> None:
    largest = int(1.7976931348623157e308)
    environment = {"big": largest, "float": 1.7976931348623157e308, "tiny": 5e-324, "negative": -largest}
    metadata = {"environment": environment, "frequency": 2**53 - 1, "successCount": 2**52}
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        result = await client.call_tool("create_lesson", {"lesson": lesson(**metadata)})
    assert not result.is_error, result.content[0].text
    stored = json.loads(stored_text(tmp_path))
    assert stored["metadata"]["environment"] == environment
    assert (stored["metadata"]["frequency"], stored["metadata"]["successCount"]) == (2**53 - 1, 2**52)


# The in-process client sends its request as JSON-ready data, where NaN and Infinity already became null; over a
# real wire they arrive as floats (1e400 parses as inf, and the SDK's parser takes NaN and Infinity literally). So
# these go to the server's call_tool directly, and over stdio as raw text below.
@pytest.mark.parametrize(
    ("field", "metadata"),
    [
        ("environment.x", {"environment": {"x": math.inf}}),
        ("environment.x", {"environment": {"x": -math.inf}}),
        ("environment.x.y[2]", {"environment": {"x": {"y": [1.5, 2, math.nan]}}}),
        ("environment.os", {"environment": {"os": math.nan}}),
        ("successRate", {"frequency": 3, "successRate": math.nan}),
        ("successRate", {"frequency": 3, "successRate": math.inf}),
    ],
)
async def test_nan_and_infinity_are_refused_naming_the_field(
    tmp_path: Path, field: str, metadata: dict[str, Any]
) -> None:
    app = build_app(settings_for(tmp_path))
    with pytest.raises(ToolError) as refusal:
        await app.server.call_tool("create_lesson", {"lesson": lesson(**metadata)})
    text = str(refusal.value)
    assert f"lesson.metadata.{field}:" in text and "NaN and Infinity are not JSON numbers" in text, text
    assert "EDGE" not in stored_text(tmp_path)


async def test_every_unreadable_number_is_named_at_once(tmp_path: Path) -> None:
    app = build_app(settings_for(tmp_path))
    environment = {"a": math.inf, "b": [10**5000], "c": "fine"}
    with pytest.raises(ToolError) as refusal:
        await app.server.call_tool("create_lesson", {"lesson": lesson(environment=environment, frequency=10**400)})
    text = str(refusal.value)
    assert "(3 problems)" in text
    for field in ("environment.a", "environment.b[0]", "frequency"):
        assert f"lesson.metadata.{field}:" in text


async def test_an_error_query_with_an_unreadable_number_is_refused(tmp_path: Path) -> None:
    app = build_app(settings_for(tmp_path))
    with pytest.raises(ToolError) as refusal:
        await app.server.call_tool("find_similar_errors", {"errorPattern": {"message": "boom", "context": 10**5000}})
    assert "errorPattern.context:" in str(refusal.value)


def test_over_stdio_1e400_nan_and_infinity_in_json_text_are_refused(tmp_path: Path) -> None:
    server = Server(tmp_path)
    try:
        server.initialize()
        for request_id, number in enumerate(["1e400", "-1e400", "NaN", "Infinity"], start=1):
            arguments = {"lesson": {**lesson(environment={"x": "NUMBER"}), "name": "WIRE"}}
            # By hand: json.dumps would write inf as Infinity but 1e400 cannot be a Python value at all.
            server.send(json.dumps(tool_call(request_id, "create_lesson", arguments)).replace('"NUMBER"', number))
            answer = server.answer(request_id)["result"]
            assert answer["isError"]
            text = answer["content"][0]["text"]
            assert "lesson.metadata.environment.x:" in text and "NaN and Infinity are not JSON numbers" in text
    finally:
        server.close()
    assert "WIRE" not in stored_text(tmp_path)
