"""Named locks shared by every worker and replica, never waited for.

``default_locks().hold(name)`` holds a lock for a ``with`` block, or raises LockHeld at once when
another holder (a thread, a worker, another replica) has it. Each lock keeps a short note that only
its holder reads or writes: the collection schedule keeps the time of its last run there, so that
the lock and what it guards change together.

FileLocks ``flock``s one file per lock under the storage root (named by
``registry.storage.paths.lock``); it serves every replica that shares that directory, and is what
the filesystem backend uses. DatabaseLocks holds a lease row in the database (registry.models.Lease),
renewed by a thread while the block runs: replicas on object storage share no disk, and a lease
(unlike a PostgreSQL advisory lock) holds no pooled connection for as long as a collection runs and
works on SQLite too. A holder that dies loses the lease when it runs out (LEASE_SECONDS).
"""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import uuid
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Protocol

from registry.storage import paths

MAX_NOTE_BYTES = 4096

log = logging.getLogger(__name__)


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


LEASE_SECONDS = 60.0


class _LeaseNote:
    def __init__(self, name: str, owner: str, data: dict[str, Any]) -> None:
        self._name, self._owner, self._data = name, owner, data

    def note(self) -> str:
        return str(self._data.get("note", ""))

    def set_note(self, text: str) -> None:
        from registry import queries

        if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
            raise ValueError(f"a lock's note is at most {MAX_NOTE_BYTES} bytes")
        self._data = {**self._data, "note": text}
        if not queries.set_lease_data(self._name, self._owner, self._data):
            raise LockHeld(f"lock {self._name} was lost (its lease ran out)")


class DatabaseLocks:
    """A lease row per lock, renewed every third of LEASE_SECONDS while held."""

    def __init__(self, lease_seconds: float = LEASE_SECONDS) -> None:
        self.lease = timedelta(seconds=lease_seconds)

    @contextmanager
    def hold(self, name: str) -> Iterator[Held]:
        from django.utils import timezone

        from registry import queries

        paths.lock(name)  # the same names as FileLocks
        owner = uuid.uuid4().hex
        now = timezone.now()
        data = queries.acquire_lease(name, owner, now, now + self.lease)
        if data is None:
            raise LockHeld(f"lock {name} is held")
        done = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(name, owner, done), daemon=True,
                                   name=f"lease-{name}")
        renewer.start()
        try:
            yield _LeaseNote(name, owner, data)
        finally:
            done.set()
            renewer.join()
            queries.release_lease(name, owner)

    def _renew(self, name: str, owner: str, done: threading.Event) -> None:
        from django.db import connection
        from django.utils import timezone

        from registry import queries

        try:
            while not done.wait(self.lease.total_seconds() / 3):
                try:
                    renewed = queries.renew_lease(name, owner, timezone.now() + self.lease)
                except Exception:
                    # A database blip must not end the renewals: the next attempt may still be in
                    # time, and if the lease runs out meanwhile another replica may take it over.
                    log.warning("lock %s: renewing its lease failed; retrying", name, exc_info=True)
                    connection.close()
                    continue
                if not renewed:
                    log.warning("lock %s: its lease ran out and another holder may have it", name)
                    return
        finally:
            connection.close()  # this thread's own connection


@lru_cache(maxsize=1)
def default_locks() -> Locks:
    from django.conf import settings

    if settings.REGISTRY_STORAGE["backend"] == "s3":
        return DatabaseLocks()
    return FileLocks(settings.REGISTRY_STORAGE_ROOT)
