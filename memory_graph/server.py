"""The MCP adapter: registers the tools, prompts and resource on services built by the composition root (app.py).

Each tool validates its input through pydantic models, calls one service method and returns the model as
structured content plus its compact JSON as text. Domain errors become tool errors here, and only here.
"""

# No `from __future__ import annotations`: the SDK reads these signatures at registration time.

import functools
import inspect
import json
import logging
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ParamSpec, cast

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError, NoBackChannelError
from mcp.types import (
    INVALID_PARAMS,
    CallToolResult,
    InputRequiredResult,
    ListRootsRequest,
    SubscribeRequestParams,
    TextContent,
    ToolAnnotations,
    UnsubscribeRequestParams,
)
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from lessons.model import (
    MAX_ALIASES,
    Alias,
    CreatedLesson,
    ErrorPattern,
    ErrorQuery,
    Lesson,
    LessonChanges,
    LessonInput,
    NonBlank,
    Recommendations,
    Severity,
    SimilarErrors,
    SuccessReport,
    UpdatedLesson,
    VerificationStep,
)
from lessons.service import MAX_CONTEXT_CHARS, LessonService
from memory_graph import __version__, argument_errors, prompts
from memory_graph.app import Services, build_services
from memory_graph.config import AUTO_PROJECT, Settings
from memory_graph.errors import InvalidInputError, MemoryGraphError, StoreClosedError
from memory_graph.graph import GraphService
from memory_graph.history import (
    MAX_HISTORY_LIMIT,
    Duplicates,
    History,
    HistoryService,
    MergedEntities,
    ObservationUpdate,
    RenamedEntity,
    RestoredEntity,
    Since,
    UpdatedObservations,
)
from memory_graph.model import (
    AddedObservationsResult,
    CreatedEntities,
    CreatedRelations,
    DeletionResult,
    Entity,
    EntityPage,
    GraphSummary,
    KnowledgeGraph,
    Neighborhood,
    ObservationAddition,
    ObservationDeletion,
    Relation,
)
from memory_graph.projects import ALLOWED_PROJECTS, Projects, choose_project, is_new, list_projects
from memory_graph.storage import StoreEngine, return_freed_memory
from memory_graph.subscriptions import GraphSubscriptions, ListenBus

log = logging.getLogger(__name__)
P = ParamSpec("P")
ROOTS_TIMEOUT_SECONDS = 5.0
LOADING_SWITCH_INTERVAL = 0.0001  # seconds: each thread's turn at the interpreter while a load runs beside calls

GRAPH_INSTRUCTIONS = (
    "A long-term memory. The knowledge graph holds entities (people, organizations, projects, events) with "
    "observations and active-voice relations between them: search_nodes or open_nodes before answering from "
    "memory, create_entities/create_relations/add_observations to remember."
)
LESSON_INSTRUCTIONS = (
    "Lessons remember errors and their fixes: on an error call find_similar_errors first; after fixing one, "
    "create_lesson; after trying a lesson, update_lesson_success."
)


def instructions(toolsets: tuple[str, ...]) -> str:
    """What the server tells the client it offers: only the tool sets it serves."""
    parts = [GRAPH_INSTRUCTIONS if "graph" in toolsets else "A long-term memory.", ""]
    if "lessons" in toolsets:
        parts[1] = LESSON_INSTRUCTIONS
    return " ".join(p for p in parts if p)


