"""Readiness checks: can this process serve registry traffic right now?

Each check returns None when it passes or a short reason when it fails. The reasons are shown on
the unauthenticated /ready endpoint, so they name the problem but never a path or an error text
from the system; those go to the log for the operator.
"""
from __future__ import annotations

import logging
import os
import secrets
import tempfile
from pathlib import Path
from typing import Callable

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from registry import queries
from registry.storage import default_driver, paths
from registry.storage.driver import delete_if_exists

log = logging.getLogger(__name__)

Check = Callable[[], "str | None"]
PROBE_DATA = b"ready\n"


_migrated = False


def database() -> str | None:
    """The connection, then the schema: an unreachable server and missing migrations are told apart,
    since their fixes differ (a restart or a network, or ``manage.py migrate``)."""
    global _migrated
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
    """A probe written, read back and removed where pushes write: uploads/ and blobs/."""
    for area in (paths.UPLOADS, paths.BLOBS):
        try:
            driver = default_driver()
            probe = paths.probe(secrets.token_hex(8), area)
            driver.write(probe, PROBE_DATA)
            try:
                if driver.read(probe) != PROBE_DATA:
                    return f"{area}/ returned different bytes than written"
            finally:
                delete_if_exists(driver, probe)
        except Exception as exc:  # StorageError, OSError, or a root that cannot be created
            log.warning("readiness: %s: %s/ is not writable: %s", _where(), area, exc)
            where = "in the bucket" if driver_is_remote() else "in the storage root"
            return f"{area}/ {where} is not writable"
    return None


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


# Reported in /ready's body without making it fail: without the directory or the OpenID provider,
# htpasswd users and API tokens still get in.
INFORMATIONAL = frozenset({"storage_low", "ldap", "oidc"})


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


def ldap() -> str | None:
    from tokens import directory

    return directory.ready()


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
        if settings.LDAP["url"]:
            selected["ldap"] = ldap
    return selected


def run() -> dict[str, str]:
    """Every check by name: ``"ok"`` or the reason it failed. All run, so all failures show."""
    return {name: check() or "ok" for name, check in checks().items()}
