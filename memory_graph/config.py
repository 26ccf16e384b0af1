"""Settings: the one place that reads the environment. Every variable here is in the README's table."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_graph.errors import InvalidInputError

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
TOOLSETS = ("graph", "lessons")

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
    store_name: str = "default"  # which store of the database (one database may hold several)

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
        return cls(
            database_url=database_url(env.get("MEMORY_DATABASE_URL", "")),
            memory_file=memory_file,
            lesson_file=lesson_file,
            shard_lines=_int(env, "MEMORY_SHARD_LINES", 1000, 1),
            max_response_chars=_int(env, "MEMORY_MAX_RESPONSE_CHARS", 80_000, 1000),
            toolsets=toolsets,
            auth_token=env.get("MEMORY_AUTH_TOKEN", "").strip() or None,
            host=env.get("MEMORY_HOST", "").strip() or "127.0.0.1",
            port=port_number(env.get("MEMORY_PORT", "") or "8000", "MEMORY_PORT"),
            log_level=level,
            history_days=_int(env, "MEMORY_HISTORY_DAYS", 0, 0),
        )
