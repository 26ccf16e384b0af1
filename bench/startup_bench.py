"""Cold start and memory, side by side with the official server: spawn -> first useful answer, and RSS after it.

For each size, one memory file of N entities (3 observations each) and 2N relations is written straight to disk
in the official format, which both servers read as is. Each server is then spawned on its own copy, sent
`initialize`, then `open_nodes` (or `search_nodes`), and timed from spawn to that answer; its RSS is read from
/proc right after. Runs alternate between the servers, so drift on a shared machine hits both.

memory-graph is measured three ways: its first start on a memory (it reads the files, then writes its start
snapshot, storage/snapshot.py); a restart (a first server ran one call and exited; the measured one restores the
snapshot); and, with MEMORY_SHARED_SERVER=on, a start relayed to the shared server a first start launched (that
start ran one call and exited; the shared server stays, warm). Clients start a server at every launch, so the
restart (or the relayed start) is the start people wait for most often. For the shared server, the RSS of the
shared server itself is reported beside the relaying start's.

    .venv/bin/python bench/startup_bench.py --sizes 10000,100000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = (
    ROOT / ".ci" / "reference" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
)


def write_memory(path: Path, size: int) -> None:
    rng = random.Random(size)
    kinds = ["person", "organization", "project", "place"]
    with open(path, "w", encoding="utf-8") as out:
        for i in range(size):
            observations = [f"fact {j} about entity {i}: likes topic{rng.randrange(1000)}" for j in range(3)]
            record = {
                "type": "entity",
                "name": f"Entity {i}",
                "entityType": rng.choice(kinds),
                "observations": observations,
            }
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
        for i in range(size):
            for _ in range(2):
                relation = {"type": "relation", "from": f"Entity {i}", "to": f"Entity {rng.randrange(size)}"}
                out.write(json.dumps({**relation, "relationType": "knows"}, separators=(",", ":")) + "\n")


def megabytes(kib: float) -> float:
    """/proc's kB are KiB: as MB of 10^6 bytes, the unit the disk sizes are given in (until the twentieth
    session the RSS was divided by 1024 and called MB, 4.9% under its size in MB, and so were bytes per byte)."""
    return kib * 1024 / 1e6


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """The process's RSS in KiB, or with `field="VmHWM"` the most it has held since it started."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def request(process: subprocess.Popen[bytes], message: dict) -> dict:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()
    while True:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the server exited")
        answer = json.loads(line)
        if answer.get("id") == message.get("id"):
            return answer


def semantic_setting() -> dict[str, str]:
    """MEMORY_SEMANTIC passed on: `off` measures the default install in a venv that has the extra."""
    return {"MEMORY_SEMANTIC": os.environ["MEMORY_SEMANTIC"]} if "MEMORY_SEMANTIC" in os.environ else {}


