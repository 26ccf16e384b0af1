"""MEMORY_SHARED_SERVER=on: stdio starts relayed to one shared server (launch.py, shared_server.py), as a client
sees them: real `python -m memory_graph` processes, real sockets, real signals."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from memory_graph.config import Settings
from memory_graph.launch import _cancelled_id, _request_id, _response_id, fingerprint, lock_of, shared_place
from memory_graph.server import build_app
from memory_graph.shared_server import Clients, _serve_client
from tests.conftest import alive, shared_pids
from tests.memory_graph.test_stdio import (
    INITIALIZE,
    INITIALIZED,
    ROOT,
    TIMEOUT,
    Server,
    line,
    run_to_the_end,
    server_env,
    tool_call,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets and signals")


def shared_env(folder: Path, runtime: Path, idle: int = 60, **extra: str) -> dict[str, str]:
    return {
        **server_env(folder),
        "MEMORY_SHARED_SERVER": "on",
        "MEMORY_SHARED_IDLE_SECONDS": str(idle),
        "MEMORY_SEMANTIC": "off",
        "XDG_RUNTIME_DIR": str(runtime),
        **extra,
    }


def zombies_of(parents: list[int]) -> list[int]:
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().split(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] == "Z" and int(fields[1]) in parents:
            found.append(int(stat_file.parent.name))
    return found


def wait_until(condition: object, what: str, limit: float = TIMEOUT) -> None:
    deadline = time.monotonic() + limit
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {limit} s")
        time.sleep(0.05)


def test_stdio_starts_share_one_server_and_see_each_others_writes(tmp_path: Path, shared_runtime: Path) -> None:
    env = shared_env(tmp_path, shared_runtime)
    first = Server(tmp_path, env, "first")
    second = None
    try:
        first.initialize()
        first.send(
            tool_call(1, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": []}]})
        )
        assert not first.answer(1)["result"]["isError"]
        second = Server(tmp_path, env, "second")
        second.initialize()
        second.send(tool_call(2, "open_nodes", {"names": ["Ada"]}))
        assert [e["name"] for e in second.answer(2)["result"]["structuredContent"]["entities"]] == ["Ada"]
        (server_pid,) = shared_pids(shared_runtime)
        assert server_pid not in (first.process.pid, second.process.pid)
        # The write went to the files, as a server of its own would have written it.
        assert "Ada" in (tmp_path / "memory.json").read_text(encoding="utf-8")
    finally:
        first.close()
        if second is not None:
            second.close()


def test_requests_piped_in_before_stdin_closes_are_all_answered_through_the_shared_server(
    tmp_path: Path, shared_runtime: Path
) -> None:
    for round_ in ("first", "second"):  # the first start launches the shared server, the second finds it running
        calls = [
            tool_call(
                i, "create_entities", {"entities": [{"name": f"{round_} {i}", "entityType": "t", "observations": []}]}
            )
            for i in range(1, 6)
        ]
        finished = run_to_the_end(
            shared_env(tmp_path, shared_runtime), "".join(line(m) for m in [INITIALIZE, INITIALIZED, *calls])
        )
        assert finished.returncode == 0, finished.stderr
        answers = {m["id"]: m for m in map(json.loads, finished.stdout.splitlines()) if "id" in m}
        assert sorted(answers) == [0, 1, 2, 3, 4, 5], finished.stderr
        assert all(not answers[i]["result"]["isError"] for i in range(1, 6))
    stored = (tmp_path / "memory.json").read_text(encoding="utf-8")
    assert all(f'"{round_} {i}"' in stored for round_ in ("first", "second") for i in range(1, 6))
    assert len(shared_pids(shared_runtime)) == 1


def test_a_request_the_shared_server_dies_before_answering_is_answered_with_an_error_and_the_next_start_replaces_it(
    tmp_path: Path, shared_runtime: Path
) -> None:
    env = shared_env(tmp_path, shared_runtime)
    client = Server(tmp_path, env, "client")
    try:
        client.initialize()
        client.send(
            tool_call(1, "create_entities", {"entities": [{"name": "kept", "entityType": "t", "observations": []}]})
        )
        assert not client.answer(1)["result"]["isError"]
        (server_pid,) = shared_pids(shared_runtime)
        os.kill(server_pid, signal.SIGSTOP)  # it reads nothing more, so the next request stays unanswered
        client.send(tool_call(2, "read_graph", {}))
        time.sleep(0.3)
        os.kill(server_pid, signal.SIGKILL)
        error = client.answer(2)["error"]
        assert "shared memory-graph server stopped before answering" in error["message"]
        assert client.process.wait(timeout=TIMEOUT) == 1
        wait_until(lambda: not alive(server_pid), "the killed server's end")
    finally:
        client.close()
    # Its socket is left behind; the next start finds nobody listening and starts a new server on the same files.
    assert list((shared_runtime / "memory-graph").glob("*.sock"))
    replacement = Server(tmp_path, env, "replacement")
    try:
        replacement.initialize()
        replacement.send(tool_call(3, "read_graph", {}))
        assert [e["name"] for e in replacement.answer(3)["result"]["structuredContent"]["entities"]] == ["kept"]
        assert shared_pids(shared_runtime) not in ([], [server_pid])
    finally:
        replacement.close()


def test_a_request_of_a_shared_server_killed_after_the_input_ended_is_answered_with_an_error(
    tmp_path: Path, shared_runtime: Path
) -> None:
    """A killed server's socket closes as cleanly as a server that has answered everything: only its farewell line
    tells the relay that nothing is left to answer."""
    # A memory whose load takes seconds: read_graph waits for it, its line read by the server (a line left unread
    # in the killed server's socket would make the close a reset, which the relay already took for its end).
    lines = (
        json.dumps({"type": "entity", "name": f"e{i}", "entityType": "t", "observations": []}) for i in range(200_000)
    )
    (tmp_path / "memory.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = shared_env(tmp_path, shared_runtime)
    client = Server(tmp_path, env, "client")
    try:
        client.initialize()
        (server_pid,) = shared_pids(shared_runtime)
        client.send(tool_call(1, "read_graph", {}))
        assert client.process.stdin is not None
        client.process.stdin.close()  # the input is over before the server ends
        time.sleep(0.5)
        os.kill(server_pid, signal.SIGKILL)
        assert "shared memory-graph server stopped before answering" in client.answer(1)["error"]["message"]
        assert client.process.wait(timeout=TIMEOUT) == 1
    finally:
        client.close()


def test_a_signal_stops_the_shared_server_while_its_clients_are_quiet(tmp_path: Path, shared_runtime: Path) -> None:
    """Closing a connection whose reading thread waits in a read used to wait for that read: one silent client kept
    the stopping server alive, answering nobody, until it spoke."""
    env = shared_env(tmp_path, shared_runtime)
    clients = [Server(tmp_path, env, f"client{i}") for i in range(2)]
    try:
        for client in clients:
            client.initialize()
        (server_pid,) = shared_pids(shared_runtime)
        os.kill(server_pid, signal.SIGTERM)
        wait_until(lambda: not alive(server_pid), "the shared server's end after SIGTERM", limit=10)
        for client in clients:
            assert client.process.wait(timeout=TIMEOUT) == 1  # told that the server closed the connection
    finally:
        for client in clients:
            client.close()


def test_a_line_nested_deeper_than_json_can_parse_is_relayed_and_later_requests_answered(
    tmp_path: Path, shared_runtime: Path
) -> None:
    """The relay reads each line's id with json.loads, which raises RecursionError past about 1,000 levels: that
    ended its reading thread, and every later request was lost."""
    deep = "[" * 3000 + "]" * 3000
    finished = run_to_the_end(
        shared_env(tmp_path, shared_runtime),
        line(INITIALIZE)
        + '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": '
        + deep
        + "}}\n"
        + line({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
    )
    assert finished.returncode == 0, finished.stderr
    answers = [json.loads(x) for x in finished.stdout.splitlines()]
    assert 2 in [a["id"] for a in answers] and "RecursionError" not in finished.stderr, finished.stderr


def test_the_shared_server_exits_after_its_idle_time_and_removes_its_socket(
    tmp_path: Path, shared_runtime: Path
) -> None:
    finished = run_to_the_end(shared_env(tmp_path, shared_runtime, idle=1), line(INITIALIZE))
    assert finished.returncode == 0 and '"result"' in finished.stdout, finished.stderr
    wait_until(lambda: not shared_pids(shared_runtime), "the idle server's exit")
    assert not list((shared_runtime / "memory-graph").glob("*.sock"))
    log = "".join(p.read_text() for p in (shared_runtime / "memory-graph").glob("*.log"))
    assert "no client for 1 s: exiting" in log and "Traceback" not in log


def test_first_starts_at_the_same_moment_end_up_on_one_shared_server(tmp_path: Path, shared_runtime: Path) -> None:
    env = shared_env(tmp_path, shared_runtime)
    clients = [Server(tmp_path, env, f"client{i}") for i in range(4)]
    try:
        for i, client in enumerate(clients):
            client.send(
                INITIALIZE,
                INITIALIZED,
                tool_call(
                    1, "create_entities", {"entities": [{"name": f"from {i}", "entityType": "t", "observations": []}]}
                ),
            )
        for client in clients:
            assert not client.answer(1)["result"]["isError"], client.stderr()
        assert len(shared_pids(shared_runtime)) == 1
        # The servers that lost the race were reaped, not left as zombies under their clients.
        wait_until(lambda: not zombies_of([c.process.pid for c in clients]), "the losing servers' reaping")
        clients[0].send(tool_call(2, "read_graph", {}))
        names = {e["name"] for e in clients[0].answer(2)["result"]["structuredContent"]["entities"]}
        assert names == {f"from {i}" for i in range(4)}
    finally:
        for client in clients:
            client.close()


def test_another_configuration_gets_a_shared_server_of_its_own(tmp_path: Path, shared_runtime: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Server(tmp_path, shared_env(tmp_path / "a", shared_runtime), "a")
    second = Server(tmp_path, shared_env(tmp_path / "b", shared_runtime), "b")
    try:
        first.initialize()
        second.initialize()
        first.send(
            tool_call(
                1, "create_entities", {"entities": [{"name": "only in a", "entityType": "t", "observations": []}]}
            )
        )
        assert not first.answer(1)["result"]["isError"]
        second.send(tool_call(2, "read_graph", {}))
        assert second.answer(2)["result"]["structuredContent"]["entities"] == []
        assert len(shared_pids(shared_runtime)) == 2
    finally:
        first.close()
        second.close()


def test_invalid_settings_are_reported_as_a_start_without_sharing_reports_them(
    tmp_path: Path, shared_runtime: Path
) -> None:
    finished = run_to_the_end(shared_env(tmp_path, shared_runtime, MEMORY_SHARD_LINES="many"), "")
    assert finished.returncode == 2
    assert "MEMORY_SHARD_LINES='many' is not a whole number" in finished.stderr
    assert not (shared_runtime / "memory-graph").exists()


def test_a_socket_folder_other_users_can_use_is_refused_and_the_start_serves_itself(
    tmp_path: Path, shared_runtime: Path
) -> None:
    shared = shared_runtime / "memory-graph"
    shared.mkdir()
    shared.chmod(0o777)
    client = Server(tmp_path, shared_env(tmp_path, shared_runtime), "client")
    try:
        client.initialize()
        client.send(tool_call(1, "read_graph", {}))
        assert client.answer(1)["result"]["structuredContent"]["entities"] == []
        assert "can be used by other users (mode 777; run: chmod 700" in client.stderr()
        assert not list(shared.iterdir())
    finally:
        client.close()


def test_the_launcher_imports_neither_the_sdk_nor_pydantic() -> None:
    """What makes a relayed start quick: only the standard library and the settings."""
    probe = "import sys, memory_graph.launch; print(sorted({m.split('.')[0] for m in sys.modules}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True)
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert not loaded & {"mcp", "mcp_types", "pydantic", "anyio", "rapidfuzz", "lessons"}


def test_the_shared_server_of_a_configuration_is_named_alike_in_every_process(tmp_path: Path) -> None:
    """The name must not depend on the process: a set's order does (the hash seed), so it is written sorted."""
    tokens = json.dumps({"token-one-0123456789": ["alpha", "beta", "gamma", "delta"], "token-two-0123456789": "*"})
    probe = (
        "from memory_graph.config import Settings; from memory_graph.launch import fingerprint; "
        f"print(fingerprint(Settings.from_env({{'MEMORY_FILE_PATH': {str(tmp_path / 'm.json')!r}, "
        f"'MEMORY_AUTH_TOKENS': {tokens!r}, 'MEMORY_LESSONS': 'project'}})))"
    )
    names = {
        subprocess.run(
            [sys.executable, "-c", probe],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in range(4)
    }
    assert len(names) == 1
    other = Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "other.json")})
    assert fingerprint(other) not in names