CREATE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DELETE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
READ = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def structured(model: BaseModel, text: str | None = None, text_field: str | None = None) -> CallToolResult:
    """Structured content plus the same data as compact JSON text (every token costs the client).

    `text_field`: the text carries only that field, as the reference's text carries the bare list.
    """
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    if text is None:
        shown = data[text_field] if text_field else data
        text = json.dumps(shown, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


class ClientRoot(BaseModel):
    """A root as the client sent it: any URI (the SDK's own model refuses every scheme but file://)."""

    model_config = ConfigDict(extra="ignore")
    uri: str


class ClientRoots(BaseModel):
    model_config = ConfigDict(extra="ignore")
    roots: list[ClientRoot]


class MemoryGraphServer(MCPServer):
    """MCPServer whose argument errors say which field, what was wrong and how to fix it, and which serves
    `resources/subscribe` for the graph resource like the official server."""

    selection: "ConnectionServices | None" = None
    last_request = 0.0  # when the last tool call or resource read began (time.monotonic())

    async def choose_project(self, context: Context[Any, Any] | None) -> None:
        """MEMORY_PROJECT=auto: choose this connection's store before its first request is served, from the
        client's roots (roots/list, when the client offers them), else the working directory's repository."""
        selection = self.selection
        if selection is None or not selection.pending:
            return
        uris: list[str] = []
        session = context.request_context.session if context is not None else None
        if session is not None and session.client_capabilities is not None and session.client_capabilities.roots:
            try:
                with warnings.catch_warnings():  # roots are deprecated in 2026-07-28, and still what clients send
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    with anyio.fail_after(ROOTS_TIMEOUT_SECONDS):
                        # Our own result model, not session.list_roots(): the SDK's requires every uri to be a
                        # file:// URL, so one root elsewhere ("vscode-vfs://...") failed every tool call. Here
                        # roots that are not local folders are skipped one by one (projects.choose_project).
                        roots = await session.send_request(ListRootsRequest(), ClientRoots)
                uris = [root.uri for root in roots.roots]
            except (MCPError, NoBackChannelError, TimeoutError) as exc:
                log.info("the client did not list its roots (%s); using the working directory", exc)
            except ValidationError as exc:
                log.warning("the client's roots/list answer is malformed (%s); using the working directory", exc)
        try:
            await anyio.to_thread.run_sync(selection.choose, uris, Path.cwd())
        except MemoryGraphError as exc:
            raise ToolError(str(exc)) from exc

    async def read_resource(self, uri: Any, context: Context[Any, Any] | None = None) -> Any:
        self.last_request = time.monotonic()
        await self.choose_project(context)
        return await super().read_resource(uri, context)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> Any:
        # The SDK answers an unknown prompt or argument with JSON-RPC code 0 and "Error rendering prompt": say
        # which, and what there is, as invalid params.
        prompt = self._prompt_manager.get_prompt(name)
        if prompt is None:
            known = ", ".join(p.name for p in self._prompt_manager.list_prompts())
            raise MCPError(INVALID_PARAMS, f"no prompt named {name!r}; the prompts are: {known}")
        allowed = [argument.name for argument in prompt.arguments or []]
        unknown = sorted(set(arguments or {}) - set(allowed))
        if unknown:
            takes = ", ".join(allowed) if allowed else "no arguments"
            raise MCPError(INVALID_PARAMS, f"prompt {name!r} takes {takes}; got {', '.join(unknown)}")
        return await super().get_prompt(name, arguments, context)

    def serve_subscriptions(self, subscriptions: GraphSubscriptions) -> None:
        # MCPServer has no public hook for the handshake-era subscribe methods; the low-level server does.
        lowlevel = self._lowlevel_server
        lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscriptions.subscribe)
        lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, subscriptions.unsubscribe)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        self.last_request = time.monotonic()
        try:
            await self.choose_project(context)
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(argument_errors.explain(name, exc.__cause__)) from exc.__cause__
            raise


