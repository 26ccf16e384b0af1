"""Entry point: `memory-graph [serve] [--transport stdio|http] [--host H] [--port P]`.

Logs go to stderr; on stdio, stdout carries nothing but the protocol.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from memory_graph.config import Settings
from memory_graph.errors import MemoryGraphError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-graph",
        description="A long-term memory for AI assistants: an MCP knowledge-graph and lessons server.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    serve = commands.add_parser("serve", help="serve MCP (the default command)")
    for target in (parser, serve):
        target.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="default: stdio")
        target.add_argument("--host", help="HTTP bind address (default 127.0.0.1, or MEMORY_HOST)")
        target.add_argument("--port", type=int, help="HTTP port (default 8000, or MEMORY_PORT)")
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
        return serve(settings, args)
    except MemoryGraphError as exc:
        print(f"memory-graph: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


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


if __name__ == "__main__":
    sys.exit(main())
