"""A file parsed again whenever it changes: its inode, size or modification time (an edit in place,
or a new file renamed over it, as editors and config management write them). Every gunicorn worker
holds its own copy and sees a change at its next look, with no restart and no signal.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable, Generic, TypeVar

Stamp = tuple[int, int, int]  # (mtime_ns, size, inode)
T = TypeVar("T")


class WatchedFile(Generic[T]):
    """``read(stamp)`` parses the file (stamp None: it could not be stat'ed); ``get`` returns the
    parse of the file as it is now, looking at most every ``every`` seconds (0: at every call)."""

    def __init__(self, path: Path, read: Callable[[Stamp | None], T]) -> None:
        self.path = path
        self._fspath = os.fspath(path)  # stat'ed on every authenticated request
        self._read = read
        self._lock = threading.Lock()
        self._stamp: Stamp | None = None
        self._value: T | None = None
        self._looked = 0.0

    def get(self, every: float = 0.0) -> T:
        value = self._value
        if every:
            now = time.monotonic()
            if value is not None and now - self._looked < every:
                return value
            self._looked = now
        try:
            st = os.stat(self._fspath)
            stamp: Stamp | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            stamp = None
        if value is not None and stamp == self._stamp:
            return value
        with self._lock:
            if self._value is None or stamp != self._stamp:
                self._value, self._stamp = self._read(stamp), stamp
            return self._value
