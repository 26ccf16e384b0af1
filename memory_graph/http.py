"""Streamable HTTP transport at /mcp, with an optional bearer token.

Binding a loopback address needs no token (only this machine can connect). Binding anything else without
MEMORY_AUTH_TOKEN is refused at startup: the memory holds personal notes. With a token, every request must carry
`Authorization: Bearer <token>` (the scheme in any case, RFC 7235); anything else gets 401 before it reaches the
MCP layer.

Connections are bounded in time: a client has HEADER_TIMEOUT seconds to send a complete request line and headers,
and an idle keep-alive connection is closed after KEEP_ALIVE_TIMEOUT seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from typing import TYPE_CHECKING, Any, ClassVar

import h11
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from memory_graph.config import LOOPBACK_HOSTS
from memory_graph.errors import InvalidInputError

if TYPE_CHECKING:
    from memory_graph.server import App

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"
HEADER_TIMEOUT = 20.0
KEEP_ALIVE_TIMEOUT = 5


class BearerTokenMiddleware:
    """Rejects every HTTP request whose Authorization header is not `Bearer <token>`: the scheme in any case,
    the token compared in constant time."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = token.encode()

    def authorized(self, header: bytes) -> bool:
        scheme, _, credentials = header.partition(b" ")
        # RFC 7235 allows one or more spaces after the scheme. The scheme is public; only the token is a secret.
        right_scheme = scheme.lower() == b"bearer"
        return hmac.compare_digest(credentials.lstrip(b" "), self.expected) and right_scheme

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if self.authorized(given):
            await self.app(scope, receive, send)
            return
        body = json.dumps(
            {"error": "unauthorized", "message": "send the header 'Authorization: Bearer <MEMORY_AUTH_TOKEN>'"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"www-authenticate", b'Bearer realm="memory-graph"'),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def check_binding(host: str, token: str | None) -> None:
    if host not in LOOPBACK_HOSTS and not token:
        raise InvalidInputError(
            f"refusing to serve the memory on {host} without a token: anyone who can reach that address could "
            "read and change it. Set MEMORY_AUTH_TOKEN to a long random secret (clients then send "
            "'Authorization: Bearer <token>'), or bind 127.0.0.1."
        )


def http_app(app: App, host: str) -> ASGIApp:
    """The ASGI application: the SDK's streamable HTTP app, behind the token check when a token is set."""
    check_binding(host, app.settings.auth_token)
    asgi: ASGIApp = app.server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if app.settings.auth_token:
        asgi = BearerTokenMiddleware(asgi, app.settings.auth_token)
    return asgi


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers.

    uvicorn times out only an idle keep-alive connection, and stops that timer at the first byte received, so a
    client that never sends a request, or trickles one byte at a time, held its connection (and a file
    descriptor) forever. The deadline is counted from when the server starts waiting for a request and is not
    extended by data that arrives: extending it would let a trickle last forever.
    """

    header_timeout: ClassVar[float] = HEADER_TIMEOUT

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._watch_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch_headers()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_watching()
        super().connection_lost(exc)

    def _awaiting_headers(self) -> bool:
        # h11 leaves the client's state IDLE until a request's headers are complete, then moves it on.
        return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _watch_headers(self) -> None:
        if not self._awaiting_headers():
            self._stop_watching()
        elif self.header_deadline is None:
            self.header_deadline = self.loop.call_later(self.header_timeout, self._headers_overdue)

    def _stop_watching(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _headers_overdue(self) -> None:
        self.header_deadline = None
        if self._awaiting_headers():
            log.info(
                "closing a connection from %s: no complete request headers in %gs", self.client, self.header_timeout
            )
            self.transport.close()


def protocol_with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    # uvicorn builds one protocol object per connection from the class alone, so the bound travels on the class.
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})


def http_server(
    app: App,
    host: str,
    port: int,
    *,
    header_timeout: float = HEADER_TIMEOUT,
    keep_alive_timeout: int = KEEP_ALIVE_TIMEOUT,
) -> uvicorn.Server:
    """The uvicorn server for `app`, not yet started; `header_timeout` and `keep_alive_timeout` are seconds."""
    config = uvicorn.Config(
        http_app(app, host),
        host=host,
        port=port,
        log_level=app.settings.log_level.lower(),
        http=protocol_with_header_timeout(header_timeout),
        timeout_keep_alive=keep_alive_timeout,
    )
    return uvicorn.Server(config)


def run_http(app: App, host: str, port: int) -> int:
    server = http_server(app, host, port)
    log.warning("memory-graph serving streamable HTTP at http://%s:%d%s", host, port, MCP_PATH)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is how this server is stopped
        server.run()
    # As uvicorn.run reports it: the port was taken, or the app failed its startup.
    return 0 if server.started else STARTUP_FAILURE
