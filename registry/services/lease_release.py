"""Upload-session leases a request could not give back, given back as soon as the database answers.

A request writing to an upload session holds the session's lease (registry.services.uploads) and
gives it back when it ends. When the database fails over under it, giving it back fails too, and the
session stayed blocked for the client's retry until the lease ran out (60 s), answering 416 meanwhile.
Such a lease is kept here, and a thread of the process gives it back every RETRY_SECONDS until the
database answers; a request of the same process finding the session leased to it takes it over at once.
"""
from __future__ import annotations

import logging
import threading
import time

from django.db import DatabaseError, connection

from registry import queries

RETRY_SECONDS = 0.25

log = logging.getLogger(__name__)
_pending: set[tuple[str, str]] = set()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def release(upload_id: str, owner: str) -> None:
    """Give the lease back now, or as soon as the database answers again."""
    global _thread
    try:
        queries.release_session(upload_id, owner)
        return
    except DatabaseError as exc:
        log.warning("upload %s: giving its lease back failed (%s); retrying every %g s", upload_id, exc,
                    RETRY_SECONDS)
    with _lock:
        _pending.add((upload_id, owner))
        if _thread is None:
            _thread = threading.Thread(target=_retry, name="lease-release", daemon=True)
            _thread.start()


def _retry() -> None:
    global _thread
    try:
        while True:
            time.sleep(RETRY_SECONDS)
            with _lock:
                leases = sorted(_pending)
                if not leases:
                    _thread = None
                    return
            for lease in leases:
                try:
                    queries.release_session(*lease)
                except Exception:  # DatabaseError: still away; all of them again next time
                    break
                with _lock:
                    _pending.discard(lease)
            connection.close()  # this thread's own
    except BaseException:
        with _lock:
            _thread = None
        raise


def abandoned(owner: str) -> bool:
    """Whether ``owner`` is a lease of this process whose request ended without giving it back."""
    with _lock:
        return any(held == owner for _, held in _pending)


def pending() -> int:
    with _lock:
        return len(_pending)