def test_the_relay_tells_requests_and_responses_apart() -> None:
    assert _request_id(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}\n') == ("int", 7)
    assert _request_id(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n') is None
    assert _request_id(b'{"jsonrpc":"2.0","id":"a","result":{"method":"x"}}\n') is None  # a reply to the server
    assert _request_id(b'{"id": 3, "method": ') is None  # not JSON: the server answers it with id null
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"r1","reason":"x"}}\n'
    assert _cancelled_id(cancel) == ("str", "r1") and _request_id(cancel) is None
    assert _cancelled_id(b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}\n') is None
    assert _response_id(b'{"jsonrpc":"2.0","id":7,"result":{}}\n') == ("int", 7)
    assert _response_id(b'{"jsonrpc":"2.0","id":"x\\"y","error":{"code":1}}\n') == ("str", 'x"y')
    assert _response_id(b'{"result": {}, "id": 8, "jsonrpc": "2.0"}\n') == ("int", 8)  # another field order
    assert _response_id(b'{"jsonrpc":"2.0","id":9,"method":"roots/list"}\n') is None  # the server asking
    assert _response_id(b'{"jsonrpc":"2.0","method":"notifications/message","params":{"id":1}}\n') is None


def test_a_place_held_by_a_server_that_does_not_accept_is_served_here_soon_and_says_by_whom(
    tmp_path: Path, shared_runtime: Path
) -> None:
    """A stopped or stuck server (here: this test holding the lock) must not make every start wait a minute, nor
    launch server after server to find out."""
    env = shared_env(tmp_path, shared_runtime)
    place = shared_place(env)
    assert place is not None
    with open(lock_of(place.socket), "a+", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("4242\n")
        lock.flush()
        started = time.monotonic()
        finished = run_to_the_end(env, line(INITIALIZE))
        waited = time.monotonic() - started
    assert finished.returncode == 0 and '"result"' in finished.stdout, finished.stderr
    assert "the shared server pid 4242 holds" in finished.stderr and "serving in this process" in finished.stderr
    assert waited < 15, f"{waited:.1f} s"
    assert not place.log.exists()  # no server was launched to find out


def test_a_request_id_the_server_spells_otherwise_is_answered_once_and_the_start_ends_cleanly(
    tmp_path: Path, shared_runtime: Path
) -> None:
    """The server answers a lone surrogate's id with U+FFFD; the relay must not take it for unanswered."""
    finished = run_to_the_end(
        shared_env(tmp_path, shared_runtime),
        line(INITIALIZE) + '{"jsonrpc": "2.0", "id": "a\\ud800", "method": "ping"}\n',
    )
    assert finished.returncode == 0, finished.stderr
    answers = [json.loads(x) for x in finished.stdout.splitlines()]
    assert [a["id"] for a in answers] == [0, "a\ufffd"] and "error" not in answers[1]


@pytest.mark.anyio
async def test_a_connections_subscriptions_end_with_it(tmp_path: Path) -> None:
    """One server serves many connections in turn: a subscriber that left must not stay subscribed."""
    app = build_app(Settings.from_env({"MEMORY_FILE_PATH": str(tmp_path / "memory.json")}, cwd=tmp_path))
    app.start_loading()
    ours, theirs = socket.socketpair()
    messages = [
        INITIALIZE,
        INITIALIZED,
        {"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "memory://knowledge-graph"}},
    ]
    try:
        theirs.sendall("".join(line(m) for m in messages).encode())
        clients = Clients()
        clients.opened()
        async with anyio.create_task_group() as group:
            group.start_soon(_serve_client, app, ours, clients)
            reader = theirs.makefile("rb")
            answered = await anyio.to_thread.run_sync(lambda: [json.loads(reader.readline()) for _ in range(2)])
            assert [a["id"] for a in answered] == [0, 1]
            assert app.subscriptions.subscribers() == 1
            theirs.shutdown(socket.SHUT_WR)
        assert app.subscriptions.subscribers() == 0
        assert clients.connected == 0
    finally:
        theirs.close()
        app.store.close()
