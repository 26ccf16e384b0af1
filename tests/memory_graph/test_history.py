"""History and edits through MCP in process: update, rename, merge, get_history, restore; across restarts, with two
stores on the same files, and refused calls that change nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memory_graph.server import build_app
from tests.conftest import FILES_ONLY, open_services
from tests.memory_graph.test_server import settings_for

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("each_engine")]
HISTORY_TOOLS = {
    "update_observations",
    "rename_entity",
    "merge_entities",
    "get_history",
    "restore_entity",
    "find_duplicates",
}


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    if tool in HISTORY_TOOLS:  # the nine keep the reference's text (a bare list for creates)
        assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    return str(result.content[0].text)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.suffix == ".json"}


async def seed(client: Client) -> None:
    await call(
        client,
        "create_entities",
        entities=[
            {"name": "Alice", "entityType": "person", "observations": ["lives in Paris", "likes tea"]},
            {"name": "Acme", "entityType": "company", "observations": ["makes anvils"]},
            {"name": "Bob", "entityType": "person", "observations": []},
        ],
    )
    await call(
        client,
        "create_relations",
        relations=[
            {"from": "Alice", "to": "Acme", "relationType": "works_at"},
            {"from": "Bob", "to": "Alice", "relationType": "knows"},
        ],
    )


@pytest.fixture
async def client(tmp_path: Path):
    async with Client(build_app(settings_for(tmp_path)).server) as connected:
        await seed(connected)
        yield connected


async def test_update_replaces_in_place_and_keeps_the_old_text_in_history_only(client: Client) -> None:
    update = {"entityName": "Alice", "old": "lives in Paris", "new": "lives in Lyon"}
    assert await call(client, "update_observations", updates=[update]) == {"updated": [update]}
    alice = (await call(client, "open_nodes", names=["Alice"]))["entities"][0]
    assert alice["observations"] == ["lives in Lyon", "likes tea"]
    assert (await call(client, "search_nodes", query="Paris"))["entities"] == []
    event = (await call(client, "get_history", name="Alice", limit=1))["events"][0]
    assert event["op"] == "update_observations"
    [superseded] = event["superseded"]
    assert superseded["old"] == "lives in Paris" and superseded["new"] == "lives in Lyon"
    assert superseded["statedAt"] <= event["at"] and event["at"].endswith("Z")
    assert event["before"]["observations"] == ["lives in Paris", "likes tea"]


async def test_refused_calls_name_each_problem_and_change_no_byte(client: Client, tmp_path: Path) -> None:
    before = files(tmp_path)
    message = await refused(
        client,
        "update_observations",
        updates=[
            {"entityName": "Nobody", "old": "x", "new": "y"},
            {"entityName": "Alice", "old": "lives in Rome", "new": "y"},
            {"entityName": "Alice", "old": "likes tea", "new": "likes coffee"},
        ],
    )
    assert "Nobody" in message and "lives in Rome" in message
    assert "Bob" in await refused(client, "rename_entity", name="Alice", newName="Bob")
    assert "Ghost" in await refused(client, "merge_entities", names=["Alice", "Ghost"], into="Alice")
    assert "exists" in await refused(client, "restore_entity", name="Alice")
    assert "never deleted" in await refused(client, "restore_entity", name="Nobody")
    assert files(tmp_path) == before


async def test_rename_moves_every_relation(client: Client) -> None:
    result = await call(client, "rename_entity", name="Alice", newName="Alice Martin")
    assert result == {"name": "Alice", "newName": "Alice Martin", "relationsUpdated": 2}
    graph = await call(client, "read_graph")
    assert "Alice" not in {e["name"] for e in graph["entities"]}
    assert sorted((r["from"], r["to"]) for r in graph["relations"]) == [
        ("Alice Martin", "Acme"),
        ("Bob", "Alice Martin"),
    ]
    events = (await call(client, "get_history", name="Alice Martin"))["events"]
    assert any(e["op"] == "create_entities" and e["entity"] == "Alice" for e in events)  # followed the rename


async def test_merge_moves_observations_and_relations_and_drops_self_relations(client: Client) -> None:
    await call(client, "create_relations", relations=[{"from": "Bob", "to": "Acme", "relationType": "works_at"}])
    result = await call(client, "merge_entities", names=["Alice", "Bob"], into="A. Person")
    assert result["into"] == {
        "name": "A. Person",
        "entityType": "person",
        "observations": ["lives in Paris", "likes tea"],
    }
    assert result["merged"] == ["Alice", "Bob"]
    assert result["relationsDropped"] == 2  # Bob knows Alice became a self-relation; works_at Acme twice
    graph = await call(client, "read_graph")
    assert sorted(e["name"] for e in graph["entities"]) == ["A. Person", "Acme"]
    assert graph["relations"] == [{"from": "A. Person", "to": "Acme", "relationType": "works_at"}]
    names = {e["entity"] for e in (await call(client, "get_history", name="A. Person", limit=100))["events"]}
    assert {"Alice", "Bob", "A. Person"} <= names


async def test_restore_brings_back_a_deleted_entity_with_relations_whose_end_exists(client: Client) -> None:
    await call(client, "delete_entities", entityNames=["Alice"])
    await call(client, "delete_entities", entityNames=["Acme"])
    restored = await call(client, "restore_entity", name="Alice")
    assert restored["entity"]["observations"] == ["lives in Paris", "likes tea"]
    assert restored["relations"] == [{"from": "Bob", "to": "Alice", "relationType": "knows"}]
    assert restored["skippedRelations"] == [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]
    assert len((await call(client, "read_graph"))["relations"]) == 1


async def test_a_restored_relation_follows_its_other_end_to_the_name_it_has_now(client: Client) -> None:
    await call(client, "create_entities", entities=[{"name": "Acme", "entityType": "org", "observations": []}])
    await call(client, "create_relations", relations=[{"from": "Alice", "to": "Acme", "relationType": "works_at"}])
    await call(client, "delete_entities", entityNames=["Alice"])
    await call(client, "rename_entity", name="Acme", newName="Acme Corp")
    restored = await call(client, "restore_entity", name="Alice")
    assert {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"} in restored["relations"]
    assert not [r for r in restored["skippedRelations"] if "Acme" in (r["from"], r["to"])]


async def test_restore_at_a_moment_before_a_rename_gives_that_state_under_the_name_it_has_now(client: Client) -> None:
    """get_history of a renamed entity shows its past under the old name; restoring at one of those moments said
    "no history before" (and restoring the old name made a second entity)."""
    [created] = [e for e in (await call(client, "get_history", name="Alice"))["events"] if e["op"] == "create_entities"]
    await anyio.sleep(0.005)
    await call(client, "rename_entity", name="Alice", newName="Alice Martin")
    await call(client, "add_observations", observations=[{"entityName": "Alice Martin", "contents": ["moved"]}])
    restored = await call(client, "restore_entity", name="Alice Martin", at=created["at"])
    assert restored["entity"] == {
        "name": "Alice Martin",
        "entityType": "person",
        "observations": ["lives in Paris", "likes tea"],
    }
    graph = await call(client, "read_graph")
    assert [e["name"] for e in graph["entities"] if e["name"].startswith("Alice")] == ["Alice Martin"]
    # A name that held an entity of its own at that moment gives that one, not the renamed entity's past.
    await call(client, "create_entities", entities=[{"name": "Alice", "entityType": "cat", "observations": ["purrs"]}])
    cat = next(e for e in (await call(client, "get_history", name="Alice"))["events"] if e["op"] == "create_entities")
    await anyio.sleep(0.005)
    assert (await call(client, "restore_entity", name="Alice", at=cat["at"]))["entity"]["entityType"] == "cat"


async def test_restore_at_a_moment_returns_an_earlier_state(client: Client) -> None:
    moment = (await call(client, "get_history", name="Alice", limit=1))["events"][0]["at"]
    await call(client, "add_observations", observations=[{"entityName": "Alice", "contents": ["new fact"]}])
    restored = await call(client, "restore_entity", name="Alice", at=moment)
    assert restored["entity"]["observations"] == ["lives in Paris", "likes tea"]
    assert "time" in await refused(client, "restore_entity", name="Alice", at="yesterday")


async def test_restore_at_the_moment_get_history_shows_brings_back_that_version(client: Client) -> None:
    """An event's `at` is its id's time to the millisecond: restoring at it gives the state that event made, not
    the one before (the cutoff was the first nanosecond of that millisecond, before the event's own id)."""
    for fact in ("v1", "v2", "v3"):
        await anyio.sleep(0.005)  # (each edit in a millisecond of its own)
        await call(client, "add_observations", observations=[{"entityName": "Alice", "contents": [fact]}])
    edits = [e for e in (await call(client, "get_history", name="Alice"))["events"] if e["op"] == "add_observations"]
    for event, kept in zip(reversed(edits), (["v1"], ["v1", "v2"], ["v1", "v2", "v3"]), strict=True):
        restored = await call(client, "restore_entity", name="Alice", at=event["at"])
        assert restored["entity"]["observations"] == ["lives in Paris", "likes tea", *kept], event
    [created] = [e for e in (await call(client, "get_history", name="Alice"))["events"] if e["op"] == "create_entities"]
    restored = await call(client, "restore_entity", name="Alice", at=created["at"])
    assert restored["entity"]["observations"] == ["lives in Paris", "likes tea"]


async def test_an_entity_that_later_takes_an_old_name_is_not_in_the_renamed_ones_history(client: Client) -> None:
    """A rename or a merge links the old name's past to the new name up to the move; a new entity that later takes
    the old name is another entity, and its events were listed (and counted) as the renamed one's."""
    await call(client, "rename_entity", name="Alice", newName="Alice Martin")
    await call(client, "create_entities", entities=[{"name": "Alice", "entityType": "cat", "observations": ["purrs"]}])
    history = await call(client, "get_history", name="Alice Martin")
    assert "purrs" not in json.dumps(history, ensure_ascii=False)
    assert [e["op"] for e in history["events"]][:1] == ["rename_entity"]
    # The old entity's own past is still there, up to the rename.
    assert "create_entities" in [e["op"] for e in history["events"]]


async def test_a_superseded_fact_is_dated_when_it_was_stated_not_when_its_entity_was_renamed(client: Client) -> None:
    created = [e for e in (await call(client, "get_history", name="Alice"))["events"] if e["op"] == "create_entities"]
    await anyio.sleep(0.005)
    await call(client, "rename_entity", name="Alice", newName="Alice Martin")
    update = {"entityName": "Alice Martin", "old": "lives in Paris", "new": "lives in Lyon"}
    await call(client, "update_observations", updates=[update])
    [edit] = [e for e in (await call(client, "get_history", name="Alice Martin"))["events"] if e.get("superseded")]
    assert edit["superseded"][0]["statedAt"] == created[0]["at"]


async def test_a_mistyped_name_without_its_accent_is_suggested_and_errors_show_text_as_written(
    client: Client,
) -> None:
    await call(
        client, "create_entities", entities=[{"name": "Zoë", "entityType": "person", "observations": ["住在東京"]}]
    )
    suggested = await refused(client, "rename_entity", name="Zoe", newName="Zoey")
    assert 'Did you mean "Zoë"?' in suggested
    update = {"entityName": "Zoë", "old": "住在大阪", "new": "x"}
    assert '"住在大阪"' in await refused(client, "update_observations", updates=[update])


async def test_whole_history_is_newest_first_and_since_filters(client: Client) -> None:
    history = await call(client, "get_history")
    assert history["total"] == 5
    stamps = [e["at"] for e in history["events"]]
    assert stamps == sorted(stamps, reverse=True)
    assert (await call(client, "get_history", since="2999-01-01T00:00:00Z")) == {"events": [], "total": 0}
    assert len((await call(client, "get_history", limit=2))["events"]) == 2


async def test_an_edit_says_which_observations_it_added_and_removed(client: Client) -> None:
    await call(client, "add_observations", observations=[{"entityName": "Alice", "contents": ["owns a cat"]}])
    await call(client, "delete_observations", deletions=[{"entityName": "Alice", "observations": ["likes tea"]}])
    deleted, added, *older = (await call(client, "get_history", name="Alice"))["events"]
    assert deleted["observationsRemoved"] == ["likes tea"] and "observationsAdded" not in deleted
    assert added["observationsAdded"] == ["owns a cat"] and "observationsRemoved" not in added
    [created] = [e for e in older if e["op"] == "create_entities"]
    assert "observationsAdded" not in created and created["after"]["observations"]  # `after` says it all


async def test_the_history_of_a_large_entity_fits_the_response_budget(tmp_path: Path) -> None:
    """Every event holds its record before and after: five edits of an entity of 2,000 observations were 2.7 MB
    of response. Events are cut to the budget, and an edit too large for it comes with what it changed only."""
    async with Client(build_app(settings_for(tmp_path, MEMORY_MAX_RESPONSE_CHARS="3000")).server) as client:
        facts = [f"fact {i:02d}: a sentence of ordinary length" for i in range(40)]  # the record: about 1.9 KB
        await call(
            client, "create_entities", entities=[{"name": "User", "entityType": "person", "observations": facts}]
        )
        for k in range(3):
            await call(client, "add_observations", observations=[{"entityName": "User", "contents": [f"new {k}"]}])
        result = await client.call_tool("get_history", {"name": "User"})
        history = result.structured_content
        assert history is not None and len(result.content[0].text) <= 3000
        assert history["total"] == 4
        events = history["events"]
        assert [e.get("observationsAdded") for e in events] == [["new 2"], ["new 1"], ["new 0"], None]
        assert events[3]["op"] == "create_entities"  # told by its op
        assert all(e["recordsOmitted"] and "before" not in e and "after" not in e for e in events)
        assert history["truncated"]["returnedEvents"] == 4 and history["truncated"]["withoutRecords"] == 4
        assert "limit" in history["truncated"]["hint"]
        small = (await call(client, "get_history", name="User", limit=1))["events"]
        assert small[0]["recordsOmitted"]  # one edit of 2 x 1.9 KB is over 3,000 characters too
        # A creation or a deletion too large for the budget comes without its records too, not as the cut of
        # every event older than it.
        big = [f"note {i:03d}: a sentence of ordinary length" for i in range(100)]  # about 4.6 KB
        await call(client, "create_entities", entities=[{"name": "Big", "entityType": "thing", "observations": big}])
        await call(client, "delete_entities", entityNames=["Big"])
        result = await client.call_tool("get_history", {"name": "Big"})
        history = result.structured_content
        assert history is not None and len(result.content[0].text) <= 3000
        assert [(e["op"], e["recordsOmitted"]) for e in history["events"]] == [
            ("delete_entities", True),
            ("create_entities", True),
        ]
    async with Client(build_app(settings_for(tmp_path)).server) as client:  # the default budget: 80,000
        history = await call(client, "get_history", name="User")
        assert "truncated" not in history and len(history["events"]) == 4
        assert history["events"][0]["after"]["observations"][-1] == "new 2"


async def test_history_survives_a_restart_and_is_shared_by_two_stores(tmp_path: Path) -> None:
    async with Client(build_app(settings_for(tmp_path)).server) as first:
        await seed(first)
        other = open_services(tmp_path)
        other.graph.delete_entities(["Bob"])  # a second store on the same files
        events = (await call(first, "get_history", name="Bob"))["events"]
        assert [e["op"] for e in events] == [
            "delete_entities",
            "delete_entities",
            "create_relations",
            "create_entities",
        ]
    async with Client(build_app(settings_for(tmp_path)).server) as again:
        assert (await call(again, "restore_entity", name="Bob"))["relations"] == [
            {"from": "Bob", "to": "Alice", "relationType": "knows"}
        ]
        assert (await call(again, "get_history", name="Bob", limit=1))["events"][0]["op"] == "restore_entity"
    assert other.history.get_history("Bob", limit=1).events[0].op == "restore_entity"


@FILES_ONLY
async def test_graph_files_keep_the_official_format(client: Client, tmp_path: Path) -> None:
    await call(client, "rename_entity", name="Bob", newName="Robert")
    for line in (tmp_path / "memory.json").read_text(encoding="utf-8").splitlines():
        assert json.loads(line)["type"] in ("entity", "relation")
    events = [json.loads(line) for line in (tmp_path / "history.json").read_text(encoding="utf-8").splitlines()]
    assert {e["type"] for e in events} == {"event"}


async def test_prompts_point_at_the_edit_tools(client: Client) -> None:
    personal = (await client.get_prompt("personalization", {})).messages[0].content.text
    assert "update_observations" in personal and "merge_entities" in personal and "restore_entity" in personal
    workflow = (await client.get_prompt("lesson-workflow", {})).messages[0].content.text
    assert "Update, don't delete and recreate" in workflow and "update_lesson" in workflow


async def test_find_duplicates_reads_punctuation_inside_words_and_plurals_at_the_end(client: Client) -> None:
    alike = [("O'Brien", "OBrien"), ("Wi-Fi", "WiFi"), ("Company", "Companies"), ("Box", "Boxes")]
    apart = [("Andreas Weber", "Andrea Weber"), ("Nicolas Martin", "Nicola Martin")]
    names = [name for pair in alike + apart for name in pair]
    entities = [{"name": name, "entityType": "thing", "observations": []} for name in names]
    await call(client, "create_entities", entities=entities)
    pairs = {tuple(d["names"]) for d in (await call(client, "find_duplicates"))["duplicates"]}
    assert set(alike) <= pairs and not set(apart) & pairs, pairs


async def test_find_duplicates_reports_look_alikes_with_a_reason(client: Client, tmp_path: Path) -> None:
    entities = [
        {"name": "J. Smith", "entityType": "person", "observations": []},
        {"name": "John Smith", "entityType": "person", "observations": []},
        {"name": "Café Zoë", "entityType": "place", "observations": []},
        {"name": "cafe zoe", "entityType": "place", "observations": []},
        {"name": "Anvils", "entityType": "product", "observations": []},
        {"name": "anvil", "entityType": "product", "observations": []},
        {"name": "J. Smithers", "entityType": "person", "observations": []},
    ]
    await call(client, "create_entities", entities=entities)
    before = files(tmp_path)
    found = (await call(client, "find_duplicates"))["duplicates"]
    pairs = {tuple(d["names"]) for d in found}
    assert pairs == {("J. Smith", "John Smith"), ("Café Zoë", "cafe zoe"), ("Anvils", "anvil")}
    assert all(d["reason"] for d in found)
    assert len((await call(client, "find_duplicates", limit=1))["duplicates"]) == 1
    assert files(tmp_path) == before
