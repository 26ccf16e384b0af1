"""The start snapshot: what a server held after loading (shard bookkeeping and its listeners' derived state), so
the next start restores it in a fraction of the parse and catches up from there.

It is a cache, never the truth: the files stay the only record of the memory. A snapshot is a consistent past
state (taken with the store held), and the start that restores it then reloads as any process does after another
process's commit: every shard whose stat or generation differs from the snapshot's is read again and its
difference applied. So a snapshot that is old only costs the reading of what changed since.

Format: a header line `memory-graph snapshot <tag> <crc32> <length>\\n` (the two numbers zero-padded to a fixed
width: the header is written last, over a placeholder), then `marshal` objects (plain containers only: marshal is
the stdlib's fastest loader of them, 3-4x `json` on a parsed graph, and runs no code when loading, unlike pickle).
The tag names the code that wrote it; a snapshot of other code, or whose checksum or length does not match (a torn
or damaged file), reads as none and the start parses the files.

The data is the chunks, then the skeleton (the payload with each container of more than CHUNK_ITEMS items replaced
by a marker that lists its chunks' lengths), then the skeleton's length (8 bytes). Each chunk holds CHUNK_ITEMS
items of one such container, in the order the markers are met; a bytes value or array of more than RAW_BYTES is a
marker too, its bytes written as they are in its place among the chunks (read back as bytes, as marshal reads an
array back). Why: marshalled in the skeleton, every array of the graph's columns and the search index's postings was
copied into one bytes object at the end of the save (about 100 MB more at the save's peak at 300k entities). Why
chunks: one marshal call holds the interpreter for the whole call (seconds at a million entities), and a database
server answers reads from another thread while it restores (`ReadsWhileLoading`); between two chunks that thread
gets its turn. Why the skeleton last: each chunk is written as soon as it is encoded, so a save never holds the
snapshot's bytes (650 MB at a million entities; joined into one file's content, they were held three times over).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import marshal
import mmap
import os
import struct
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

from memory_graph.storage.files import TEMP_SUFFIX, atomic_writer

log = logging.getLogger(__name__)

MAGIC = b"memory-graph snapshot"
MAX_HEADER = 256
CHUNK_ITEMS = 5_000
RAW_BYTES = 1 << 16
CHECK_PIECE_BYTES = 16 << 20
SKELETON_LENGTH = struct.Struct("<Q")  # the data ends with the skeleton's length
# Stands for a container whose items follow in chunks: (CHUNKED, "dict" or "list", the chunks' lengths). A tuple
# whose first item is this (a NUL, then words) is nothing a memory's records or their indexes hold.
CHUNKED = "\x00memory-graph chunked container"
STALE_TEMP_SECONDS = 600.0
# (size, mtime_ns, inode) of a snapshot as its writer wrote it, taken before the rename that puts it in place (a
# rename keeps them, not the ctime): whether the file is still the one written.
WrittenSnapshot = tuple[int, int, int]
UNUSED_SNAPSHOT_DAYS = 30


def code_tag(modules: Iterable[str], *parts: str) -> str:
    """A digest of the source files (and settings) whose structures a snapshot holds: any change to them makes
    every snapshot stale instead of silently wrong."""
    digest = hashlib.sha1()
    for module in modules:
        digest.update(source_digest(module))
    for part in parts:
        digest.update(part.encode("utf-8"))
    return digest.hexdigest()[:16]


@functools.cache
def source_digest(module: str) -> bytes:
    """A source file's digest as this process first read it. Read once: a package upgraded under a running server
    changes the files, not the code running, and a snapshot the old code saves must not carry the new code's tag
    (the next start would take the old shapes for its own)."""
    return hashlib.sha1(Path(module).read_bytes()).digest()


def read_snapshot(
    path: Path,
    tag: str,
    between_chunks: Callable[[], None] = lambda: None,
    written: WrittenSnapshot | None = None,
    checked: Callable[[], None] = lambda: None,
) -> Any | None:
    """The payload, or None when there is none, it is of other code, or it is damaged (logged). `between_chunks`
    is called before each piece is checked and each chunk read. With `written`, the file must be the one a save
    wrote (`write_snapshot`'s stat: it is never changed in place, only replaced), or None is returned. `checked`
    is called once the checksum matched, before the payload is read.

    The file is mapped, not read: its pages come in as the chunks reach them, and the whole file is never a second
    copy of the snapshot in memory. Pages already read are let go as it goes (`_Released`), and the checksum is
    taken from the file read a piece at a time into one buffer, not through the mapping: mapped pages count in the
    process's RSS, and at a million entities the 650 MB file, all touched by the checksum, was a third of a
    restore's peak (touched by the checksum and let go, every page was then faulted in twice)."""
    try:
        with open(path, "rb") as handle:
            return _read_open(path, handle, tag, between_chunks, written, checked)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:  # (ValueError: mmap refuses an empty file)
        log.warning("ignoring the start snapshot %s (%s); the files are read instead", path, exc)
        return None


def _read_open(
    path: Path,
    handle: io.BufferedReader,
    tag: str,
    between_chunks: Callable[[], None],
    written: WrittenSnapshot | None,
    checked: Callable[[], None],
) -> Any | None:
    header = handle.readline(MAX_HEADER)
    st = os.fstat(handle.fileno())
    if written is not None and (st.st_size, st.st_mtime_ns, st.st_ino) != written:
        return None  # replaced since (another process's save)
    size = st.st_size - len(header)
    mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size > 0 else None
    fields = _header_fields(header)
    if mapped is None or len(fields) != 4 or fields[0] != MAGIC or fields[1].decode("ascii", "replace") != tag:
        if mapped is not None:
            mapped.close()
        return None  # another version's snapshot (replaced at the next save), or nothing after its header

    def file_crc() -> int:
        """The crc32 of the data after the header (-1 when it cannot be read), a piece at a time."""
        checksum = 0
        buffer = bytearray(CHECK_PIECE_BYTES)
        try:
            handle.seek(len(header))  # (the mapping does not use the file's position)
            with memoryview(buffer) as view:
                while True:
                    between_chunks()
                    count = handle.readinto(view)
                    if not count:
                        return checksum
                    checksum = zlib.crc32(view[:count], checksum)
        except OSError:
            return -1

    try:
        with memoryview(mapped) as whole, whole[len(header) :] as data:
            released = _Released(mapped, len(header))
            return _payload(path, fields, data, between_chunks, checked, released, file_crc)
    finally:
        mapped.close()


class _Released:
    """Lets go of a mapped snapshot's pages once they are read: `upto(end)` drops the whole pages of the data
    before `end` not yet dropped, once at least CHECK_PIECE_BYTES have piled up (file pages: touched again, they
    are read again from the page cache). Where madvise is missing, nothing."""

    def __init__(self, mapped: mmap.mmap | None = None, offset: int = 0) -> None:
        self.mapped, self.offset, self.done = mapped, offset, 0

    def upto(self, end: int, at_least: int = CHECK_PIECE_BYTES) -> None:
        if self.mapped is None or not hasattr(self.mapped, "madvise") or end - self.done < at_least:
            return
        first = -(-(self.offset + self.done) // mmap.PAGESIZE) * mmap.PAGESIZE  # (a page partly unread is kept)
        last = min(self.offset + end, len(self.mapped)) // mmap.PAGESIZE * mmap.PAGESIZE
        if last > first:
            self.mapped.madvise(mmap.MADV_DONTNEED, first, last - first)
        self.done = end


def _payload(
    path: Path,
    fields: list[bytes],
    data: memoryview,
    between_chunks: Callable[[], None],
    checked: Callable[[], None] = lambda: None,
    released: _Released | None = None,
    crc_of: Callable[[], int] | None = None,
) -> Any | None:
    """The payload of the data after a header (`fields`), or None when it is damaged (logged). `crc_of`: the
    data's crc32 taken otherwise than from `data` (a file's, read into a buffer: see read_snapshot)."""
    released = released or _Released()
    try:
        crc, length = int(fields[2]), int(fields[3])
    except ValueError:
        crc, length = -1, -1
    if crc_of is not None:
        checksum = crc_of()
    else:
        checksum = 0
        for start in range(0, len(data), CHECK_PIECE_BYTES):
            between_chunks()
            checksum = zlib.crc32(data[start : start + CHECK_PIECE_BYTES], checksum)
    if length != len(data) or checksum != crc:
        log.warning("ignoring the damaged start snapshot %s; the files are read instead", path)
        return None
    checked()
    try:
        skeleton_end = len(data) - SKELETON_LENGTH.size
        (skeleton_length,) = SKELETON_LENGTH.unpack_from(data, skeleton_end)
        chunks_end = skeleton_end - skeleton_length
        if chunks_end < 0:
            raise ValueError("the skeleton is longer than the snapshot")
        with data[:chunks_end] as chunks:
            reader = _Chunks(chunks, between_chunks, released)
            payload = reader.restored(marshal.loads(data[chunks_end:skeleton_end]))
            if reader.position != chunks_end:
                raise ValueError("chunks the skeleton does not name")
        return payload
    except (EOFError, ValueError, TypeError, KeyError, struct.error) as exc:
        log.warning("ignoring the unreadable start snapshot %s (%s); the files are read instead", path, exc)
        return None


class _Chunks:
    """Reads the chunks that follow the skeleton, in order (see the module's doc)."""

    def __init__(self, data: memoryview, between_chunks: Callable[[], None], released: _Released) -> None:
        self.data, self.position, self.between_chunks, self.released = data, 0, between_chunks, released

    def next(self, length: int) -> Any:
        return self._take(length, marshal.loads)  # (loads: load from a stream is twice as slow)

    def _take(self, length: int, read: Callable[[memoryview], Any]) -> Any:
        """`read` of the next `length` bytes; their pages are let go once read."""
        self.between_chunks()
        end = self.position + length
        if end > len(self.data):
            raise ValueError("a chunk runs past the end")
        value = read(self.data[self.position : end])
        self.position = end
        self.released.upto(end)
        return value

    def restored(self, value: Any) -> Any:
        """A value of the skeleton with its chunked containers read back."""
        if type(value) is tuple and len(value) == 3 and value[0] == CHUNKED:
            kind, lengths = value[1], value[2]
            if kind == "dict":
                merged: dict[Any, Any] = {}
                for length in lengths:
                    merged.update(self.next(length))
                return merged
            if kind == "list":
                joined: list[Any] = []
                for length in lengths:
                    joined.extend(self.next(length))
                return joined
            if kind == "bytes" and len(lengths) == 1:
                return self._take(lengths[0], bytes)
            raise ValueError(f"a chunked container of an unknown kind {kind!r}")
        if type(value) is dict:
            return {key: self.restored(item) for key, item in value.items()}
        if type(value) is list:
            return [self.restored(item) for item in value]
        return value


class SnapshotStream:
    """A large container of the payload given by its items, made only as the writer reaches them: a table
    written chunk by chunk never exists whole in memory beside the one it is made from (a million packed entities
    are ~280 MB). Read back as the dict (items given as pairs) or list it stands for, or (kind "bytes", items
    given as bytes-like pieces, each written as it is) as one bytes object of them all."""

    def __init__(self, kind: str, items: Iterable[Any]) -> None:
        if kind not in ("dict", "list", "bytes"):
            raise ValueError(f"a stream is of a dict, a list or bytes, not {kind!r}")
        self.kind, self.items = kind, items


def _chunked(value: Any, write: Callable[[bytes | memoryview], None]) -> Any:
    """The payload with every container past CHUNK_ITEMS items (and every SnapshotStream) replaced by its marker, its
    chunks written (the items of such a container are kept as they are: large ones hold records, not further large
    containers)."""
    if type(value) is SnapshotStream:
        if value.kind == "bytes":
            return _written_raw(value.items, write)
        return _written_in_chunks(value.kind, iter(value.items), write)
    if (type(value) is bytes or type(value) is array) and memoryview(value).nbytes > RAW_BYTES:
        return _written_raw([value], write)
    if type(value) is dict:
        if len(value) > CHUNK_ITEMS:
            return _written_in_chunks("dict", iter(value.items()), write)
        return {key: _chunked(item, write) for key, item in value.items()}
    if type(value) is list:
        if len(value) > CHUNK_ITEMS:
            return _written_in_chunks("list", iter(value), write)
        return [_chunked(item, write) for item in value]
    return value


def _written_raw(pieces: Iterable[Any], write: Callable[[bytes | memoryview], None]) -> tuple[str, str, tuple[int]]:
    """Bytes-like pieces written as they are, one after the other: read back as one bytes object."""
    total = 0
    for piece in pieces:
        with memoryview(piece) as view, view.cast("B") as raw:
            write(raw)
            total += raw.nbytes
    return (CHUNKED, "bytes", (total,))


def _written_in_chunks(
    kind: str, items: Iterator[Any], write: Callable[[bytes | memoryview], None]
) -> tuple[str, str, tuple[int, ...]]:
    make = dict if kind == "dict" else list
    lengths = []
    while chunk := make(islice(items, CHUNK_ITEMS)):
        encoded = marshal.dumps(chunk)
        write(encoded)
        lengths.append(len(encoded))
    return (CHUNKED, kind, tuple(lengths))


def _header(tag: str, crc: int, length: int) -> bytes:
    """Of one width whatever the numbers (a crc32 has at most 10 digits), so it can be written over its
    placeholder."""
    return b" ".join([MAGIC, tag.encode("ascii"), b"%010d" % crc, b"%020d" % length]) + b"\n"


def _header_fields(header: bytes) -> list[bytes]:
    """The header's words, its tag, crc32 and length the last three (see `_header`)."""
    return header.rstrip(b"\n").rsplit(b" ", 3)


class _Checksummed:
    """Writes the data to the file, counting its length and crc32 as the header will state them."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle, self.crc, self.length = handle, 0, 0

    def write(self, data: bytes | memoryview) -> None:
        self.handle.write(data)
        self.crc = zlib.crc32(data, self.crc)
        self.length += len(data)


def _encode_into(handle: BinaryIO, tag: str, payload: Any) -> int:
    handle.write(_header(tag, 0, 0))
    data = _Checksummed(handle)
    skeleton = marshal.dumps(_chunked(payload, data.write))
    data.write(skeleton)
    data.write(SKELETON_LENGTH.pack(len(skeleton)))
    header = _header(tag, data.crc, data.length)
    handle.seek(0)
    handle.write(header)
    return len(header) + data.length


def as_read_back(payload: Any) -> Any:
    """The payload as a snapshot of it reads back (streams made into their containers, arrays into bytes): what a
    restore is given, for tests and tools."""
    buffer = io.BytesIO()
    _encode_into(buffer, "read-back", payload)
    header, _, data = buffer.getvalue().partition(b"\n")
    with memoryview(data) as view:
        return _payload(Path("<memory>"), _header_fields(header), view, lambda: None)


def write_snapshot(path: Path, tag: str, payload: Any) -> WrittenSnapshot:
    """Write a snapshot of `payload` (made with the store held; written after it is let go) atomically, not
    fsynced (losing it costs one slower start), after removing what a writer killed mid-write left of an earlier
    one (a temp file as big as the snapshot) a while ago; the stat of the file written (its size first). Raises
    OSError, or ValueError for a value marshal cannot write, leaving the earlier snapshot as it was."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # the cache folder
    cutoff = time.time() - STALE_TEMP_SECONDS  # a younger one may be another process's write in progress
    for temp in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            if temp.stat().st_mtime < cutoff:
                temp.unlink()
    with atomic_writer(path, durable=False) as handle:
        _encode_into(handle, tag, payload)
        handle.flush()
        st = os.fstat(handle.fileno())  # a rename keeps the inode and the time of the last write
    # The snapshots of memories gone or unused for a month (each as big as its memory) are let go; one in use is
    # rewritten when its memory changes, or touched when it is restored.
    cutoff = time.time() - UNUSED_SNAPSHOT_DAYS * 86_400
    for other in path.parent.glob(f"*{path.suffix}"):
        with contextlib.suppress(OSError):
            if other != path and other.stat().st_mtime < cutoff:
                other.unlink()
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def mark_used(path: Path) -> None:
    """A snapshot restored: kept from the pruning of unused ones (see write_snapshot)."""
    with contextlib.suppress(OSError):
        os.utime(path)
