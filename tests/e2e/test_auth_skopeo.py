"""Authentication end to end: gunicorn with auth on, skopeo logging in and pushing with tokens.

The htpasswd file is made by Apache's own ``htpasswd -cbB``, the tokens by the token API and by
manage.py, and every client request goes over real HTTP to two gunicorn workers.
"""
from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.e2e.conftest import Skopeo, require_tool
from tests.support.images import build_image
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

ALICE = {"username": "alice", "password": "wonderland"}


def http(server: RegistryServer, method: str, path: str, body: Any = None,
         headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, method=method, headers={
        **({"Content-Type": "application/json"} if data else {}), **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw, status, got = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        raw, status, got = error.read(), error.code, dict(error.headers)
    return status, (json.loads(raw) if raw.strip().startswith(b"{") else {}), got


def new_token(server: RegistryServer, role: str) -> str:
    status, body, _ = http(server, "POST", "/api/tokens", {**ALICE, "role": role, "ttl_days": 1})
    assert status == 201, body
    return body["token"]


@pytest.fixture
def auth_registry(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    htpasswd = require_tool("htpasswd")
    workdir = tmp_path / "server"
    workdir.mkdir()
    subprocess.run([htpasswd, "-cbB", str(workdir / "users.htpasswd"), "alice", "wonderland"],
                   check=True, capture_output=True)
    return start_registry(SVC_AUTH_ENABLED="true")


def test_it_logs_skopeo_in_only_with_the_right_password(auth_registry, skopeo: Skopeo) -> None:
    host = auth_registry.host
    wrong = skopeo.run("login", "--tls-verify=false", "-u", "alice", "-p", "looking-glass", host, check=False)
    assert wrong.returncode != 0
    assert "invalid username/password" in wrong.stderr
    right = skopeo.run("login", "--tls-verify=false", "-u", "alice", "-p", "wonderland", host, check=False)
    assert right.returncode == 0, right.stderr

    # A user added with manage.py can log in at once: the server re-reads the changed file.
    added = auth_registry.manage("adduser", "carol", "--password-stdin", "--cost", "4", input="tea-party\n")
    assert added.returncode == 0, added.stderr
    carol = skopeo.run("login", "--tls-verify=false", "-u", "carol", "-p", "tea-party", host, check=False)
    assert carol.returncode == 0, carol.stderr


def test_it_lets_each_token_do_what_its_role_allows(auth_registry, skopeo: Skopeo, tmp_path: Path) -> None:
    image = build_image(tmp_path / "src", layers=2)
    write, read = new_token(auth_registry, "write"), new_token(auth_registry, "read")
    created = auth_registry.manage("createtoken", "--username", "alice", "--role", "admin")
    assert created.returncode == 0, created.stderr
    admin = created.stdout.strip()
    ref = f"docker://{auth_registry.host}/team/app:v1"

    anonymous = skopeo.run("copy", "--dest-tls-verify=false", f"oci:{image.layout}:v1", ref, check=False)
    assert anonymous.returncode != 0
    refused = skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", f"token:{read}",
                         f"oci:{image.layout}:v1", ref, check=False)
    assert refused.returncode != 0
    assert "denied" in refused.stderr.lower()
    assert "has role read; push needs write" in refused.stderr  # the envelope's message, shown as is

    skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", f"token:{write}",
               f"oci:{image.layout}:v1", ref)
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", "--src-creds", f"token:{read}", ref, f"oci:{out}:v1")
    assert sorted(p.name for p in (out / "blobs" / "sha256").iterdir()) == sorted(
        p.name for p in (image.layout / "blobs" / "sha256").iterdir())

    not_admin = skopeo.run("delete", "--tls-verify=false", "--creds", f"token:{write}", ref, check=False)
    assert not_admin.returncode != 0
    assert "denied" in not_admin.stderr.lower()
    skopeo.run("delete", "--tls-verify=false", "--creds", f"token:{admin}", ref)
    gone = skopeo.run("inspect", "--tls-verify=false", "--creds", f"token:{read}", ref, check=False)
    assert gone.returncode != 0


def test_it_refuses_a_revoked_token_in_every_worker(auth_registry, skopeo: Skopeo, tmp_path: Path) -> None:
    image = build_image(tmp_path / "src", layers=1)
    token = new_token(auth_registry, "write")
    ref = f"docker://{auth_registry.host}/team/app:v1"
    skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", f"token:{token}", f"oci:{image.layout}:v1", ref)

    status, listed, _ = http(auth_registry, "POST", "/api/tokens/list", ALICE)
    [entry] = listed["tokens"]
    status, body, _ = http(auth_registry, "POST", "/api/tokens/revoke", {**ALICE, "hash_prefix": entry["hash_prefix"]})
    assert (status, body) == (200, {"revoked": entry["hash_prefix"]})

    after = skopeo.run("inspect", "--tls-verify=false", "--creds", f"token:{token}", ref, check=False)
    assert after.returncode != 0
    # Several requests over fresh connections land on both workers; none may still accept it.
    for _ in range(8):
        status, body, headers = http(auth_registry, "GET", "/v2/_catalog",
                                     headers={"Authorization": f"Bearer {token}"})
        assert status == 401
        assert body["errors"][0]["code"] == "UNAUTHORIZED"
        assert headers["WWW-Authenticate"].startswith("Basic realm=")


def test_it_challenges_and_counts_failed_logins_across_workers(auth_registry) -> None:
    status, _, headers = http(auth_registry, "GET", "/v2/")
    assert status == 200 and headers["WWW-Authenticate"] == 'Basic realm="svc-registry"'
    status, body, _ = http(auth_registry, "GET", "/v2/_catalog")
    assert status == 401 and body["error"] == "authentication required"
    status, _, _ = http(auth_registry, "GET", "/v2/_catalog",
                        headers={"Authorization": "Basic YWxpY2U6d29uZGVybGFuZA=="})  # alice:wonderland
    assert status == 200

    # Ten failures over fresh connections (spread over both workers) lock alice out everywhere.
    for _ in range(10):
        status, _, _ = http(auth_registry, "POST", "/api/tokens", {"username": "alice", "password": "no"})
        assert status == 401
    for _ in range(4):
        status, body, headers = http(auth_registry, "POST", "/api/tokens", ALICE)
        assert status == 429, body
        assert 1 <= int(headers["Retry-After"]) <= 60


def test_it_will_not_start_without_the_htpasswd_file(tmp_path: Path) -> None:
    server = RegistryServer(tmp_path / "no-users", env_overrides={"SVC_AUTH_ENABLED": "true"})
    with pytest.raises(RuntimeError) as failed:
        server.start(timeout=20)
    assert f"[auth] htpasswd_file: cannot read {tmp_path / 'no-users' / 'users.htpasswd'}" in str(failed.value)
