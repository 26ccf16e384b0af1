"""Streamable HTTP transport at /mcp, with an optional bearer token.

Binding a loopback address needs no token (only this machine can connect). Binding anything else without
MEMORY_AUTH_TOKEN is refused at startup: the memory holds personal notes. With a token, every request must carry
`Authorization: Bearer <token>`; anything else gets 401 before it reaches the MCP layer.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import TYPE_CHECKING

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_graph.config import LOOPBACK_HOSTS
from memory_graph.errors import InvalidInputError

if TYPE_CHECKING:
    from memory_graph.server import App

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"


class BearerTokenMiddleware:
    """Rejects every HTTP request whose Authorization header is not `Bearer <token>` (constant-time compare)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
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


def run_http(app: App, host: str, port: int) -> int:
    asgi = http_app(app, host)
    log.warning("memory-graph serving streamable HTTP at http://%s:%d%s", host, port, MCP_PATH)
    uvicorn.run(asgi, host=host, port=port, log_level=app.settings.log_level.lower())
    return 0
