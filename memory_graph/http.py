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

import anyio
import anyio.abc
import h11
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from memory_graph.config import DEFAULT_STORE, LOOPBACK_HOSTS, project_name
from memory_graph.errors import InvalidInputError
from memory_graph.projects import ALLOWED_PROJECTS, is_new

if TYPE_CHECKING:
    from memory_graph.server import App

log = logging.getLogger(__name__)
MCP_PATH = "/mcp"
HEADER_TIMEOUT = 20.0
KEEP_ALIVE_TIMEOUT = 5
MAX_PROJECT_APPS = 256  # each served project holds a store (and, on PostgreSQL, a connection pool)


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
    """The ASGI application: `/mcp` serves the server's own store, `/mcp/<project>` each project's, behind the
    token check when tokens are set."""
    settings = app.base_settings
    check_binding(host, settings.auth_token or next(iter(settings.project_tokens), None))
    return ProjectRouter(app, host)


def _loopback_host(headers: dict[bytes, bytes]) -> bool:
    host = headers.get(b"host", b"").decode("latin-1").strip().lower()
    name = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0] if ":" in host else host
    return name in LOOPBACK_HOSTS


def _json_response(status: int, error: str, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> Any:
    body = json.dumps({"error": error, "message": message}).encode()
    start = {
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        ],
    }
    return start, {"type": "http.response.body", "body": body}


