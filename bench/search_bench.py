"""Broad searches on a large memory: search_nodes for queries that match a tenth or more of the entities.

A query that is a substring of many entities ("topic7" in a memory whose observations name topic0..topic999, or
"entity 5") makes the substring tier order every match and the cut response count the relations they touch,
before the answer is cut to its size; "entity 12345" names one entity with a word every entity holds. In
process, after the load and the index warm-up; p50 over `--rounds`.
Pass `--code` to time another checkout of the code (a `git worktree`) alternately with this one.

    .venv/bin/python bench/search_bench.py --entities 100000 --code /path/to/other/worktree
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import alternate

QUERIES = ["topic7", "topic42", "entity 5", "fact 2 about", "entity 12345"]


def measure(entities: int, rounds: int) -> dict[str, float]:
    """Median ms per query, with the code importable from sys.path."""
    sys.path.insert(1, str(Path(__file__).resolve().parent))
    from startup_bench import write_memory

    from memory_graph.app import services_for_folder

    with tempfile.TemporaryDirectory() as folder:
        write_memory(Path(folder) / "memory.json", entities)
        services = services_for_folder(Path(folder))
        services.store.open()
        services.graph.warm_up()
        medians: dict[str, float] = {}
        for query in QUERIES:
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                services.graph.search_nodes(query)
                times.append(time.perf_counter() - started)
            medians[query] = statistics.median(times) * 1000
        return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=9)
    alternate.add_arguments(parser)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.entities, args.rounds)))
        return
    arguments = ["--entities", str(args.entities), "--rounds", str(args.rounds)]
    results = alternate.run_alternately(__file__, arguments, args)
    print(f"search_nodes p50 in ms at {args.entities:,} entities (each run: {args.rounds} calls per query)")
    for label, runs in results.items():
        shown = "  ".join(f"{q!r} {statistics.median(r[q] for r in runs):.1f}" for q in QUERIES)
        print(f"{label:10} {shown}")


if __name__ == "__main__":
    main()