def tool_errors(fn: Callable[P, CallToolResult]) -> Callable[P, CallToolResult]:
    """The one place domain errors become MCP tool errors (other exceptions are logged by the SDK)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            return fn(*args, **kwargs)
        except MemoryGraphError as exc:
            raise ToolError(str(exc)) from exc

    # The docstring is the tool's description, sent to every client: without its source indentation.
    wrapper.__doc__ = inspect.cleandoc(fn.__doc__) if fn.__doc__ else None
    return wrapper


class ConnectionServices:
    """The services of the store this server's connection uses: built at start for the default store or a
    pinned project, or, with MEMORY_PROJECT=auto, when the first request arrives (from the client's roots, else
    the working directory's repository). Until then no store is open, so nothing can fall back to another one."""

    def __init__(self, settings: Settings, on_built: Callable[[Services], None]) -> None:
        self.settings = settings
        self._on_built = on_built
        self._services: Services | None = None
        self._lock = threading.Lock()
        if settings.project != AUTO_PROJECT:
            self._build(settings)

    @property
    def pending(self) -> bool:
        return self._services is None

    def get(self) -> Services:
        if self._services is None:
            raise InvalidInputError(
                "MEMORY_PROJECT=auto: this connection's project is chosen at its first tool call; nothing was read"
            )
        return self._services

    def choose(self, root_uris: list[str], cwd: Path) -> Services:
        with self._lock:
            if self._services is None:
                chosen = choose_project(root_uris, cwd)
                settings = self.settings.for_project(chosen.name)
                new = " (new: made now, empty)" if is_new(settings) else ""
                log.warning("memory-graph: project %s%s, chosen from %s", chosen.name, new, chosen.how)
                services = self._build(settings)
                services.store.open()
            return self.get()

    def _build(self, settings: Settings) -> Services:
        services = build_services(settings)
        self._on_built(services)
        self._services = services
        return services


class Deferred:
    """Stands for one service of the connection's project, which `MEMORY_PROJECT=auto` chooses only when the
    first request arrives: the tools are registered once, on this, and reach the chosen service."""

    def __init__(self, resolve: Callable[[], Any]) -> None:
        self._resolve = resolve

    def __getattr__(self, name: str) -> Any:
        return getattr(self._resolve(), name)


@dataclass
class App:
    selection: ConnectionServices
    server: "MemoryGraphServer"
    subscriptions: GraphSubscriptions
    base_settings: Settings

    @property
    def services(self) -> Services:
        return self.selection.get()

    @property
    def settings(self) -> Settings:
        return self.services.settings if not self.selection.pending else self.base_settings

    @property
    def store(self) -> StoreEngine:
        return self.services.store

    @property
    def graph(self) -> GraphService:
        return self.services.graph

    @property
    def lessons(self) -> LessonService:
        return self.services.lessons

    def close(self) -> None:
        """A clean shutdown: the embeddings' side file is written first (the worker writes it at most every 2 s, so
        a session ending sooner after its last change wrote none and the next start embedded everything again),
        then the store is closed (which saves its start snapshot if this session changed the memory)."""
        if self.selection.pending:  # MEMORY_PROJECT=auto before any call: no store was opened
            return
        if self.graph.semantic is not None:
            self.graph.semantic.flush()
        self.store.close()

    def start_loading(self) -> None:
        """Load the files in the background, so `initialize` is answered at once even for a huge graph.

        Tool calls wait for the load (they take the store's lock); if it fails, the first call reports why.
        With MEMORY_PROJECT=auto the store is loaded when the first call has chosen it.
        """
        if self.selection.pending:
            return
        # Before the thread starts: a call that arrives before the thread has begun the load is answered as one
        # arriving during it (from a database's indexes), not made to wait for all of the load.
        self.store.opening()
        threading.Thread(target=self._load, name="memory-graph-load", daemon=True).start()

    def _load(self) -> None:
        # Calls arriving meanwhile wait for the interpreter at each of their thread hops while this thread runs:
        # a shorter turn for each thread keeps them answered promptly (the default 5 ms made `initialize` take
        # a second longer during a large load).
        interval = sys.getswitchinterval()
        sys.setswitchinterval(LOADING_SWITCH_INTERVAL)
        try:
            self._load_and_warm_up()
        finally:
            sys.setswitchinterval(interval)
        self._hold_as_restored_when_quiet()

    def _load_and_warm_up(self) -> None:
        try:
            self.graph.prepare()
            self.store.open()
            # Now, not only after the warm-up: the parsed records are let go once the listeners hold what they
            # need, and a large memory's warm-up and save take seconds more. (The files' store has done it before
            # letting the first call in; a database's store has not.)
            return_freed_memory()
            if self.graph.semantic is not None:
                self.graph.semantic.start()  # the model loads in its own thread; the first search waits for it
            self.graph.warm_up()
            # After the index is built, so the next start restores it too (written only if the load changed
            # anything since the snapshot it restored).
            self.store.save_snapshot()
            return_freed_memory()
        except StoreClosedError:
            log.info("the load stopped: the store was closed")
            return
        except MemoryGraphError as exc:
            # The first call reports it too, and retries: a database that comes back is used from then on.
            log.error("could not load the memory: %s", exc)
        self.subscriptions.watch(self.store.poll)

    def _hold_as_restored_when_quiet(self) -> None:
        """After a full read: the memory taken again from the snapshot just saved (`hold_as_restored`, hundreds of
        MB less held at a million entities), once no request has begun for MEMORY_COMPACT_IDLE_SECONDS. The store
        is held for the restore's time (9 s at a million entities): the wait is long enough for a client's burst
        of calls (one turn of a conversation, a client's restart) to be over, so they are not the ones held up."""
        quiet = self.settings.compact_idle_seconds
        if not quiet:
            return
        while (wait := self.server.last_request + quiet - time.monotonic()) > 0:
            time.sleep(wait)
        try:
            if self.store.hold_as_restored():
                return_freed_memory()
        except MemoryGraphError as exc:  # a store closed meanwhile
            log.info("the memory was not taken again from its snapshot: %s", exc)


def build_app(settings: Settings) -> App:
    bus = ListenBus()
    server = MemoryGraphServer(
        "memory-graph", version=__version__, instructions=instructions(settings.toolsets), subscriptions=bus
    )
    subscriptions = GraphSubscriptions(bus)

    def on_built(services: Services) -> None:
        services.store.add_listener(subscriptions)

    selection = ConnectionServices(settings, on_built)
    server.selection = selection
    if selection.pending:
        subscriptions.watch(lambda: selection.get().store.poll() if not selection.pending else None)
    graph = cast(GraphService, Deferred(lambda: selection.get().graph))
    lessons = cast(LessonService, Deferred(lambda: selection.get().lessons))
    history = cast(HistoryService, Deferred(lambda: selection.get().history))
    if "graph" in settings.toolsets:
        register_graph_tools(server, graph)
    if "lessons" in settings.toolsets:
        register_lesson_tools(server, lessons)
    if "graph" in settings.toolsets and settings.toolsets != ("graph",):
        # MEMORY_TOOLS=graph promises exactly the official nine tools; the browse, history and project tools come
        # with the full set.
        register_browse_tools(server, graph)
        register_history_tools(server, graph, history)
        register_project_tools(server, selection)
    register_prompts_and_resources(server, graph, settings.toolsets)
    server.serve_subscriptions(subscriptions)
    return App(selection=selection, server=server, subscriptions=subscriptions, base_settings=settings)


def register_graph_tools(server: MCPServer, graph: GraphService) -> None:
    @server.tool(title="Create Entities", annotations=CREATE)
    @tool_errors
    def create_entities(entities: list[Entity]) -> Annotated[CallToolResult, CreatedEntities]:
        """Create multiple new entities in the knowledge graph"""
        return structured(graph.create_entities(entities), text_field="entities")

    @server.tool(title="Create Relations", annotations=CREATE)
    @tool_errors
    def create_relations(relations: list[Relation]) -> Annotated[CallToolResult, CreatedRelations]:
        """Create multiple new relations between entities in the knowledge graph. Relations should be in active voice.
        Both ends must already exist (create_entities first); existing relations are skipped"""
        return structured(graph.create_relations(relations), text_field="relations")

    @server.tool(title="Add Observations", annotations=CREATE)
    @tool_errors
    def add_observations(
        observations: list[ObservationAddition],
    ) -> Annotated[CallToolResult, AddedObservationsResult]:
        """Add new observations to existing entities in the knowledge graph"""
        return structured(graph.add_observations(observations), text_field="results")

    @server.tool(title="Delete Entities", annotations=DELETE)
    @tool_errors
    def delete_entities(
        entityNames: Annotated[list[str], Field(description="An array of entity names to delete")],
    ) -> Annotated[CallToolResult, DeletionResult]:
        """Delete multiple entities and their associated relations from the knowledge graph"""
        result = graph.delete_entities(entityNames)
        return structured(result, text=result.message)

    @server.tool(title="Delete Observations", annotations=DELETE)
    @tool_errors
    def delete_observations(
        deletions: list[ObservationDeletion],
    ) -> Annotated[CallToolResult, DeletionResult]:
        """Delete specific observations from entities in the knowledge graph"""
        result = graph.delete_observations(deletions)
        return structured(result, text=result.message)

    @server.tool(title="Delete Relations", annotations=DELETE)
    @tool_errors
    def delete_relations(
        relations: Annotated[list[Relation], Field(description="An array of relations to delete")],
    ) -> Annotated[CallToolResult, DeletionResult]:
        """Delete multiple relations from the knowledge graph"""
        result = graph.delete_relations(relations)
        return structured(result, text=result.message)

    @server.tool(title="Read Graph", annotations=READ)
    @tool_errors
    def read_graph() -> Annotated[CallToolResult, KnowledgeGraph]:
        """Read the entire knowledge graph. A graph larger than the response budget is cut (entities first, then
        the relations touching them) and says so in `truncated`; narrow with search_nodes or open_nodes."""
        return structured(graph.read_graph())

    @server.tool(title="Search Nodes", annotations=READ)
    @tool_errors
    def search_nodes(
        query: Annotated[
            str,
            Field(description="The search query to match against entity names, types, and observation content"),
        ],
    ) -> Annotated[CallToolResult, KnowledgeGraph]:
        """Search for nodes in the knowledge graph based on a query. Case-insensitive; matches names, types,
        observations and lessons' error text; several words also match in any order. Best matches first, with
        the relations that touch them."""
        return structured(graph.search_nodes(query))

    @server.tool(title="Open Nodes", annotations=READ)
    @tool_errors
    def open_nodes(
        names: Annotated[list[str], Field(description="An array of entity names to retrieve")],
    ) -> Annotated[CallToolResult, KnowledgeGraph]:
        """Open specific nodes in the knowledge graph by their names (exact and case-sensitive), with every
        relation that touches them"""
        return structured(graph.open_nodes(names))


Limit = Annotated[int, Field(ge=1, le=50, description="Most results to return")]


def register_lesson_tools(server: MCPServer, lessons: LessonService) -> None:
    @server.tool(title="Create Lesson", annotations=CREATE)
    @tool_errors
    def create_lesson(lesson: LessonInput) -> Annotated[CallToolResult, CreatedLesson]:
        """Remember an error and how it was fixed: errorPattern {type, message, context, stackTrace?},
        observations (cause and fix), verificationSteps, metadata {severity, environment, ...}.
        The name must be unused by any entity or lesson. Returns the stored lesson; when a lesson with the same
        error signature exists, the new one is merged into it instead (merged: true, and a note naming it)."""
        return structured(lessons.create_lesson(lesson))

    @server.tool(title="Update Lesson", annotations=EDIT)
    @tool_errors
    def update_lesson(
        name: Annotated[NonBlank, Field(description="The lesson's exact name")],
        errorPattern: Annotated[ErrorPattern | None, Field(description="Replaces the whole error pattern")] = None,
        observations: Annotated[list[StrictStr] | None, Field(description="Replaces the observations")] = None,
        addObservations: Annotated[list[StrictStr] | None, Field(description="Appended to the observations")] = None,
        verificationSteps: Annotated[
            list[VerificationStep] | None, Field(description="Replaces the verification steps")
        ] = None,
        severity: Annotated[Severity | None, Field(description="low, medium, high or critical")] = None,
        aliases: Annotated[
            list[Alias] | None,
            Field(
                max_length=MAX_ALIASES,
                description=f"Replaces the wordings learned from use, at most {MAX_ALIASES} ([] clears them)",
            ),
        ] = None,
    ) -> Annotated[CallToolResult, Lesson]:
        """Edit a lesson: the fields sent replace the stored ones (addObservations appends); its name, success
        counts and creation time are kept, and every earlier version stays in get_history."""
        changes = LessonChanges(
            name=name,
            errorPattern=errorPattern,
            observations=observations,
            addObservations=addObservations or [],
            verificationSteps=verificationSteps,
            severity=severity,
            aliases=aliases,
        )
        return structured(lessons.update_lesson(changes))

    @server.tool(title="Find Similar Errors", annotations=READ)
    @tool_errors
    def find_similar_errors(errorPattern: ErrorQuery, limit: Limit = 5) -> Annotated[CallToolResult, SimilarErrors]:
        """Find lessons about an error like this one (call it first when an error appears). Matching ignores
        paths, names, numbers, addresses and log noise. Returns lessons best match first, each with its score
        (0..1) and success statistic; unrelated lessons are left out."""
        return structured(lessons.find_similar_errors(errorPattern, limit))

    @server.tool(title="Update Lesson Success", annotations=CREATE)
    @tool_errors
    def update_lesson_success(
        lessonName: Annotated[NonBlank, Field(description="The lesson's exact name")],
        success: Annotated[StrictBool, Field(description="true if applying the lesson fixed the problem")],
    ) -> Annotated[CallToolResult, UpdatedLesson]:
        """Record whether applying a lesson worked; updates its frequency, successRate and updatedAt."""
        return structured(lessons.update_lesson_success(SuccessReport(lessonName=lessonName, success=success)))

    @server.tool(title="Get Lesson Recommendations", annotations=READ)
    @tool_errors
    def get_lesson_recommendations(
        context: Annotated[
            str,
            Field(
                min_length=1,
                max_length=MAX_CONTEXT_CHARS,
                description="What went wrong: a description, an error message, or a whole pasted terminal log",
            ),
        ],
        limit: Limit = 5,
    ) -> Annotated[CallToolResult, Recommendations]:
        """Lessons that apply to a situation, ranked by relevance combined with a success statistic that needs
        real evidence (a lucky 1-for-1 does not beat a proven 95-for-100)."""
        return structured(lessons.get_lesson_recommendations(context, limit))


def register_browse_tools(server: MCPServer, graph: GraphService) -> None:
    """Progressive reads: a graph too large to read whole is listed page by page, explored around one entity,
    or summarized."""

    @server.tool(title="List Entities", annotations=READ)
    @tool_errors
    def list_entities(
        entityType: Annotated[
            str | None, Field(min_length=1, description="Only entities of this exact type (case-sensitive)")
        ] = None,
        cursor: Annotated[
            str | None, Field(description="nextCursor from the previous page; omit for the first")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Most entities on one page")] = 100,
    ) -> Annotated[CallToolResult, EntityPage]:
        """List entities in name order, a page at a time: name, type and how many observations each has (open_nodes
        reads them). The cursor stays valid while the graph changes."""
        return structured(graph.list_entities(entityType, cursor, limit))

    @server.tool(title="Get Neighbors", annotations=READ)
    @tool_errors
    def get_neighbors(
        name: Annotated[str, Field(min_length=1, description="The entity's exact, case-sensitive name")],
        depth: Annotated[int, Field(ge=1, le=3, description="How many relations away to go")] = 1,
        relationType: Annotated[
            str | None, Field(min_length=1, description="Follow only relations of this exact type")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=500, description="Most neighboring entities to return")] = 50,
    ) -> Annotated[CallToolResult, Neighborhood]:
        """The entities within `depth` relations of one entity (either direction), nearest and best connected
        first, each with its depth and degree, and the relations among them."""
        return structured(graph.get_neighbors(name, depth, relationType, limit))

    @server.tool(title="Graph Summary", annotations=READ)
    @tool_errors
    def graph_summary() -> Annotated[CallToolResult, GraphSummary]:
        """The graph at a glance: how many entities and relations, counts by entity type and relation type, and
        the most connected entities (good places to start with get_neighbors)."""
        return structured(graph.graph_summary())


def register_prompts_and_resources(server: MCPServer, graph: GraphService, toolsets: tuple[str, ...]) -> None:
    @server.prompt(name="personalization", title="Personalization (custom instructions)")
    def personalization(
        user_name: Annotated[str, Field(description="Who the assistant talks to")] = "default_user",
    ) -> str:
        """The official memory server's custom instructions: identify the user, retrieve memory first, watch for
        identity, behaviours, preferences, goals and relationships, and store them as entities and relations."""
        return prompts.personalization(user_name.strip() or "default_user")

    if "lessons" in toolsets:

        @server.prompt(name="lesson-workflow", title="Lessons workflow")
        def lesson_workflow(
            error: Annotated[str, Field(description="Optional: the error at hand")] = "",
        ) -> str:
            """How to use lessons: find_similar_errors first on an error, create_lesson after a fix,
            update_lesson_success after trying a lesson."""
            return prompts.lesson_workflow(error)

    @server.resource(
        "memory://knowledge-graph",
        name="knowledge-graph",
        title="Knowledge Graph",
        description="The full knowledge graph with all entities and relations",
        mime_type="application/json",
    )
    def knowledge_graph() -> str:
        return graph.read_graph().model_dump_json(by_alias=True, exclude_none=True)


EDIT = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)
Name = Annotated[str, Field(min_length=1, description="Exact, case-sensitive entity name")]


