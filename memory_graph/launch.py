"""How `memory-graph` starts, before anything heavy is imported.

With MEMORY_SHARED_SERVER=on a stdio start does not load the memory itself. It connects to the one shared server
(shared_server.py) that serves this memory with this configuration, starting it in the background when none
is, and relays the protocol between its own stdin/stdout and that server's socket. Clients start an MCP server
at every launch (each editor window, each new chat): this way only the first start pays for the interpreter, the
MCP SDK and the memory's load, and every later one is answered by a server that is already warm. Every other
start (HTTP, an admin command, sharing off or not possible here) goes to cli.main, as it always did.

The standard library and config.py only: importing the SDK here would cost the time this saves.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, BinaryIO

from memory_graph.config import AUTO_PROJECT, Settings
from memory_graph.errors import MemoryGraphError

# The arguments of a stdio start (`memory-graph`, `memory-graph serve`): only those are relayed.
SHARED_ARGUMENTS: tuple[list[str], ...] = ([], ["serve"])
# The shared server's first line on every connection: not MCP, never relayed. A connection closed before it (a
# server exiting for idleness as the client connected) is retried with a new server.
GREETING = b'{"memory-graph-shared":1}\n'
# Its last line on a connection whose input ended and whose every request is settled, never relayed either: a close
# without it is the server's end (a kill, a crash, a stop), which a clean close of the socket looks the same as.
FAREWELL = b'{"memory-graph-shared":"done"}\n'
START_SECONDS = 60.0  # how long a start waits for a shared server it launched to accept it
GREETING_SECONDS = 10.0  # the greeting is sent at accept, whatever the server is doing
HELD_SECONDS = 5.0  # how long a place whose lock is held may go without a server accepting on it
CONNECT_POLL_SECONDS = 0.02
ALREADY_SERVED = 3  # the shared server's exit status when another one serves the same place
MAX_SOCKET_PATH = 100  # bytes (a Unix socket's path holds 104-108 bytes, by platform)
LOG_KEEP_BYTES = 1 << 20
# A response as the shared server writes it (pydantic keeps the model's field order); anything else is parsed.
RESPONSE_START = re.compile(rb'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')


@dataclass(frozen=True)
class SharedPlace:
    """Where the shared server of one memory and configuration listens, and its log."""

    socket: Path
    log: Path


def lock_of(socket_path: Path) -> Path:
    """The lock the shared server of a socket holds while it serves (its pid written in it)."""
    return socket_path.with_suffix(".lock")


def main(argv: Sequence[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments in SHARED_ARGUMENTS:
        place = shared_place()
        if place is not None:
            answered = relay_to_shared_server(place)
            if answered is not None:
                # Ended at once: a thread may still be in a read of stdin (the server went away first), which the
                # interpreter's shutdown would wait on, and nothing else here needs cleaning up.
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(answered)
    from memory_graph.cli import main as cli_main

    return cli_main(arguments)


def _say(message: str) -> None:
    print(f"memory-graph: {message}", file=sys.stderr, flush=True)


def shared_place(env: Mapping[str, str] | None = None) -> SharedPlace | None:
    """The shared server's place for these settings, or None when this start serves in its own process: sharing
    off, MEMORY_PROJECT=auto, settings cli.main will refuse (and explain), or no private folder for the socket."""
    try:
        settings = Settings.from_env(env)
    except MemoryGraphError:
        return None
    if not settings.shared_server or settings.project == AUTO_PROJECT or sys.platform == "win32":
        return None
    folder = private_folder(settings.shared_folder)
    if folder is None:
        return None
    name = fingerprint(settings)
    place = SharedPlace(folder / f"{name}.sock", folder / f"{name}.log")
    if len(os.fsencode(place.socket)) > MAX_SOCKET_PATH:
        _say(f"the socket path {place.socket} is too long for this system; serving in this process")
        return None
    return place


def private_folder(folder: Path) -> Path | None:
    """The folder, made if needed, when only this user can use it: another user who could reach the socket would
    reach the memory."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        found = os.lstat(folder)
    except OSError as exc:
        _say(f"cannot use {folder} for the shared server ({exc.strerror}); serving in this process")
        return None
    problem = (
        "is a symbolic link, not a folder"
        if stat.S_ISLNK(found.st_mode)
        else "is not a folder"
        if not stat.S_ISDIR(found.st_mode)
        else f"belongs to another user (uid {found.st_uid})"
        if found.st_uid != os.getuid()
        else f"can be used by other users (mode {found.st_mode & 0o777:o}; run: chmod 700 {folder})"
        if found.st_mode & 0o077
        else None
    )
    if problem is not None:
        _say(
            f"the shared server's folder {folder} {problem}; serving in this process. Set XDG_RUNTIME_DIR to a "
            "folder of your own, or remove that one."
        )
        return None
    return folder


