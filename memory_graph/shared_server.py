"""The shared server: one process that serves a memory to every stdio start relayed to it (MEMORY_SHARED_SERVER=on;
launch.py starts it and relays to it). Each connection on its socket is one MCP client, served exactly as stdin and
stdout are (stdio.serve_connection), all of them by one app: one load, one search index, one set of caches, and
no other process's commits to follow.

It holds a lock beside its socket while it serves (its pid written in it), so one server serves a place; it
exits when no client has been connected for MEMORY_SHARED_IDLE_SECONDS, or on SIGTERM/SIGINT, and closes the
store as a stdio server does (saving the start snapshot).

    python -m memory_graph.shared_server <socket path>     (launch.py runs this)
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO

import anyio

from memory_graph.config import Settings
from memory_graph.errors import MemoryGraphError
from memory_graph.launch import ALREADY_SERVED, FAREWELL, GREETING, lock_of
from memory_graph.server import App, build_app
from memory_graph.stdio import serve_connection, stop_on_signal
from memory_graph.subscriptions import CONNECTION

log = logging.getLogger("memory_graph.shared_server")  # (run as __main__)
ACCEPT_POLL_SECONDS = 0.5  # how often an idle server looks at the clock


class Clients:
    """How many clients are connected, and since when none is."""

    def __init__(self) -> None:
        self.connected = 0
        self.idle_since = time.monotonic()

    def opened(self) -> None:
        self.connected += 1

    def closed(self) -> None:
        self.connected -= 1
        if not self.connected:
            self.idle_since = time.monotonic()

    def idle_for(self) -> float:
        return 0.0 if self.connected else time.monotonic() - self.idle_since


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m memory_graph.shared_server <socket path> (launch.py runs it)", file=sys.stderr)
        return 2
    socket_path = Path(arguments[0])
    try:
        settings = Settings.from_env()
    except MemoryGraphError as exc:
        print(f"memory-graph: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr,
        level=settings.log_level,
        format="memory-graph shared server %(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Every path is resolved in the settings by now: the working directory of whichever client started this server
    # is not held busy for as long as it runs.
    os.chdir("/")
    with open(lock_of(socket_path), "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return ALREADY_SERVED
        return _serve_place(settings, socket_path, lock)


def _serve_place(settings: Settings, socket_path: Path, lock: IO[str]) -> int:
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()  # a server killed before it could remove its socket (the lock says none serves)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Bound at once, so a start that finds the lock held finds the socket too (it waits for the greeting, sent
    # once the app is built); the folder is this user's alone, and so is the socket (the memory's door).
    listener.bind(str(socket_path))
    socket_path.chmod(0o600)
    listener.listen(64)
    app = build_app(settings)
    log.warning("serving %s on %s (pid %d)", settings.memory_file, socket_path, os.getpid())
    app.start_loading()
    try:
        return anyio.run(_serve_clients, app, listener, settings.shared_idle_seconds)
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        # The place is free before the store is closed (saving the start snapshot of a large memory takes a
        # while): a start in that time launches the next server at once, which works beside this one's last
        # save as any two servers on the same files do.
        fcntl.flock(lock, fcntl.LOCK_UN)
        app.close()
        log.warning("stopped")


async def _serve_clients(app: App, listener: socket.socket, idle_seconds: int) -> int:
    clients = Clients()
    stopped_by: list[int] = []
    listener.settimeout(ACCEPT_POLL_SECONDS)
    # Accepting takes a thread of its own: not one of the pool every client's tool calls share, where a new client
    # would wait behind 40 waiting calls.
    accepting = anyio.CapacityLimiter(1)
    async with anyio.create_task_group() as group:
        group.start_soon(stop_on_signal, group.cancel_scope, stopped_by)
        while clients.idle_for() <= idle_seconds:
            try:
                connection, _ = await anyio.to_thread.run_sync(listener.accept, limiter=accepting)
            except TimeoutError:
                continue
            try:
                connection.settimeout(None)
                connection.sendall(GREETING)
            except OSError:
                connection.close()
                continue
            clients.opened()
            group.start_soon(_serve_client, app, connection, clients)
        log.warning("no client for %d s: exiting", idle_seconds)
        group.cancel_scope.cancel()
    return 0


async def _serve_client(app: App, connection: socket.socket, clients: Clients) -> None:
    reader, writer = connection.makefile("rb"), connection.makefile("wb")
    CONNECTION.set(connection)  # (this task's context, which its requests' tasks inherit)
    try:
        await serve_connection(app.server, reader, writer)
        await anyio.to_thread.run_sync(_say_farewell, writer)
    except Exception as exc:  # one client's end is never the others'
        broken = isinstance(exc, OSError) or (isinstance(exc, ExceptionGroup) and exc.split(OSError)[1] is None)
        if broken:  # it went away mid-answer
            log.info("a client's connection broke: %r", exc)
        else:
            log.exception("a client's connection failed")
    finally:
        # Wakes this connection's reading thread first (a client may be silent when the server stops): closing a
        # reader that another thread is reading waits for that read to return, which would hold the event loop.
        with contextlib.suppress(OSError):
            connection.shutdown(socket.SHUT_RDWR)
        for part in (reader, writer, connection):
            with contextlib.suppress(OSError):
                part.close()
        app.subscriptions.connection_ended(connection)
        clients.closed()


def _say_farewell(writer: IO[bytes]) -> None:
    writer.write(FAREWELL)
    writer.flush()


if __name__ == "__main__":
    sys.exit(main())
