"""Docker Engine 20.10 (Debian's docker.io, which refuses a path in ``registry-mirrors``) with this
registry as its only mirror: a root mirror (``[[proxy]] prefix = ""``) of a CNCF registry that holds
``library/busybox``. ``docker pull busybox`` is the engine's own mirror logic, no name rewritten by
anyone: Docker Hub cannot be reached here, so the image can only have come through the mirror."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import unavailable
from tests.support.docker import Docker, DockerUnavailable, start_docker
from tests.support.ports import free_port
from tests.support.server import RegistryServer
from tests.support.upstreams import Distribution, UpstreamUnavailable

pytestmark = pytest.mark.e2e


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Distribution]:
    try:
        server = Distribution(tmp_path / "upstream").start()
    except UpstreamUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


@pytest.fixture
def mirror_port() -> int:
    return free_port()


@pytest.fixture
def engine(mirror_port: int) -> Iterator[Docker]:
    """An engine of its own, whose only mirror is the registry under test (plain HTTP on loopback,
    which the engine treats as an insecure registry by default)."""
    try:
        docker = start_docker("--registry-mirror", f"http://127.0.0.1:{mirror_port}")
    except DockerUnavailable as exc:
        unavailable(str(exc))
    yield docker
    docker.stop()


def test_docker_pulls_library_busybox_through_a_root_mirror(engine: Docker, upstream: Distribution, tmp_path: Path,
                                                            mirror_port: int,
                                                            start_registry: Callable[..., RegistryServer]) -> None:
    version = engine.run("version", "--format", "{{.Server.Version}}").stdout.strip()
    assert version.startswith("20.10."), version
    mirrors = engine.run("info", "--format", "{{json .RegistryConfig.Mirrors}}").stdout
    assert f"http://127.0.0.1:{mirror_port}/" in mirrors
    # What Docker Hub would hold: library/busybox, pushed into the CNCF registry by the engine.
    original = f"127.0.0.1:{upstream.port}/library/busybox:latest"
    engine.import_busybox(original)
    engine.run("push", original)
    pushed_id = engine.run("image", "inspect", "--format", "{{.Id}}", original).stdout.strip()
    engine.run("rmi", original)
    workdir = tmp_path / "mirror"
    workdir.mkdir()
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = ""\nurl = "{upstream.url}"\nhost = "docker.io"\n')
    mirror = start_registry(name="mirror", port=mirror_port)

    engine.run("pull", "busybox")

    assert engine.run("image", "inspect", "--format", "{{.Id}}", "busybox").stdout.strip() == pushed_id
    ran = engine.run("run", "--rm", "--network", "none", "busybox", "/bin/sh", "-c", "echo through the mirror")
    assert ran.stdout.strip() == "through the mirror"
    asked = {line["path"] for line in mirror.request_lines() if line.get("status") == 200}
    assert "/v2/library/busybox/manifests/latest" in asked, asked
    # The mirror holds it under the upstream's own name, and lists it.
    with mirror.open("/v2/_catalog") as response:
        assert b'"library/busybox"' in response.read()
