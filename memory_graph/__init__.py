"""memory-graph: a long-term memory for AI assistants, served over MCP."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("memory-graph")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0"
