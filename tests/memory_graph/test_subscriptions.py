"""resources/subscribe on memory://knowledge-graph: a subscriber hears about every change, as with the
official server, including changes another process makes to the shared files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.types import ResourceUpdatedNotification

from memory_graph.model import Entity
from memory_graph.server import build_app
from memory_graph.subscriptions import GRAPH_URI
from tests.conftest import open_graph, settings_in

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("each_engine")]


async def test_a_subscriber_is_told_of_changes_from_this_and_other_processes(tmp_path: Path) -> None:
    updates: list[str] = []
    arrived = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            arrived.set()

    app = build_app(settings_in(tmp_path))
    app.start_loading()  # also watches for other processes' changes while anyone is subscribed
    async with Client(app.server, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.resources.subscribe is True
        with pytest.warns(MCPDeprecationWarning):  # the handshake-era method, which the official server uses
            await client.subscribe_resource(GRAPH_URI)
        entity = {"name": "Alice", "entityType": "person", "observations": []}
        assert not (await client.call_tool("create_entities", {"entities": [entity]})).is_error
        with anyio.fail_after(5):
            await arrived.wait()
        assert updates == [GRAPH_URI]

        arrived = anyio.Event()
        other_process = open_graph(tmp_path, shard_lines=1000)
        other_process.create_entities([Entity(name="Bob", entityType="person", observations=[])])
        with anyio.fail_after(5):  # no call from this client: an idle subscriber is told too
            await arrived.wait()
        assert updates == [GRAPH_URI, GRAPH_URI]

        with pytest.warns(MCPDeprecationWarning):
            await client.unsubscribe_resource(GRAPH_URI)
        await client.call_tool("create_entities", {"entities": [{**entity, "name": "Carol"}]})
        await anyio.sleep(0.2)
        assert len(updates) == 2, updates
    app.subscriptions.stop()


async def test_a_listener_of_protocol_2026_07_28_is_told_of_changes_from_this_and_other_processes(
    tmp_path: Path,
) -> None:
    """From 2026-07-28 a client listens (subscriptions/listen), and the SDK drops an updated notification sent on
    the connection: the change must go out on the server's subscription bus, or such a client never hears of it."""
    app = build_app(settings_in(tmp_path))
    app.start_loading()
    async with Client(app.server, mode="2026-07-28") as client:
        async with client.listen(resource_subscriptions=[GRAPH_URI]) as events:
            entity = {"name": "Alice", "entityType": "person", "observations": []}
            assert not (await client.call_tool("create_entities", {"entities": [entity]})).is_error
            with anyio.fail_after(5):
                assert (await events.__anext__()).uri == GRAPH_URI
            other_process = open_graph(tmp_path, shard_lines=1000)
            other_process.create_entities([Entity(name="Bob", entityType="person", observations=[])])
            with anyio.fail_after(5):  # no call from this client: an idle listener is told too
                assert (await events.__anext__()).uri == GRAPH_URI
        with anyio.fail_after(5):  # the stream ended (its handler is cancelled): nothing left to poll for
            while app.subscriptions.bus.listening():
                await anyio.sleep(0.05)
    app.subscriptions.stop()


async def test_a_subscription_is_forgotten_when_its_connection_ends(tmp_path: Path) -> None:
    """A notification to an ended session (an HTTP session deleted) does not fail: without the connection's end,
    every subscription ever made was notified at every write, and kept the watch thread polling."""
    app = build_app(settings_in(tmp_path))
    for _ in range(3):
        async with Client(app.server, mode="legacy") as client:
            with pytest.warns(MCPDeprecationWarning):
                await client.subscribe_resource(GRAPH_URI)
            assert app.subscriptions.subscribers() == 1
    assert app.subscriptions.subscribers() == 0


async def test_with_only_the_graph_tools_nothing_mentions_lessons(tmp_path: Path) -> None:
    settings = settings_in(tmp_path, MEMORY_TOOLS="graph")
    async with Client(build_app(settings).server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        instructions = client.instructions or ""
    assert len(tools) == 9 and "find_similar_errors" not in tools
    assert prompts == {"personalization"}
    assert "lesson" not in instructions.lower() and "search_nodes" in instructions
