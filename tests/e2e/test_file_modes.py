"""Under gunicorn: the database, blob and upload data, their directories, token files and the session
key are created readable by the service user only (0600 files, 0700 directories), whatever the umask
it is started with and whether or not `manage.py migrate` ran first."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.faults.wire import Registry
from tests.support.auth import write_htpasswd
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def test_everything_the_registry_writes_is_private(start_registry, tmp_path: Path) -> None:
    users = write_htpasswd(tmp_path / "users", {"alice": "pw"})
    server = start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_HTPASSWD_FILE=str(users),
                            copy_migrated=False)  # what `manage.py migrate` creates, then gunicorn
    client = Registry(server.host, headers={"Authorization": "Basic YWxpY2U6cHc="})
    client.push_image("team/app", "v1", [b"a layer"])
    assert client.request("POST", "/v2/team/app/blobs/uploads/").status == 202  # a session in progress
    assert server.manage("createtoken", "--username", "alice").returncode == 0
    created = [server.workdir / "db.sqlite3", server.workdir / "secret_key", server.workdir / "registry",
               server.workdir / "tokens"]
    created += [p for root in created[2:] for p in root.rglob("*")]
    assert len(created) > 10
    for path in created:
        mode = stat.S_IMODE(path.stat().st_mode)
        expected = 0o700 if path.is_dir() else 0o600
        assert mode == expected, f"{path.relative_to(server.workdir)} is {oct(mode)}"
    for journal in server.workdir.glob("db.sqlite3-*"):
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600


def test_a_server_started_before_migrate_creates_private_directories_whatever_the_umask(tmp_path: Path) -> None:
    data = tmp_path / "data"  # as `make run`'s data/ when gunicorn is started directly, before anything
    server = RegistryServer(tmp_path / "server", env_overrides={
        "SVC_STORAGE_ROOT": str(data / "registry"), "SVC_AUTH_TOKEN_STORAGE": str(data / "tokens"),
        "SVC_DATABASE_URL": f"sqlite:///{data / 'db' / 'db.sqlite3'}"})
    previous = os.umask(0o002)  # a shell's usual umask, inherited by gunicorn
    try:
        server.start(migrate=False)
    finally:
        os.umask(previous)
    try:
        created = [data, *data.rglob("*")]
        assert {p.name for p in created} >= {"data", "registry", "tokens", "db"}
        for path in created:
            assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    finally:
        server.stop()
