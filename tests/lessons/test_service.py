"""The lesson tools through MCP, and a regression test for each failure of the fork we replace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_graph.config import Settings
from memory_graph.server import build_app
from tests.conftest import FILES_ONLY, settings_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("each_engine")]

PIP = {
    "name": "PIP_NO_MATCHING_DIST",
    "errorPattern": {
        "type": "dependency",
        "message": "ERROR: No matching distribution found for reqeusts",
        "context": "adding an HTTP client library",
    },
    "observations": ["Misspelled project name or a pin that was never published.", "Fix: check the name."],
    "verificationSteps": [
        {"command": "pip index versions requests", "expectedOutput": "versions", "successIndicators": ["Available"]}
    ],
    "metadata": {"severity": "medium", "environment": {"os": "linux", "pythonVersion": "3.11", "shell": "bash"}},
}
PORT = {
    "name": "NODE_EADDRINUSE",
    "errorPattern": {
        "type": "network",
        "message": "Error: listen EADDRINUSE: address already in use :::3000",
        "context": "starting the dev server",
    },
    "observations": ["Another process already listens on the port.", "Fix: stop it (lsof -i :3000) or use PORT=3001."],
}


TEXT_IS_STRUCTURED = {"create_lesson", "find_similar_errors", "update_lesson_success", "get_lesson_recommendations"}


def settings_for(folder: Path) -> Settings:
    return settings_in(folder, MEMORY_SHARD_LINES=2)


async def call(client: Client, tool: str, **arguments: Any) -> dict:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    if tool in TEXT_IS_STRUCTURED:
        assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return result.content[0].text


@pytest.fixture
async def client(tmp_path: Path):
    async with Client(build_app(settings_for(tmp_path)).server) as connected:
        yield connected


async def test_create_lesson_validates_defaults_and_keeps_history(client: Client) -> None:
    stored = await call(
        client, "create_lesson", lesson={**PIP, "metadata": {**PIP["metadata"], "frequency": 20, "successRate": 0.9}}
    )
    assert stored["entityType"] == "lesson"
    meta = stored["metadata"]
    assert (meta["frequency"], meta["successCount"], meta["successRate"]) == (20, 18, 0.9)
    assert meta["createdAt"].endswith("Z") and meta["createdAt"] == meta["updatedAt"]
    assert meta["environment"] == {"os": "linux", "pythonVersion": "3.11", "shell": "bash"}
    assert stored["verificationSteps"][0]["command"] == "pip index versions requests"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"errorPattern": {"type": "x", "message": "", "context": ""}}, "message"),
        ({"errorPattern": {"type": "x", "message": "   ", "context": ""}}, "message"),
        ({"entityType": "person"}, "entityType"),
        ({"metadata": {"severity": "urgent"}}, "severity"),
        ({"metadata": {"frequency": -1}}, "frequency"),
        ({"metadata": {"successRate": 1.5, "frequency": 2}}, "successRate"),
        ({"verificationSteps": [{"expectedOutput": "x"}]}, "command"),
        ({"name": ""}, "name"),
    ],
)
async def test_bad_lessons_are_refused_naming_the_field(
    client: Client, tmp_path: Path, change: dict, field: str
) -> None:
    text = await error_of(client, "create_lesson", lesson={**PIP, **change})
    assert field in text
    assert not list(tmp_path.glob("lesson*.json"))


async def test_names_are_unique_across_entities_and_lessons(client: Client) -> None:
    await call(
        client, "create_entities", entities=[{"name": "NODE_EADDRINUSE", "entityType": "note", "observations": []}]
    )
    text = await error_of(client, "create_lesson", lesson=PORT)
    assert "already used" in text and "delete_entities" in text
    await call(client, "create_lesson", lesson=PIP)
    created = await call(
        client, "create_entities", entities=[{"name": "PIP_NO_MATCHING_DIST", "entityType": "x", "observations": []}]
    )
    assert created["entities"] == []


async def test_lessons_are_graph_entities(client: Client, tmp_path: Path) -> None:
    await call(client, "create_lesson", lesson=PIP)
    await call(
        client, "create_entities", entities=[{"name": "api-project", "entityType": "project", "observations": []}]
    )
    await call(
        client,
        "create_relations",
        relations=[{"from": "api-project", "to": "PIP_NO_MATCHING_DIST", "relationType": "hit"}],
    )
    graph = await call(client, "read_graph")
    lesson_view = {"name": "PIP_NO_MATCHING_DIST", "entityType": "lesson", "observations": PIP["observations"]}
    assert lesson_view in graph["entities"]
    assert (await call(client, "search_nodes", query="matching distribution"))["entities"] == [lesson_view]
    assert (await call(client, "open_nodes", names=["PIP_NO_MATCHING_DIST"]))["relations"] == [
        {"from": "api-project", "to": "PIP_NO_MATCHING_DIST", "relationType": "hit"}
    ]
    await call(
        client,
        "add_observations",
        observations=[{"entityName": "PIP_NO_MATCHING_DIST", "contents": ["Also: --no-index"]}],
    )
    found = await call(
        client,
        "find_similar_errors",
        errorPattern={"type": "dependency", "message": "ERROR: No matching distribution found for djnago"},
    )
    assert found["matches"][0]["lesson"]["observations"][-1] == "Also: --no-index"
    assert found["matches"][0]["lesson"]["verificationSteps"] == PIP["verificationSteps"]
    await call(client, "delete_entities", entityNames=["PIP_NO_MATCHING_DIST"])
    assert (await call(client, "read_graph"))["relations"] == []
    assert (
        await call(
            client,
            "find_similar_errors",
            errorPattern={"type": "dependency", "message": PIP["errorPattern"]["message"]},
        )
    )["matches"] == []
    assert not any("PIP_NO_MATCHING_DIST" in p.read_text() for p in tmp_path.glob("lesson*.json"))


async def test_find_similar_errors_ranks_and_leaves_unrelated_out(client: Client) -> None:
    await call(client, "create_lesson", lesson=PIP)
    await call(client, "create_lesson", lesson=PORT)
    found = await call(
        client,
        "find_similar_errors",
        errorPattern={
            "type": "network",
            "message": "2026-11-29 10:00:01 [app] Error: listen EADDRINUSE: address already in use 127.0.0.1:8080",
            "context": "npm start",
        },
    )
    assert [m["name"] for m in found["matches"]] == ["NODE_EADDRINUSE"]
    assert 0.5 < found["matches"][0]["score"] <= 1.0
    unrelated = await call(
        client, "find_similar_errors", errorPattern={"type": "runtime", "message": "Segmentation fault (core dumped)"}
    )
    assert unrelated["matches"] == []
    text = await error_of(client, "find_similar_errors", errorPattern={"type": "x", "message": ""})
    assert "message" in text


async def test_update_lesson_success_needs_a_real_boolean(client: Client) -> None:
    await call(client, "create_lesson", lesson=PIP)
    for fake in ("false", "true", 0, None):
        text = await error_of(client, "update_lesson_success", lessonName="PIP_NO_MATCHING_DIST", success=fake)
        assert "success" in text
    assert "lessonName" in await error_of(client, "update_lesson_success", lessonName="  ", success=True)
    first = await call(client, "update_lesson_success", lessonName="PIP_NO_MATCHING_DIST", success=False)
    second = await call(client, "update_lesson_success", lessonName="PIP_NO_MATCHING_DIST", success=True)
    meta = second["lesson"]["metadata"]
    assert (meta["frequency"], meta["successCount"], meta["successRate"]) == (2, 1, 0.5)
    assert first["lesson"]["metadata"]["successRate"] == 0.0
    assert meta["updatedAt"] >= meta["createdAt"]
    text = await error_of(client, "update_lesson_success", lessonName="PIP_NO_MATCHING_DIS", success=True)
    assert 'Did you mean "PIP_NO_MATCHING_DIST"' in text


async def test_recommendations_read_a_raw_log_and_prefer_proven_lessons(client: Client) -> None:
    await call(client, "create_lesson", lesson=PORT)
    # Another type: not a twin of NODE_EADDRINUSE (a twin would be merged into it).
    proven = {**PORT, "name": "PORT_PROVEN", "errorPattern": {**PORT["errorPattern"], "type": "runtime"}}
    await call(client, "create_lesson", lesson=proven)
    for _ in range(20):
        await call(client, "update_lesson_success", lessonName="PORT_PROVEN", success=True)
    await call(client, "update_lesson_success", lessonName="NODE_EADDRINUSE", success=True)
    log = "\n".join(
        [
            "$ npm run dev",
            "> app@1.0.0 dev",
            "> node server.js",
            "node:events:497",
            "      throw er;",
            "Error: listen EADDRINUSE: address already in use :::5173",
            "    at Server.setupListenHandle",
            "Node.js v20.20.2",
        ]
    )
    result = await call(client, "get_lesson_recommendations", context=log)
    names = [r["name"] for r in result["recommendations"]]
    assert names == ["PORT_PROVEN", "NODE_EADDRINUSE"]
    top = result["recommendations"][0]
    assert top["relevance"] > 0.8 and "EADDRINUSE" in top["matchedLine"]
    assert top["score"] == pytest.approx(top["relevance"] * (0.7 + 0.3 * top["successStatistic"]), abs=1e-3)
    assert (await call(client, "get_lesson_recommendations", context="all good, nothing failed"))[
        "recommendations"
    ] == []


# -- the fork's failures -------------------------------------------------------------------------------------
async def test_a_missing_lesson_file_never_empties_the_graph(tmp_path: Path) -> None:
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        await call(
            client, "create_entities", entities=[{"name": "Alice", "entityType": "person", "observations": ["x"]}]
        )
    assert not (tmp_path / "lesson.json").exists()
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        assert [e["name"] for e in (await call(client, "read_graph"))["entities"]] == ["Alice"]
        await call(client, "create_lesson", lesson=PIP)
        assert {e["name"] for e in (await call(client, "read_graph"))["entities"]} == {"Alice", "PIP_NO_MATCHING_DIST"}


@FILES_ONLY
async def test_restart_keeps_the_last_write_and_sharding_neither_duplicates_nor_resurrects(tmp_path: Path) -> None:
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        for i in range(5):
            kind = {**PORT["errorPattern"], "type": ["network", "runtime", "server", "dev", "node"][i]}
            await call(client, "create_lesson", lesson={**PORT, "name": f"L{i}", "errorPattern": kind})
        await call(client, "delete_entities", entityNames=["L1", "L3"])
        await call(client, "update_lesson_success", lessonName="L4", success=True)
    lines = [line for p in tmp_path.glob("lesson*.json") for line in p.read_text(encoding="utf-8").splitlines()]
    assert sorted(json.loads(line)["name"] for line in lines) == ["L0", "L2", "L4"]
    assert all(p.read_text(encoding="utf-8").count("\n") <= 2 for p in tmp_path.glob("lesson*.json"))
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        found = await call(client, "find_similar_errors", errorPattern=PORT["errorPattern"], limit=10)
        assert sorted(m["name"] for m in found["matches"]) == ["L0", "L2", "L4"]
        l4 = next(m for m in found["matches"] if m["name"] == "L4")
        assert l4["lesson"]["metadata"]["frequency"] == 1
        assert found["matches"][0]["name"] == "L4"  # equal scores: the one with a success ranks first


@FILES_ONLY
async def test_a_malformed_stored_lesson_is_reported_by_line_and_field_never_masked(tmp_path: Path) -> None:
    """Issue 7, defect 3: a hand-edited lesson whose verificationSteps is a string."""
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        await call(client, "create_lesson", lesson=PIP)
        await call(client, "create_lesson", lesson=PORT)
    shard = tmp_path / "lesson.json"
    lines = shard.read_text(encoding="utf-8").splitlines()
    broken = json.loads(lines[0])
    broken["verificationSteps"] = "just run it"
    shard.write_text("\n".join([json.dumps(broken), *lines[1:]]) + "\n", encoding="utf-8")
    before = shard.read_bytes()
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        found = await call(client, "find_similar_errors", errorPattern=PORT["errorPattern"])
        assert [m["name"] for m in found["matches"]] == ["NODE_EADDRINUSE"]
        message = await error_of(client, "update_lesson_success", lessonName="NODE_EADDRINUSE", success=True)
        assert f"{shard}:1:" in message and "verificationSteps" in message and "memory-graph repair" in message
        await error_of(client, "update_lesson_success", lessonName="NODE_EADDRINUSE", success=True)
    assert shard.read_bytes() == before  # refused twice, counted never
    app = build_app(settings_for(tmp_path))
    problems = app.store.check().problems
    assert len(problems) == 1 and problems[0].startswith(f"{shard}:1: lesson 'PIP_NO_MATCHING_DIST': field ")
    assert "verificationSteps" in problems[0]


@FILES_ONLY
@pytest.mark.parametrize(
    ("metadata", "said"),
    [
        ('{"frequency": 1e400}', "metadata.frequency must be a number from 0"),
        ('{"frequency": -4}', "metadata.frequency must be a number from 0"),
        ('{"frequency": 2.5}', "metadata.frequency must be a whole number"),
        ('{"frequency": 1, "successCount": 5}', "metadata.successCount (5) cannot exceed metadata.frequency (1)"),
        ('{"frequency": 1, "recentAttempts": 1e400}', "metadata.recentAttempts must be a number from 0"),
        ('{"frequency": 1, "recentSuccesses": 2}', "metadata.recentSuccesses (2) cannot exceed"),
    ],
)
async def test_a_stored_lesson_whose_counts_no_lookup_can_use_is_reported_and_the_rest_served(
    tmp_path: Path, metadata: str, said: str
) -> None:
    """Valid JSON, unusable counts: an infinite frequency made every tool fail (and `check` crash), a negative one
    every lookup divide by zero, an infinite recent count print NaN, which no JSON client parses."""
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        await call(client, "create_lesson", lesson=PORT)
    shard = tmp_path / "lesson.json"
    record = json.dumps({"type": "entity", "name": "BROKEN", "entityType": "lesson", "observations": []})
    line = record[:-1] + ', "errorPattern": {"type": "build", "message": "make: *** No rule"}, "metadata": '
    with shard.open("a", encoding="utf-8") as handle:
        handle.write(line + metadata + "}\n")
    app = build_app(settings_for(tmp_path))
    (problem,) = app.store.check().problems
    assert problem.startswith(f"{shard}:2: lesson 'BROKEN': ") and said in problem
    async with Client(app.server) as client:
        found = await call(client, "find_similar_errors", errorPattern={"message": "make: *** No rule to make"})
        assert all(0 <= m["successStatistic"] <= 1 and 0 <= m["score"] <= 1 for m in found["matches"])
        await call(client, "get_lesson_recommendations", context="Error: listen EADDRINUSE :::3000")
        assert (await call(client, "read_graph"))["entities"][0]["name"] == "NODE_EADDRINUSE"


@FILES_ONLY
async def test_a_stored_rate_is_the_count_over_the_attempts(tmp_path: Path) -> None:
    """A lesson imported or written by hand with its counts and no rate showed a rate of 0."""
    record = {"type": "entity", "name": "PIP", "entityType": "lesson", "observations": []}
    record |= {"errorPattern": PIP["errorPattern"], "metadata": {"frequency": 4, "successCount": 3}}
    (tmp_path / "lesson.json").write_text(json.dumps(record) + "\n", encoding="utf-8")
    async with Client(build_app(settings_for(tmp_path)).server) as client:
        found = await call(client, "find_similar_errors", errorPattern=PIP["errorPattern"])
    assert found["matches"][0]["lesson"]["metadata"]["successRate"] == 0.75


async def test_a_find_score_stays_within_0_and_1_when_the_context_quotes_a_command(client: Client) -> None:
    await call(client, "create_lesson", lesson=PIP)
    found = await call(
        client,
        "find_similar_errors",
        errorPattern={**PIP["errorPattern"], "context": "ran `pip install reqeusts` in a venv"},
    )
    assert found["matches"] and all(0 <= m["score"] <= 1 for m in found["matches"])


async def test_a_log_with_carriage_return_line_ends_is_read_line_by_line(client: Client) -> None:
    await call(client, "create_lesson", lesson=PORT)
    log = "".join(f"Downloading chunk {i} of 300\n" for i in range(300))
    log += "node server.js\nError: listen EADDRINUSE: address already in use :::3000\n    at Server.setupListenHandle\n"
    for ending in ("\n", "\r\n", "\r"):
        found = await call(client, "get_lesson_recommendations", context=log.replace("\n", ending))
        assert [r["name"] for r in found["recommendations"]][:1] == ["NODE_EADDRINUSE"], repr(ending)


async def test_find_reads_a_bounded_message_and_echoes_a_bounded_signature(client: Client) -> None:
    await call(client, "create_lesson", lesson=PORT)
    text = await error_of(client, "find_similar_errors", errorPattern={"message": "a." * 40_000})
    assert "message" in text and "65536" in text.replace(",", "")
    found = await call(client, "find_similar_errors", errorPattern={"message": "error: " + "word " * 10_000})
    assert len(found["signature"]) <= 1_000


async def test_lookups_answer_within_the_response_budget_saying_what_was_cut(tmp_path: Path) -> None:
    """A lesson holding a 230 KB stack trace made a find answer of 336 KB, past every read's budget."""
    settings = settings_in(tmp_path, MEMORY_MAX_RESPONSE_CHARS=20_000)
    trace = "\n".join(f"  at frame{i} (lib/mod{i}.js:{i}:7)" for i in range(7_000))
    huge = {**PORT, "errorPattern": {**PORT["errorPattern"], "stackTrace": trace}}
    async with Client(build_app(settings).server) as client:
        await call(client, "create_lesson", lesson=huge)
        await call(client, "create_lesson", lesson={**PORT, "name": "PORT_OTHER", "observations": ["x" * 15_000]})
        for tool, arguments, items in (
            ("find_similar_errors", {"errorPattern": PORT["errorPattern"]}, "matches"),
            ("get_lesson_recommendations", {"context": PORT["errorPattern"]["message"]}, "recommendations"),
        ):
            result = await client.call_tool(tool, arguments)
            assert not result.is_error and len(result.content[0].text) <= 20_000, tool
            answer = result.structured_content
            assert answer[items][0]["name"] == "NODE_EADDRINUSE" and answer["truncated"]["maxResponseChars"] == 20_000
            assert answer["truncated"]["shortenedTexts"] >= 1 and answer["truncated"]["total"] >= 1
        small = await call(client, "find_similar_errors", errorPattern={"message": "something else entirely"})
        assert "truncated" not in small


