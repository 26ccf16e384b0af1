"""The command line: `memory-graph [serve|import|export|stats|check|repair|compact|migrate] ...` (serve is the
default).

A thin adapter: it parses flags, calls the store or a service, and prints. Only `serve` imports the MCP SDK.
Logs go to stderr; on stdio, stdout carries nothing but the protocol.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from memory_graph import __version__
from memory_graph.app import Services, build_services, migration_target, store_for
from memory_graph.config import AUTO_PROJECT, DEFAULT_STORE, Settings, port_number, project_name
from memory_graph.errors import InvalidInputError, MemoryGraphError, StorageError
from memory_graph.export import FORMATS, render
from memory_graph.graph import ImportSummary
from memory_graph.projects import (
    choose_project,
    earlier_projects_note,
    is_new,
    list_projects,
    move_entity,
    require_known,
)
from memory_graph.storage import atomic_write, copy_records, files_to_import, read_source

log = logging.getLogger("memory_graph")


def port_argument(raw: str) -> int:
    try:
        return port_number(raw, "--port")
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-graph",
        description="A long-term memory for AI assistants: an MCP knowledge-graph and lessons server. "
        "The store is the one MEMORY_FILE_PATH (and LESSON_FILE_PATH) name.",
    )
    parser.add_argument("--version", action="version", version=f"memory-graph {__version__}")
    parser.add_argument(
        "--project",
        metavar="NAME",
        help=f"work on this project's store (overrides MEMORY_PROJECT; every command, serve included): a name, "
        f"{DEFAULT_STORE} (the default store) or {AUTO_PROJECT} (as MEMORY_PROJECT={AUTO_PROJECT})",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve MCP (the default command)")
    for target in (parser, serve):
        target.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
        target.add_argument("--host", help="HTTP bind address (default 127.0.0.1, or MEMORY_HOST)")
        target.add_argument("--port", type=port_argument, help="HTTP port, 1-65535 (default 8000, or MEMORY_PORT)")
    importing = commands.add_parser(
        "import",
        help="merge an official memory.jsonl, or the lessons fork's memory.json/lesson.json (with -N shards and "
        "file_registry.json), into the store; a name seen twice keeps the union of its observations",
    )
    importing.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    exporting = commands.add_parser("export", help="write the whole memory out")
    exporting.add_argument("--format", choices=FORMATS, default="jsonl")
    exporting.add_argument("--output", type=Path, help="file to write (default: standard output)")
    exporting.add_argument("--force", action="store_true", help="replace the --output file if it exists")
    commands.add_parser("stats", help="counts by type, shards and file sizes (JSON)")
    commands.add_parser("check", help="validate every shard; exit 1 when anything is wrong")
    commands.add_parser("repair", help="set aside bad and duplicate lines, finish or set aside a broken commit")
    compact = commands.add_parser("compact", help="drop change history older than MEMORY_HISTORY_DAYS (or --days)")
    compact.add_argument("--days", type=int, help="keep this many days of history (overrides MEMORY_HISTORY_DAYS)")
    commands.add_parser("projects", help="list the projects (stores) of this data folder or database (JSON)")
    moving = commands.add_parser(
        "move-entity",
        help="move an entity, with its relations whose other end exists there, from this store (--project, or the "
        "default) to another project's",
    )
    moving.add_argument("name", metavar="NAME")
    moving.add_argument(
        "--to-project",
        required=True,
        metavar="PROJECT",
        help=f"the project to move it to ({DEFAULT_STORE}: the default store)",
    )
    moving.add_argument("--create", action="store_true", help="make the target project if it does not exist yet")
    migrating = commands.add_parser(
        "migrate",
        help="copy the whole store (graph, lessons, history) into an empty one: a PostgreSQL URL or a memory file; "
        "verifies the counts and leaves this store untouched",
    )
    migrating.add_argument("--to", required=True, metavar="TARGET", help="postgresql://... or /path/memory.json")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        source = "MEMORY_PROJECT"
        if args.project is not None:
            # As MEMORY_PROJECT's values, and `default` as `projects` lists it and --to-project takes it.
            chosen = args.project.strip().lower()
            if chosen == DEFAULT_STORE:
                settings = settings.for_project(None)
            elif chosen == AUTO_PROJECT:
                settings = replace(settings.for_project(None), project=AUTO_PROJECT)
            else:
                settings = settings.for_project(project_name(args.project, "--project"))
            source = "--project"
        if settings.project == AUTO_PROJECT and args.command not in (None, "serve"):
            # An admin command has no client to ask: auto means the working directory's repository.
            settings = settings.for_project(choose_project([], Path.cwd()).name)
            source = "MEMORY_PROJECT=auto chose"
    except MemoryGraphError as exc:
        print(f"memory-graph: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level, format="memory-graph %(levelname)s %(name)s: %(message)s"
    )
    note = earlier_projects_note(settings)
    if note is not None:
        log.warning("memory-graph: %s", note)
    try:
        if args.command in (None, "serve"):
            return serve(settings, args)
        if args.command not in MAKES_PROJECTS:
            require_known(settings, source)
        return ADMIN[args.command](build_services(settings), args)
    except MemoryGraphError as exc:
        print(f"memory-graph: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def serve(settings: Settings, args: argparse.Namespace) -> int:
    from memory_graph.server import build_app

    if settings.project not in (None, AUTO_PROJECT) and is_new(settings):
        # Said, not refused: a server's project is made by its first write. A mistyped name shows here.
        log.warning(
            "memory-graph: project %s is new (made now, empty); `memory-graph projects` lists them", settings.project
        )
    app = build_app(settings)
    # Said at every start (stderr; stdout is the protocol's): which files this server reads and writes.
    if app.selection.pending:
        log.warning("memory-graph %s: the project is chosen per connection (MEMORY_PROJECT=auto)", __version__)
    elif settings.database_url is None:
        project = f" (project {settings.project})" if settings.project else ""
        log.warning(
            "memory-graph %s: memory %s, lessons %s%s", __version__, settings.memory_file, settings.lesson_file, project
        )
    else:
        log.warning("memory-graph %s: memory in %s", __version__, app.store.location)
    if args.transport == "stdio":
        from memory_graph.stdio import run_stdio

        app.start_loading()
        try:
            return run_stdio(app.server)
        finally:
            app.close()  # writes the embeddings, and the start snapshot if this session changed the memory
    from memory_graph.http import check_binding, run_http

    host = args.host or settings.host
    if settings.project == AUTO_PROJECT:
        raise InvalidInputError(
            "MEMORY_PROJECT=auto chooses a project per stdio connection; over HTTP every client would share the "
            "first one's. Serve projects at /mcp/<project> instead (unset MEMORY_PROJECT, or pin one name)."
        )
    check_binding(host, settings.auth_token or next(iter(settings.project_tokens), None))
    app.start_loading()
    try:
        return run_http(app, host=host, port=args.port or settings.port)
    finally:
        app.close()  # writes the embeddings, and the start snapshot if this session changed the memory


def check(services: Services, args: argparse.Namespace) -> int:
    found = services.store.check()
    for line in found.problems:
        print(f"problem: {line}")
    for line in found.notes:
        print(f"note: {line}")
    print("ok" if found.ok else f"{len(found.problems)} problem(s); `memory-graph repair` fixes them")
    return 0 if found.ok else 1


def repair(services: Services, args: argparse.Namespace) -> int:
    found = services.store.check(fix=True)
    print("\n".join(found.repaired) if found.repaired else "nothing to repair")
    for line in found.problems:
        print(f"still a problem: {line}")
    return 0 if found.ok else 1


def stats(services: Services, args: argparse.Namespace) -> int:
    exported = services.graph.export()
    shards = services.store.describe()
    kinds = {"memory": exported.entities, "lesson": exported.lessons}
    out = {}
    for name, files in shards.items():
        types = Counter(r["entityType"] for r in kinds.get(name, []))
        relations = Counter(r["relationType"] for r in exported.relations) if name == "memory" else Counter()
        out[name] = {
            "entities": sum(types.values()),
            "relations": sum(relations.values()),
            "entityTypes": dict(types.most_common()),
            "relationTypes": dict(relations.most_common()),
            "shards": files,
            "bytes": sum(f["bytes"] for f in files),
        }
    if "history" in out:
        span = services.history.span()
        out["history"] = {k: v for k, v in out["history"].items() if k in ("shards", "bytes")}
        out["history"].update(events=span.events, oldestChange=span.oldest, newestChange=span.newest)
    return write_stdout(json.dumps(out, indent=2, ensure_ascii=False) + "\n")


def compact(services: Services, args: argparse.Namespace) -> int:
    days = services.settings.history_days if args.days is None else args.days
    if days < 0:
        raise InvalidInputError(f"--days {days}: give 0 (keep all) or a number of days")
    if days == 0:
        print("history kept whole (MEMORY_HISTORY_DAYS is 0); give --days N to keep only N days")
        return 0
    dropped = services.store.prune_history(datetime.now(UTC) - timedelta(days=days))
    print(f"dropped {dropped} change event(s) older than {days} day(s)")
    return 0


def export(services: Services, args: argparse.Namespace) -> int:
    exported = services.graph.export()
    text = render(exported, args.format)
    count = len(exported.entities) + len(exported.lessons) + len(exported.relations)
    if args.output is None:
        return write_stdout(text)
    target = args.output.expanduser().absolute()
    if target.resolve() in services.store.paths():
        raise InvalidInputError(f"--output {args.output} is one of the store's own files; choose another file")
    if target.exists() and not args.force:
        raise InvalidInputError(
            f"--output {args.output} already exists (it may be another store's memory, or an earlier export); "
            "choose another file, or add --force to replace it"
        )
    if not target.parent.is_dir():
        raise InvalidInputError(f"--output {args.output}: the folder {target.parent} does not exist; create it first")
    try:
        atomic_write(target, text)
    except OSError as exc:
        raise StorageError(f"cannot write {args.output}: {exc.strerror or exc}") from exc
    print(f"exported {count} records to {args.output}", file=sys.stderr)
    return 0


def write_stdout(text: str) -> int:
    """Write to standard output; a reader that went away (`export | head`) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # Python would report the pipe again when it flushes at exit; point stdout at nothing instead.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def import_(services: Services, args: argparse.Namespace) -> int:
    from lessons.model import is_lesson_record

    files = files_to_import(args.paths)
    unreadable: list[str] = []
    entities: list[dict[str, Any]] = []
    lessons: list[dict[str, Any]] = []
    lesson_places: list[str] = []
    relations: list[dict[str, Any]] = []
    for path in files:
        for item in read_source(path):
            if item.record is None:
                unreadable.append(item.problem)
            elif item.record["type"] == "relation":
                relations.append(item.record)
            elif is_lesson_record(item.record):
                lessons.append(item.record)
                lesson_places.append(item.place)
            else:
                entities.append(item.record)
    summary = ImportSummary()
    bar = ProgressBar("importing", total=len(lessons) + len(entities) + len(relations))
    for offset, step in (
        (0, lambda: services.lessons.import_lessons(lessons, summary, places=lesson_places)),
        (len(lessons), lambda: services.graph.import_entities(entities, summary)),
        (len(lessons) + len(entities), lambda: services.graph.import_relations(relations, summary)),
    ):
        summary.on_progress = lambda done, offset=offset: bar(offset + done)
        step()
    invalid = [*unreadable, *summary.invalid]
    print(
        f"imported {summary.entities} entities, {summary.relations} relations, {summary.lessons} lessons "
        f"from {len(files)} file(s); merged {summary.merged} into names already there; skipped "
        f"{summary.duplicates} duplicates and {summary.dangling} relations whose ends do not exist"
    )
    report_problems("skipped", summary.problems)
    report_problems("could not be read, so were not imported (fix them and import again)", invalid)
    return 1 if invalid else 0


