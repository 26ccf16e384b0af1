"""Resource subscriptions, as the official server offers them: a client that sent `resources/subscribe` for
`memory://knowledge-graph` gets `notifications/resources/updated` whenever the graph changes, whether this
process changed it or another process sharing the files did.

The store calls `records_changed` from whichever thread committed or noticed the change; the notification is
scheduled on the event loop of the session that subscribed. It goes out on the channel of the subscribe
request, which on stdio is the connection itself; a subscription whose channel is gone (an HTTP request
that has ended) is dropped at its first failed notification.

From protocol 2026-07-28 a client listens instead (`subscriptions/listen`), and the SDK drops a
`notifications/resources/updated` sent on the connection: the change is published on the server's subscription
bus (`ListenBus`), which the SDK's listen streams read.

Another process's commit is noticed when this process next looks at the store; so that an idle subscriber
hears of it too, `watch` polls the store (one small stamp read) every half second while anyone is subscribed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ResourceUpdated, ServerEvent
from mcp.types import EmptyResult, SubscribeRequestParams, UnsubscribeRequestParams

from memory_graph.errors import MemoryGraphError
from memory_graph.storage import Key, Taken

log = logging.getLogger(__name__)
GRAPH_URI = "memory://knowledge-graph"
POLL_SECONDS = 0.5
# The connection a request came on, where one process serves several in turn (the shared server sets it for each):
# its subscriptions are forgotten when it ends. (A notification to a finished session does not fail, so nothing
# else would ever drop them.)
CONNECTION: ContextVar[object | None] = ContextVar("memory_graph_connection", default=None)


def connection_key(ctx: ServerRequestContext[Any]) -> int:
    """Which client connection a request came on. The SDK hands each request its own session object, but the
    client's `initialize` parameters are one object per connection."""
    params = ctx.session.client_params
    return id(params) if params is not None else id(ctx.session)


class ListenBus(InMemorySubscriptionBus):
    """The SDK's in-process bus for `subscriptions/listen` streams (2026-07-28), noting the event loop its streams
    listen on (a store's change is heard in any thread, and a stream is fed on its loop) and how many listen."""

    def __init__(self) -> None:
        super().__init__()
        self._count_lock = threading.Lock()
        self._listening = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        self.loop = asyncio.get_running_loop()  # (called by the SDK's listen handler, on the server's loop)
        unsubscribe = super().subscribe(listener)
        with self._count_lock:
            self._listening += 1
        done = threading.Event()

        def ended() -> None:
            if not done.is_set():
                done.set()
                with self._count_lock:
                    self._listening -= 1
            unsubscribe()

        return ended

    def listening(self) -> bool:
        with self._count_lock:
            return self._listening > 0

    def changed(self) -> None:
        """Tell every listen stream the graph changed (from any thread)."""
        loop = self.loop
        if loop is None or loop.is_closed() or not self.listening():
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody is listening
            asyncio.run_coroutine_threadsafe(self.publish(ResourceUpdated(uri=GRAPH_URI)), loop)


class GraphSubscriptions:
    """Sessions subscribed to the graph resource (a store `ChangeListener`), and the listen streams of `bus`."""

    def __init__(self, bus: ListenBus | None = None) -> None:
        self.bus = bus or ListenBus()
        self._lock = threading.Lock()
        self._sessions: dict[int, tuple[ServerSession, asyncio.AbstractEventLoop]] = {}
        self._keys_of: dict[object, set[int]] = {}  # a CONNECTION -> its subscriptions' keys
        self._stopped = threading.Event()

    async def subscribe(self, ctx: ServerRequestContext[Any], params: SubscribeRequestParams) -> EmptyResult:
        if str(params.uri) == GRAPH_URI:
            key, connection = connection_key(ctx), CONNECTION.get()
            with self._lock:
                known = key in self._sessions
                self._sessions[key] = (ctx.session, asyncio.get_running_loop())
                if connection is not None:
                    self._keys_of.setdefault(connection, set()).add(key)
            # Forgotten when the connection ends (an HTTP session deleted or timed out, stdio closed): a
            # notification to an ended session does not fail, so nothing else would drop it, and every write would
            # go on notifying it. (The SDK gives a lowlevel handler's session no public way to its connection.)
            connection_state = getattr(ctx.session, "_connection", None)
            if not known and connection_state is not None:
                connection_state.exit_stack.callback(self._forget, key)
        return EmptyResult()

    def _forget(self, key: int) -> None:
        with self._lock:
            self._sessions.pop(key, None)

    def connection_ended(self, connection: object) -> None:
        """Forget the subscriptions of a connection that ended (see CONNECTION)."""
        with self._lock:
            for key in self._keys_of.pop(connection, ()):
                self._sessions.pop(key, None)

    def subscribers(self) -> int:
        with self._lock:
            return len(self._sessions)

    async def unsubscribe(self, ctx: ServerRequestContext[Any], params: UnsubscribeRequestParams) -> EmptyResult:
        if str(params.uri) == GRAPH_URI:
            with self._lock:
                self._sessions.pop(connection_key(ctx), None)
        return EmptyResult()

    def watch(self, poll: Callable[[], None]) -> None:
        """Poll for other processes' changes in a daemon thread, while there are subscribers."""

        def loop() -> None:
            while not self._stopped.wait(POLL_SECONDS):
                with self._lock:
                    idle = not self._sessions and not self.bus.listening()
                if idle:
                    continue
                try:
                    poll()
                except MemoryGraphError as exc:
                    log.warning("could not look for other processes' changes: %s", exc)

        threading.Thread(target=loop, name="memory-graph-watch", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    # Kept in the start snapshot as nothing: a restored store has no subscriber to tell (and no record to parse
    # for one).
    snapshot_name = "subscriptions"

    def snapshot_version(self) -> str:
        return ""

    def snapshot_copy(self) -> Taken:
        return Taken(None)

    def snapshot_state(self) -> None:
        return None

    def restore_state(self, state: None) -> None:
        return None

    def records_changed(self, collection: str, removed: list[Key], upserted: list[dict[str, Any]]) -> None:
        self.bus.changed()
        with self._lock:
            subscribers = list(self._sessions.items())
        for key, (session, loop) in subscribers:
            if loop.is_closed():
                with self._lock:
                    self._sessions.pop(key, None)
                continue
            try:
                future = asyncio.run_coroutine_threadsafe(session.send_resource_updated(GRAPH_URI), loop)
            except RuntimeError:  # the loop closed between the check and the call
                with self._lock:
                    self._sessions.pop(key, None)
                continue
            future.add_done_callback(self._forget_if_gone(key))

    def _forget_if_gone(self, key: int) -> Any:
        def check(future: Any) -> None:
            if future.cancelled() or future.exception() is not None:
                log.info("dropping a resource subscription whose session is gone")
                with self._lock:
                    self._sessions.pop(key, None)

        return check