# -- learning from use and upkeep (issue 8) --------------------------------------------------------------------
async def test_a_twin_is_merged_into_the_lesson_it_duplicates_and_its_name_still_finds_it(client: Client) -> None:
    first = await call(client, "create_lesson", lesson=PORT)
    assert first["merged"] is False and first["name"] == "NODE_EADDRINUSE"
    twin = {
        **PORT,
        "name": "PORT_BUSY",
        # Same signature: only the port differs.
        "errorPattern": {**PORT["errorPattern"], "message": "Error: listen EADDRINUSE: address already in use :::8080"},
        "observations": ["Fix: kill the old dev server (kill $(lsof -t -i :8080))."],
        "verificationSteps": [{"command": "ss -ltnp | grep 8080", "expectedOutput": "", "successIndicators": []}],
        "metadata": {"frequency": 3, "successCount": 2},
    }
    merged = await call(client, "create_lesson", lesson=twin)
    assert merged["merged"] is True and merged["name"] == "NODE_EADDRINUSE" and '"NODE_EADDRINUSE"' in merged["note"]
    assert merged["observations"] == [*PORT["observations"], *twin["observations"]]
    assert [s["command"] for s in merged["verificationSteps"]] == ["ss -ltnp | grep 8080"]
    assert (merged["metadata"]["frequency"], merged["metadata"]["successCount"]) == (3, 2)
    assert merged["mergedNames"] == ["PORT_BUSY"]
    lessons = [e for e in (await call(client, "read_graph"))["entities"] if e["entityType"] == "lesson"]
    assert [e["name"] for e in lessons] == ["NODE_EADDRINUSE"]
    # The twin's name reaches the lesson it was merged into.
    updated = await call(client, "update_lesson_success", lessonName="PORT_BUSY", success=True)
    assert updated["lesson"]["name"] == "NODE_EADDRINUSE" and updated["lesson"]["metadata"]["frequency"] == 4
    # Another error (not the same signature) is its own lesson.
    other = {
        **PORT,
        "name": "PORT_DENIED",
        "errorPattern": {**PORT["errorPattern"], "message": "Error: listen EACCES: permission denied 0.0.0.0:80"},
    }
    assert (await call(client, "create_lesson", lesson=other))["merged"] is False


