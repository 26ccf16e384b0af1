"""The stdio transport as a client sees it: a real `python -m memory_graph` fed raw JSON-RPC lines.

Every wait is bounded, so a server that stops answering fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0  # generous: a cold interpreter start on a slow runner
STOP_TIMEOUT = 5.0
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def line(message: dict[str, Any] | str) -> str:
    return (message if isinstance(message, str) else json.dumps(message)) + "\n"


def server_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_") and k != "LESSON_FILE_PATH"}
    return {**env, "MEMORY_FILE_PATH": str(folder / "memory.json"), "PYTHONPATH": str(ROOT)}


class Server:
    """A server process whose stdout lines are collected by a thread, so reads can time out."""

    def __init__(self, folder: Path, env: dict[str, str] | None = None, name: str = "stderr") -> None:
        self.stderr_path = folder / f"{name}.txt"
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "memory_graph"],
                cwd=ROOT,
                env=env or server_env(folder),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
            )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._collector = threading.Thread(target=self._collect, args=(self.process.stdout,), daemon=True)
        self._collector.start()

    def _collect(self, stdout: IO[str]) -> None:
        for received in stdout:
            self._lines.put(received)
        self._lines.put(None)

    def send(self, *messages: dict[str, Any] | str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("".join(line(m) for m in messages))
        self.process.stdin.flush()

    def receive(self) -> dict[str, Any]:
        try:
            received = self._lines.get(timeout=TIMEOUT)
        except queue.Empty:
            pytest.fail(f"no answer within {TIMEOUT}s; stderr: {self.stderr()}")
        assert received is not None, f"stdout closed; stderr: {self.stderr()}"
        message: dict[str, Any] = json.loads(received)
        return message

    def answer(self, request_id: int | None) -> dict[str, Any]:
        while "id" not in (message := self.receive()) or message["id"] != request_id:
            pass  # a notification, or another request's answer
        return message

    def initialize(self) -> None:
        self.send(INITIALIZE)
        assert self.answer(0)["result"]["protocolVersion"] == "2025-06-18"
        self.send(INITIALIZED)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=TIMEOUT)
        self._collector.join(timeout=TIMEOUT)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    started = Server(tmp_path)
    yield started
    started.close()


def test_a_line_that_is_not_json_gets_a_parse_error_and_later_requests_are_still_answered(server: Server) -> None:
    server.initialize()
    server.send('{"jsonrpc": "2.0", "id": 1, "method": ')
    error = server.answer(None)["error"]
    assert error["code"] == -32700
    assert error["message"].startswith("Parse error") and "one JSON-RPC message per line" in error["message"]
    server.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert "create_entities" in {tool["name"] for tool in server.answer(2)["result"]["tools"]}


def test_a_lone_surrogate_escape_is_answered_and_stored_as_the_replacement_character(
    server: Server, tmp_path: Path
) -> None:
    server.initialize()
    # Written by hand: json.dumps would not produce a lone surrogate escape from a Python str we could type here.
    observations = r'["cut \ud800 here", "upper \uD800", "pair \ud83d\ude00 kept", "literal \\ud800 kept"]'
    server.send(
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "create_entities", '
        f'"arguments": {{"entities": [{{"name": "cut", "entityType": "note", "observations": {observations}}}]}}}}}}'
    )
    created = server.answer(1)
    assert "error" not in created and not created["result"]["isError"]
    server.send(tool_call(2, "read_graph", {}))
    entities = server.answer(2)["result"]["structuredContent"]["entities"]
    expected = ["cut \ufffd here", "upper \ufffd", "pair \U0001f600 kept", "literal \\ud800 kept"]
    assert entities == [{"name": "cut", "entityType": "note", "observations": expected}]
    stored = "".join(p.read_bytes().decode("utf-8") for p in tmp_path.glob("memory*.json"))  # strict UTF-8
    assert "cut \ufffd here" in stored


def run_to_the_end(env: dict[str, str], stdin: str) -> subprocess.CompletedProcess[str]:
    """`python -m memory_graph` given all of its input at once, run until it exits."""
    return subprocess.run(
        [sys.executable, "-m", "memory_graph"],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=TIMEOUT,
    )


def test_requests_piped_in_before_stdin_closes_are_all_answered(tmp_path: Path) -> None:
    calls = [
        tool_call(i, "create_entities", {"entities": [{"name": f"e{i}", "entityType": "t", "observations": []}]})
        for i in range(1, 6)
    ]
    finished = run_to_the_end(server_env(tmp_path), "".join(line(m) for m in [INITIALIZE, INITIALIZED, *calls]))
    assert finished.returncode == 0, finished.stderr
    answers = {m["id"]: m for m in map(json.loads, finished.stdout.splitlines()) if "id" in m}
    assert sorted(answers) == [0, 1, 2, 3, 4, 5], finished.stderr
    assert all("result" in answers[i] and not answers[i]["result"]["isError"] for i in range(1, 6))


def test_a_request_whose_id_is_neither_an_integer_nor_a_string_is_answered_as_invalid(tmp_path: Path) -> None:
    """pydantic reads `"id": 1.5` (or true, or null) as a notification's extra field: nobody answered it, and a
    client that wrote a float id waited for ever."""
    odd_ids = [
        '{"jsonrpc": "2.0", "id": ' + value + ', "method": "ping"}\n' for value in ("1.5", "1.0", "true", "null")
    ]
    finished = run_to_the_end(
        server_env(tmp_path), line(INITIALIZE) + "".join(odd_ids) + line({"jsonrpc": "2.0", "id": 9, "method": "ping"})
    )
    assert finished.returncode == 0, finished.stderr
    answers = [json.loads(x) for x in finished.stdout.splitlines()]
    # (An invalid line is answered by the transport itself: it may come before initialize's answer.)
    assert sorted(-1 if a["id"] is None else a["id"] for a in answers) == [-1, -1, -1, -1, 0, 9], answers
    for invalid in (a for a in answers if a["id"] is None):
        assert invalid["error"]["code"] == -32600 and "integer or a string" in invalid["error"]["message"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    ("signum", "exit_codes"), [(signal.SIGINT, {0, 130}), (signal.SIGTERM, {0})], ids=["SIGINT", "SIGTERM"]
)
def test_a_signal_stops_an_idle_server_promptly_and_quietly(
    server: Server, signum: signal.Signals, exit_codes: set[int]
) -> None:
    server.initialize()  # the answer proves the server is serving, so its signal handling is in place
    server.process.send_signal(signum)
    try:
        returncode = server.process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {STOP_TIMEOUT}s after {signum.name}")
    assert returncode in exit_codes
    assert "Traceback" not in server.stderr()
