"""Durable file primitives: atomic replace with fsync, and the commit journal.

A single file is replaced atomically by writing a uniquely named temp file in the same folder, fsyncing it,
`os.replace`-ing it over the target and fsyncing the folder. A file we replace keeps its permissions; a new
one is created 0600 (a memory holds personal facts).

A commit that changes several files:
1. writes every new content to its temp file and fsyncs it (this is where a full disk fails: the temps are
   removed and nothing has changed);
2. writes the journal: for each target, its temp file (or a delete), and the hashes of its content before and
   after the commit. Paths are relative to the journal's folder, so a copied or restored data
   folder never reaches back into the original one. Once the journal is on disk the commit is decided;
3. renames the temps over the targets (renames need no space), removes the journal.

Whoever holds the lock next finishes a decided commit (`recover_journal`): a target still as it was before is
renamed into place; one already holding the new content is left; one changed since by someone who did not
see this journal (a store sharing this file) is left alone, never overwritten with older content. Only files
the store owns are ever touched: a journal naming anything else is refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from memory_graph.errors import StorageError

TEMP_SUFFIX = ".tmp"
JOURNAL_FORMAT = "memory-graph-journal/2"
NEW_FILE_MODE = 0o600


class CommitPendingError(StorageError):
    """The commit is decided (its journal is on disk) but could not be applied now; it will be finished."""


@dataclass(frozen=True)
class FileWrite:
    """New content for a file, or None to delete it; with `append`, lines to add at the file's end."""

    path: Path
    content: str | None
    append: bool = False


