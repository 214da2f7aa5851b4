"""Garbage collection every ``[gc] interval_hours`` inside the service, once per interval in all.

Each gunicorn worker runs a daemon thread (started by gunicorn.conf.py) that wakes every
``POLL_SECONDS`` and tries to hold the collector's lock (``registry.locks``, named ``gc``) without
waiting. The holder reads the time of the last scheduled run from the lock's note and collects when
an interval has passed since. The lock lets one worker (of this or of another replica sharing the
lock) run at a time, and the time kept with the lock makes the run happen once per interval,
whichever worker gets there first. ``manage.py garbagecollect`` takes the same lock, so a manual or
cron collection and a scheduled one never overlap.

A scheduled run first applies the ``[[retention]]`` rules (registry.retention: they remove tags),
then collects blobs and expired uploads with ``[gc] grace_hours``, and the manifests the retention
rules leave to go; elsewhere it never deletes untagged manifests, which only an explicit
``garbagecollect --delete-untagged`` does. It also purges expired API tokens (``manage.py
purgetokens --expired`` does the same by hand), and binds tokens made before owner stamps to their
owner's htpasswd entry (tokens.owner_stamp).

On object storage the lock is a lease in the database, which a failover (or a stall) can make run
out under a collection while another replica takes it: a run checks its lease before each step it
reports (``guarded``) and stops at the first it no longer holds, so that two collections never go on
side by side; the next poll, on whichever replica holds the lease then, runs it again.
"""
from __future__ import annotations

import logging
import random
import threading
import time
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from typing import Iterator

from django.conf import settings
from django.db import connections

from registry.locks import Held, LockHeld, LockLost, default_locks
from registry.services.sweep import Report
from registry.retention import executor as retention
from registry.services import gc
from registry.storage import paths

POLL_SECONDS = 60.0

log = logging.getLogger("registry.gc")


class CollectionRunning(Exception):
    """Another garbage collection holds the lock."""


@contextmanager
def exclusive() -> Iterator[Held]:
    """Hold the collector's lock for the block; CollectionRunning at once when another run has it."""
    with ExitStack() as stack:
        try:
            held = stack.enter_context(default_locks().hold(paths.GC_LOCK))
        except LockHeld as exc:
            raise CollectionRunning(f"another garbage collection is running ({exc})") from None
        yield held


def guarded(held: Held, report: Report) -> Report:
    """``report``, checking first that the lock is still held: LockLost stops the run there."""
    def checked(line: str) -> None:
        held.ensure()
        report(line)

    return checked


def _last_run(held: Held) -> float | None:
    try:
        return float(held.note())
    except ValueError:
        return None


def _record_run(held: Held, when: float) -> None:
    held.set_note(repr(when))


def run_if_due(now: float | None = None) -> gc.Result | None:
    """Collect if an interval has passed since the last scheduled run; None when it did not run."""
    interval = settings.REGISTRY_GC_INTERVAL_HOURS * 3600
    if interval <= 0:
        return None
    now = time.time() if now is None else now
    try:
        with exclusive() as held:
            last = _last_run(held)
            if last is None:
                _record_run(held, now)  # first start: the first run is one interval from now
                return None
            if now - last < interval:
                return None
            log.info("scheduled garbage collection started")
            try:
                applied = retention.run(report=guarded(held, log.info))
                if applied.repositories:
                    log.info("%s", applied.summary(dry_run=False))
                options = gc.Options(grace=timedelta(hours=settings.REGISTRY_GC_GRACE_HOURS))
                held.ensure()
                result = gc.collect(options, report=guarded(held, log.debug))
            finally:
                _record_run(held, now)  # a failing run is retried one interval later, not every poll
    except CollectionRunning:
        return None
    except LockLost as exc:
        log.warning("scheduled garbage collection stopped: %s", exc)
        return None
    log.info("scheduled garbage collection finished: %s", result.summary(dry_run=False))
    _maintain_tokens()
    return result


def _maintain_tokens() -> None:
    from tokens import services

    try:
        purged = services.purge_expired()
        stamped = services.stamp_unstamped()
    except Exception:  # the collection is done; a failure here is retried next interval
        log.exception("maintaining API tokens (purging expired ones, stamping old ones) failed")
        return
    if purged:
        log.info("scheduled maintenance purged %d expired API tokens", purged)
    if stamped:
        log.info("scheduled maintenance bound %d API tokens made before owner stamps to their owner's "
                 "htpasswd entry", stamped)


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
