"""Readiness checks: can this process serve registry traffic right now?

Each check returns None when it passes or a short reason when it fails. The reasons are shown on
the unauthenticated /ready endpoint, so they name the problem but never a path or an error text
from the system; those go to the log for the operator.

/ready is public and every balancer and kubelet probes it every few seconds: ``run()`` runs the
checks at most once per ``[server] ready_cache_seconds`` in a process, whatever the call rate, and
answers every other call with the last results. A check is a function in ``checks()``: one added
there is run (and bounded) like the others.
"""
from __future__ import annotations

import logging
import os
import secrets
import tempfile
import threading
from pathlib import Path
from time import monotonic
from typing import Callable

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from registry import queries
from registry.storage import default_driver, paths
from registry.storage.driver import delete_if_exists
from regsite import db

log = logging.getLogger(__name__)

Check = Callable[[], "str | None"]
PROBE_DATA = b"ready\n"


_migrated = False


def database() -> str | None:
    """The connection, then the schema: an unreachable server and missing migrations are told apart,
    since their fixes differ (a restart or a network, or ``manage.py migrate``)."""
    global _migrated
    if problem := db.primary_problem():  # bounded, and a writable primary (PostgreSQL)
        return problem
    try:
        connection.ensure_connection()
    except Exception as exc:
        log.warning("readiness: database check failed: cannot connect: %s", exc)
        return "database does not answer"
    if not _migrated:
        try:
            pending = MigrationExecutor(connection).migration_plan(
                MigrationExecutor(connection).loader.graph.leaf_nodes())
        except Exception as exc:
            log.warning("readiness: database check failed: migrations cannot be read: %s", exc)
            return "database does not answer"
        if pending:
            log.warning("readiness: database check failed: %d migrations not applied (run manage.py "
                        "migrate)", len(pending))
            return f"database schema is not migrated ({len(pending)} migrations pending)"
        _migrated = True  # applied migrations stay applied: checked once per process
    try:
        queries.probe_registry_table()
    except Exception as exc:
        log.warning("readiness: database check failed: %s", exc)
        return "database does not answer registry queries"
    return None


def _where() -> str:
    storage = settings.REGISTRY_STORAGE
    if storage["backend"] == "s3":
        return f"bucket {storage['s3_bucket']}"  # never the endpoint's credentials
    return f"storage root {settings.REGISTRY_STORAGE_ROOT}"


def storage() -> str | None:
    """Pushes can write where they write. On an object store, one small request: the probe object in
    uploads/ overwritten (a fixed name, so nothing piles up and nothing is left to delete); every
    replica writes the same one. On a filesystem, a probe written, read back and removed in
    uploads/ and blobs/ (a few local system calls)."""
    try:
        driver = default_driver()
        if driver.remote:
            driver.write(paths.ready_probe(paths.UPLOADS), PROBE_DATA)
            return None
    except Exception as exc:  # StorageError, OSError, or a driver that cannot be made
        return _not_writable(paths.UPLOADS, exc)
    for area in (paths.UPLOADS, paths.BLOBS):
        try:
            probe = paths.probe(secrets.token_hex(8), area)
            driver.write(probe, PROBE_DATA)
            try:
                if driver.read(probe) != PROBE_DATA:
                    return f"{area}/ returned different bytes than written"
            finally:
                delete_if_exists(driver, probe)
        except Exception as exc:  # StorageError, OSError, or a root that cannot be created
            return _not_writable(area, exc)
    return None


def _not_writable(area: str, exc: Exception) -> str:
    log.warning("readiness: %s: %s/ is not writable: %s", _where(), area, exc)
    where = "in the bucket" if driver_is_remote() else "in the storage root"
    return f"{area}/ {where} is not writable"


def driver_is_remote() -> bool:
    try:
        return default_driver().remote
    except Exception:
        return settings.REGISTRY_STORAGE["backend"] == "s3"


