"""Garbage collection every ``[gc] interval_hours`` inside the service, once per interval in all.

Each gunicorn worker runs a daemon thread (started by gunicorn.conf.py) that wakes every
``POLL_SECONDS`` and tries to take an exclusive, non-blocking ``flock`` on ``_gc/schedule`` under the
storage root. The holder reads the time of the last scheduled run from that file and collects when
an interval has passed since. The lock lets one worker (of this or of another replica sharing the
storage) run at a time, and the time kept in the shared file makes the run happen once per interval,
whichever worker gets there first. ``manage.py garbagecollect`` takes the same lock, so a manual or
cron collection and a scheduled one never overlap.

A scheduled run collects blobs and expired uploads with ``[gc] grace_hours``; it never deletes
untagged manifests, which only an explicit ``garbagecollect --delete-untagged`` does.
"""
from __future__ import annotations

import fcntl
import logging
import os
import random
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Iterator

from django.conf import settings
from django.db import connections

from registry.services import gc
from registry.storage import paths

POLL_SECONDS = 60.0

log = logging.getLogger("registry.gc")


class CollectionRunning(Exception):
    """Another garbage collection holds the lock."""


def _schedule_path() -> Path:
    return Path(settings.REGISTRY_STORAGE_ROOT) / paths.GC_SCHEDULE


@contextmanager
def exclusive() -> Iterator[int]:
    """Hold the collector's lock; yields the descriptor of the schedule file. Never waits."""
    path = _schedule_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CollectionRunning(f"another garbage collection is running (lock {path})") from None
        yield fd
    finally:
        os.close(fd)  # releases the lock


def _last_run(fd: int) -> float | None:
    try:
        return float(os.pread(fd, 64, 0).decode().strip())
    except (UnicodeDecodeError, ValueError):
        return None


def _record_run(fd: int, when: float) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{when!r}\n".encode(), 0)
    os.fsync(fd)


def run_if_due(now: float | None = None) -> gc.Result | None:
    """Collect if an interval has passed since the last scheduled run; None when it did not run."""
    interval = settings.REGISTRY_GC_INTERVAL_HOURS * 3600
    if interval <= 0:
        return None
    now = time.time() if now is None else now
    try:
        with exclusive() as fd:
            last = _last_run(fd)
            if last is None:
                _record_run(fd, now)  # first start: the first run is one interval from now
                return None
            if now - last < interval:
                return None
            log.info("scheduled garbage collection started")
            try:
                options = gc.Options(grace=timedelta(hours=settings.REGISTRY_GC_GRACE_HOURS))
                result = gc.collect(options, report=log.debug)
            finally:
                _record_run(fd, now)  # a failing run is retried one interval later, not every poll
    except CollectionRunning:
        return None
    log.info("scheduled garbage collection finished: %s", result.summary(dry_run=False))
    return result


def _loop() -> None:
    time.sleep(random.uniform(1.0, 3.0))  # workers start together: let one of them go first
    while True:
        try:
            run_if_due()
        except Exception:
            log.exception("scheduled garbage collection failed")
        finally:
            connections.close_all()
        time.sleep(POLL_SECONDS)


def start() -> threading.Thread | None:
    """Start this process's scheduler thread when ``[gc] interval_hours`` is set."""
    if settings.REGISTRY_GC_INTERVAL_HOURS <= 0:
        return None
    thread = threading.Thread(target=_loop, name="gc-scheduler", daemon=True)
    thread.start()
    return thread