def temp_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(8)}{TEMP_SUFFIX}")


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mode_for(target: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return NEW_FILE_MODE


@contextmanager
def _temp_file(temp: Path, mode: int, durable: bool) -> Iterator[BinaryIO]:
    """`temp` created with `mode` (exactly, whatever the umask) and open for writing; flushed (and fsynced if
    `durable`) and closed when the block ends, removed if it raises."""
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        with open(fd, "wb", closefd=False) as handle:
            yield handle
            handle.flush()
            if durable:
                os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    os.close(fd)


def _write_temp(target: Path, content: str | bytes, durable: bool = True) -> Path:
    temp = temp_name(target)
    with _temp_file(temp, _mode_for(target), durable) as handle:
        handle.write(content.encode("utf-8") if isinstance(content, str) else content)
    return temp


def _put_in_place(
    temp: Path, target: Path, durable: bool, before_replace: Callable[[], None] | None, sync_folder: bool
) -> None:
    try:
        if before_replace is not None:
            before_replace()
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    if durable and sync_folder:
        fsync_dir(target.parent)


def atomic_write(
    target: Path,
    content: str | bytes,
    durable: bool = True,
    before_replace: Callable[[], None] | None = None,
    sync_folder: bool = True,
) -> None:
    """Replace `target` atomically; `durable=False` skips the fsyncs (for hints that may be lost).
    `before_replace` runs once the new content is on disk and before it replaces the target (if it raises,
    the target is left as it was); `sync_folder=False` leaves the folder's fsync to the caller (`fsync_dir`)."""
    _put_in_place(_write_temp(target, content, durable), target, durable, before_replace, sync_folder)


@contextmanager
def atomic_writer(target: Path, durable: bool = True) -> Iterator[BinaryIO]:
    """Replace `target` atomically with what the block writes to the file it is given: for content too large
    to hold whole in memory. If the block raises, the target is left as it was. `durable` as in atomic_write."""
    temp = temp_name(target)
    with _temp_file(temp, _mode_for(target), durable) as handle:
        yield handle
    _put_in_place(temp, target, durable, None, sync_folder=True)


_datasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


@contextmanager
def appending(target: Path, content: str) -> Iterator[Callable[[], None]]:
    """Add `content` at the end of an existing file and yield its flush (an fdatasync: one flush, where a
    replace needs two, the file's and its folder's). If the block raises, the content is cut back off, so the
    file is as it was."""
    data = content.encode("utf-8")
    fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data  # a file that does not end its last line (never ours) keeps that line whole
        try:
            written = 0
            while written < len(data):
                written += os.write(fd, data[written:])
            yield lambda: _datasync(fd)
        except BaseException:
            try:
                os.ftruncate(fd, size)
                _datasync(fd)
            except OSError as exc:
                # Events left behind are finished (rolled forward, or set aside when torn) by the next call.
                raise CommitPendingError(
                    f"the change could not be completed and its history events could not be taken back out of "
                    f"{target} ({exc.strerror or exc}); the next call that can write there finishes it or sets it "
                    "aside: read the entities back before retrying"
                ) from exc
            raise
    finally:
        os.close(fd)


class BackgroundFlush:
    """One worker thread that flushes a file while the caller writes another: two fsyncs overlap instead of
    adding up. Made again in a forked child (a fork does not copy the parent's worker)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._guard = threading.Lock()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forget_parent)

    def _forget_parent(self) -> None:
        self._pool, self._guard = None, threading.Lock()

    def submit(self, call: Callable[[], None]) -> Future[None]:
        with self._guard:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="memory-graph-flush")
            try:
                return self._pool.submit(call)
            except RuntimeError:  # the interpreter is shutting down: no new threads, so flush here
                done: Future[None] = Future()
                try:
                    call()
                    done.set_result(None)
                except BaseException as exc:
                    done.set_exception(exc)
                return done


BACKGROUND_FLUSH = BackgroundFlush()


def cut_tail(target: Path, offset: int, aside: Path) -> None:
    """Move the bytes of `target` from `offset` on into `aside` (durably, first), then cut them off."""
    with open(target, "rb") as handle:
        handle.seek(offset)
        tail = handle.read()
    with open(aside, "ab") as handle:
        handle.write(tail if tail.endswith(b"\n") else tail + b"\n")
        handle.flush()
        os.fsync(handle.fileno())
    fd = os.open(target, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.ftruncate(fd, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def _digest(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def _file_digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def _relative(path: Path, base: Path) -> str:
    return os.path.relpath(path, base)


def replace_in_order(writes: list[FileWrite]) -> None:
    """Replace each file with its new content, in order, for a commit whose first file is its redo log (the
    history's events, `history_log.events_first`): every new content is written and flushed before any file is
    replaced, so a full disk or a file size limit, where writes fail, changes nothing. Before, the events were put
    in place and the graph shard's write then failed: the call said nothing was changed, and the next open
    finished the commit from those events. A replace failing past the first (an unlikely rename error) raises
    CommitPendingError: the change is decided, and the next open finishes it."""
    temps: list[Path] = []
    try:
        for write in writes:
            temps.append(_write_temp(write.path, write.content or ""))
    except BaseException:
        for temp in temps:
            with contextlib.suppress(OSError):
                temp.unlink()
        raise
    for number, (temp, write) in enumerate(zip(temps, writes, strict=True)):
        try:
            _put_in_place(temp, write.path, True, None, True)
        except OSError as exc:
            for left in temps[number + 1 :]:
                with contextlib.suppress(OSError):
                    left.unlink()
            if number == 0:
                raise
            raise CommitPendingError(
                f"the change is saved in {writes[0].path}, but {write.path} could not be replaced "
                f"({exc.strerror or exc}); the next call that can write there finishes it: read the entities "
                "back before retrying"
            ) from exc


def commit_files(writes: list[FileWrite], journal: Path) -> None:
    """Make all `writes` happen, or none of them, even across a crash (see the module docstring)."""
    if len(writes) == 1 and writes[0].content is not None:
        atomic_write(writes[0].path, writes[0].content)
        return
    if len(writes) == 1:
        with contextlib.suppress(FileNotFoundError):
            writes[0].path.unlink()
        fsync_dir(writes[0].path.parent)
        return
    temps: dict[Path, Path] = {}
    base = journal.parent
    try:
        for write in writes:
            if write.content is not None:
                temps[write.path] = _write_temp(write.path, write.content)
        entries = [
            {
                "target": _relative(w.path, base),
                "temp": _relative(temps[w.path], base) if w.path in temps else None,
                "before": _file_digest(w.path),
                "after": _digest(w.content) if w.content is not None else None,
            }
            for w in writes
        ]
        atomic_write(journal, json.dumps({"format": JOURNAL_FORMAT, "writes": entries}, ensure_ascii=False))
    except BaseException:
        if journal.exists():
            raise  # decided after all (only the fsync after the rename failed): the temps are needed to finish
        for temp in temps.values():
            with contextlib.suppress(OSError):
                temp.unlink()
        raise
    try:
        _apply(journal, [_entry(e, base) for e in entries])
    except OSError as exc:
        raise CommitPendingError(
            f"the change is saved in {journal} but could not be put in place yet ({exc.strerror or exc}); "
            "it is finished by the next call that can write there"
        ) from exc


@dataclass(frozen=True)
class JournalEntry:
    target: Path
    temp: Path | None
    before: str | None
    after: str | None


def _entry(item: dict[str, Any], base: Path) -> JournalEntry:
    temp = item["temp"]
    return JournalEntry(base / item["target"], base / temp if temp else None, item["before"], item["after"])


def _apply(journal: Path, entries: list[JournalEntry], check_temps: bool = False) -> list[str]:
    """Put a decided commit in place, target by target, as the module docstring says; returns what it skipped.
    `check_temps`: a temp is put in place only when it holds the content the journal names (after a crash: a
    folder copied or synced mid-commit may have cut one, which would replace a shard with part of itself, its
    last records lost without a word)."""
    skipped: list[str] = []
    for entry in entries:
        current = _file_digest(entry.target)
        if entry.after is None:
            if current is not None and current == entry.before:
                entry.target.unlink()
            elif current is not None:
                skipped.append(f"{entry.target} (changed since; not deleted)")
            continue
        if current == entry.before and entry.temp is not None and entry.temp.exists():
            if check_temps and _file_digest(entry.temp) != entry.after:
                skipped.append(
                    f"{entry.target} (its new content in {entry.temp} was damaged since the commit; the file is "
                    "left as it was)"
                )
                continue
            os.replace(entry.temp, entry.target)
            continue
        if entry.temp is not None:
            with contextlib.suppress(FileNotFoundError):
                entry.temp.unlink()
        if current != entry.after:
            skipped.append(f"{entry.target} (changed since, or its new content was lost; left as it is)")
    for folder in {e.target.parent for e in entries} | {journal.parent}:
        fsync_dir(folder)
    journal.unlink()
    fsync_dir(journal.parent)
    return skipped


def read_journal(journal: Path, owned: Callable[[Path], bool]) -> list[JournalEntry] | None:
    """The entries of a decided commit, or None when there is none; a journal that is not ours to apply
    (unreadable, another format, or naming a file the store does not own) is refused with the remedy."""
    try:
        raw = journal.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StorageError(
            f"{journal} is a folder; memory-graph keeps its commit journal there: move it away"
        ) from None
    try:
        payload = json.loads(raw.decode("utf-8"))
        if payload.get("format") != JOURNAL_FORMAT:
            raise ValueError(f"unknown format {payload.get('format')!r}")
        entries = [_entry(item, journal.parent) for item in payload["writes"]]
        for entry in entries:
            _check_entry(entry, owned)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise StorageError(
            f"the commit journal {journal} is unreadable or not this store's ({exc}); it is written atomically, "
            "so it was changed by hand, copied from elsewhere or written by another program. Run "
            "`memory-graph repair` to set it aside (that discards the commit it describes)."
        ) from exc
    return entries


def _check_entry(entry: JournalEntry, owned: Callable[[Path], bool]) -> None:
    if not isinstance(entry.before, (str, type(None))) or not isinstance(entry.after, (str, type(None))):
        raise ValueError(f"malformed entry for {entry.target}")
    if not owned(entry.target):
        raise ValueError(f"it names {entry.target}, which is not one of this store's files")
    if entry.temp is not None and (
        entry.temp.parent != entry.target.parent
        or not entry.temp.name.startswith(f".{entry.target.name}.")
        or not entry.temp.name.endswith(TEMP_SUFFIX)
    ):
        raise ValueError(f"its temp file {entry.temp} does not belong to {entry.target}")


def recover_journal(journal: Path, owned: Callable[[Path], bool]) -> list[str] | None:
    """Finish a commit a crash interrupted (roll forward). Returns None when there was none, else what it
    had to leave alone (targets changed since by someone else)."""
    entries = read_journal(journal, owned)
    if entries is None:
        return None
    return _apply(journal, entries, check_temps=True)


def journal_temps(folder: Path) -> set[str]:
    """Temp files that journals in a folder still need (another memory's pending commit among them)."""
    needed: set[str] = set()
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if not entry.name.endswith(".journal"):
                continue
            with contextlib.suppress(OSError, ValueError, AttributeError, TypeError, KeyError, RecursionError):
                payload = json.loads(Path(entry.path).read_bytes().decode("utf-8"))
                needed.update(Path(w["temp"]).name for w in payload["writes"] if w.get("temp"))
    return needed


def remove_stray_temps(folder: Path, prefixes: Iterable[str]) -> None:
    """Delete temp files left by a crashed writer (call only while holding the folder's lock), except those
    a pending journal still needs."""
    starts = tuple(f".{prefix}" for prefix in prefixes)
    needed = journal_temps(folder)
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(starts) and entry.name.endswith(TEMP_SUFFIX) and entry.name not in needed:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