def report_problems(what: str, problems: list[str], shown: int = 50) -> None:
    if problems:
        print(f"{len(problems)} record(s) {what}:", file=sys.stderr)
    for problem in problems[:shown]:
        print(f"  {problem}", file=sys.stderr)
    if len(problems) > shown:
        print(f"  ... and {len(problems) - shown} more", file=sys.stderr)


def migrate(services: Services, args: argparse.Namespace) -> int:
    target_settings = migration_target(services.settings, args.to)
    source = services.store
    if target_settings.database_url is None:
        # (The lessons' file is named lesson.json beside any memory file: a target in the source's folder is one.)
        own = {path.resolve() for path in source.paths()}
        shared = sorted(
            str(f) for f in (target_settings.memory_file, target_settings.lesson_file) if f.resolve() in own
        )
        if shared:
            raise InvalidInputError(
                f"--to {args.to} would write {', '.join(shared)}, which this store uses; "
                "choose a file in another folder"
            )
    target = store_for(target_settings)
    if target.location == source.location:
        raise InvalidInputError(f"--to {args.to} is this store itself; name another database or file")
    try:
        copied = copy_records(source, target)
    finally:
        target.close()
    reopened = store_for(target_settings)
    try:
        held = reopened.record_counts()
    finally:
        reopened.close()
    wrong = {name: (count, held.get(name, 0)) for name, count in copied.items() if held.get(name, 0) != count}
    if wrong:
        shown = ", ".join(f"{name}: {want} in the source, {got} in the target" for name, (want, got) in wrong.items())
        raise StorageError(f"the copy in {reopened.location} does not match ({shown}); the source is unchanged")
    counts = ", ".join(f"{count} {name}" for name, count in copied.items())
    print(f"copied {counts} records from {source.location} to {reopened.location}; counts verified")
    return 0