def register_history_tools(server: MCPServer, graph: GraphService, history: HistoryService) -> None:
    """Edits that keep the history (update, rename, merge), the history itself, and restore."""

    @server.tool(title="Update Observations", annotations=EDIT)
    @tool_errors
    def update_observations(updates: list[ObservationUpdate]) -> Annotated[CallToolResult, UpdatedObservations]:
        """Correct facts in place: replace each observation `old` of `entityName` with `new` (position kept);
        the old text stays in get_history as superseded. Use it instead of delete_observations + add_observations.
        An unknown entity or text fails the whole call, naming each."""
        return structured(graph.update_observations(updates))

    @server.tool(title="Rename Entity", annotations=EDIT)
    @tool_errors
    def rename_entity(name: Name, newName: Name) -> Annotated[CallToolResult, RenamedEntity]:
        """Rename an entity; every relation follows. Refused if newName exists (merge_entities joins two)."""
        return structured(graph.rename_entity(name, newName))

    @server.tool(title="Merge Entities", annotations=EDIT)
    @tool_errors
    def merge_entities(
        names: Annotated[list[Name], Field(min_length=1, description="The entities to merge")],
        into: Name,
    ) -> Annotated[CallToolResult, MergedEntities]:
        """Merge duplicates: observations and relations of `names` move to `into` (duplicates and self-relations
        dropped) and the merged entities disappear. `into` may be one of them or a new name (it takes the
        first entity's type)."""
        return structured(graph.merge_entities(names, into))

    @server.tool(title="Get History", annotations=READ)
    @tool_errors
    def get_history(
        name: Annotated[
            str | None, Field(description="One entity (following renames and merges); omit for all")
        ] = None,
        since: Since = None,
        limit: Annotated[int, Field(ge=1, le=MAX_HISTORY_LIMIT, description="Most changes to return")] = 50,
    ) -> Annotated[CallToolResult, History]:
        """Changes newest first: when (`at`, UTC), which operation, which entity, the values before and after
        and an edit's observations added and removed, including deleted entities and superseded observations.
        Cut to the response budget (says so in `truncated`)."""
        return structured(history.get_history(name, since, limit))

    @server.tool(title="Restore Entity", annotations=EDIT)
    @tool_errors
    def restore_entity(
        name: Name,
        at: Annotated[str | None, Field(description="Restore the state of this UTC ISO 8601 time")] = None,
    ) -> Annotated[CallToolResult, RestoredEntity]:
        """Undo a wrong delete: bring an entity back as it was before its deletion (or as it was at `at`), with
        its observations and the relations whose other end exists. Says what it restored."""
        return structured(history.restore_entity(name, at))

    @server.tool(title="Find Duplicates", annotations=READ)
    @tool_errors
    def find_duplicates(
        limit: Annotated[int, Field(ge=1, le=MAX_HISTORY_LIMIT, description="Most pairs to return")] = 50,
    ) -> Annotated[CallToolResult, Duplicates]:
        """Entities that look like the same thing (case, accents, punctuation, plural, `J. Smith` vs
        `John Smith` of one type), each pair with a reason; read-only. merge_entities joins a pair."""
        return structured(history.find_duplicates(limit))


def register_project_tools(server: MCPServer, selection: ConnectionServices) -> None:
    @server.tool(name="list_projects", title="List Projects", annotations=READ)
    @tool_errors
    def list_projects_tool(ctx: Context[Any, Any]) -> Annotated[CallToolResult, Projects]:
        """The memory's projects (separate stores: one per repository or topic) with their size and last change,
        and which one this connection uses. Lessons are shared by every project unless the server says otherwise."""
        request = ctx.request_context.request
        scope = getattr(request, "scope", None) or {}
        return structured(list_projects(selection.get().settings, scope.get(ALLOWED_PROJECTS)))
