"""containerd with this registry as its docker.io mirror (hosts.toml, as docs/pull-through-cache.md shows it) pulls
``docker.io/library/...`` through the cache: its requests carry ``?ns=docker.io`` and reach the
``[[proxy]]`` whose host is docker.io. Nothing reaches the internet: the only host in hosts.toml is
the cache, and the real registry-1.docker.io would not answer here."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import require_tool, unavailable
from tests.support.containerd import Containerd, ContainerdUnavailable
from tests.support.server import RegistryServer, access_log_env, read_access_log
from tests.support.upstreams import Distribution, UpstreamUnavailable, htpasswd_file, push_image, push_multiarch

pytestmark = pytest.mark.e2e

HOSTS_TOML = """\
server = "https://registry-1.docker.io"

[host."http://{cache}"]
  capabilities = ["pull", "resolve"]
"""


@pytest.fixture
def containerd() -> Iterator[Containerd]:
    try:
        daemon = Containerd().start()
    except ContainerdUnavailable as exc:
        unavailable(str(exc))
    yield daemon
    daemon.stop()


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Distribution]:
    try:
        server = Distribution(tmp_path / "upstream").start()
    except UpstreamUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def test_containerd_pulls_docker_io_images_through_the_mirror(
        containerd: Containerd, upstream: Distribution, start_registry: Callable[..., RegistryServer],
        tmp_path: Path) -> None:
    require_tool("htpasswd")
    image = push_image(upstream.url, "library/alpine", "3.20", layers=3, layer_size=100_000)
    multi = push_multiarch(upstream.url, "library/busybox", "latest")
    workdir = tmp_path / "cache"
    workdir.mkdir()
    htpasswd_file(workdir / "users.htpasswd", "alice", "wonderland")
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "hub"\nurl = "{upstream.url}"\nhost = "docker.io"\n')
    access_log = tmp_path / "access.log"
    cache = start_registry(name="cache", SVC_AUTH_ENABLED="true", **access_log_env(access_log))
    hosts = tmp_path / "certs.d" / "docker.io"
    hosts.mkdir(parents=True)
    (hosts / "hosts.toml").write_text(HOSTS_TOML.format(cache=cache.host))
    token = cache.manage("createtoken", "--username", "alice", "--role", "read").stdout.strip()

    for reference, digest in (("docker.io/library/alpine:3.20", image.digest),
                              ("docker.io/library/busybox:latest", multi.digest)):
        containerd.ctr("images", "pull", "--hosts-dir", str(tmp_path / "certs.d"), "--user", f"token:{token}",
                       "--platform", "linux/amd64", "--snapshotter", "native", reference)
        listed = containerd.ctr("images", "list").stdout
        assert reference in listed and digest in listed

    entries = read_access_log(access_log, lambda got: any("ns=docker.io" in e.query for e in got))
    asked = [e for e in entries if e.path.startswith("/v2/library/")]
    assert asked and all(e.query.startswith("ns=docker.io") or "ns=docker.io" in e.query for e in asked)
    assert all(e.status in (200, 401) for e in asked), [(e.path, e.status) for e in asked]
    for digest in image.blobs:  # every layer came once from the upstream, through the cache
        assert upstream.served("GET", f"/v2/library/alpine/blobs/{digest}", 200) == 1
