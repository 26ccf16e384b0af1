"""Side-by-side latency of the graph tools: memory-graph against the official server, over stdio.

Drives `../shared/tools/bench.py` (same workload, interleaved servers) with the reference installed by
`.ci/run` (or `npm install --prefix .ci/reference @modelcontextprotocol/server-memory@2026.8.31`).

    .venv/bin/python bench/graph_bench.py --sizes 1000,10000,100000 --json /tmp/graph-bench.json
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT.parent / "shared" / "tools" / "bench.py"
REFERENCE = (
    ROOT / ".ci" / "reference" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--calls", default="200")
    parser.add_argument("--json", help="write all figures here")
    parser.add_argument("--no-reference", action="store_true", help="measure memory-graph alone")
    args = parser.parse_args()
    if not BENCH.exists():
        print(f"bench.py not found at {BENCH}", file=sys.stderr)
        return 2
    servers = []
    if not args.no_reference:
        if REFERENCE.exists() and shutil.which("node"):
            servers += ["--server", f"official=node {REFERENCE}"]
        else:
            print("reference server not installed: measuring memory-graph alone", file=sys.stderr)
    servers += ["--server", f"memory-graph={sys.executable} -m memory_graph"]
    command = [sys.executable, str(BENCH), *servers, "--sizes", args.sizes, "--calls", args.calls]
    if args.json:
        command += ["--json", args.json]
    return subprocess.call(command, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "MEMORY_TOOLS": "graph"})


if __name__ == "__main__":
    sys.exit(main())
