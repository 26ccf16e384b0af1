"""The few errors memory-graph raises on purpose.

Every message says what went wrong and how to fix it; the MCP adapter translates them to tool errors in one
place (`server.py`), the CLI prints them. Anything else that escapes is a bug and is logged with its traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class MemoryGraphError(Exception):
    """Base class: a problem the caller or the user can fix; the message says how."""


class InvalidInputError(MemoryGraphError):
    """A tool argument is well-typed but not acceptable (names the field and the remedy)."""


class NotFoundError(MemoryGraphError):
    """A named entity or lesson does not exist."""


class ConflictError(MemoryGraphError):
    """The request contradicts what is stored (for example a lesson name already used by an entity)."""


@dataclass(frozen=True)
class LineProblem:
    """One line of a data file that could not be read."""

    path: Path
    line_number: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_number}: {self.reason}"


class CorruptFileError(MemoryGraphError):
    """A data file holds lines that cannot be parsed; it is never rewritten until repaired."""

    def __init__(self, problems: list[LineProblem]) -> None:
        self.problems = problems
        shown = "; ".join(str(p) for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        files = sorted({str(p.path) for p in problems})
        super().__init__(
            f"cannot change {', '.join(files)}: it holds unreadable lines: {shown}{more}. "
            "Nothing was written. Fix or remove those lines by hand, or run `memory-graph repair` "
            "(it moves them to a side file next to the shard, keeping every byte)."
        )


class SemanticUnavailableError(MemoryGraphError):
    """MEMORY_SEMANTIC=on, but recall by meaning cannot be had (the model's folder cannot be made, or the model
    does not load); the message names the folder and the remedy."""


class StorageError(MemoryGraphError):
    """The data folder cannot be read or written (permissions, disk full, a broken journal)."""


class StoreClosedError(StorageError):
    """The store was closed (the server is shutting down); a load still running stops here."""


class StaleShardError(StorageError):
    """A shard changed on disk between reading it and writing it; nothing was written, the change is read in."""
