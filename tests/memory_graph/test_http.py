"""Streamable HTTP: the SDK's client over real HTTP, the bearer token, and the refusal to bind openly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOKEN = "s3cret-token-for-tests"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def serve(folder: Path, *args: str, token: str | None = TOKEN) -> subprocess.Popen[str]:
    env = {**os.environ, "MEMORY_FILE_PATH": str(folder / "memory.json")}
    env.pop("MEMORY_AUTH_TOKEN", None)
    if token:
        env["MEMORY_AUTH_TOKEN"] = token
    return subprocess.Popen(
        [sys.executable, "-m", "memory_graph", "--transport", "http", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = serve(tmp_path, "--port", str(port))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"the HTTP server did not start: {process.communicate()[1]}")
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.communicate(timeout=10)


@asynccontextmanager
async def client_for(url: str, token: str = TOKEN) -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


@pytest.mark.anyio
async def test_the_sdk_client_works_over_http_with_the_token(server: str) -> None:
    async with client_for(server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"create_entities", "search_nodes", "find_similar_errors"} <= tools
        created = await client.call_tool(
            "create_entities", {"entities": [{"name": "Alice", "entityType": "person", "observations": ["x"]}]}
        )
        assert not created.is_error
        found = await client.call_tool("search_nodes", {"query": "alice"})
        assert [e["name"] for e in found.structured_content["entities"]] == ["Alice"]


@pytest.mark.anyio
async def test_several_http_clients_share_one_server_safely(server: str) -> None:
    async def writer(worker: int) -> None:
        async with client_for(server) as client:
            for i in range(15):
                entity = {"name": f"w{worker}-{i}", "entityType": "t", "observations": []}
                result = await client.call_tool("create_entities", {"entities": [entity]})
                assert not result.is_error
                shared = [{"entityName": "shared", "contents": [f"w{worker}-{i}"]}]
                assert not (await client.call_tool("add_observations", {"observations": shared})).is_error

    async with client_for(server) as client:
        await client.call_tool(
            "create_entities", {"entities": [{"name": "shared", "entityType": "t", "observations": []}]}
        )
    async with anyio.create_task_group() as group:
        for worker in range(4):
            group.start_soon(writer, worker)
    async with client_for(server) as client:
        graph = (await client.call_tool("read_graph", {})).structured_content
    names = {e["name"] for e in graph["entities"]}
    assert names == {"shared"} | {f"w{w}-{i}" for w in range(4) for i in range(15)}
    shared = next(e for e in graph["entities"] if e["name"] == "shared")
    assert len(shared["observations"]) == 60


def raw_post(url: str, headers: dict[str, str]) -> tuple[int, dict]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, {}
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"{}")


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}],
)
def test_requests_without_the_right_token_get_401(server: str, headers: dict[str, str]) -> None:
    status, body = raw_post(server, {"Accept": "application/json, text/event-stream", **headers})
    assert status == 401
    assert "Bearer" in body["message"]


def test_binding_a_public_address_without_a_token_is_refused(tmp_path: Path) -> None:
    process = serve(tmp_path, "--host", "0.0.0.0", "--port", str(free_port()), token=None)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode != 0
    assert "MEMORY_AUTH_TOKEN" in stderr and "0.0.0.0" in stderr
