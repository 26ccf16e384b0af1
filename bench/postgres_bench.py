"""The PostgreSQL engine beside the JSON Lines files, in one run: cold start to the first search answer, and
one-entity writes and searches once warm.

For each size, N entities (3 observations each) and 2N relations are written straight to storage: the official
memory file for the files engine, the same records copied (COPY) into the tables for PostgreSQL. Then, for each
engine in turn (alternating, so drift on a shared machine hits both):
- cold start: a server is spawned on stdio, sent `initialize` and `search_nodes`, timed from spawn to the answer
  (on PostgreSQL that search is answered from the database while the server loads);
- restart: the same after a first server answered one call and exited, leaving its start snapshot
  (storage/snapshot.py; each run has a cache folder of its own);
- warm calls, in process: create_entities of one new entity, search_nodes for `topic0`.. (each a substring of
  about a tenth of the graph, or a hundredth past `topic99`), and search_nodes for one entity's name; p50 and p95.

    .venv/bin/python bench/postgres_bench.py --sizes 1000,100000 --runs 3
    .venv/bin/python bench/postgres_bench.py --sizes 1000000 --runs 1 --calls 100

It uses MEMORY_TEST_DATABASE_URL's server when set, else starts a throwaway one (tests/postgres_server.py).
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
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.startup_bench import megabytes, request, rss_kb, semantic_setting, write_memory  # noqa: E402
from memory_graph.app import build_services  # noqa: E402
from memory_graph.config import Settings  # noqa: E402
from memory_graph.model import Entity  # noqa: E402
from memory_graph.storage import PostgresStore, encode_key, record_key  # noqa: E402
from tests import postgres_server  # noqa: E402


def fresh_database(server_url: str, name: str) -> str:
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return server_url.rsplit("/", 1)[0] + "/" + name


def load_database(url: str, memory: Path) -> None:
    """The memory file's records copied straight into the tables (the schema made by the server's own code)."""
    store = PostgresStore(url, ["memory", "lesson"])
    store.open()
    store.close()
    with psycopg.connect(url) as conn, conn.cursor() as cursor:
        with (
            cursor.copy(
                "COPY memory_graph_records (store, collection, key, entity_name, position, record) FROM STDIN"
            ) as copy,
            open(memory, encoding="utf-8") as lines,
        ):
            seen: set[str] = set()  # the generator repeats a relation now and then; the files merge copies on read
            for position, line in enumerate(lines):
                record = json.loads(line)
                key = encode_key(record_key(record))
                if key in seen:
                    continue
                seen.add(key)
                name = record["name"] if record["type"] == "entity" else None
                copy.write_row(("default", "memory", key, name, position, line.strip()))
        cursor.execute("SELECT setval('memory_graph_position', (SELECT max(position) FROM memory_graph_records))")
    # What autovacuum does to a table soon after a bulk insert: statistics, and the visibility map the relation
    # counts' index-only scans need.
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE memory_graph_records")


def cold_start(env: dict[str, str], exit_gracefully: bool = False) -> tuple[float, int]:
    """Seconds from spawn to the first search_nodes answer, and RSS (KiB) after it (`exit_gracefully`: then close
    its input and wait for it to exit, as a client ends it; else kill it)."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_graph"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(ROOT), **semantic_setting(), **env},
    )
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        request(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        assert process.stdin is not None
        process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = {"name": "search_nodes", "arguments": {"query": "topic42"}}
        answer = request(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        assert "result" in answer and not answer["result"].get("isError"), answer
        figures = time.perf_counter() - started, rss_kb(process.pid)
        if exit_gracefully:
            # A database server answers that search while it loads: list_entities waits for the load, so the
            # server exits with all of it held and leaves its start snapshot, as a long session would.
            call = {"name": "list_entities", "arguments": {"limit": 1}}
            answer = request(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call})
            assert "result" in answer and not answer["result"].get("isError"), answer
            process.stdin.close()
            process.wait(timeout=600)
        return figures
    finally:
        process.kill()
        process.wait()


def warm_calls(folder: Path, url: str | None, calls: int, tag: str, size: int) -> dict[str, list[float]]:
    settings = Settings(
        memory_file=folder / "memory.json",
        lesson_file=folder / "lesson.json",
        database_url=url,
        cache_dir=folder / "cache" / "memory-graph",
        semantic="off",
    )
    services = build_services(settings)
    services.store.open()
    graph = services.graph
    graph.warm_up()
    times: dict[str, list[float]] = {"create_entities ms": [], "search_nodes ms": [], "search_nodes (a name) ms": []}
    for i in range(calls):
        started = time.perf_counter()
        graph.create_entities([Entity(name=f"{tag} new {i}", entityType="bench", observations=[f"note {i}"])])
        times["create_entities ms"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        graph.search_nodes(f"topic{i % 1000}")
        times["search_nodes ms"].append((time.perf_counter() - started) * 1000)
        # An entity's whole name, all its digits (no other name starts with it): the answer is that entity.
        started = time.perf_counter()
        graph.search_nodes(f"Entity {size // 10 + (i * 7919) % (size - size // 10)}")
        times["search_nodes (a name) ms"].append((time.perf_counter() - started) * 1000)
    services.store.close()
    return times


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--engines", default="files,postgresql", help="which engines to measure (comma-separated)")
    args = parser.parse_args()
    given = os.environ.get("MEMORY_TEST_DATABASE_URL", "").strip()
    server = None if given else postgres_server.create()
    server_url = given or (server.url if server else "")
    results: dict[str, Any] = {}
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            with tempfile.TemporaryDirectory() as folder:
                source = Path(folder) / "source.jsonl"
                write_memory(source, size)
                url = fresh_database(server_url, f"bench_{size}")
                started = time.perf_counter()
                load_database(url, source)
                print(
                    f"\n== {size} entities, {2 * size} relations (copied into PostgreSQL in "
                    f"{time.perf_counter() - started:.1f} s) =="
                )
                figures: dict[str, dict[str, list[float]]] = {e: {} for e in args.engines.split(",")}
                for run in range(args.runs):
                    for engine in figures:
                        run_folder = Path(folder) / f"{engine}-{run}"
                        run_folder.mkdir()
                        if engine == "files":
                            (run_folder / "memory.json").write_bytes(source.read_bytes())
                            env = {"MEMORY_FILE_PATH": str(run_folder / "memory.json")}
                        else:
                            env = {"MEMORY_DATABASE_URL": url}
                        env["XDG_CACHE_HOME"] = str(run_folder / "cache")
                        seconds, rss = cold_start(env, exit_gracefully=True)
                        row = figures[engine]
                        row.setdefault("first search_nodes s", []).append(seconds)
                        row.setdefault("RSS after it MB", []).append(megabytes(rss))
                        seconds, rss = cold_start(env)  # restores what the first one left
                        row.setdefault("restart: first search_nodes s", []).append(seconds)
                        row.setdefault("restart: RSS after it MB", []).append(megabytes(rss))
                        warm = warm_calls(run_folder, env.get("MEMORY_DATABASE_URL"), args.calls, f"r{run}", size)
                        for metric, values in warm.items():
                            row.setdefault(f"{metric} p50", []).append(p(values, 0.5))
                            row.setdefault(f"{metric} p95", []).append(p(values, 0.95))
                medians = {e: {k: statistics.median(v) for k, v in row.items()} for e, row in figures.items()}
                results[str(size)] = medians
                print(f"{'metric (median of runs)':32}" + "".join(f"{e:>14}" for e in medians) + f"{'ratio':>10}")
                for metric in next(iter(medians.values())):
                    values = [medians[e][metric] for e in medians]
                    ratio = values[-1] / values[0] if len(values) == 2 and values[0] else float("nan")
                    print(f"{metric:32}" + "".join(f"{v:>14.2f}" for v in values) + f"{ratio:>10.2f}")
    finally:
        if server is not None:
            server.stop("immediate")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