async def test_a_twin_keeps_its_occurrence_and_its_steps_details_and_a_merged_name_is_not_reused(
    client: Client,
) -> None:
    # Its context: "starting the dev server"; a step with a command only.
    await call(client, "create_lesson", lesson={**PORT, "verificationSteps": [{"command": "lsof -i :3000"}]})
    twin = {
        **PORT,
        "name": "PORT_BUSY",
        "errorPattern": {
            **PORT["errorPattern"],
            "message": "Error: listen EADDRINUSE: address already in use :::8080",
            "context": "running the end-to-end tests",
            "stackTrace": "at Server.setupListenHandle [as _listen2] (node:net:1817:16)",
        },
        "verificationSteps": [{"command": "lsof -i :3000", "expectedOutput": "", "successIndicators": ["exit 1"]}],
    }
    merged = await call(client, "create_lesson", lesson=twin)
    assert merged["merged"] is True and merged["errorPattern"]["context"] == "starting the dev server"
    assert "Also seen while running the end-to-end tests" in merged["observations"]
    assert "not its stack trace" in merged["note"]
    assert merged["verificationSteps"] == [
        {"command": "lsof -i :3000", "expectedOutput": "", "successIndicators": ["exit 1"]}
    ]
    # The name now stands for NODE_EADDRINUSE: a lesson of another error merged under it would be out of reach.
    other = {
        **PORT,
        "errorPattern": {"type": "network", "message": "Error: listen EACCES: permission denied 0.0.0.0:80"},
    }
    await call(client, "create_lesson", lesson={**other, "name": "PORT_DENIED"})
    refused = await error_of(
        client,
        "create_lesson",
        lesson={
            **other,
            "name": "PORT_BUSY",
            "errorPattern": {**other["errorPattern"], "message": other["errorPattern"]["message"].replace("80", "443")},
        },
    )
    assert '"PORT_BUSY" already stands for' in refused and '"NODE_EADDRINUSE"' in refused and "another name" in refused