def fingerprint(settings: Settings) -> str:
    """Names the shared server that may answer these settings: the same settings, interpreter and code. Another
    configuration (another memory file, tool set, database) or an upgrade gets a server of its own."""
    identity = [sys.executable, sys.version, _code_identity(), _canonical(settings)]
    return hashlib.sha256(json.dumps(identity).encode("utf-8")).hexdigest()[:24]


def _canonical(value: Any) -> Any:
    if isinstance(value, Settings):
        return [[f.name, _canonical(getattr(value, f.name))] for f in fields(value)]
    if isinstance(value, set | frozenset):
        return sorted(map(_canonical, value), key=repr)  # (a set's order changes with each process's hash seed)
    if isinstance(value, dict):
        return sorted(([str(k), _canonical(v)] for k, v in value.items()), key=repr)
    if isinstance(value, tuple | list):
        return [_canonical(item) for item in value]
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


def _code_identity() -> list[Any]:
    """The source files of both packages by name, size and time (a stat each), and the MCP SDK's version."""
    found: list[Any] = []
    for package in ("memory_graph", "lessons"):
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        root = Path(spec.origin).parent
        for path in sorted(root.rglob("*.py")):
            with contextlib.suppress(OSError):
                st = path.stat()
                found.append([str(path.relative_to(root.parent)), st.st_size, st.st_mtime_ns])
    try:
        from importlib.metadata import version

        found.append(version("mcp"))
    except Exception:  # an SDK that is not installed is cli.main's to report
        found.append(None)
    return found


@dataclass
class _Connection:
    sock: socket.socket
    reader: BinaryIO


def _connect(place: SharedPlace) -> _Connection | None:
    """A connection the shared server has greeted, or None (no server there, or one that is going away)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(GREETING_SECONDS)
        sock.connect(str(place.socket))
        reader = sock.makefile("rb")
        greeting = reader.readline()
        sock.settimeout(None)
    except OSError:
        sock.close()
        return None
    if greeting != GREETING:
        reader.close()
        sock.close()
        return None
    return _Connection(sock, reader)


def relay_to_shared_server(place: SharedPlace) -> int | None:
    """Serve this start through the shared server: the exit status, or None to serve in this process instead."""
    connection = _connect(place) or _start_and_connect(place)
    if connection is None:
        return None
    return Relay(connection).run()


def _start_and_connect(place: SharedPlace) -> _Connection | None:
    """Start the shared server and connect to it; None to serve in this process. Two starts at once both start one:
    the second finds the place served (the lock) and exits, and both clients connect to the first."""
    started = time.monotonic()
    held_since: float | None = None
    launched: subprocess.Popen[bytes] | None = None
    while time.monotonic() - started < START_SECONDS:
        connection = _connect(place)
        if connection is not None:
            if launched is not None:  # reaped when it ends (this client may outlive it)
                threading.Thread(target=launched.wait, daemon=True).start()
            return connection
        status = launched.poll() if launched is not None else ALREADY_SERVED
        if status is not None and status != ALREADY_SERVED:
            _say(f"the shared server stopped at its start (status {status}; see {place.log}); serving in this process")
            return None
        if status is None:  # the one launched is starting
            time.sleep(CONNECT_POLL_SECONDS)
            continue
        holder = _holder(place)
        if holder is None:
            launched, held_since = _launch(place), None
            continue
        held_since = held_since or time.monotonic()
        if time.monotonic() - held_since > HELD_SECONDS:
            _say(
                f"the shared server {holder} holds {lock_of(place.socket)} but does not accept on {place.socket}; "
                f"serving in this process (see {place.log})"
            )
            return None
        time.sleep(CONNECT_POLL_SECONDS)
    _say(
        f"the shared server did not accept within {time.monotonic() - started:.0f} s (see {place.log}); serving in "
        "this process"
    )
    return None


def _launch(place: SharedPlace) -> subprocess.Popen[bytes]:
    with contextlib.suppress(OSError):
        if place.log.stat().st_size > LOG_KEEP_BYTES:
            place.log.unlink()
    with open(place.log, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "memory_graph.shared_server", str(place.socket)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,  # it outlives this client, and a Ctrl-C meant for the client
        )


def _holder(place: SharedPlace) -> str | None:
    """Who holds the place's lock ("pid N"), or None when no server does (then one may be launched)."""
    try:
        with open(lock_of(place.socket), "a+", encoding="utf-8") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.seek(0)
                return f"pid {lock.read().strip() or '?'}"
            fcntl.flock(lock, fcntl.LOCK_UN)
            return None
    except OSError:
        return None


