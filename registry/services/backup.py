"""A consistent copy of a registry on the filesystem backend: the database first, then the blobs.

The order matters: a blob's data is written before the row that records it and deleted after the
row is gone, so blob data copied after the database holds every blob the copied database refers to
(and perhaps more, which the restored registry's collector removes). Only a garbage collection
running in between could remove data a copied row refers to, so the collector's lock is held for
the whole copy: pushes and pulls go on meanwhile.

Blobs never change once stored (their name is their digest, and they are written by rename), so
they are hard-linked into the backup when it is on the same filesystem, and copied otherwise.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from django.conf import settings
from django.db import connection

from registry.locks import LockHeld, default_locks
from registry.storage import paths
from regsite.version import version


class BackupError(Exception):
    """The backup cannot be made (a reason the operator can act on)."""


@dataclass
class BackupResult:
    database: str
    blobs: int = 0
    bytes: int = 0
    linked: int = 0


def backup(dest: Path, report: Callable[[str], None] = lambda _line: None) -> BackupResult:
    if settings.REGISTRY_STORAGE["backend"] != "filesystem":
        raise BackupError("manage.py backup copies a filesystem registry; on S3 back up the database "
                          "(pg_dump) and the bucket as docs/storage.md (Backup and restore) says")
    if dest.exists() and any(dest.iterdir()):
        raise BackupError(f"{dest} is not empty")
    dest.mkdir(parents=True, exist_ok=True)
    try:
        with default_locks().hold(paths.GC_LOCK):
            result = BackupResult(_database(dest))
            report(f"database: {result.database}")
            _blobs(Path(settings.REGISTRY_STORAGE_ROOT), dest / "registry", result)
            report(f"blobs: {result.blobs} ({result.bytes} bytes, {result.linked} hard-linked)")
            _files(dest, report)
    except LockHeld:
        raise BackupError("a garbage collection is running: try again when it has finished") from None
    (dest / "BACKUP").write_text(f"svc-registry {version()}\n")
    return result


def _database(dest: Path) -> str:
    if connection.vendor == "sqlite":
        target = dest / "db.sqlite3"
        source = sqlite3.connect(settings.DATABASES["default"]["NAME"])
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)  # SQLite's online backup: a consistent snapshot while others write
        finally:
            copy.close()
            source.close()
        os.chmod(target, 0o600)
        return str(target)
    if connection.vendor == "postgresql":
        if shutil.which("pg_dump") is None:
            raise BackupError("pg_dump is not installed")
        db = settings.DATABASES["default"]
        target = dest / "registry.pgdump"
        env = {**os.environ, "PGPASSWORD": db.get("PASSWORD") or ""}
        done = subprocess.run(["pg_dump", "--format=custom", "--no-owner", f"--file={target}",
                               "-h", db.get("HOST") or "localhost", "-p", str(db.get("PORT") or 5432),
                               "-U", db.get("USER") or "", db["NAME"]], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise BackupError(f"pg_dump failed: {done.stderr.strip()[-300:]}")
        return str(target)
    raise BackupError(f"no backup for a {connection.vendor} database")


def _blobs(root: Path, dest: Path, result: BackupResult) -> None:
    source = root / paths.BLOBS
    if not source.is_dir():
        return
    for directory, _dirs, files in os.walk(source):
        for name in files:
            if name.startswith("."):
                continue  # readiness probes, temp files of a write in progress
            path = Path(directory, name)
            target = dest / path.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(path, target)
                result.linked += 1
            except OSError:
                shutil.copy2(path, target)
            result.blobs += 1
            result.bytes += target.stat().st_size


def _files(dest: Path, report: Callable[[str], None]) -> None:
    """Token files, the htpasswd file and the session key: what the registry needs besides data."""
    if settings.AUTH_TOKEN_BACKEND == "files" and Path(settings.AUTH_TOKEN_STORAGE).is_dir():
        shutil.copytree(settings.AUTH_TOKEN_STORAGE, dest / "tokens")
        report("tokens: copied")
    for name, path in (("users.htpasswd", settings.AUTH_HTPASSWD_FILE),
                       ("secret_key", Path(settings.SVC["server"]["secret_key_file"]))):
        if Path(path).is_file():
            shutil.copy2(path, dest / name)
            report(f"{name}: copied")
