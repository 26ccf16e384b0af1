"""Several stdio servers on one store: calls per second and write latency, one process against N.

Each editor window spawns its own server, so several processes share one memory. The store (N entities with
3 observations each, written straight to disk in the official format) is served by 1 process, then by
`--processes` processes, each driven by a thread of this script doing mixed calls for `--seconds`: 70% reads
(search_nodes, open_nodes), 30% writes (add_observations to a random entity, create_entities of a new one).

    .venv/bin/python bench/processes_bench.py --entities 10000 --processes 16 --seconds 20 [--shared]

`--shared` also measures the N stdio starts relayed to one shared server (MEMORY_SHARED_SERVER=on), which then
serves every call from one process.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from startup_bench import request, stop_shared_server, write_memory  # noqa: E402


def spawn(memory: Path, runtime: Path | None = None) -> subprocess.Popen[bytes]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "MEMORY_FILE_PATH": str(memory),
        "PYTHONPATH": str(ROOT),
        "MEMORY_SEMANTIC": "off",
    }
    if runtime is not None:
        env.update(MEMORY_SHARED_SERVER="on", XDG_RUNTIME_DIR=str(runtime))
    process = subprocess.Popen(
        [sys.executable, "-m", "memory_graph"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    request(process, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    assert process.stdin is not None
    process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    process.stdin.flush()
    return process


def drive(process: subprocess.Popen[bytes], worker: int, size: int, until: float, out: dict[str, list[float]]) -> None:
    rng = random.Random(worker)
    number = 1
    while time.perf_counter() < until:
        number += 1
        roll = rng.random()
        entity = f"Entity {rng.randrange(size)}"
        if roll < 0.35:
            name, arguments, kind = "search_nodes", {"query": f"topic{rng.randrange(1000)}"}, "read"
        elif roll < 0.7:
            name, arguments, kind = "open_nodes", {"names": [entity]}, "read"
        elif roll < 0.9:
            contents = [f"note {worker}-{number}"]
            name, arguments, kind = (
                "add_observations",
                {"observations": [{"entityName": entity, "contents": contents}]},
                "write",
            )
        else:
            new = {"name": f"New {worker}-{number}", "entityType": "note", "observations": ["x"]}
            name, arguments, kind = "create_entities", {"entities": [new]}, "write"
        call = {
            "jsonrpc": "2.0",
            "id": number,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        }
        started = time.perf_counter()
        answer = request(process, call)
        elapsed = time.perf_counter() - started
        assert "result" in answer and not answer["result"].get("isError"), answer
        out[kind].append(elapsed)


def run(
    memory: Path, count: int, size: int, seconds: float, settle: float = 0.0, runtime: Path | None = None
) -> tuple[float, float, float]:
    """(calls per second, read p50 ms, write p95 ms) with `count` processes, `settle` seconds after their first
    calls (a server's background work after its load, the search index and its start snapshot, is then done);
    relayed to a shared server in `runtime` when given."""
    processes = [spawn(memory, runtime) for _ in range(count)]
    try:
        # Every server's first call loads the store: done before the clock starts.
        for process in processes:
            call = {"name": "open_nodes", "arguments": {"names": ["Entity 0"]}}
            request(process, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        time.sleep(settle)
        results = [{"read": [], "write": []} for _ in processes]
        until = time.perf_counter() + seconds
        threads = [
            threading.Thread(target=drive, args=(p, i, size, until, results[i])) for i, p in enumerate(processes)
        ]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
    finally:
        for process in processes:
            process.kill()
            process.wait()
    reads = sorted(t for r in results for t in r["read"])
    print(
        f"  ({count}) read p95 {reads[int(len(reads) * 0.95)] * 1000:.1f} ms, "
        f"write p50 {statistics.median(t for r in results for t in r['write']) * 1000:.1f} ms"
    )
    writes = sorted(t for r in results for t in r["write"])
    calls = len(reads) + len(writes)
    write_p95 = writes[int(len(writes) * 0.95)] * 1000 if writes else 0.0
    return calls / elapsed, statistics.median(reads) * 1000, write_p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=10000)
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--settle", type=float, default=0, help="seconds between the servers' first calls and the measured ones"
    )
    parser.add_argument("--shared", action="store_true", help="also the N starts relayed to one shared server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "source.json"
        write_memory(source, args.entities)
        figures: dict[str, tuple[float, float, float]] = {}
        setups = [("1", 1, False), (str(args.processes), args.processes, False)]
        if args.shared:
            setups.append((f"{args.processes} shared", args.processes, True))
        for name, count, shared in setups:
            store = Path(folder) / f"store-{name.replace(' ', '-')}"
            store.mkdir()
            shutil.copy(source, store / "memory.json")
            runtime = Path(tempfile.mkdtemp(prefix="mg-bench-")) if shared else None  # short: a socket path's limit
            try:
                figures[name] = run(store / "memory.json", count, args.entities, args.seconds, args.settle, runtime)
            finally:
                if runtime is not None:
                    stop_shared_server(runtime)
                    shutil.rmtree(runtime)
            rate, read_p50, write_p95 = figures[name]
            print(
                f"{args.entities} entities, {name} process(es): {rate:.1f} calls/s, "
                f"read p50 {read_p50:.1f} ms, write p95 {write_p95:.1f} ms"
            )
        for name in list(figures)[1:]:
            print(f"{name} processes keep {figures[name][0] / figures['1'][0]:.0%} of one process's throughput")
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
