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
import time
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
        deadline = time.monotonic() + self.timeout
        delay = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockTimeout(str(self.folder)) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.002)  # short: a waiter sleeping 20 ms lost the lock to busier processes
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
