"""Two ways people really use a memory that the per-call benches miss, over stdio, this checkout and another one
(`--code`, a `git worktree`) alternately in one run (bench/alternate.py):

- **official**: a memory the official server wrote (one `memory.jsonl` of N entities, 3 observations each, and 2N
  relations). A server starts on it, answers, is left to finish its start snapshot, makes one create_entities, and
  reads 1.5 s later (`read_after_write_ms`: when the check for hand edits comes round), RSS then. Then
  `memory-graph import` adds one entity from a file, and a server starts again (`start_after_import_s`, RSS).
- **large-record**: a memory of 5,000 small entities and one of `--observations` (the user's own, which a
  personalization prompt adds to at every chat), edited `--edits` times by add_observations. A server starts on
  it (`start_s`, RSS), then one list_entities (time, RSS after) and one get_history of that entity (limit 5: the
  characters of its answer); the history's size on disk and its newest shard's.

    .venv/bin/python bench/flows_bench.py --code /path/to/other/worktree --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import alternate
from startup_bench import request, rss_kb, wait_for_snapshot, write_memory

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


class Server:
    """A stdio server of the code on the path (PYTHONPATH, set by alternate.py) on one memory file."""

    def __init__(self, memory: Path) -> None:
        env = {
            **os.environ,
            "MEMORY_FILE_PATH": str(memory),
            "XDG_CACHE_HOME": str(memory.parent / "cache"),
            "MEMORY_SEMANTIC": "off",
        }
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "memory_graph"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.ids = iter(range(1, 1 << 30))
        request(self.process, {"jsonrpc": "2.0", "id": next(self.ids), "method": "initialize", "params": INIT})
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[float, str]:
        """Seconds the call took, and its answer's text."""
        started = time.perf_counter()
        message = {"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call"}
        answer = request(self.process, {**message, "params": {"name": tool, "arguments": arguments}})
        seconds = time.perf_counter() - started
        assert "result" in answer and not answer["result"].get("isError"), str(answer)[:300]
        return seconds, answer["result"]["content"][0]["text"]

    def rss_mb(self) -> float:
        return rss_kb(self.process.pid) / 1024

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def official(folder: Path, entities: int) -> dict[str, float]:
    memory = folder / "memory.jsonl"
    write_memory(memory, entities)
    server = Server(memory)
    server.call("open_nodes", {"names": ["Entity 7"]})
    wait_for_snapshot(memory)
    time.sleep(3)
    created = {"entities": [{"name": "Newcomer", "entityType": "person", "observations": ["arrived"]}]}
    server.call("create_entities", created)
    time.sleep(1.5)
    read, _ = server.call("open_nodes", {"names": ["Entity 8"]})
    result = {"read_after_write_ms": read * 1000, "rss_after_write_mb": server.rss_mb()}
    server.close()
    extra = folder / "extra.jsonl"
    extra.write_text(json.dumps({"type": "entity", "name": "Imported", "entityType": "x", "observations": []}) + "\n")
    env = {**os.environ, "MEMORY_FILE_PATH": str(memory), "XDG_CACHE_HOME": str(folder / "cache")}
    command = [sys.executable, "-m", "memory_graph", "import", str(extra)]
    subprocess.run(command, env=env, check=True, capture_output=True)
    server = Server(memory)
    server.call("open_nodes", {"names": ["Imported"]})
    result |= {"start_after_import_s": time.perf_counter() - server.started, "rss_after_import_mb": server.rss_mb()}
    server.close()
    return result


def large_record(folder: Path, observations: int, edits: int) -> dict[str, float]:
    from memory_graph.app import services_for_folder
    from memory_graph.model import Entity, ObservationAddition

    built = services_for_folder(folder, shard_lines=1000)
    built.store.open()
    facts = [f"fact number {i} about the user, a sentence of ordinary length" for i in range(observations)]
    built.graph.create_entities([Entity(name="default_user", entityType="person", observations=facts)])
    built.graph.create_entities([Entity(name=f"E{i}", entityType="thing", observations=["x"]) for i in range(5000)])
    for k in range(edits):
        built.graph.add_observations([ObservationAddition(entityName="default_user", contents=[f"new fact {k}"])])
    built.store.close()
    shards = list(folder.glob("history*.json"))
    server = Server(folder / "memory.json")
    server.call("open_nodes", {"names": ["E7"]})
    result = {"start_s": time.perf_counter() - server.started, "start_rss_mb": server.rss_mb()}
    listed, _ = server.call("list_entities", {"limit": 5})
    result |= {"list_entities_ms": listed * 1000, "rss_after_list_mb": server.rss_mb()}
    _, text = server.call("get_history", {"name": "default_user", "limit": 5})
    server.close()
    return result | {
        "get_history_chars": len(text),
        "history_mb": sum(p.stat().st_size for p in shards) / 2**20,
        "newest_shard_mb": max(shards, key=lambda p: p.stat().st_mtime_ns).stat().st_size / 2**20,
    }


def child(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp())
    try:
        if args.scenario == "official":
            result = official(folder, args.entities)
        else:
            result = large_record(folder, args.observations, args.edits)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=["official", "large-record", "both"], default="both")
    parser.add_argument("--entities", type=int, default=100_000, help="official: the memory's entities")
    parser.add_argument("--observations", type=int, default=2000, help="large-record: the user entity's")
    parser.add_argument("--edits", type=int, default=400, help="large-record: add_observations to it")
    alternate.add_arguments(parser)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    for scenario in ["official", "large-record"] if args.scenario == "both" else [args.scenario]:
        arguments = ["--scenario", scenario, "--entities", str(args.entities)]
        arguments += ["--observations", str(args.observations), "--edits", str(args.edits)]
        for label, runs in alternate.run_alternately(__file__, arguments, args).items():
            for number, figures in enumerate(runs, 1):
                shown = ", ".join(f"{name} {value:.2f}" for name, value in figures.items())
                print(f"{scenario}, {label}, run {number}: {shown}", flush=True)


if __name__ == "__main__":
    main()