async def test_prior_counts_are_stored_as_a_whole_count_and_its_rate(client: Client) -> None:
    def prior(**metadata: Any) -> dict[str, Any]:
        return {**PIP, "metadata": {**PIP["metadata"], **metadata}}

    for metadata in ({"frequency": 10, "successRate": 0.9, "successCount": 2}, {"frequency": 3, "successRate": 0.5}):
        message = await error_of(client, "create_lesson", lesson=prior(**metadata))
        assert "metadata.successRate" in message and "send metadata.successCount" in message, message
    stored = (await call(client, "create_lesson", lesson=prior(frequency=3, successRate=0.67)))["metadata"]
    assert (stored["successCount"], stored["successRate"]) == (2, 2 / 3)


async def test_aliases_set_by_hand_are_not_learned_again_and_are_checked(client: Client) -> None:
    await call(client, "create_lesson", lesson=PORT)
    error = {"type": "network", "message": "listen EADDRINUSE: address already in use 0.0.0.0:5173 (vite)"}
    assert (await call(client, "find_similar_errors", errorPattern=error))["matches"]
    await call(client, "update_lesson_success", lessonName="NODE_EADDRINUSE", success=True)
    assert (await call(client, "update_lesson", name="NODE_EADDRINUSE", aliases=[]))["aliases"] == []
    again = await call(client, "update_lesson_success", lessonName="NODE_EADDRINUSE", success=True)
    assert again["lesson"].get("aliases", []) == []  # the lookup before the clearing teaches nothing
    for aliases, problem in (
        ([" "], "aliases[0]"),
        (["x" * 501], "aliases[0]"),
        ([f"e{i}" for i in range(11)], "aliases"),
    ):
        assert problem in await error_of(client, "update_lesson", name="NODE_EADDRINUSE", aliases=aliases)


