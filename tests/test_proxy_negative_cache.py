"""A miss the upstream answered 404 is remembered for ``negative_ttl_seconds``: readers asking again
and again for what the upstream does not have cannot spend its rate limit (each worker asks once)."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from registry.proxy import misses

from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, upstream  # noqa: F401
from tests.support.registry_client import error_code
from tests.support.upstreams import OCI_MANIFEST, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}
ABSENT = "sha256:" + "0" * 64


def test_ninety_pulls_of_an_absent_blob_ask_the_upstream_once(client, upstream, mirror) -> None:
    mirror(negative_ttl_seconds=60)
    for n in range(90):
        request = client.head if n % 3 == 0 else client.get
        response = request(f"/v2/hub/library/app/blobs/{ABSENT}")
        assert response.status_code == 404
    assert response.status_code == 404 and error_code(response) == "BLOB_UNKNOWN"
    path = f"/v2/library/app/blobs/{ABSENT}"
    assert upstream.served("GET", path) + upstream.served("HEAD", path) == 1


def test_an_absent_tag_is_remembered_too(client, upstream, mirror) -> None:
    mirror(negative_ttl_seconds=60)
    for _ in range(30):
        response = client.get("/v2/hub/library/app/manifests/nope", headers=ACCEPT)
        assert response.status_code == 404 and error_code(response) == "MANIFEST_UNKNOWN"
    assert upstream.served("GET", "/v2/library/app/manifests/nope") == 1


def test_a_miss_is_asked_again_once_its_ttl_ran_out(client, upstream, mirror, monkeypatch) -> None:
    mirror(negative_ttl_seconds=60)
    assert client.get("/v2/hub/library/app/manifests/v1", headers=ACCEPT).status_code == 404
    pushed = push_image(upstream.url, "library/app", "v1", layers=1)
    assert client.get("/v2/hub/library/app/manifests/v1", headers=ACCEPT).status_code == 404  # remembered
    # The TTL runs out on the clock the misses are kept by, not by sleeping through it: a TTL short
    # enough to sleep through ran out during the push on a busy machine.
    later = time.monotonic() + 61
    monkeypatch.setattr(misses, "time", SimpleNamespace(monotonic=lambda: later))
    response = client.get("/v2/hub/library/app/manifests/v1", headers=ACCEPT)
    assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest


def test_a_ttl_of_zero_remembers_nothing(client, upstream, mirror) -> None:
    mirror(negative_ttl_seconds=0)
    for _ in range(3):
        assert client.get(f"/v2/hub/library/app/blobs/{ABSENT}").status_code == 404
    assert upstream.served("GET", f"/v2/library/app/blobs/{ABSENT}") == 3


def test_other_names_and_caches_are_asked_for_themselves(client, upstream, mirror) -> None:
    mirror(negative_ttl_seconds=60)
    assert client.get(f"/v2/hub/library/app/blobs/{ABSENT}").status_code == 404
    pushed = push_image(upstream.url, "library/other", "v1", layers=1)
    layer = next(iter(pushed.blobs))
    assert client.get(f"/v2/hub/library/app/blobs/{layer}").status_code == 404  # not in that repository
    got = client.get(f"/v2/hub/library/other/blobs/{layer}")
    assert got.status_code == 200
    b"".join(got.streaming_content)
