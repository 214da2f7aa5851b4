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

A lease can also be lost by a holder that lives: the database away for longer than the lease (a
failover), or a holder stalled that long. It then counts as lost from the moment its last renewal
would have run out, by the holder's own clock, whether or not another holder took it: ``ensure()``
raises LockLost, and so does writing the note, so that a collection or a notification sender stops
at its next step instead of running beside the one that took over.
"""
from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
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


class LockLost(LockHeld):
    """This holder had the lock and may not have it any more (its lease ran out)."""


class Held(Protocol):
    """A lock held by this block, with its note."""

    def note(self) -> str:
        """What a holder last wrote with ``set_note``; empty when nothing was written."""

    def set_note(self, text: str) -> None:
        """Replace the note; it is durable when this returns."""

    def ensure(self) -> None:
        """Raise LockLost if the lock may be another holder's by now."""


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

    def ensure(self) -> None:
        pass  # a flock lasts as long as its descriptor


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


class _Lease:
    """A lease held by this process: its note, and until when it is surely still ours."""

    def __init__(self, name: str, owner: str, data: dict[str, Any], until: float) -> None:
        self._name, self._owner, self._data = name, owner, data
        self._until = until  # time.monotonic(): when the last acquisition or renewal runs out
        self._lost = False

    def renewed(self, until: float) -> None:
        self._until = until

    def lose(self) -> None:
        self._lost = True

    def ensure(self) -> None:
        if self._lost or time.monotonic() >= self._until:
            raise LockLost(f"lock {self._name} was lost (its lease ran out, and another holder may have it)")

    def note(self) -> str:
        return str(self._data.get("note", ""))

    def set_note(self, text: str) -> None:
        from registry import queries

        if len(text.encode("utf-8")) > MAX_NOTE_BYTES:
            raise ValueError(f"a lock's note is at most {MAX_NOTE_BYTES} bytes")
        self.ensure()
        self._data = {**self._data, "note": text}
        if not queries.set_lease_data(self._name, self._owner, self._data):
            self.lose()
            self.ensure()


class DatabaseLocks:
    """A lease row per lock, renewed every third of LEASE_SECONDS while held."""

    def __init__(self, lease_seconds: float = LEASE_SECONDS) -> None:
        self.lease = timedelta(seconds=lease_seconds)

    @contextmanager
    def hold(self, name: str) -> Iterator[Held]:
        from django.db import DatabaseError
        from django.utils import timezone

        from registry import queries

        paths.lock(name)  # the same names as FileLocks
        owner = uuid.uuid4().hex
        asked, now = time.monotonic(), timezone.now()
        data = queries.acquire_lease(name, owner, now, now + self.lease)
        if data is None:
            raise LockHeld(f"lock {name} is held")
        # Counted from before asking: the row's end, by the database's clock, is no earlier.
        lease = _Lease(name, owner, data, asked + self.lease.total_seconds())
        done = threading.Event()
        renewer = threading.Thread(target=self._renew, args=(lease, owner, done), daemon=True,
                                   name=f"lease-{name}")
        renewer.start()
        try:
            yield lease
        finally:
            done.set()
            renewer.join()
            try:
                queries.release_lease(name, owner)
            except DatabaseError as exc:  # the database away: the lease runs out by itself
                log.warning("lock %s: giving its lease back failed (%s); it runs out in %g s", name, exc,
                            self.lease.total_seconds())

    def _renew(self, lease: _Lease, owner: str, done: threading.Event) -> None:
        from django.db import connection
        from django.utils import timezone

        from registry import queries

        name = lease._name
        try:
            while not done.wait(self.lease.total_seconds() / 3):
                asked = time.monotonic()
                try:
                    renewed = queries.renew_lease(name, owner, timezone.now() + self.lease)
                except Exception:
                    # A database blip must not end the renewals: the next attempt may still be in
                    # time; past the lease's end the holder is told (ensure) that it lost it.
                    log.warning("lock %s: renewing its lease failed; retrying", name, exc_info=True)
                    connection.close()
                    continue
                if not renewed:
                    log.warning("lock %s: its lease ran out and another holder may have it", name)
                    lease.lose()
                    return
                lease.renewed(asked + self.lease.total_seconds())
        finally:
            connection.close()  # this thread's own connection


@lru_cache(maxsize=1)
def default_locks() -> Locks:
    from django.conf import settings

    if settings.REGISTRY_STORAGE["backend"] == "s3":
        return DatabaseLocks()
    return FileLocks(settings.REGISTRY_STORAGE_ROOT)
