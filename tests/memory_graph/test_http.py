"""Streamable HTTP: the SDK's client over real HTTP, the bearer token, and the refusal to bind openly."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
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

from memory_graph.config import Settings
from memory_graph.http import HEADER_TIMEOUT, KEEP_ALIVE_TIMEOUT, http_server
from memory_graph.server import build_app

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


def wait_for_port(process: subprocess.Popen[str], port: int, seconds: float = 20) -> None:
    """Until the spawned server accepts connections on the port (failing with its stderr if it exits)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if process.poll() is not None:
                pytest.fail(f"the HTTP server did not start: {process.communicate()[1]}")
            time.sleep(0.05)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = serve(tmp_path, "--port", str(port))
    wait_for_port(process, port)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.communicate(timeout=10)


@asynccontextmanager
async def client_for(url: str, token: str = TOKEN, scheme: str = "Bearer") -> AsyncIterator[Client]:
    async with (
        create_mcp_http_client(headers={"Authorization": f"{scheme} {token}"}) as http,
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


@pytest.mark.anyio
@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR", "Bearer "])
async def test_the_scheme_is_case_insensitive(server: str, scheme: str) -> None:
    # RFC 7235: the auth scheme is a case-insensitive token, followed by one or more spaces.
    async with client_for(server, scheme=scheme) as client:
        assert not (await client.call_tool("read_graph", {})).is_error


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "bearer wrong"},
        {"Authorization": TOKEN},
        {"Authorization": f"Bearer{TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": f"Bearer {TOKEN.upper()}"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearerx {TOKEN}"},
    ],
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


# Slow clients. A server in this process, so the bounds can be short: one second for the headers, one for idling.
BOUND = 1.0
MARGIN = 4.0  # a loaded runner may fire a timer late; a server that never closes fails all the same


@pytest.fixture
def quick_server(tmp_path: Path) -> Iterator[int]:
    settings = Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "memory.json")}, cwd=tmp_path)
    port = free_port()
    server = http_server(build_app(settings), "127.0.0.1", port, header_timeout=BOUND, keep_alive_timeout=1)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the HTTP server did not start"
        time.sleep(0.02)
    yield port
    server.should_exit = True
    thread.join(timeout=10)
    assert not thread.is_alive()


def closed_after(connection: socket.socket) -> float:
    """Seconds until the server closes the connection (reading and dropping anything it sends first)."""
    started = time.monotonic()
    connection.settimeout(BOUND + MARGIN)
    try:
        while connection.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for more than {BOUND + MARGIN}s")
    return time.monotonic() - started


def test_a_connection_that_sends_nothing_is_closed(quick_server: int) -> None:
    with socket.create_connection(("127.0.0.1", quick_server)) as connection:
        assert closed_after(connection) >= BOUND * 0.8


@pytest.mark.parametrize(
    "partial",
    [b"POST /mc", b"POST /mcp HTTP/1.1\r\n", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"],
)
def test_a_request_whose_headers_never_end_is_closed(quick_server: int, partial: bytes) -> None:
    with socket.create_connection(("127.0.0.1", quick_server)) as connection:
        connection.sendall(partial)
        assert closed_after(connection) >= BOUND * 0.8


def test_a_request_whose_body_never_comes_is_closed(quick_server: int) -> None:
    with socket.create_connection(("127.0.0.1", quick_server)) as connection:
        connection.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"jsonrpc"'
        )
        assert closed_after(connection) >= BOUND * 0.5


def test_headers_trickled_a_byte_at_a_time_do_not_extend_the_deadline(quick_server: int) -> None:
    header = b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", quick_server)) as connection:
        try:
            for byte in header:
                connection.sendall(bytes([byte]))
                time.sleep(0.05)
                assert time.monotonic() - started < BOUND + MARGIN, "still open while bytes keep arriving"
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed mid-trickle: what should happen
        else:
            pytest.fail("all 1,000+ bytes were accepted one at a time")
    assert time.monotonic() - started >= BOUND * 0.8


def response_head(connection: socket.socket) -> bytes:
    connection.settimeout(10)
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(4096)
        assert chunk, f"closed before a whole response head arrived: {received!r}"
        received += chunk
    return received


def test_a_prompt_request_is_answered_and_the_idle_connection_then_closed(quick_server: int) -> None:
    with socket.create_connection(("127.0.0.1", quick_server)) as connection:
        connection.sendall(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert response_head(connection).startswith(b"HTTP/1.1 404")
        assert closed_after(connection) >= 0.5


def test_the_next_request_on_a_kept_alive_connection_has_the_same_deadline(quick_server: int) -> None:
    with socket.create_connection(("127.0.0.1", quick_server)) as connection:
        connection.sendall(b"GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert response_head(connection).startswith(b"HTTP/1.1 404")
        # Bytes of a next request stop uvicorn's keep-alive timer; the header deadline still holds.
        connection.sendall(b"GET /nowhere HTTP/1.1\r\nHost")
        assert closed_after(connection) >= BOUND * 0.8


def test_the_cli_server_uses_the_default_bounds(tmp_path: Path) -> None:
    settings = Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "memory.json")}, cwd=tmp_path)
    config = http_server(build_app(settings), "127.0.0.1", free_port()).config
    assert 10 <= HEADER_TIMEOUT <= 30 and config.http.header_timeout == HEADER_TIMEOUT  # type: ignore[union-attr]
    assert config.timeout_keep_alive == KEEP_ALIVE_TIMEOUT
