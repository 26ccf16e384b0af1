"""Serve an MCPServer over stdin/stdout so that every message gets its answer.

The SDK's `stdio_server()` drops a line it cannot parse without a word to the client, cannot parse the lone
surrogate escapes JavaScript clients send when they cut a string mid-emoji (so that request is never answered),
cancels the requests still running when stdin reaches EOF, and reads stdin in a worker thread that neither
Ctrl-C nor SIGTERM can interrupt. This is the SDK's transport with those four holes closed; the lowlevel server,
its initialization options and the claim of fds 0 and 1 (stray prints go to stderr) are the SDK's own.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import sys
import threading
from collections import Counter
from contextlib import suppress
from functools import partial
from typing import BinaryIO

import anyio
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer

# The SDK's own fd claim: it points fds 0 and 1 away from the wire while serving (with the Windows handle
# rebinding and the one-claim-per-process guard), which is not worth re-deriving here.
from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

log = logging.getLogger(__name__)

# Escaped backslashes are matched first so that `\\ud800` (a backslash, then text) is never read as an escape.
_ESCAPE = re.compile(
    r"\\(?:\\|u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(u[dD][89a-fA-F][0-9a-fA-F]{2}))"
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def run_stdio(server: MCPServer) -> int:
    """Serve until stdin closes and every request read has been answered (0), or until SIGINT (130) or SIGTERM (0)."""
    stdin, release_stdin = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    try:
        stdout, release_stdout = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
        try:
            return anyio.run(_serve, server, stdin, stdout)
        finally:
            if release_stdout is not None:
                release_stdout()
    finally:
        if release_stdin is not None:
            release_stdin()


def _replace_lone_surrogates(line: str) -> str:
    """Turn each `\\uD800`-style escape that is not half of a pair into `\\uFFFD`, which pydantic accepts."""
    if "\\u" not in line:
        return line
    return _ESCAPE.sub(lambda m: "\\ufffd" if m.group(1) else m.group(0), line)


class _Unanswered:
    """Requests read from stdin that have had neither an answer nor a settlement without one (a cancellation)."""

    def __init__(self) -> None:
        self._ids: Counter[RequestId] = Counter()
        self._changed = anyio.Event()

    def add(self, request_id: RequestId) -> None:
        self._ids[request_id] += 1

    def settle(self, request_id: RequestId) -> None:
        if self._ids[request_id] > 0:
            self._ids[request_id] -= 1
            if not self._ids[request_id]:
                del self._ids[request_id]
            self._changed.set()

    async def wait_for_none(self) -> None:
        while self._ids:
            self._changed = anyio.Event()
            await self._changed.wait()


async def _serve(server: MCPServer, stdin: BinaryIO, stdout: BinaryIO) -> int:
    stopped_by: list[int] = []
    async with anyio.create_task_group() as outer:
        outer.start_soon(stop_on_signal, outer.cancel_scope, stopped_by)
        await serve_connection(server, stdin, stdout)
        outer.cancel_scope.cancel()
    return 130 if signal.SIGINT in stopped_by else 0


async def serve_connection(server: MCPServer, reader: BinaryIO, writer: BinaryIO) -> None:
    """Serve one client's line-delimited JSON-RPC from `reader` to `writer` until its input ends and every request
    read has been answered: stdin and stdout here, a socket's two sides in the shared server (shared_server.py)."""
    lowlevel = server._lowlevel_server
    unanswered = _Unanswered()
    lines_in, lines = anyio.create_memory_object_stream[bytes](0)
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    async with BlockingPortal() as portal:
        threading.Thread(target=_pump_stdin, args=(reader, portal, lines_in), name="stdin", daemon=True).start()
        async with anyio.create_task_group() as work:
            work.start_soon(_read, lines, to_server, server_writes.clone(), unanswered)
            work.start_soon(_write, from_server, writer, unanswered)
            # Exactly what MCPServer.run_stdio_async does, on our streams.
            await lowlevel.run(server_reads, server_writes, lowlevel.create_initialization_options())


def _pump_stdin(stdin: BinaryIO, portal: BlockingPortal, lines: MemoryObjectSendStream[bytes]) -> None:
    # A daemon thread, not anyio's worker threads: a blocking read cannot be cancelled, and only a daemon thread
    # lets the process exit on a signal while the read is still waiting.
    try:
        for line in stdin:
            portal.call(lines.send, line)
    except Exception as exc:  # the loop stopped (a signal) or stdin failed: either way the input is over
        log.debug("stopped reading stdin: %r", exc)
    finally:
        with suppress(Exception):  # the loop is gone, so nobody is left to tell
            portal.call(lines.close)


