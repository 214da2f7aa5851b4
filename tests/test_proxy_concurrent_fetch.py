"""Concurrent pulls of one missing blob cause one upstream fetch: the others wait for it (a lease row
in the database) and then read what was stored."""
from __future__ import annotations

import hashlib
import os
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from registry.digests import Digest
from registry.models import Lease
from registry.proxy import blobs as proxy_blobs
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.upstreams import OCI_MANIFEST, push_blob, push_image

pytestmark = pytest.mark.django_db(transaction=True)


def pull_in_threads(path: str, count: int) -> list[str]:
    digests: list[str] = []
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def pull() -> None:
        try:
            start.wait()
            response = Client().get(path)
            hasher = hashlib.sha256()
            for piece in response.streaming_content:
                hasher.update(piece)
            response.close()
            digests.append("sha256:" + hasher.hexdigest())
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=pull) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    return digests


def test_eight_pulls_of_one_missing_blob_fetch_it_once(client, settings, upstream, mirror) -> None:
    # Every one of them may wait here (registry.proxy.slots bounds that: tests/test_proxy_deadline.py).
    settings.REGISTRY_PROXY_WORKER_FETCHES = 8
    mirror(max_concurrent_fetches=8)
    pushed = push_image(upstream.url, "library/big", "v1", layers=1, layer_size=12 * 1024 * 1024)
    client.get("/v2/hub/library/big/manifests/v1", headers={"Accept": OCI_MANIFEST})
    layer = max(pushed.blobs, key=lambda d: len(pushed.blobs[d]))
    digests = pull_in_threads(f"/v2/hub/library/big/blobs/{layer}", 8)
    assert digests == [layer] * 8
    assert upstream.served("GET", f"/v2/library/big/blobs/{layer}") == 1
    # The fetcher's lease goes once its copy is stored, which may end after the last client's answer.
    stored()
    assert not Lease.objects.filter(name__startswith="proxy-").exists()  # no row left per blob


def test_a_fetch_whose_holder_died_is_taken_over(client, upstream, mirror) -> None:
    mirror()
    pushed = push_image(upstream.url, "library/orphan", "v1", layers=1)
    layer = next(iter(pushed.blobs))
    # A lease taken by a process that died without letting go: it runs out, and then a pull fetches.
    Lease.objects.create(name=proxy_blobs.FetchLease(Digest.parse(layer)).name, owner="dead",
                         until=timezone.now() - timedelta(seconds=1))
    response = client.get(f"/v2/hub/library/orphan/blobs/{layer}")
    assert b"".join(response.streaming_content) == pushed.blobs[layer]
    assert upstream.served("GET", f"/v2/library/orphan/blobs/{layer}") == 1


def test_a_client_gone_midway_leaves_the_blob_stored_for_the_others(client, upstream, mirror) -> None:
    mirror()
    data = os.urandom(5 * proxy_blobs.PIECE)
    layer = push_blob(upstream.url, "library/left", data)
    response = client.get(f"/v2/hub/library/left/blobs/{layer}")
    iterator = iter(response.streaming_content)
    next(iterator)  # one piece read, then the client goes away
    response.close()
    again = client.get(f"/v2/hub/library/left/blobs/{layer}")
    assert b"".join(again.streaming_content) == data
    assert upstream.served("GET", f"/v2/library/left/blobs/{layer}") == 1