def server_env(memory: Path, extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measured server: its memory, and a cache folder (the snapshot's) beside it."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "MEMORY_FILE_PATH": str(memory), "PYTHONPATH": str(ROOT)}
    env["XDG_CACHE_HOME"] = str(memory.parent / "cache")
    env.update(semantic_setting())
    env.update(extra_env or {})
    return env


def wait_for_snapshot(memory: Path, limit: float = 1800.0) -> None:
    """Until the server on `memory` has written its start snapshot: on a first start it does so once its load's
    background work (the search index) is done. A memory too small to keep one (under the store's
    SNAPSHOT_MIN_RECORDS, 20,000 records) is not waited for."""
    if sum(1 for _ in memory.open("rb")) < 20_000:
        return
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and not any((memory.parent / "cache").rglob("snapshots/*.bin")):
        time.sleep(0.5)


def shared_server_pid(runtime: Path) -> int | None:
    """The shared server's pid (written in its lock), when one runs for this runtime folder."""
    for lock in (runtime / "memory-graph").glob("*.lock"):
        text = lock.read_text().strip()
        if text and Path(f"/proc/{text}").exists():
            return int(text)
    return None


def stop_shared_server(runtime: Path) -> None:
    pid = shared_server_pid(runtime)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 600
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def prime(
    command: list[str], memory: Path, tool: str, arguments: dict, extra_env: dict[str, str] | None = None
) -> None:
    """Run a server once on `memory` (one call, then its input closes and it exits as clients end it), once its
    background work is done: a server closed before its search index is built saves the index unbuilt, and the
    next start builds it (and saves it then), so a restart after that one would measure a different start."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=server_env(memory, extra_env),
    )
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    request(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    request(process, call)
    wait_for_snapshot(memory)
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=600)


def cold_start(
    command: list[str],
    memory: Path,
    tool: str,
    arguments: dict,
    extra_env: dict[str, str] | None = None,
    settle: float = 0,
    holder: Path | None = None,
) -> tuple[float, float, int, int, int]:
    """(seconds to the initialize answer, seconds to the tool's answer, RSS in KiB after it, and `settle` seconds
    later: what a long session holds once the load's background work is done, and the most it held until then).
    `holder`: the runtime folder of a shared server, whose RSS is the one reported (the measured process only
    relays to it)."""
    env = server_env(memory, extra_env)
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        request(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        initialized = time.perf_counter() - started
        assert process.stdin is not None
        process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        answer = request(process, call)
        answered = time.perf_counter() - started
        assert "result" in answer and not answer["result"].get("isError"), answer
        held_by = (shared_server_pid(holder) if holder else None) or process.pid
        at_answer = rss_kb(held_by)
        time.sleep(settle)
        settled = rss_kb(held_by) if settle else at_answer
        return initialized, answered, at_answer, settled, rss_kb(held_by, "VmHWM")
    finally:
        process.kill()
        process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--settle",
        type=float,
        default=0,
        help="also measure RSS this many seconds after, and the most the process held until then (VmHWM)",
    )
    args = parser.parse_args()
    ours = [sys.executable, "-m", "memory_graph"]
    servers = {"memory-graph": ours, "memory-graph restart": ours, "memory-graph shared": ours}
    if REFERENCE.exists() and shutil.which("node"):
        servers = {"official": ["node", str(REFERENCE)], **servers}
    probes: dict[str, dict[str, Any]] = {"open_nodes": {"names": ["Entity 7"]}, "search_nodes": {"query": "topic42"}}
    results: dict[str, dict] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as folder:
            source = Path(folder) / "source.jsonl"
            write_memory(source, size)
            disk = source.stat().st_size
            figures: dict[str, dict[str, list[float]]] = {name: {} for name in servers}
            for run in range(args.runs):
                for tool, arguments in probes.items():
                    for name, command in servers.items():
                        copy = Path(folder) / f"{name}-{run}-{tool}" / "memory.json"
                        copy.parent.mkdir()
                        shutil.copy(source, copy)
                        runtime = Path(tempfile.mkdtemp(prefix="mg-bench-"))  # short: a socket path's limit
                        shared = {"MEMORY_SHARED_SERVER": "on", "XDG_RUNTIME_DIR": str(runtime)}
                        extra = shared if name.endswith("shared") else None
                        if name.endswith(("restart", "shared")):
                            prime(command, copy, tool, arguments, extra)
                        try:
                            initialized, answered, rss, settled, peak = cold_start(
                                command, copy, tool, arguments, extra, args.settle, runtime if extra else None
                            )
                        finally:
                            stop_shared_server(runtime)
                            shutil.rmtree(runtime)
                        row = figures[name]
                        row.setdefault("initialize s", []).append(initialized)
                        row.setdefault(f"first {tool} s", []).append(answered)
                        row.setdefault(f"RSS after {tool} MB", []).append(megabytes(rss))
                        if args.settle:
                            row.setdefault(f"RSS {args.settle:g} s after {tool} MB", []).append(megabytes(settled))
                            row.setdefault(f"most RSS by then ({tool}) MB", []).append(megabytes(peak))
                        shutil.rmtree(copy.parent)
            medians = {name: {k: statistics.median(v) for k, v in row.items()} for name, row in figures.items()}
            results[str(size)] = {"disk MB": disk / 1e6, **medians}
            print(f"\n== {size} entities, {2 * size} relations, {disk / 1e6:.1f} MB on disk (median of {args.runs}) ==")
            names = list(servers)
            print(f"{'metric':32}" + "".join(f"{n:>22}" for n in names))
            for metric in medians[names[-1]]:
                print(f"{metric:32}" + "".join(f"{medians[n].get(metric, float('nan')):>22.2f}" for n in names))
            per_byte = "".join(f"{medians[n]['RSS after open_nodes MB'] * 1e6 / disk:>22.1f}" for n in names)
            print(f"{'RSS per byte on disk':32}{per_byte}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