async def test_update_lesson_replaces_the_fields_sent_and_keeps_counts_and_history(client: Client) -> None:
    await call(client, "create_lesson", lesson=PIP)
    await call(client, "update_lesson_success", lessonName="PIP_NO_MATCHING_DIST", success=True)
    pattern = {"type": "dependency", "message": "ERROR: No matching distribution found for <package>"}
    edited = await call(
        client,
        "update_lesson",
        name="PIP_NO_MATCHING_DIST",
        errorPattern=pattern,
        addObservations=["pip index versions <pkg> lists what exists."],
        severity="high",
    )
    assert edited["errorPattern"]["message"] == pattern["message"] and edited["metadata"]["severity"] == "high"
    assert edited["observations"] == [*PIP["observations"], "pip index versions <pkg> lists what exists."]
    assert edited["verificationSteps"] == PIP["verificationSteps"]  # not sent: kept
    assert (edited["metadata"]["frequency"], edited["metadata"]["successCount"]) == (1, 1)
    history = await call(client, "get_history", name="PIP_NO_MATCHING_DIST")
    messages = [(e.get("after") or {}).get("errorPattern", {}).get("message") for e in history["events"]]
    assert PIP["errorPattern"]["message"] in messages and pattern["message"] in messages
    found = await call(
        client, "find_similar_errors", errorPattern={"message": "No matching distribution found for flask"}
    )
    assert found["matches"][0]["name"] == "PIP_NO_MATCHING_DIST"
    assert "nothing to change" in await error_of(client, "update_lesson", name="PIP_NO_MATCHING_DIST")
    assert 'Did you mean "PIP_NO_MATCHING_DIST"' in await error_of(
        client, "update_lesson", name="PIP_NO_MATCHING", severity="low"
    )


