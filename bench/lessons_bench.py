"""Lesson lookup latency over stdio with many lessons.

Creates N lessons (the dev corpus' lessons, then variations of them with other identifiers, tools and wording),
then times find_similar_errors (each dev query's errorPattern) and get_lesson_recommendations (a 200-line log:
build noise around each dev query's log), and prints p50/p95 and the dev-set top-1 at that size.

    .venv/bin/python bench/lessons_bench.py --lessons 10000
    .venv/bin/python bench/lessons_bench.py --lessons 50000 --import-store   # store built in process

The server runs with MEMORY_SEMANTIC=off unless the environment says otherwise: the bars are the default install's,
and with the semantic extra installed a server that was just given 10,000 lessons spends minutes embedding them in
a background thread, which the lookups timed meanwhile would share a core with (find 38 ms p50 instead of 8).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_graph.app import services_for_folder  # noqa: E402
from memory_graph.graph import ImportSummary  # noqa: E402

CORPUS = ROOT.parent / "shared" / "data" / "errors-dev.json"
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "cache",
    "queue",
    "worker",
    "socket",
    "parser",
    "render",
    "schema",
    "token",
    "session",
    "buffer",
    "stream",
    "index",
    "shard",
    "replica",
    "tenant",
    "invoice",
    "ledger",
    "sensor",
    "pixel",
    "widget",
    "plugin",
    "module",
    "adapter",
    "driver",
    "kernel",
]
TOOLS = ["gradle", "terraform", "kubectl", "docker", "helm", "ansible", "go", "dotnet", "swift", "ruby", "php"]
NOISE = [
    "[INFO] Downloading dependency {w}-{n}.jar",
    "  Compiling {w} v0.{n}.0",
    "Step {n}/40 : RUN make {w}",
    "{w}: ok ({n} ms)",
    "npm http fetch GET 200 https://registry.example/{w} {n}ms",
    "collected {n} items",
    "warning: unused variable `{w}`",
]


class Client:
    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memory_graph"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
            bufsize=1,
        )
        self.next_id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}},
        )
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.proc.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}) + "\n"
        )
        self.proc.stdin.flush()
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                return message

    def call(self, tool: str, arguments: dict) -> tuple[dict, float]:
        start = time.perf_counter()
        message = self.request("tools/call", {"name": tool, "arguments": arguments})
        return message["result"], (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def variation(lesson: dict, i: int, rng: random.Random) -> dict:
    pattern = dict(lesson["errorPattern"])
    words = rng.sample(WORDS, 3)
    tool = rng.choice(TOOLS)
    pattern["message"] = f"{tool}: {pattern['message']} [{words[0]}_{i}]".replace("e", rng.choice("eaio"), 1)
    pattern["context"] = f"{words[1]} {words[2]} job {i}"
    return {
        **lesson,
        "name": f"{lesson['name']}_{tool.upper()}_{i}",
        "errorPattern": pattern,
        "observations": [f"{tool} {words[0]} variant {i}: {o}" for o in lesson["observations"]],
    }


def noisy_log(log: str, rng: random.Random, lines: int = 200) -> str:
    body = log.split("\n")
    noise = [rng.choice(NOISE).format(w=rng.choice(WORDS), n=rng.randint(1, 999)) for _ in range(lines - len(body))]
    cut = rng.randint(0, len(noise))
    return "\n".join(noise[:cut] + body + noise[cut:])


def same_class(found: str, expected: str) -> bool:
    """The expected lesson or one of its variations (which are near-copies of it)."""
    return found == expected or (found.startswith(expected + "_") and found.rsplit("_", 1)[-1].isdigit())


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lessons", type=int, default=10_000)
    parser.add_argument("--corpus", default=str(CORPUS))
    parser.add_argument("--settle", type=float, default=30.0, help="seconds to wait before timing (default 30)")
    parser.add_argument(
        "--import-store", action="store_true", help="build the store in process (import) instead of one call each"
    )
    args = parser.parse_args()
    corpus = json.loads(Path(args.corpus).read_text(encoding="utf-8"))
    rng = random.Random(1)
    with tempfile.TemporaryDirectory() as folder:
        env = {
            "MEMORY_SEMANTIC": "off",
            **os.environ,
            "MEMORY_FILE_PATH": str(Path(folder) / "memory.json"),
            "PYTHONPATH": str(ROOT),
        }
        started = time.perf_counter()
        lessons = list(corpus["lessons"])
        while len(lessons) < args.lessons:
            lessons.append(variation(rng.choice(corpus["lessons"]), len(lessons), rng))
        if args.import_store:
            imported = services_for_folder(Path(folder)).lessons
            imported.import_lessons([{"type": "entity", "entityType": "lesson", **x} for x in lessons], ImportSummary())
            imported.store.close()
        client = Client(env)
        if not args.import_store:
            for lesson in lessons:
                result, _ = client.call("create_lesson", {"lesson": lesson})
                assert not result.get("isError"), result
        print(f"created {len(lessons)} lessons in {time.perf_counter() - started:.1f} s")
        # A server that was just given a large store builds its search index and writes its start snapshot in the
        # background: lookups timed then share the processors with that work (p95 of 300 ms at 50k).
        time.sleep(args.settle)
        find_ms: list[float] = []
        rec_ms: list[float] = []
        find_hits = rec_hits = 0
        for query in corpus["queries"]:
            result, ms = client.call("find_similar_errors", {"errorPattern": query["errorPattern"]})
            find_ms.append(ms)
            names = [m["name"] for m in result["structuredContent"]["matches"]]
            find_hits += bool(names) and same_class(names[0], query["expected"])
            result, ms = client.call("get_lesson_recommendations", {"context": noisy_log(query["log"], rng)})
            rec_ms.append(ms)
            names = [r["name"] for r in result["structuredContent"]["recommendations"]]
            rec_hits += bool(names) and same_class(names[0], query["expected"])
        client.close()
    n = len(corpus["queries"])
    for label, times, hits in (
        ("find_similar_errors", find_ms, find_hits),
        ("get_lesson_recommendations (200-line logs)", rec_ms, rec_hits),
    ):
        p50, p95 = statistics.median(times), percentile(times, 0.95)
        print(f"{label:44} p50 {p50:6.1f} ms  p95 {p95:6.1f} ms  top-1 {hits / n:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
