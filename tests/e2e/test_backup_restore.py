"""manage.py backup while the registry serves, restored on another machine (another directory here):
scrub finds nothing wrong, every image pulls byte for byte, tokens and users still work."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.faults.wire import Registry
from tests.support.auth import basic, write_htpasswd
from tests.support.images import build_image, build_multiarch
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def _blobs(layout: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (layout / "blobs" / "sha256").iterdir()}


def test_a_backup_restores_elsewhere_whole(start_registry, skopeo, tmp_path: Path) -> None:
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    auth = {"SVC_AUTH_ENABLED": "true", "SVC_AUTH_HTPASSWD_FILE": str(users)}
    source = start_registry(name="source", **auth)
    creds = ("--dest-creds", "alice:wonderland")
    image = build_image(tmp_path / "image", layers=3)
    multi = build_multiarch(tmp_path / "multi", arches=("amd64", "arm64"))
    skopeo.run("copy", "--dest-tls-verify=false", *creds, f"oci:{image.layout}:v1",
               f"docker://{source.host}/team/app:v1")
    skopeo.run("copy", "--all", "--dest-tls-verify=false", *creds, f"oci:{multi.layout}:multi",
               f"docker://{source.host}/team/multi:v1")
    token = source.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()

    backup = tmp_path / "backup"
    made = source.manage("backup", str(backup))
    assert made.returncode == 0, made.stderr
    assert (backup / "db.sqlite3").exists() and (backup / "BACKUP").read_text().startswith("svc-registry ")

    # Restored as an operator would: the database, the blobs, the tokens, the users, the key.
    target = tmp_path / "target"
    target.mkdir()
    for name in ("db.sqlite3", "users.htpasswd", "secret_key"):
        shutil.copy2(backup / name, target / name)
    shutil.copytree(backup / "registry", target / "registry")
    shutil.copytree(backup / "tokens", target / "tokens")
    restored = RegistryServer(target, env_overrides={**auth, "SVC_AUTH_HTPASSWD_FILE": str(target / "users.htpasswd")})
    restored.start()
    try:
        scrub = restored.manage("scrub", "--grace-hours", "0")
        assert scrub.returncode == 0 and scrub.stdout.strip().endswith("0 problems, 0 removed"), scrub.stdout
        pull = ("--src-creds", "alice:wonderland")
        skopeo.run("copy", "--src-tls-verify=false", *pull, f"docker://{restored.host}/team/app:v1",
                   f"oci:{tmp_path / 'out'}:v1")
        assert _blobs(tmp_path / "out") == _blobs(image.layout)
        skopeo.run("copy", "--all", "--src-tls-verify=false", *pull, f"docker://{restored.host}/team/multi:v1",
                   f"oci:{tmp_path / 'out-multi'}:v1")
        assert _blobs(tmp_path / "out-multi") == _blobs(multi.layout)
        client = Registry(restored.host)
        assert client.request("GET", "/v2/_catalog", headers={"Authorization": f"Bearer {token}"}).status == 200
        catalog = client.request("GET", "/v2/_catalog", headers={"Authorization": basic("alice", "wonderland")})
        assert json.loads(catalog.body)["repositories"] == ["team/app", "team/multi"]
    finally:
        restored.stop()
