"""Entry point: `python -m memory_graph` and the `memory-graph` console script (see launch.py, then cli.py)."""

import sys

from memory_graph.launch import main

if __name__ == "__main__":
    sys.exit(main())
