"""Docker's token flow end to end ([auth] challenge = "bearer"): docker, podman and skopeo log in,
fetch signed tokens from /auth/token and push and pull; skopeo's --registry-token takes an API token
or a signed token; docker keeps a refresh token (identitytoken) instead of the password; docker and
podman logged in with a read token show why its push is refused."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from tests.e2e.conftest import Skopeo, require_tool
from tests.support.auth import basic, write_htpasswd
from tests.support.docker import Docker
from tests.support.images import build_image
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


@pytest.fixture
def bearer_registry(start_registry: Callable[..., RegistryServer], tmp_path: Path) -> RegistryServer:
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    return start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_CHALLENGE="bearer", SVC_AUTH_HTPASSWD_FILE=str(users))


def token_requests(server: RegistryServer) -> list[dict[str, Any]]:
    """The request log's lines for /auth/token: proof that a client took the token flow."""
    return server.request_lines("/auth/token")


def signed_token(server: RegistryServer, scope: str, authorization: str) -> str:
    request = urllib.request.Request(f"{server.url}/auth/token?service=svc-registry&scope={scope}",
                                     headers={"Authorization": authorization})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["token"]


def test_docker_logs_in_keeps_a_refresh_token_and_pushes(docker: Docker, bearer_registry) -> None:
    host = bearer_registry.host
    image = f"{host}/team/busybox:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    docker.run("login", "-u", "alice", "--password-stdin", host, input="wonderland")
    stored = json.loads((docker.config / "config.json").read_text())["auths"][host]
    # The engine got a refresh token at login; the CLI keeps it instead of the password.
    assert stored.get("identitytoken"), stored
    assert base64.b64decode(stored["auth"]) == b"alice:", stored

    docker.run("push", image)
    docker.run("rmi", image)
    docker.run("pull", image)
    ran = docker.run("run", "--rm", "--network", "none", image, "/bin/sh", "-c", "echo pulled and ran")
    assert ran.stdout.strip() == "pulled and ran"
    grants = {(line["method"], line["status"]) for line in token_requests(bearer_registry)}
    assert ("GET", 200) in grants and ("POST", 200) in grants, grants  # login, then the refresh grant
    docker.run("logout", host)


def test_docker_uses_api_tokens_through_the_token_flow(docker: Docker, bearer_registry) -> None:
    host = bearer_registry.host
    image = f"{host}/team/tokens:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    write = bearer_registry.manage("createtoken", "--username", "alice", "--role", "write").stdout.strip()
    read = bearer_registry.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()

    docker.run("login", "-u", "token", "--password-stdin", host, input=write)
    docker.run("push", image)
    docker.run("rmi", image)

    docker.run("login", "-u", "token", "--password-stdin", host, input=read)
    docker.run("pull", image)
    other = image.rsplit(":", 1)[0] + ":pushed-with-read"
    docker.run("tag", image, other)
    refused = docker.run("push", other, check=False)
    assert refused.returncode != 0
    assert "has role read; push needs write" in refused.stderr, refused.stderr
    docker.run("logout", host)


@pytest.fixture
def podman() -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    binary = require_tool("podman")
    root = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))  # its runroot path must be short
    (root / "xdg").mkdir()
    env = {**os.environ, "HOME": str(root), "XDG_RUNTIME_DIR": str(root / "xdg")}
    base = [binary, "--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs"]

    def run(*args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([*base, *args], capture_output=True, text=True, env=env, input=input, timeout=300)
        if check and done.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} failed:\n{done.stderr}")
        return done

    yield run
    shutil.rmtree(root, ignore_errors=True)