async def test_a_wording_that_a_lesson_fixed_becomes_an_alias_and_finds_it_next_time(client: Client) -> None:
    summary = {
        "name": "JAVA_NPE",
        "errorPattern": {"type": "java", "message": "NPE when Map.get() returned null for a user without an email"},
        "observations": [
            "java.lang.NullPointerException: a method was called on a null reference (the String from Map.get).",
            "Fix: check the value before using it.",
        ],
    }
    await call(client, "create_lesson", lesson=summary)
    error = {
        "type": "runtime",
        "message": 'Exception in thread "main" java.lang.NullPointerException: Cannot invoke "String.length()" '
        'because "<local1>" is null',
    }
    before = await call(client, "find_similar_errors", errorPattern=error)
    assert [m["name"] for m in before["matches"]] == ["JAVA_NPE"]
    await call(client, "update_lesson_success", lessonName="JAVA_NPE", success=True)
    lesson = (await call(client, "find_similar_errors", errorPattern=error))["matches"][0]
    assert lesson["lesson"]["aliases"] == [error["message"]]
    assert lesson["score"] > before["matches"][0]["score"]
    # A failed attempt teaches nothing, and the same wording is learned once.
    await call(client, "update_lesson_success", lessonName="JAVA_NPE", success=False)
    await call(client, "update_lesson_success", lessonName="JAVA_NPE", success=True)
    final = (await call(client, "find_similar_errors", errorPattern=error))["matches"][0]["lesson"]
    assert final["aliases"] == [error["message"]]