class ProjectRouter:
    """One MCP server per store: `/mcp` for the default store (or the pinned project), `/mcp/<project>` for a
    project, each built at its first request and kept running until shutdown.

    Tokens: MEMORY_AUTH_TOKEN opens every path; a MEMORY_AUTH_TOKENS token opens only its projects (`default` is
    the store at `/mcp`), anything else is 403. A request for a project name that is not valid is 404 and opens
    nothing. Each sub-server's session manager runs in a task of this router's lifespan."""

    def __init__(self, app: App, host: str) -> None:
        self.base = app
        self.host = host
        self.settings = app.base_settings
        self.apps: dict[str | None, ASGIApp] = {}
        self._task_group: anyio.abc.TaskGroup | None = None
        self._stopping = anyio.Event()
        self._starting = anyio.Lock()

    # -- who may see what --------------------------------------------------------------------------------------
    def allowed(self, header: bytes) -> frozenset[str] | bool | None:
        """The projects a request's token opens (None: all of them), or False when it opens nothing."""
        settings = self.settings
        if not settings.auth_token and not settings.project_tokens:
            return None
        scheme, _, credentials = header.partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        given = credentials.lstrip(b" ")
        if settings.auth_token and hmac.compare_digest(given, settings.auth_token.encode()):
            return None
        opened: frozenset[str] | bool | None = False
        for token, projects in settings.project_tokens.items():
            if hmac.compare_digest(given, token.encode()):  # no early exit: every token is compared
                opened = projects
        return opened

    # -- ASGI ----------------------------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path: str = scope.get("path", "")
        project: str | None
        if path == MCP_PATH or path == MCP_PATH + "/":
            project = None
        elif path.startswith(MCP_PATH + "/"):
            raw = path[len(MCP_PATH) + 1 :].rstrip("/")
            try:
                project = project_name(raw, "the project in the URL /mcp/<project>")
            except InvalidInputError as exc:
                await self._send(send, *_json_response(404, "not_found", str(exc)))
                return
        else:
            await self._send(send, *_json_response(404, "not_found", f"MCP is served at {MCP_PATH} and /mcp/<project>"))
            return
        headers = dict(scope.get("headers") or [])
        if not (self.settings.auth_token or self.settings.project_tokens) and not _loopback_host(headers):
            # Without tokens only this machine may connect (binding elsewhere needs one): a page on another site
            # that resolves its name to 127.0.0.1 (DNS rebinding) sends its own Host and opens nothing.
            await self._send(send, *_json_response(403, "forbidden", "requests must be addressed to localhost"))
            return
        if project is not None and project not in self.apps and len(self.apps) > MAX_PROJECT_APPS:
            await self._send(
                send, *_json_response(503, "too_many_projects", f"at most {MAX_PROJECT_APPS} projects are served")
            )
            return
        opened = self.allowed(headers.get(b"authorization", b""))
        if opened is False:
            message = "send the header 'Authorization: Bearer <token>' (MEMORY_AUTH_TOKEN or one of MEMORY_AUTH_TOKENS)"
            challenge = [(b"www-authenticate", b'Bearer realm="memory-graph"')]
            await self._send(send, *_json_response(401, "unauthorized", message, challenge))
            return
        store = project or self.settings.project or DEFAULT_STORE
        if isinstance(opened, frozenset) and store not in opened:
            shown = ", ".join(sorted(opened))
            message = f"this token may not use the project {store!r}; it opens only: {shown}"
            await self._send(send, *_json_response(403, "forbidden", message))
            return
        target = await self._app_for(project)
        # The path as the store's app serves it: a project's name is one case (/mcp/MyApp is /mcp/myapp), and a
        # trailing slash is the same path (the app would redirect it).
        served = MCP_PATH if project is None else f"{MCP_PATH}/{project}"
        await target({**scope, "path": served, "raw_path": served.encode(), ALLOWED_PROJECTS: opened}, receive, send)

    async def _send(self, send: Send, start: Any, body: Any) -> None:
        await send(start)
        await send(body)

    async def _app_for(self, project: str | None) -> ASGIApp:
        if project in self.apps:
            return self.apps[project]
        async with self._starting:
            if project not in self.apps:
                if self._task_group is None:
                    raise RuntimeError("the HTTP server's lifespan has not started")
                self.apps[project] = await self._task_group.start(self._serve, project)
        return self.apps[project]

    async def _serve(self, project: str | None, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run one store's MCP server (its session manager) until shutdown."""
        from memory_graph.server import build_app

        settings = self.settings.for_project(project)
        new = project is not None and is_new(settings)
        app = self.base if project is None else build_app(settings)
        if project is not None:
            shown = " (new: made now, empty)" if new else ""
            log.warning("memory-graph: serving project %s%s at %s/%s", project, shown, MCP_PATH, project)
            app.start_loading()
        path = MCP_PATH if project is None else f"{MCP_PATH}/{project}"
        asgi = app.server.streamable_http_app(streamable_http_path=path, host=self.host)
        async with asgi.router.lifespan_context(asgi):
            task_status.started(asgi)
            await self._stopping.wait()
        app.subscriptions.stop()
        if project is not None:
            # As the base store is closed at exit (cli.serve): a project's store too saves its start snapshot
            # when this session changed it, and lets go of its database pool.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(app.close)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "lifespan.startup":
            return
        async with anyio.create_task_group() as group:
            self._task_group = group
            await self._app_for(None)
            await send({"type": "lifespan.startup.complete"})
            while (await receive())["type"] != "lifespan.shutdown":
                pass
            self._stopping.set()
        await send({"type": "lifespan.shutdown.complete"})


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers and body.

    uvicorn times out only an idle keep-alive connection, and stops that timer at the first byte received, so a
    client that never sends a request, or trickles one byte at a time, held its connection (and a file
    descriptor) forever; so did one whose body never came after its headers. The deadline is counted from when
    the server starts waiting for a request and is not extended by data that arrives: extending it would let a
    trickle last forever (a 4 MiB body, the most a request may send, needs 200 KB/s to arrive in 20 s).
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
        # h11 leaves the client's state IDLE until a request's headers are complete, then SEND_BODY until its body
        # is (a body that stops coming held its connection for ever: enough of them took every descriptor).
        waiting = self.conn.their_state is h11.IDLE or self.conn.their_state is h11.SEND_BODY
        return waiting and not self.transport.is_closing()

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
        if self._awaiting_headers() and self.flow.read_paused:
            self._watch_headers()  # (this side stopped reading, the app not having taken the body yet: not the client)
        elif self._awaiting_headers():
            log.info("closing a connection from %s: no complete request in %gs", self.client, self.header_timeout)
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
        log_level=app.base_settings.log_level.lower(),
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
