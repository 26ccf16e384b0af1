"""What the change history costs: a write (one-entity create_entities and add_observations, p50 in process, on a
store with history and one without, interleaved so machine noise hits both alike), and with `--cold` a start
(spawn -> first search_nodes answer over stdio, on a store whose history holds N events, and on the same files
without the history; runs alternate).

    .venv/bin/python bench/history_bench.py --sizes 10000,100000 --calls 400
    .venv/bin/python bench/history_bench.py --cold --sizes 10000,100000 --events 200000,1000000 --runs 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memory_graph.app import build_services
from memory_graph.config import Settings
from memory_graph.graph import GraphService
from memory_graph.model import Entity, ObservationAddition


def filled(folder: Path, size: int, history: bool) -> GraphService:
    settings = Settings(memory_file=folder / "memory.json", lesson_file=folder / "lesson.json")
    services = build_services(settings)
    if not history:
        services.store.collections.pop("history")  # the same store, as one opened without history
    graph = services.graph
    for start in range(0, size, 5000):
        graph.create_entities(
            [Entity(name=f"e{i}", entityType="t", observations=[f"fact {i}"]) for i in range(start, start + 5000)]
        )
    return graph


def timed(call: object) -> float:
    start = time.perf_counter()
    call()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def with_events(folder: Path, size: int, events: int) -> None:
    """A memory of `size` entities whose history holds about `events` events (creates, then observations)."""
    graph = filled(folder, size, True)
    done, round_ = size, 0
    while done < events:
        batch = min(5000, size, events - done)
        start = (done * 7) % size
        graph.add_observations(
            [
                ObservationAddition(entityName=f"e{(start + i) % size}", contents=[f"note {round_}-{i}"])
                for i in range(batch)
            ]
        )
        done, round_ = done + batch, round_ + 1


def cold(sizes: list[int], events: list[int], runs: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from startup_bench import cold_start

    command = [sys.executable, "-m", "memory_graph"]
    search = {"query": "e1"}
    for size, count in zip(sizes, events, strict=True):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            with_events(Path(a), size, count)
            for file in Path(a).iterdir():
                if file.is_file() and not file.name.startswith("history"):
                    shutil.copy(file, Path(b) / file.name)
            stores = {"with history": Path(a) / "memory.json", "history removed": Path(b) / "memory.json"}
            times: dict[str, list[float]] = {label: [] for label in stores}
            for _ in range(runs):
                for label, memory in stores.items():
                    answered = cold_start(command, memory, "search_nodes", search, {"MEMORY_SEMANTIC": "off"})[1]
                    times[label].append(answered)
            history_bytes = sum(f.stat().st_size for f in Path(a).glob("history*.json"))
            for label, values in times.items():
                print(
                    f"{size} entities, {count} events ({history_bytes / 1e6:.0f} MB of history), {label}: "
                    f"first search {statistics.median(values):.2f} s"
                )
            ratio = statistics.median(times["with history"]) / statistics.median(times["history removed"])
            print(f"{size} entities, {count} events: with / without history {ratio:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--cold", action="store_true", help="time a start instead of writes")
    parser.add_argument("--events", default="200000", help="with --cold: events in the history, one per size")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if args.cold:
        cold([int(s) for s in args.sizes.split(",")], [int(e) for e in args.events.split(",")], args.runs)
        return
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            graphs = {"without history": filled(Path(a), size, False), "with history": filled(Path(b), size, True)}
            times: dict[str, dict[str, list[float]]] = {k: {"create": [], "observe": []} for k in graphs}
            for i in range(args.calls):
                for label, graph in graphs.items():
                    new = [Entity(name=f"n{i}", entityType="t", observations=["x"])]
                    times[label]["create"].append(timed(lambda g=graph, n=new: g.create_entities(n)))
                    added = [ObservationAddition(entityName=f"e{i * 7 % size}", contents=[f"more {i}"])]
                    times[label]["observe"].append(timed(lambda g=graph, o=added: g.add_observations(o)))
            for label, by_call in times.items():
                figures = ", ".join(f"{c} p50 {statistics.median(v):.2f} ms" for c, v in by_call.items())
                print(f"{size} entities, {label}: {figures}")
            ratios = ", ".join(
                f"{call} {statistics.median(times['with history'][call]) / statistics.median(v):.2f}x"
                for call, v in times["without history"].items()
            )
            print(f"{size} entities, with / without history: {ratios}")


if __name__ == "__main__":
    main()