async def stop_on_signal(scope: anyio.CancelScope, stopped_by: list[int]) -> None:
    if sys.platform == "win32":  # no signal handlers in the Proactor loop; Ctrl-C still raises KeyboardInterrupt
        return
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            log.info("stopping on %s", signal.Signals(signum).name)
            stopped_by.append(signum)
            scope.cancel()
            return


async def _read(
    lines: MemoryObjectReceiveStream[bytes],
    to_server: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
    unanswered: _Unanswered,
) -> None:
    async with lines, to_server, replies:
        try:
            async for raw in lines:
                # Invalid UTF-8 bytes become U+FFFD here, as in the SDK.
                line = raw.decode("utf-8", errors="replace")
                if not line.strip():
                    continue
                try:
                    message = jsonrpc_message_adapter.validate_json(_replace_lone_surrogates(line), by_name=False)
                except ValidationError as exc:
                    rejection = _rejection(line, exc)
                    if rejection is not None:
                        await replies.send(SessionMessage(rejection))
                    continue
                if isinstance(message, JSONRPCNotification) and _has_id(line):
                    # An id that is neither an integer nor a string (1.0, true, null) makes pydantic read the line as
                    # a notification, which nobody answers: the client would wait for ever.
                    log.warning("answered a request whose id is neither an integer nor a string")
                    await replies.send(SessionMessage(_invalid_request(None)))
                    continue
                metadata = None
                if isinstance(message, JSONRPCRequest):
                    # Counted before it is handed over, so its answer cannot overtake the count.
                    unanswered.add(message.id)
                    metadata = ServerMessageMetadata(on_request_unanswered=partial(_settle, unanswered, message.id))
                await to_server.send(SessionMessage(message, metadata=metadata))
            # EOF: the server cancels whatever is still running once its input closes, so hold it open until
            # every request read has been answered.
            await unanswered.wait_for_none()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            log.debug("the server stopped reading")


async def _settle(unanswered: _Unanswered, request_id: RequestId) -> None:
    unanswered.settle(request_id)


def _rejection(line: str, exc: ValidationError) -> JSONRPCError | None:
    """The JSON-RPC error answering a line that is not a message; None for a malformed response (never answered)."""
    error = exc.errors(include_url=False, include_context=False, include_input=False)[0]
    if error["type"] == "json_invalid":
        log.warning("answered a line that is not JSON: %s", error["msg"])
        message = f"Parse error: {error['msg']}; send one JSON-RPC message per line"
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=message))
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict) and "method" not in data and ("result" in data or "error" in data):
        log.warning("dropped a malformed response from the client: %s", error["msg"])
        return None
    request_id = data.get("id") if isinstance(data, dict) else None
    log.warning("answered a line that is not a JSON-RPC message: %s", error["msg"])
    return _invalid_request(request_id if type(request_id) in (int, str) else None)


def _invalid_request(request_id: RequestId | None) -> JSONRPCError:
    message = (
        'Invalid Request: expected one JSON-RPC 2.0 object with "jsonrpc": "2.0", a "method" and, for a request, an '
        '"id" that is an integer or a string (batches are not supported)'
    )
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_REQUEST, message=message))


def _has_id(line: str) -> bool:
    """Whether the line's object has an "id" member (a notification has none)."""
    if '"id"' not in line:
        return False
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "id" in data


async def _write(
    messages: MemoryObjectReceiveStream[SessionMessage], stdout: BinaryIO, unanswered: _Unanswered
) -> None:
    # A connection's writes take a thread of their own, not one of the pool the tools' calls share: in the shared
    # server (shared_server.py) every client's answers would otherwise queue behind 40 waiting calls.
    writes = anyio.CapacityLimiter(1)
    async with messages:
        async for item in messages:
            message = item.message
            try:
                text = message.model_dump_json(by_alias=True, exclude_unset=True)
            except PydanticSerializationError:
                # Stored text may hold lone surrogates (an old file, an import), which UTF-8 cannot carry; the
                # client still gets its answer, with U+FFFD in their place.
                data = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
                text = _SURROGATE.sub("\ufffd", json.dumps(data, ensure_ascii=False, separators=(",", ":")))
            await anyio.to_thread.run_sync(_write_line, stdout, (text + "\n").encode("utf-8"), limiter=writes)
            if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
                unanswered.settle(message.id)


def _write_line(stdout: BinaryIO, data: bytes) -> None:
    stdout.write(data)
    stdout.flush()
