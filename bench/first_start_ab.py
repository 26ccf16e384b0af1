"""A first start's first search_nodes (or open_nodes, `--open`), side by side: the official server and one or more
checkouts of this code.

Each run spawns every server in turn on its own fresh copy of one memory file (so each is a first start: no
snapshot, the files read from nothing), sends `initialize` then the one call, and times spawn -> answer.
Runs alternate between the servers, so drift on a shared machine hits all of them; read the ratios.

The memory is the one bench/startup_bench.py writes (N entities with 3 observations, 2N relations), made once in
`--folder` and kept there for the next run. A checkout is any folder holding this code (a `git worktree` of an
older commit, say); it is put first on PYTHONPATH, and run by this venv's interpreter.

    git worktree add /tmp/before <commit>
    MEMORY_SEMANTIC=off .venv/bin/python bench/first_start_ab.py --size 1000000 --runs 3 \\
        --folder /tmp/bench-1m --code before=/tmp/before --code now=.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from startup_bench import REFERENCE, cold_start, megabytes, write_memory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="entities (relations: twice as many)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--query", default="topic42", help="the search (topic42: 3,300 matches at 100k)")
    parser.add_argument(
        "--open", metavar="NAME", action="append", help="time open_nodes of these names instead (repeatable)"
    )
    parser.add_argument("--folder", type=Path, required=True, help="where the memory file is made and kept")
    parser.add_argument("--code", action="append", default=[], help="label=folder of a checkout (repeatable)")
    args = parser.parse_args()
    memory = args.folder / f"memory-{args.size}.json"
    if not memory.exists():
        args.folder.mkdir(parents=True, exist_ok=True)
        write_memory(memory, args.size)
    servers: dict[str, tuple[list[str], dict[str, str]]] = {"official": (["node", str(REFERENCE)], {})}
    for labelled in args.code or [f"this code={Path(__file__).resolve().parents[1]}"]:
        label, folder = labelled.split("=", 1)
        command = [sys.executable, "-P", "-m", "memory_graph"]  # (-P: not the working folder's code first)
        servers[label] = (command, {"PYTHONPATH": str(Path(folder).resolve())})
    tool, arguments = ("open_nodes", {"names": args.open}) if args.open else ("search_nodes", {"query": args.query})
    answers: dict[str, list[float]] = {label: [] for label in servers}
    for run in range(args.runs):
        for label, (command, env) in servers.items():
            with tempfile.TemporaryDirectory(dir=args.folder) as scratch:
                copy = Path(scratch) / "memory.json"
                shutil.copyfile(memory, copy)
                initialized, answered, rss, _, _ = cold_start(command, copy, tool, arguments, env)
            answers[label].append(answered)
            print(
                f"run {run + 1} {label:>10}: initialize {initialized:.2f} s, answer {answered:.2f} s, "
                f"RSS {megabytes(rss):.0f} MB",
                flush=True,
            )
    official = statistics.median(answers["official"])
    for label, times in answers.items():
        each = " / ".join(f"{t:.2f}" for t in times)
        median = statistics.median(times)
        print(f"{label:>10}: {each} s (median {median:.2f} s, {median / official:.2f}x the official server's)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
