"""podman with the cache as docker.io's mirror in registries.conf (the example of docs/pull-through-cache.md, with the
cache's prefix in the mirror location) pulls ``docker.io/library/...`` through it, without the
internet: the mirror is the only place it can come from."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import require_tool, unavailable
from tests.support.server import RegistryServer
from tests.support.upstreams import Distribution, UpstreamUnavailable, push_image

pytestmark = pytest.mark.e2e

REGISTRIES_CONF = """\
[[registry]]
prefix = "docker.io"
location = "registry-1.docker.io"

[[registry.mirror]]
location = "{cache}/hub"
insecure = true
"""


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Distribution]:
    try:
        server = Distribution(tmp_path / "upstream").start()
    except UpstreamUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def test_podman_pulls_docker_io_images_through_the_mirror(upstream: Distribution, tmp_path: Path,
                                                          start_registry: Callable[..., RegistryServer]) -> None:
    podman = require_tool("podman")
    image = push_image(upstream.url, "library/alpine", "3.20", layers=2, layer_size=100_000)
    workdir = tmp_path / "cache"
    workdir.mkdir()
    (workdir / "config.toml").write_text(f'[[proxy]]\nprefix = "hub"\nurl = "{upstream.url}"\nhost = "docker.io"\n')
    cache = start_registry(name="cache")
    root = Path(tempfile.mkdtemp(prefix="podman-", dir="/tmp"))  # its runroot path must be short
    try:
        (root / "xdg").mkdir()
        (root / "registries.conf").write_text(REGISTRIES_CONF.format(cache=cache.host))
        env = {**os.environ, "HOME": str(root), "XDG_RUNTIME_DIR": str(root / "xdg"),
               "CONTAINERS_REGISTRIES_CONF": str(root / "registries.conf")}
        base = [podman, "--root", str(root / "storage"), "--runroot", str(root / "run"), "--storage-driver", "vfs"]
        pulled = subprocess.run([*base, "pull", "docker.io/library/alpine:3.20"], capture_output=True, text=True,
                                env=env, timeout=300)
        assert pulled.returncode == 0, pulled.stderr
        shown = subprocess.run([*base, "image", "inspect", "--format", "{{.Digest}}", "docker.io/library/alpine:3.20"],
                               capture_output=True, text=True, env=env, timeout=60)
        assert shown.stdout.strip() == image.digest
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for digest in image.blobs:
        assert upstream.served("GET", f"/v2/library/alpine/blobs/{digest}", 200) == 1
