"""Spawn -> first search_nodes answer on a database that already holds a large memory, this checkout against
others (`git worktree` checkouts), alternated: the first-start figure of bench/postgres_bench.py without its
hour of setup, for comparing code on the same data.

    .venv/bin/python bench/postgres_first_search.py postgresql://.../db --code /path/to/worktree --rounds 6

Each run is a server on stdio sent `initialize`, then `search_nodes` (`--query`, default `topic42`: 32,643 of
the 1M entities that bench/postgres_bench.py writes), with a cache folder of its own (so a first start: no
snapshot), killed once it answers; runs are `--pause` seconds apart so the previous load's work has stopped.
With `--restart` each checkout first runs a server to the end of its load (list_entities waits for it) and lets
it exit, leaving its start snapshot, and every run restarts on that cache folder. With `--shared` every start
has MEMORY_SHARED_SERVER=on: a first start launches each checkout's shared server and waits for its load, and
every run is a start relayed to it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.startup_bench import request, stop_shared_server  # noqa: E402


def first_search(
    code: Path, url: str, query: str, cache: Path, until_loaded: bool = False, runtime: Path | None = None
) -> tuple[float, float, int]:
    """(seconds to the initialize answer, seconds to the search answer, the answer's size in bytes); with
    `until_loaded` the server then waits for its load and exits, leaving its start snapshot in `cache`; with
    `runtime`, the start relays to the shared server of that runtime folder."""
    shared = {"MEMORY_SHARED_SERVER": "on", "XDG_RUNTIME_DIR": str(runtime)} if runtime is not None else {}
    env = {
        **shared,
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MEMORY_DATABASE_URL": url,
        "XDG_CACHE_HOME": str(cache),
        "MEMORY_SEMANTIC": "off",
        "PYTHONPATH": str(code),
        "MEMORY_LOG_LEVEL": "INFO",
    }
    with tempfile.TemporaryFile() as log_file:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "memory_graph"],
            cwd=code,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
        )
        try:
            hello = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"},
            }
            request(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
            initialized = time.perf_counter()
            assert process.stdin is not None
            process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            process.stdin.flush()
            call = {"name": "search_nodes", "arguments": {"query": query}}
            answer = request(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
            answered = time.perf_counter()
            if until_loaded:
                call = {"name": "list_entities", "arguments": {"limit": 1}}
                request(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
                process.stdin.close()
                process.wait(timeout=900)
        finally:
            process.kill()
            process.wait()
            # Why a first search was slow, when the server said so (a read the database could not answer, an error).
            log_file.seek(0)
            for line in log_file.read().decode("utf-8", "replace").splitlines():
                if "instead" in line or " ERROR " in line:
                    print(f"    server: {line}", flush=True)
    return initialized - started, answered - started, len(json.dumps(answer))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", help="a database holding the memory (e.g. one bench/postgres_bench.py filled)")
    parser.add_argument("--code", action="append", default=[], help="another checkout to compare (repeatable)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--query", default="topic42")
    parser.add_argument("--pause", type=float, default=8.0)
    parser.add_argument("--restart", action="store_true", help="restarts on a start snapshot, not first starts")
    parser.add_argument("--shared", action="store_true", help="starts relayed to a warm shared server")
    args = parser.parse_args()
    checkouts = [ROOT, *(Path(code).resolve() for code in args.code)]
    totals: dict[Path, list[float]] = {code: [] for code in checkouts}
    # Short runtime folders: a socket's path holds about 100 bytes.
    runtimes = [Path(tempfile.mkdtemp(prefix="mg-bench-")) if args.shared else None for _ in checkouts]
    with tempfile.TemporaryDirectory() as folder:
        try:
            if args.restart or args.shared:
                for index, code in enumerate(checkouts):
                    warm = Path(folder) / f"warm-{index}"
                    first_search(code, args.url, args.query, warm, until_loaded=True, runtime=runtimes[index])
                    if args.shared:  # the shared server goes on: its warm-up ends with the snapshot's save
                        while not any(warm.rglob("snapshots/*.bin")):
                            time.sleep(0.5)
                    time.sleep(args.pause)
            for round_number in range(args.rounds):
                for index, code in enumerate(checkouts):
                    warm = args.restart or args.shared
                    cache = Path(folder) / (f"warm-{index}" if warm else f"{round_number}-{index}")
                    initialize, total, size = first_search(code, args.url, args.query, cache, runtime=runtimes[index])
                    totals[code].append(total)
                    print(
                        f"{code}: initialize {initialize:.2f} s, first search {total:.2f} s ({size:,} bytes)",
                        flush=True,
                    )
                    time.sleep(args.pause)
        finally:
            for runtime in runtimes:
                if runtime is not None:
                    stop_shared_server(runtime)
    for code, values in totals.items():
        print(f"{code}: median {statistics.median(values):.2f} s, range {min(values):.2f}-{max(values):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
