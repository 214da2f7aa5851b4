"""The outbox is bounded while a receiver hangs: an endpoint never holds more than its
``max_pending`` events (the oldest are dropped as new ones are written, logged and counted in
``registry_notifications_dropped_total``), and pulls of one repository and digest within a minute
are one pull event."""
from __future__ import annotations

import logging
import threading
from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from notifications import outbox, queries, sender
from notifications.endpoints import Endpoint
from notifications.models import EndpointState, PendingEvent, PullMark
from tests.support.notify import entry, queued
from tests.support.registry_client import digest_of, push_image
from tests.test_metrics import samples, scrape

pytestmark = pytest.mark.django_db

EVERY_EVENT = ["push", "delete", "pull"]


def pending(endpoint: str = "ci") -> int:
    return PendingEvent.objects.filter(endpoint=endpoint).count()


def state(endpoint: str = "ci") -> EndpointState:
    return EndpointState.objects.get(name=endpoint)


def test_an_endpoint_never_holds_more_than_max_pending_the_oldest_dropped(client: Client, settings, caplog) -> None:
    settings.NOTIFICATIONS = [entry(max_pending=10), entry(name="audit", max_pending=1000)]
    written = [f"sha256:{i:064x}" for i in range(35)]

    with caplog.at_level(logging.WARNING, logger="notifications"):
        for digest in written:
            outbox.blob_pushed("team/app", digest, 1)
            assert pending() <= 10

    kept = [event["target"]["digest"] for event in queued()]
    assert kept == written[-len(kept):] and len(kept) >= 9  # the newest, in order
    assert state().dropped == len(written) - len(kept) == state().dropped
    assert state().pending == pending()
    assert pending("audit") == 35 and state("audit").dropped == 0  # per endpoint
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert dropped and all(r.endpoint == "ci" for r in dropped)  # type: ignore[attr-defined]
    assert "max_pending = 10" in dropped[0].getMessage()
    assert samples(scrape(client))[("registry_notifications_dropped_total", (("endpoint", "ci"),))] == state().dropped


def test_pulls_of_one_repository_and_digest_within_a_minute_are_one_event(client: Client, settings) -> None:
    settings.NOTIFICATIONS = [entry(events=EVERY_EVENT, max_pending=100)]
    _body, digest = push_image(client, "team/app", "v1", layers=[b"layer"])
    PendingEvent.objects.all().delete()
    EndpointState.objects.update(pending=0)

    for _ in range(40):  # a reader pulling in a loop, by tag and by digest
        assert client.get("/v2/team/app/manifests/v1").status_code == 200
        assert client.get(f"/v2/team/app/manifests/{digest}").status_code == 200
        assert client.get(f"/v2/team/app/blobs/{digest_of(b'layer')}").status_code == 200

    events = queued()
    assert [(e["action"], e["target"]["digest"]) for e in events] == [("pull", digest),
                                                                       ("pull", digest_of(b"layer"))]
    assert events[0]["target"]["tag"] == "v1"  # the first pull's

    PullMark.objects.update(at=timezone.now() - timedelta(seconds=61))  # a minute later, an event again
    client.get(f"/v2/team/app/manifests/{digest}")
    assert [e["action"] for e in queued()] == ["pull"] * 3


def test_the_pending_count_follows_deliveries_and_is_recounted(settings, receiver_ok) -> None:
    settings.NOTIFICATIONS = [entry(url=receiver_ok, max_pending=50)]
    for i in range(5):
        outbox.blob_pushed("team/app", f"sha256:{i:064x}", 1)
    assert state().pending == 5

    sender.deliver_once(Endpoint.of(settings.NOTIFICATIONS[0]))
    assert state().pending == 0 == pending()

    PendingEvent.objects.create(endpoint="ci", payload="{}", created_at=timezone.now())  # an earlier release's
    queries.recount(["ci"])
    assert state().pending == 1


@pytest.fixture
def receiver_ok():  # type: ignore[no-untyped-def]
    from tests.support.receiver import Receiver

    receiving = Receiver().start()
    yield receiving.url
    receiving.stop()


@pytest.mark.django_db(transaction=True)
def test_writers_at_once_keep_the_count_exact_and_within_the_limit(settings) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    settings.NOTIFICATIONS = [entry(max_pending=25)]
    barrier = threading.Barrier(8)

    def write(worker: int) -> None:
        try:
            barrier.wait(timeout=10)
            for i in range(20):
                with transaction.atomic():  # as a push writes its event
                    outbox.blob_pushed("team/app", f"sha256:{worker:032x}{i:032x}", 1)
        finally:
            connection.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(8)))

    assert pending() <= 25
    assert state().pending == pending()
    assert state().dropped + pending() == 160
