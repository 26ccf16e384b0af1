"""Entry point: `memory-graph [serve|import|export|stats|check|repair] ...` (serve is the default).

Logs go to stderr; on stdio, stdout carries nothing but the protocol.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from memory_graph import __version__
from memory_graph.config import Settings
from memory_graph.errors import MemoryGraphError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-graph",
        description="A long-term memory for AI assistants: an MCP knowledge-graph and lessons server. "
        "The store is the one MEMORY_FILE_PATH (and LESSON_FILE_PATH) name.",
    )
    parser.add_argument("--version", action="version", version=f"memory-graph {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve MCP (the default command)")
    for target in (parser, serve):
        target.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
        target.add_argument("--host", help="HTTP bind address (default 127.0.0.1, or MEMORY_HOST)")
        target.add_argument("--port", type=int, help="HTTP port (default 8000, or MEMORY_PORT)")
    importing = commands.add_parser(
        "import",
        help="merge an official memory.jsonl, or the lessons fork's memory.json/lesson.json (with -N shards and "
        "file_registry.json), into the store; duplicates are skipped",
    )
    importing.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    exporting = commands.add_parser("export", help="write the whole memory out")
    exporting.add_argument("--format", choices=["jsonl", "json", "mermaid", "dot"], default="jsonl")
    exporting.add_argument("--output", type=Path, help="file to write (default: standard output)")
    commands.add_parser("stats", help="counts by type, shards and file sizes (JSON)")
    commands.add_parser("check", help="validate every shard; exit 1 when anything is wrong")
    commands.add_parser("repair", help="set aside bad and duplicate lines, finish or set aside a broken commit")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except MemoryGraphError as exc:
        print(f"memory-graph: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level, format="memory-graph %(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.command in (None, "serve"):
            return serve(settings, args)
        return administer(settings, args)
    except MemoryGraphError as exc:
        print(f"memory-graph: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def serve(settings: Settings, args: argparse.Namespace) -> int:
    from memory_graph.server import build_app

    app = build_app(settings)
    if args.transport == "stdio":
        app.start_loading()
        app.server.run()
        return 0
    from memory_graph.http import check_binding, run_http

    host = args.host or settings.host
    check_binding(host, settings.auth_token)
    app.start_loading()
    return run_http(app, host=host, port=args.port or settings.port)


def administer(settings: Settings, args: argparse.Namespace) -> int:
    from memory_graph import admin
    from memory_graph.server import build_store

    store = build_store(settings)
    if args.command == "check":
        checked = admin.check(store)
        for line in checked.problems:
            print(f"problem: {line}")
        for line in checked.notes:
            print(f"note: {line}")
        print("ok" if checked.ok else f"{len(checked.problems)} problem(s); `memory-graph repair` fixes them")
        return 0 if checked.ok else 1
    if args.command == "repair":
        done = admin.repair(store)
        print("\n".join(done) if done else "nothing to repair")
        return 0
    if args.command == "stats":
        print(json.dumps(admin.stats(store), indent=2, ensure_ascii=False))
        return 0
    if args.command == "export":
        if args.output:
            with open(args.output, "w", encoding="utf-8") as out:
                count = admin.export(store, args.format, out)
            print(f"exported {count} records to {args.output}", file=sys.stderr)
        else:
            admin.export(store, args.format, sys.stdout)
        return 0
    imported = admin.import_into(store, args.paths, progress=admin.ProgressBar("importing"))
    print(
        f"imported {imported.entities} entities, {imported.relations} relations, {imported.lessons} lessons "
        f"from {len(imported.files)} file(s); skipped {imported.skipped_duplicates} duplicates and "
        f"{imported.skipped_dangling} relations whose ends do not exist"
    )
    for problem in imported.problems[:50]:
        print(f"  {problem}", file=sys.stderr)
    if len(imported.problems) > 50:
        print(f"  ... and {len(imported.problems) - 50} more", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
