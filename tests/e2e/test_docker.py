"""The Docker engine as a client: login with a user and with API tokens, push, rmi, pull, run, and a
multi-arch index pull that picks the engine's platform."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.support.auth import write_htpasswd
from tests.support.docker import Docker
from tests.support.images import build_multiarch

pytestmark = pytest.mark.e2e


@pytest.fixture
def secured(start_registry, tmp_path: Path):  # type: ignore[no-untyped-def]
    users = write_htpasswd(tmp_path / "users.htpasswd", {"alice": "wonderland"})
    return start_registry(SVC_AUTH_ENABLED="true", SVC_AUTH_HTPASSWD_FILE=str(users))


def _login(docker: Docker, host: str, user: str, password: str) -> None:
    docker.run("login", "-u", user, "--password-stdin", host, input=password)


def test_docker_logs_in_pushes_pulls_and_runs(docker: Docker, secured) -> None:
    image = f"{secured.host}/team/busybox:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    _login(docker, secured.host, "alice", "wonderland")
    docker.run("push", image)
    docker.run("rmi", image)
    docker.run("pull", image)
    ran = docker.run("run", "--rm", "--network", "none", image, "/bin/sh", "-c", "echo pulled and ran")
    assert ran.stdout.strip() == "pulled and ran"
    docker.run("logout", secured.host)


def test_docker_uses_api_tokens_within_their_role(docker: Docker, secured) -> None:
    image = f"{secured.host}/team/tokens:{uuid.uuid4().hex[:8]}"
    docker.import_busybox(image)
    write = secured.manage("createtoken", "--username", "alice", "--role", "write").stdout.strip()
    read = secured.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()

    _login(docker, secured.host, "token", write)
    docker.run("push", image)
    docker.run("rmi", image)

    _login(docker, secured.host, "token", read)
    docker.run("pull", image)
    docker.run("tag", image, image.rsplit(":", 1)[0] + ":pushed-with-read")
    refused = docker.run("push", image.rsplit(":", 1)[0] + ":pushed-with-read", check=False)
    assert refused.returncode != 0 and "denied" in refused.stderr.lower(), refused.stderr
    assert "has role read; push needs write" in refused.stderr, refused.stderr
    docker.run("logout", secured.host)


def test_docker_pulls_its_platform_from_a_multi_arch_index(docker: Docker, registry, skopeo,
                                                           tmp_path: Path) -> None:
    index = build_multiarch(tmp_path / "src", tag="multi", arches=("arm64", "amd64", "s390x"))
    skopeo.run("copy", "--all", "--dest-tls-verify=false", f"oci:{index.layout}:multi",
               f"docker://{registry.host}/team/multi:v1")
    docker.run("pull", f"{registry.host}/team/multi:v1")
    arch = docker.run("image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", f"{registry.host}/team/multi:v1")
    assert arch.stdout.strip() == "linux/amd64"