def test_podman_logs_in_pulls_and_pushes(podman, bearer_registry, skopeo: Skopeo, tmp_path: Path) -> None:
    host = bearer_registry.host
    image = build_image(tmp_path / "src", layers=2)
    skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", "alice:wonderland",
               f"oci:{image.layout}:v1", f"docker://{host}/team/app:v1")
    before = len(token_requests(bearer_registry))

    wrong = podman("login", "--tls-verify=false", "-u", "alice", "--password-stdin", host, input="nope", check=False)
    assert wrong.returncode != 0
    podman("login", "--tls-verify=false", "-u", "alice", "--password-stdin", host, input="wonderland")
    podman("pull", "--tls-verify=false", f"{host}/team/app:v1")
    podman("tag", f"{host}/team/app:v1", f"{host}/team/copy:v2")
    podman("push", "--tls-verify=false", f"{host}/team/copy:v2")
    podman("rmi", f"{host}/team/copy:v2", f"{host}/team/app:v1")
    podman("pull", "--tls-verify=false", f"{host}/team/copy:v2")
    assert len(token_requests(bearer_registry)) > before


def test_podman_with_a_read_token_pulls_and_is_told_why_it_may_not_push(
        podman, bearer_registry, skopeo: Skopeo, tmp_path: Path) -> None:
    host = bearer_registry.host
    image = build_image(tmp_path / "src", layers=1)
    skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", "alice:wonderland",
               f"oci:{image.layout}:v1", f"docker://{host}/team/app:v1")
    read = bearer_registry.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()
    before = len(token_requests(bearer_registry))

    podman("login", "--tls-verify=false", "-u", "token", "--password-stdin", host, input=read)
    podman("pull", "--tls-verify=false", f"{host}/team/app:v1")
    podman("tag", f"{host}/team/app:v1", f"{host}/team/app:pushed-with-read")
    refused = podman("push", "--tls-verify=false", f"{host}/team/app:pushed-with-read", check=False)
    assert refused.returncode != 0
    assert "has role read; push needs write" in refused.stderr, refused.stderr  # the envelope's message
    assert len(token_requests(bearer_registry)) > before  # the token flow, not Basic
    tags = json.loads(skopeo.run("list-tags", "--tls-verify=false", "--creds", "alice:wonderland",
                                 f"docker://{host}/team/app").stdout)["Tags"]
    assert tags == ["v1"]


def test_skopeo_logs_in_with_creds_and_with_registry_tokens(bearer_registry, skopeo: Skopeo, tmp_path: Path) -> None:
    host = bearer_registry.host
    image = build_image(tmp_path / "src", layers=2)
    write = bearer_registry.manage("createtoken", "--username", "alice", "--role", "write").stdout.strip()

    skopeo.run("copy", "--dest-tls-verify=false", "--dest-creds", f"token:{write}",
               f"oci:{image.layout}:v1", f"docker://{host}/team/app:v1")
    assert any(line["status"] == 200 for line in token_requests(bearer_registry))

    # --registry-token sends the token as Bearer once the registry asks for Bearer: an API token...
    skopeo.run("copy", "--dest-tls-verify=false", "--dest-registry-token", write,
               f"oci:{image.layout}:v1", f"docker://{host}/team/app:v2")
    # ...or a signed token fetched from the realm, which is held to its scope.
    pull_only = signed_token(bearer_registry, "repository:team/app:pull", basic("alice", "wonderland"))
    out = tmp_path / "out"
    skopeo.run("copy", "--src-tls-verify=false", "--src-registry-token", pull_only,
               f"docker://{host}/team/app:v2", f"oci:{out}:v2")
    assert sorted(p.name for p in (out / "blobs" / "sha256").iterdir()) == sorted(
        p.name for p in (image.layout / "blobs" / "sha256").iterdir())
    refused = skopeo.run("copy", "--dest-tls-verify=false", "--dest-registry-token", pull_only,
                         f"oci:{image.layout}:v1", f"docker://{host}/team/app:v3", check=False)
    assert refused.returncode != 0
    assert "authentication required" in refused.stderr or "unauthorized" in refused.stderr.lower(), refused.stderr

    wrong = skopeo.run("login", "--tls-verify=false", "-u", "alice", "-p", "looking-glass", host, check=False)
    assert wrong.returncode != 0
    skopeo.run("login", "--tls-verify=false", "-u", "alice", "-p", "wonderland", host)