async def test_only_the_same_error_at_another_place_is_a_twin(client: Client) -> None:
    """Numbers, quoted names and file names keep lessons apart; folders, positions and addresses do not."""
    killed = {"name": "OOM_KILLED", "errorPattern": {"type": "ci", "message": "Process completed with exit code 137"}}
    failed = {"name": "SCRIPT_FAILED", "errorPattern": {"type": "ci", "message": "Process completed with exit code 1"}}
    config = {
        "name": "CONFIG_MISSING",
        "errorPattern": {"type": "runtime", "message": "FileNotFoundError: No such file: 'config.yaml'"},
    }
    data = {
        "name": "DATA_MISSING",
        "errorPattern": {"type": "runtime", "message": "FileNotFoundError: No such file: 'train.csv'"},
    }
    for lesson in (killed, failed, config, data):
        assert (await call(client, "create_lesson", lesson=lesson))["merged"] is False
    moved = {
        "name": "CONFIG_MISSING_AGAIN",
        "errorPattern": {"type": "runtime", "message": "FileNotFoundError: No such file: '/srv/app/config.yaml'"},
        "metadata": {"severity": "critical", "environment": {"os": "linux"}},
    }
    merged = await call(client, "create_lesson", lesson=moved)
    assert merged["merged"] is True and merged["name"] == "CONFIG_MISSING"
    assert merged["metadata"]["severity"] == "critical" and merged["metadata"]["environment"] == {"os": "linux"}
    # A client retrying the same call: merged once, counted once.
    again = await call(client, "create_lesson", lesson={**moved, "metadata": {"frequency": 5, "successCount": 5}})
    assert again["merged"] is True and again["metadata"]["frequency"] == 0 and "nothing changed" in again["note"]
    # A merged name taken by an entity later is that entity's, not the lesson's.
    await call(
        client, "create_entities", entities=[{"name": "CONFIG_MISSING_AGAIN", "entityType": "x", "observations": []}]
    )
    assert "not a lesson" in await error_of(client, "update_lesson", name="CONFIG_MISSING_AGAIN", severity="low")


async def test_a_lesson_made_again_under_a_deleted_name_learns_nothing_from_the_old_lookups(client: Client) -> None:
    await call(client, "create_lesson", lesson=PORT)
    await call(client, "find_similar_errors", errorPattern=PORT["errorPattern"])
    await call(client, "delete_entities", entityNames=["NODE_EADDRINUSE"])
    await call(client, "create_lesson", lesson={**PIP, "name": "NODE_EADDRINUSE"})
    updated = await call(client, "update_lesson_success", lessonName="NODE_EADDRINUSE", success=True)
    assert updated["lesson"]["aliases"] == []
    # Aliases can be replaced (or cleared) by hand.
    edited = await call(client, "update_lesson", name="NODE_EADDRINUSE", aliases=["No matching distribution for x"])
    assert edited["aliases"] == ["No matching distribution for x"]
    assert (await call(client, "update_lesson", name="NODE_EADDRINUSE", aliases=[]))["aliases"] == []