def storage_low() -> str | None:
    """Below [storage] min_free_bytes new uploads are refused (507), but pulls go on: reported,
    never failing readiness, which would take every replica out of its load balancer."""
    floor = settings.REGISTRY_MIN_FREE_BYTES
    try:
        free = default_driver().free_bytes()
    except Exception as exc:
        log.warning("readiness: cannot read free space of %s: %s", settings.REGISTRY_STORAGE_ROOT, exc)
        return "free space of the storage device is unknown"
    if free is not None and free < floor:
        return f"{free} bytes free on the storage device, below the floor of {floor}: new uploads are refused"
    return None


# Reported in /ready's body without making it fail.
INFORMATIONAL = frozenset({"storage_low"})


def _unreadable(path: Path, what: str) -> str | None:
    try:
        with path.open("rb") as fh:
            fh.read(1)
    except OSError as exc:
        log.warning("readiness: %s %s is not readable: %s", what, path, exc.strerror or exc)
        return f"{what} is not readable"
    return None


def htpasswd() -> str | None:
    return _unreadable(Path(settings.AUTH_HTPASSWD_FILE), "htpasswd file")


def groups_file() -> str | None:
    # Unreadable, it puts nobody in any group: access through groups is gone until it is fixed.
    return _unreadable(Path(settings.AUTH_GROUPS_FILE), "groups file")


def token_storage() -> str | None:
    from tokens.services import file_repository

    repo = file_repository()
    try:
        repo.ensure_directory()
        # The repository skips dot files, so a concurrent token listing never sees the probe.
        fd, probe = tempfile.mkstemp(dir=repo.directory, prefix=".ready-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        log.warning("readiness: token directory %s is not writable: %s", repo.directory, exc.strerror or exc)
        return "token directory is not writable"
    return None


def checks() -> dict[str, Check]:
    # On object storage the probe write is the bucket check, and there is no device to be full.
    selected: dict[str, Check] = {"database": database, "storage": storage}
    if not driver_is_remote():
        selected["storage_low"] = storage_low
    if settings.AUTH_ENABLED:
        selected["htpasswd"] = htpasswd
        if settings.AUTH_GROUPS_FILE:
            selected["groups"] = groups_file
        if settings.AUTH_TOKEN_BACKEND == "files":
            selected["tokens"] = token_storage
    return selected


class _LastResults:
    """The last results of the checks in this process, and when they were made."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.results: dict[str, str] | None = None
        self.made = 0.0

    def fresh(self, period: float) -> dict[str, str] | None:
        results = self.results
        return results if results is not None and monotonic() - self.made < period else None

    def get(self, period: float) -> dict[str, str]:
        if period <= 0:
            return _run_checks()
        if (results := self.fresh(period)) is not None:
            return results
        # One thread runs the checks; meanwhile the others answer with the last results, so that a
        # store that is slow to answer holds one request thread and not every caller's. Before the
        # first results there are none to give: those callers wait for that one run.
        last = self.results
        if last is None:
            self.lock.acquire()
        elif not self.lock.acquire(blocking=False):
            return last
        try:
            if (results := self.fresh(period)) is not None:
                return results  # made by the thread this one waited for
            self.results = _run_checks()
            self.made = monotonic()  # when the checks ended: runs start at least a period apart
            return self.results
        finally:
            self.lock.release()

    def forget(self) -> None:
        with self.lock:
            self.results = None


_last = _LastResults()
forget = _last.forget  # for tests, and for a process that must check again at once


def _run_checks() -> dict[str, str]:
    return {name: check() or "ok" for name, check in checks().items()}


def run() -> dict[str, str]:
    """Every check by name: ``"ok"`` or the reason it failed. All run, so all failures show; at most
    once per ``[server] ready_cache_seconds`` (failures too: a failing store is not asked faster)."""
    return _last.get(settings.READY_CACHE_SECONDS)
