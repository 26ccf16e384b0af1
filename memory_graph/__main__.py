"""Entry point: `python -m memory_graph` and the `memory-graph` console script (see cli.py)."""

import sys

from memory_graph.cli import main

if __name__ == "__main__":
    sys.exit(main())
