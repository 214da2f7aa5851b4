"""Fixtures of the pull-through cache's Django test-client tests (import them into the test module).

The upstream is a real CNCF registry (tests/support/upstreams.py) on loopback; the registry under
test is configured through ``settings.REGISTRY_PROXIES``, as regsite.settings fills it from
[[proxy]] tables.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from regsite import config
from tests.support.upstreams import Distribution, UpstreamUnavailable


def proxy_entry(**keys: Any) -> dict[str, Any]:
    """A [[proxy]] entry as the configuration loader returns it: every key, defaults filled in."""
    entry = {key: default for key, default in config.LISTS["proxy"].items() if not isinstance(default, config.Required)}
    entry.update(keys)
    config.LIST_VALIDATORS["proxy"]([entry])
    return entry


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def start_upstream(tmp_path: Path) -> Iterator[Callable[..., Distribution]]:
    """Start CNCF registries: ``start_upstream()``, ``start_upstream(credentials=("u", "p"))``."""
    started: list[Distribution] = []

    def start(name: str = "upstream", **options: Any) -> Distribution:
        try:
            upstream = Distribution(tmp_path / name, **options).start()
        except UpstreamUnavailable as exc:
            _unavailable(str(exc))
        started.append(upstream)
        return upstream

    yield start
    for upstream in started:
        upstream.stop()


@pytest.fixture
def upstream(start_upstream: Callable[..., Distribution]) -> Distribution:
    return start_upstream()


@pytest.fixture
def mirror(settings, upstream: Distribution) -> Callable[..., dict[str, Any]]:
    """Configure pull-through caches: ``mirror()`` is prefix "hub" of ``upstream``, host docker.io."""

    def configure(*entries: dict[str, Any], **keys: Any) -> dict[str, Any]:
        first = proxy_entry(**({"prefix": "hub", "url": upstream.url, "host": "docker.io"} | keys))
        settings.REGISTRY_PROXIES = [first, *entries]
        return first

    return configure


def stored(timeout: float = 30.0) -> None:
    """Wait until the blobs that pulls fetched are stored: a response ends once the client has every
    verified byte, and the spool's thread finishes storing after it (registry.proxy.blobs.Fill)."""
    from registry.proxy import blobs

    assert blobs.wait_for_stores(timeout), f"a fetched blob was still being stored after {timeout:g} s"


@pytest.fixture(autouse=True)
def fresh_upstream_state() -> Iterator[None]:
    """Each test starts with no remembered credentials, unreachable upstreams or upstream misses,
    and leaves no blob being stored behind it (into the next test's database)."""
    from registry.proxy import misses, upstream

    upstream._DOWN_UNTIL.clear()
    upstream._CREDENTIALS._headers.clear()
    misses.forget_all()
    yield
    stored()
    upstream._DOWN_UNTIL.clear()
    upstream._CREDENTIALS._headers.clear()
    misses.forget_all()
