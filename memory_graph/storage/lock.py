"""The inter-process lock of a data folder: `flock` on the folder itself.

Why the folder and not a `memory.json.lock` file: a lock file can be deleted while a process holds it (by a
user tidying up, or a cleaning tool), and the next process then creates a new file, locks that one, and both
believe they hold the lock: writes are lost. A folder cannot be deleted while it holds the data, and its lock
needs no file of its own, so there is nothing to delete, nothing to create (a read-only folder can be locked
too), and two memories that share a file (a common `lesson.json`) share its folder's lock. The OS releases
the lock of a process that dies, so nobody ever has to clean one up.
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path


class LockTimeout(Exception):
    """The lock stayed held by someone else for the whole timeout."""


class FolderLock:
    def __init__(self, folder: Path, timeout: float) -> None:
        self.folder = folder
        self.timeout = timeout
        self._fd: int | None = None
        self._depth = 0

    def acquire(self) -> None:
        """Take the lock (re-entrant); raises LockTimeout, or OSError when the folder cannot be opened."""
        if self._fd is not None:
            self._depth += 1
            return
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # From here the descriptor is the waiter's to close when the lock is not taken.
            if not _wait_for_lock(fd, self.timeout):
                raise LockTimeout(str(self.folder)) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._depth = fd, 1

    def release(self) -> None:
        if self._fd is None:
            return
        self._depth -= 1
        if self._depth:
            return
        fd, self._fd = self._fd, None
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _wait_for_lock(fd: int, timeout: float) -> bool:
    """Block in `flock` until the lock is ours (True) or the timeout passes (False: the descriptor is closed once
    the lock comes free, or with the process).

    Why block instead of polling: the kernel wakes a blocked waiter the moment the lock is released, while a
    poller sleeps through the release and loses the lock to a process that asks again at once; with 16 processes
    on one store, polling made a write's p95 wait several times its median. `flock` has no timeout, so a helper
    thread blocks in it."""
    taken = threading.Event()
    state = {"abandoned": False}
    guard = threading.Lock()

    def wait() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            pass
        else:
            with guard:
                if not state["abandoned"]:
                    taken.set()
                    return
        os.close(fd)

    threading.Thread(target=wait, name="memory-graph folder lock", daemon=True).start()
    ours = False
    try:
        ours = taken.wait(timeout)
    except BaseException:  # an interrupt in the wait: a lock nobody would release must not stay held
        with guard:
            state["abandoned"] = True
            if taken.is_set():
                os.close(fd)
        raise
    with guard:
        ours = ours or taken.is_set()  # (taken in the instant the wait ended)
        state["abandoned"] = not ours
    return ours
