"""No pull waits on an upstream for longer than its cache's deadline (``total_timeout_seconds``),
however slowly the upstream sends; and a worker never has more than ``max_concurrent_fetches``
request threads waiting on one upstream: past that a pull is refused at once, 503 with Retry-After.

The upstream here sends one byte every half second, well inside the read timeout, so that only a
deadline on the whole response ends a pull. Without a free slot, a cached tag is served as when the
upstream fails: with a Warning."""
from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Iterator

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from registry.digests import Digest
from registry.models import Lease
from registry.proxy import blobs as proxy_blobs
from registry.proxy import mirrors, slots
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, proxy_entry, start_upstream, upstream  # noqa: F401
from tests.support.trickling_upstream import TricklingUpstream
from tests.support.upstreams import OCI_MANIFEST, push_blob, push_image

pytestmark = pytest.mark.django_db(transaction=True)
ACCEPT = {"Accept": OCI_MANIFEST}
DEADLINE = 2


@pytest.fixture
def trickling() -> Iterator[Callable[..., TricklingUpstream]]:
    servers: list[TricklingUpstream] = []

    def start(**options: Any) -> TricklingUpstream:
        servers.append(TricklingUpstream(interval=0.5, **options).start())
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def timed(call: Callable[[], Any], limit: float) -> tuple[Any, float]:
    """``call()`` in a thread: its answer and seconds, failing if it takes longer than ``limit``."""
    answer: list[Any] = []

    def run() -> None:
        try:
            answer.append(call())
        except BaseException as exc:  # the streaming body's end, for one
            answer.append(exc)
        finally:
            connection.close()

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit)
    assert not thread.is_alive(), f"still waiting on the upstream after {limit} s"
    return answer[0], time.monotonic() - started


def slow_cache(settings, server: TricklingUpstream, **keys: Any) -> None:  # type: ignore[no-untyped-def]
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="slow", url=server.url, timeout_seconds=10,
                                             total_timeout_seconds=DEADLINE, **keys)]


def assert_refused(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert int(response["Retry-After"]) > 0
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "UNAVAILABLE"
    return error


@pytest.mark.parametrize("trickle_head", [False, True], ids=["body", "head"])
def test_a_manifest_trickling_in_ends_at_the_deadline_with_504(client, settings, trickling, trickle_head) -> None:
    server = trickling(trickle_head=trickle_head)
    slow_cache(settings, server)
    response, seconds = timed(lambda: client.get("/v2/slow/library/app/manifests/v1", headers=ACCEPT), 10)
    error = assert_refused(response, 504)
    assert "did not answer" in error["message"] and f"{DEADLINE} s" in error["message"]
    assert DEADLINE - 0.5 < seconds < DEADLINE + 1.5


def test_a_blob_trickling_in_ends_at_the_deadline_with_504(client, settings, trickling) -> None:
    server = trickling()
    slow_cache(settings, server)
    response, seconds = timed(lambda: client.get(f"/v2/slow/library/app/blobs/{server.layer_digest}"), 10)
    assert_refused(response, 504)
    assert seconds < DEADLINE + 1.5
    assert not Lease.objects.filter(name__startswith="proxy-").exists()  # free for the next pull


def test_a_large_blob_arriving_at_an_honest_pace_is_stored_past_the_deadline(client, settings, trickling) -> None:
    # 4 MiB at about 1.25 MiB/s take longer than the 2 s deadline: bytes that arrive earn time (a second
    # per MiB), or a layer slower than the deadline would be fetched again by every retry, never stored.
    server = trickling(layer_size=4 * 1024 * 1024, chunk=64 * 1024)
    server.interval = 0.05
    slow_cache(settings, server)

    def pull() -> tuple[int, bytes]:
        response = client.get(f"/v2/slow/library/app/blobs/{server.layer_digest}")
        return response.status_code, b"".join(response.streaming_content)

    (status, body), seconds = timed(pull, 20)
    assert status == 200 and body == server.layer
    assert seconds > DEADLINE
    stored = client.head(f"/v2/slow/library/app/blobs/{server.layer_digest}")
    assert stored.status_code == 200 and int(stored["Content-Length"]) == len(server.layer)


def test_a_blob_head_trickling_in_ends_at_the_deadline(client, settings, trickling) -> None:
    server = trickling(trickle_head=True)
    slow_cache(settings, server)
    response, seconds = timed(lambda: client.head(f"/v2/slow/library/app/blobs/{server.layer_digest}"), 10)
    assert response.status_code == 504 and int(response["Retry-After"]) > 0
    assert seconds < DEADLINE + 1.5


def test_a_pull_waiting_for_another_fetch_gets_503_at_the_deadline(client, settings, upstream) -> None:
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, total_timeout_seconds=DEADLINE)]
    digest = push_blob(upstream.url, "library/app", b"a layer being fetched by another replica")
    # Another replica's fetch of this blob, alive and renewing its lease, that never ends.
    Lease.objects.create(name=proxy_blobs.FetchLease(Digest.parse(digest)).name, owner="another replica",
                         until=timezone.now() + timedelta(hours=1))
    response, seconds = timed(lambda: client.get(f"/v2/hub/library/app/blobs/{digest}"), 10)
    error = assert_refused(response, 503)
    assert "still fetching" in error["message"]
    assert DEADLINE - 0.5 < seconds < DEADLINE + 1.5


def test_past_max_concurrent_fetches_a_pull_is_refused_at_once(settings, trickling) -> None:
    server = trickling()
    slow_cache(settings, server, max_concurrent_fetches=2)
    waiting = [threading.Thread(target=timed, args=(
        lambda n=n: Client().get(f"/v2/slow/team/app{n}/manifests/v1", headers=ACCEPT), 10)) for n in range(2)]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 5
    while len(server.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(server.requests) == 2  # both are waiting on the upstream now

    for path in ("/v2/slow/team/other/manifests/v1", f"/v2/slow/team/other/blobs/{server.layer_digest}"):
        response, seconds = timed(lambda path=path: Client().get(path, headers=ACCEPT), 10)
        error = assert_refused(response, 503)
        assert "max_concurrent_fetches" in error["message"] and seconds < 0.5
    assert len(server.requests) == 2  # the refused pulls never reached the upstream
    for thread in waiting:
        thread.join()
    # Once they ended (at the deadline), pulls reach the upstream again.
    response, _ = timed(lambda: Client().get("/v2/slow/team/other/manifests/v1", headers=ACCEPT), 10)
    assert response.status_code == 504 and len(server.requests) == 3


def test_a_cached_tag_is_served_with_a_warning_when_no_slot_is_free(client, settings, upstream) -> None:
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="hub", url=upstream.url, tag_ttl_seconds=0,
                                             max_concurrent_fetches=1)]
    pushed = push_image(upstream.url, "library/app", "v1", layers=1)
    assert client.get("/v2/hub/library/app/manifests/v1", headers=ACCEPT).status_code == 200
    held = slots.take(mirrors.configured()[0])  # another pull waiting on the upstream
    try:
        response = client.get("/v2/hub/library/app/manifests/v1", headers=ACCEPT)
        assert response.status_code == 200 and response["Docker-Content-Digest"] == pushed.digest
        assert "max_concurrent_fetches" in response["Warning"]
        assert_refused(client.get("/v2/hub/library/other/manifests/v1", headers=ACCEPT), 503)
    finally:
        held.release()
    assert "Warning" not in client.get("/v2/hub/library/app/manifests/v1", headers=ACCEPT)
