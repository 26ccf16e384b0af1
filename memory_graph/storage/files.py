"""Durable file primitives: atomic replace with fsync, and the commit journal.

A single file is replaced atomically by writing a uniquely named temp file in the same folder, fsyncing it,
`os.replace`-ing it over the target and fsyncing the folder. A commit that changes several files first writes
the complete new contents of all of them to a journal the same way; once the journal exists the commit is
decided, and `recover_journal` finishes it after a crash. Either way a reader never sees a torn file, and a
crash leaves exactly the state before or after the commit.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memory_graph.errors import StorageError

TEMP_SUFFIX = ".tmp"


@dataclass(frozen=True)
class FileWrite:
    """New content for a file, or None to delete it."""

    path: Path
    content: str | None


def temp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}{TEMP_SUFFIX}")


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_temp(target: Path, content: str, durable: bool = True) -> Path:
    temp = temp_name(target)
    try:
        with open(temp, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(content)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    return temp


def atomic_write(target: Path, content: str, durable: bool = True) -> None:
    """Replace `target` atomically; `durable=False` skips the fsyncs (for hints that may be lost)."""
    temp = _write_temp(target, content, durable)
    try:
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    if durable:
        fsync_dir(target.parent)


def apply_writes(writes: Iterable[FileWrite]) -> None:
    """Apply file writes and deletes durably (each write atomic; the set as a whole is not)."""
    folders: set[Path] = set()
    for write in writes:
        if write.content is None:
            with contextlib.suppress(FileNotFoundError):
                write.path.unlink()
        else:
            temp = _write_temp(write.path, write.content)
            os.replace(temp, write.path)
        folders.add(write.path.parent)
    for folder in folders:
        fsync_dir(folder)


def commit_files(writes: list[FileWrite], journal: Path) -> None:
    """Make all `writes` happen, or none of them, even across a crash."""
    if len(writes) == 1 and writes[0].content is not None:
        atomic_write(writes[0].path, writes[0].content)
        return
    if len(writes) == 1:
        apply_writes(writes)
        return
    payload = {
        "format": "memory-graph-journal/1",
        "writes": [{"path": str(w.path), "content": w.content} for w in writes],
    }
    atomic_write(journal, json.dumps(payload, ensure_ascii=False))
    apply_writes(writes)
    journal.unlink()
    fsync_dir(journal.parent)


def read_journal(journal: Path) -> list[FileWrite] | None:
    """The writes of an unfinished commit, or None when there is none."""
    try:
        text = journal.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        payload = json.loads(text)
        return [FileWrite(Path(item["path"]), item["content"]) for item in payload["writes"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(
            f"the commit journal {journal} is unreadable ({exc}); it was written atomically, so it was "
            "changed by hand or by another program. Move it aside to discard that commit, or run "
            "`memory-graph repair`."
        ) from exc


def recover_journal(journal: Path) -> list[FileWrite]:
    """Finish a commit a crash interrupted (roll forward). Returns what it rewrote."""
    writes = read_journal(journal)
    if writes is None:
        return []
    apply_writes(writes)
    journal.unlink()
    fsync_dir(journal.parent)
    return writes


def remove_stray_temps(folder: Path, prefix: str) -> None:
    """Delete temp files left by a crashed writer (call only while holding the store lock)."""
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(folder):
            if entry.name.startswith(f".{prefix}") and entry.name.endswith(TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
