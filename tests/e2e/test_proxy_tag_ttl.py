"""A tag moved upstream is seen through the cache after tag_ttl_seconds, and not before (skopeo,
gunicorn, the CNCF registry as the upstream, real time)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from tests.e2e.conftest import Skopeo, unavailable
from tests.support.server import RegistryServer
from tests.support.upstreams import Distribution, UpstreamUnavailable, push_image

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # a 3 s real-time TTL with skopeo inside: run alone
TTL = 3


@pytest.fixture
def upstream(tmp_path: Path) -> Iterator[Distribution]:
    try:
        server = Distribution(tmp_path / "upstream").start()
    except UpstreamUnavailable as exc:
        unavailable(str(exc))
    yield server
    server.stop()


def test_a_moved_tag_is_seen_after_the_ttl_not_before(upstream: Distribution, skopeo: Skopeo,
                                                      start_registry: Callable[..., RegistryServer],
                                                      tmp_path: Path) -> None:
    workdir = tmp_path / "cache"
    workdir.mkdir()
    (workdir / "config.toml").write_text(
        f'[[proxy]]\nprefix = "hub"\nurl = "{upstream.url}"\ntag_ttl_seconds = {TTL}\n')
    cache = start_registry(name="cache")

    def digest() -> str:
        shown = skopeo.run("inspect", "--tls-verify=false", f"docker://{cache.host}/hub/library/app:stable")
        return json.loads(shown.stdout)["Digest"]

    first = push_image(upstream.url, "library/app", "stable", layers=1)
    assert digest() == first.digest
    cached_at = time.monotonic()
    second = push_image(upstream.url, "library/app", "stable", layers=1)
    seen_before = []
    while time.monotonic() - cached_at < TTL - 1:
        seen_before.append(digest())
    assert seen_before and set(seen_before) == {first.digest}
    assert upstream.served("HEAD", "/v2/library/app/manifests/stable") == 0

    time.sleep(max(0.0, TTL + 0.2 - (time.monotonic() - cached_at)))
    assert digest() == second.digest
    assert upstream.served("HEAD", "/v2/library/app/manifests/stable") == 1