def _id_key(value: Any) -> tuple[str, Any] | None:
    return (type(value).__name__, value) if type(value) in (int, str) else None


def _request_id(line: bytes) -> tuple[str, Any] | None:
    """The id of a request the client sent (one that must be answered), else None."""
    if b'"id"' not in line or b'"method"' not in line:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # (json.loads: a line nested past the interpreter's depth)
        return None
    return _id_key(message.get("id")) if isinstance(message, dict) and "method" in message else None


def _cancelled_id(line: bytes) -> tuple[str, Any] | None:
    """The request a client's cancellation gives up (the server answers a cancelled request with nothing)."""
    if b"notifications/cancelled" not in line:
        return None
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # (json.loads: a line nested past the interpreter's depth)
        return None
    if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
        return None
    params = message.get("params")
    return _id_key(params.get("requestId")) if isinstance(params, dict) else None


def _response_id(line: bytes) -> tuple[str, Any] | None:
    """The id a response from the server answers, else None."""
    start = RESPONSE_START.match(line)
    if start is not None:
        return _id_key(json.loads(start.group(1)))
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # (json.loads: a line nested past the interpreter's depth)
        return None
    return _id_key(message.get("id")) if isinstance(message, dict) and "method" not in message else None


class Relay:
    """Copies the client's lines to the shared server and its lines back. Every request gets an answer: if the
    server goes away first, the requests it had not answered are answered here with an error."""

    def __init__(self, connection: _Connection) -> None:
        self.connection = connection
        self.unanswered: dict[tuple[str, Any], Any] = {}
        self.lock = threading.Lock()
        self.input_over = threading.Event()

    def run(self) -> int:
        # As a server of its own ends on SIGTERM: quietly (the shared server ends this connection's requests).
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        threading.Thread(target=self._to_server, name="stdin", daemon=True).start()
        stdout = sys.stdout.buffer
        broke = finished = False
        try:
            for line in self.connection.reader:
                if line == FAREWELL:
                    finished = True
                    continue
                answered = _response_id(line)
                if answered is not None:
                    with self.lock:
                        self.unanswered.pop(answered, None)
                stdout.write(line)
                stdout.flush()
        except OSError:
            broke = True  # the server's side broke: treated as its end
        except KeyboardInterrupt:
            return 130
        if finished and not broke:
            # The server says farewell on a connection whose input ended only once it has settled every request
            # read (an answer, or a cancellation's silence): nothing is left to answer, whatever the ids noted here
            # say.
            return 0
        with self.lock:
            left = list(self.unanswered.values())
        for request_id in left:
            error = {
                "code": -32603,
                "message": "the shared memory-graph server stopped before answering; nothing more is known of this "
                "request. Restart the MCP server (its log is in the folder of MEMORY_SHARED_SERVER's socket).",
            }
            with contextlib.suppress(OSError):
                stdout.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode() + b"\n")
                stdout.flush()
        _say("the shared server closed the connection; stopping")
        return 1

    def _to_server(self) -> None:
        sock = self.connection.sock
        try:
            for line in sys.stdin.buffer:
                request, cancelled = _request_id(line), _cancelled_id(line)
                if request is not None or cancelled is not None:
                    with self.lock:
                        if request is not None:
                            self.unanswered[request] = request[1]
                        if cancelled is not None:
                            self.unanswered.pop(cancelled, None)
                sock.sendall(line)
        except OSError:
            return  # the server is gone: the reading side answers what is left
        self.input_over.set()
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)  # the server answers what it read, then closes
