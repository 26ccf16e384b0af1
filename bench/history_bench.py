"""What the change history costs a write: one-entity create_entities and add_observations, p50 in process, on a
store with history and one without, interleaved (so machine noise hits both alike).

    .venv/bin/python bench/history_bench.py --sizes 10000,100000 --calls 200
"""

from __future__ import annotations

import argparse
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
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
