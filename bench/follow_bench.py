"""What following another process's commits costs: two services on one folder (as two processes would be), one
writes `--commits` one-observation commits, then the other's next `open_nodes` (which catches up with them) is
timed; p50 over `--rounds`, in process. Pass `--code` to time another checkout of the code (a `git worktree`) in
the same run, so both are measured side by side.

    .venv/bin/python bench/follow_bench.py --entities 10000 --commits 5 --rounds 200
    .venv/bin/python bench/follow_bench.py --code /path/to/other/worktree
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


def measure(entities: int, commits: int, rounds: int) -> float:
    """Median ms of a read that follows `commits` commits, with the code importable from sys.path."""
    sys.path.insert(0, str(Path(__file__).parent))
    from startup_bench import write_memory

    from memory_graph.app import services_for_folder
    from memory_graph.model import ObservationAddition

    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        write_memory(work / "memory.json", entities)
        writer, follower = services_for_folder(work), services_for_folder(work)
        writer.graph.warm_up()
        follower.graph.warm_up()
        number = 0

        def write() -> None:
            nonlocal number
            number += 1
            target = f"Entity {number * 7919 % entities}"
            writer.graph.add_observations([ObservationAddition(entityName=target, contents=[f"note {number}"])])

        for _ in range(30):  # the first commits split the official-format file into shards
            write()
            follower.graph.open_nodes(["Entity 1"])
        times = []
        for _ in range(rounds):
            for _ in range(commits):
                write()
            started = time.perf_counter()
            follower.graph.open_nodes(["Entity 1"])
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entities", type=int, default=10000)
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=200)
    alternate.add_arguments(parser)
    parser.set_defaults(runs=3)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.entities, args.commits, args.rounds)))
        return
    arguments = ["--entities", str(args.entities), "--commits", str(args.commits), "--rounds", str(args.rounds)]
    for label, values in alternate.run_alternately(__file__, arguments, args).items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{label}: a read following {args.commits} commits, p50 {statistics.median(values):.2f} ms ({shown})")


if __name__ == "__main__":
    main()