def projects(services: Services, args: argparse.Namespace) -> int:
    found = list_projects(services.settings)
    return write_stdout(json.dumps(found.model_dump(exclude_none=True), indent=2, ensure_ascii=False) + "\n")


def move_entity_command(services: Services, args: argparse.Namespace) -> int:
    default = args.to_project.strip().lower() == DEFAULT_STORE
    name = DEFAULT_STORE if default else project_name(args.to_project, "--to-project")
    if name == (services.settings.project or DEFAULT_STORE):
        raise InvalidInputError(f"--to-project {name} is the store the entity is in; name another one")
    target_settings = services.settings.for_project(None if default else name)
    if not args.create:
        require_known(target_settings, "--to-project", "add --create to make it; check the spelling first")
    target = build_services(target_settings)
    moved = move_entity(services, target, args.name)
    print(f"moved {moved.name!r} with {moved.relations_moved} relation(s) to project {name}")
    if moved.relations_left:
        print(
            f"{len(moved.relations_left)} relation(s) to entities project {name} lacks were deleted with it (the "
            "history keeps them; restore_entity brings them back): " + "; ".join(moved.relations_left)
        )
    return 0


MAKES_PROJECTS = ("import", "projects")  # every other command reads or changes a store that must exist already
ADMIN = {
    "projects": projects,
    "move-entity": move_entity_command,
    "migrate": migrate,
    "check": check,
    "repair": repair,
    "stats": stats,
    "export": export,
    "import": import_,
    "compact": compact,
}


class ProgressBar:
    """A progress bar on stderr, shown only once the work has taken more than a moment."""

    def __init__(self, label: str, total: int, stream: TextIO | None = None, delay: float = 0.5) -> None:
        self.label, self.total, self.stream, self.delay = label, total, stream or sys.stderr, delay
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.started < self.delay or (now - self.last < 0.1 and done < self.total):
            return
        self.last = now
        width = 30
        filled = int(width * done / self.total) if self.total else width
        end = "\n" if done >= self.total else ""
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}{end}")
        self.stream.flush()
