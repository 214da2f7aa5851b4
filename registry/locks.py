"""Named locks shared by every worker and replica, never waited for.

``default_locks().hold(name)`` holds a lock for a ``with`` block, or raises LockHeld at once when
another holder (a thread, a worker, another replica) has it. Each lock keeps a short note that only
its holder reads or writes: the collection schedule keeps the time of its last run there, so that
the lock and what it guards change together.

FileLocks, the implementation used today, ``flock``s one file per lock under the storage root
(named by ``registry.storage.paths.lock``); it serves every replica that shares that directory. An
implementation for replicas without a shared disk (database lease rows or advisory locks) plugs in
behind the same protocol, chosen in ``default_locks`` alone.
"""
from __future__ import annotations

import fcntl
import os
from contextlib import AbstractContextManager, contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Iterator, Protocol

from registry.storage import paths

MAX_NOTE_BYTES = 4096


class LockHeld(Exception):
    """Another holder has the lock."""


class Held(Protocol):
    """A lock held by this block, with its note."""

    def note(self) -> str:
        """What a holder last wrote with ``set_note``; empty when nothing was written."""

    def set_note(self, text: str) -> None:
        """Replace the note; it is durable when this returns."""


class Locks(Protocol):
    def hold(self, name: str) -> AbstractContextManager[Held]:
        """Hold lock ``name`` until the block ends; LockHeld at once when another holder has it."""


class _FileNote:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def note(self) -> str:
        return os.pread(self._fd, MAX_NOTE_BYTES, 0).decode("utf-8", errors="replace").strip()

    def set_note(self, text: str) -> None:
        data = (text + "\n").encode("utf-8")
        if len(data) > MAX_NOTE_BYTES:
            raise ValueError(f"a lock's note is at most {MAX_NOTE_BYTES} bytes")
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)


class FileLocks:
    """``flock(2)`` on one file per lock below ``root``; the note is the file's content."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path(self, name: str) -> Path:
        return self.root.joinpath(*paths.lock(name).split("/"))

    @contextmanager
    def hold(self, name: str) -> Iterator[Held]:
        path = self.path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LockHeld(f"lock {path} is held") from None
            yield _FileNote(fd)
        finally:
            os.close(fd)  # closing the descriptor releases the flock


@lru_cache(maxsize=1)
def default_locks() -> Locks:
    from django.conf import settings

    return FileLocks(settings.REGISTRY_STORAGE_ROOT)
