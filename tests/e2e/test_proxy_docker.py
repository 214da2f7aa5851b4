"""The Docker engine pulls through the cache with the prefixed name (what engines older than 24.0.8,
which refuse a path in registry-mirrors, do), logged in with a read token, and runs the image."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import unavailable
from tests.support.docker import Docker
from tests.support.server import RegistryServer
from tests.support.upstreams import Distribution, UpstreamUnavailable, htpasswd_file

pytestmark = pytest.mark.e2e


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Distribution]:
    try:
        server = Distribution(tmp_path / "upstream").start()
    except UpstreamUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def test_docker_pulls_and_runs_through_the_cache(docker: Docker, upstream: Distribution, tmp_path: Path,
                                                 start_registry: Callable[..., RegistryServer]) -> None:
    tag = uuid.uuid4().hex[:8]
    original = f"127.0.0.1:{upstream.port}/team/busybox:{tag}"
    docker.import_busybox(original)
    docker.run("push", original)
    workdir = tmp_path / "cache"
    workdir.mkdir()
    htpasswd_file(workdir / "users.htpasswd", "alice", "wonderland")
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "up"\nurl = "{upstream.url}"\n')
    cache = start_registry(name="cache", SVC_AUTH_ENABLED="true")
    token = cache.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()
    docker.run("login", "-u", "token", "--password-stdin", cache.host, input=token)
    through = f"{cache.host}/up/team/busybox:{tag}"
    docker.run("pull", through)
    pushed_id = docker.run("image", "inspect", "--format", "{{.Id}}", original).stdout.strip()
    assert docker.run("image", "inspect", "--format", "{{.Id}}", through).stdout.strip() == pushed_id
    ran = docker.run("run", "--rm", "--network", "none", through, "/bin/sh", "-c", "echo through the cache")
    assert ran.stdout.strip() == "through the cache"
    refused = docker.run("push", through, check=False)
    assert refused.returncode != 0
    docker.run("logout", cache.host)
