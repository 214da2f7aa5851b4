"""Delivery of the outbox: signed envelopes, in order per endpoint, retried with backoff, expired
(logged and counted) after max_age_hours, secrets never in an error or a log line."""
from __future__ import annotations

import json
import logging
import threading
import time
from datetime import timedelta
from typing import Iterator

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from notifications import queries, sender
from notifications.endpoints import Endpoint
from notifications.models import EndpointState, PendingEvent
from notifications.outbox import MEDIA_TYPE
from registry.locks import default_locks
from regsite.logs import JsonLines
from tests.support.notify import entry, queued, summary
from tests.support.receiver import Receiver
from tests.support.registry_client import push_blob, push_image
from tests.support.server import free_port

pytestmark = pytest.mark.django_db
SECRET = "a shared secret"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def endpoint(settings, receiver: Receiver) -> Endpoint:
    settings.NOTIFICATIONS = [entry(url=receiver.url, secret=SECRET, headers={"Authorization": "Bearer sekrit"},
                                    timeout_seconds=2)]
    return Endpoint.of(settings.NOTIFICATIONS[0])


def state() -> EndpointState:
    return EndpointState.objects.get(name="ci")


def test_it_posts_distributions_envelope_signed_with_the_secret(client: Client, endpoint, receiver) -> None:
    push_image(client, "team/app", "v1")
    waiting = queued()
    assert sender.deliver_once(endpoint) == 0.0
    (delivery,) = receiver.deliveries
    assert delivery.path == "/hooks/registry"
    assert delivery.headers["content-type"] == MEDIA_TYPE == "application/vnd.docker.distribution.events.v1+json"
    assert delivery.signed_with(SECRET) and not delivery.signed_with("another secret")
    assert delivery.headers["authorization"] == "Bearer sekrit"
    assert delivery.headers["user-agent"].startswith("svc-registry/")
    assert json.loads(delivery.body) == {"events": waiting}
    assert queued() == []
    assert (state().delivered, state().failed, state().attempts) == (3, 0, 0)
    assert state().last_success_at is not None


def test_without_a_secret_there_is_no_signature(client: Client, settings, receiver) -> None:
    settings.NOTIFICATIONS = [entry(url=receiver.url)]
    push_blob(client, "team/app", b"x")
    sender.deliver_once(Endpoint.of(settings.NOTIFICATIONS[0]))
    assert "x-registry-signature" not in receiver.deliveries[0].headers


def test_a_refused_delivery_is_kept_and_retried_with_exponential_backoff(client: Client, endpoint, receiver) -> None:
    push_blob(client, "team/app", b"x")
    receiver.status = 500
    assert sender.deliver_once(endpoint) <= 1.0
    assert len(queued()) == 1 and len(receiver.attempts) == 1
    first = state()
    assert (first.failed, first.attempts) == (1, 1)
    assert first.last_error == "HTTP 500 Internal Server Error: no"
    assert timedelta(seconds=0.5) < first.next_attempt_at - first.last_error_at <= timedelta(seconds=1)

    sender.deliver_once(endpoint)  # still backing off: nothing is sent
    assert len(receiver.attempts) == 1
    EndpointState.objects.update(next_attempt_at=timezone.now())
    sender.deliver_once(endpoint)
    second = state()
    assert (second.failed, second.attempts) == (2, 2)
    assert timedelta(seconds=1.5) < second.next_attempt_at - second.last_error_at <= timedelta(seconds=2)

    receiver.status = 200
    EndpointState.objects.update(next_attempt_at=timezone.now())
    sender.deliver_once(endpoint)
    assert queued() == [] and len(receiver.deliveries) == 1
    assert (state().attempts, state().next_attempt_at, state().delivered, state().failed) == (0, None, 1, 2)


def test_backoff_doubles_up_to_five_minutes() -> None:
    assert [sender.backoff(n) for n in (1, 2, 3, 4, 9, 10, 50)] == [1, 2, 4, 8, 256, 300, 300]


def test_a_dead_or_slow_endpoint_is_an_error_naming_what_happened(client: Client, settings, receiver) -> None:
    push_blob(client, "team/app", b"x")
    dead = Endpoint.of(entry("dead", url=f"http://127.0.0.1:{free_port()}/x"))
    assert sender.post(dead, b"{}").error == "cannot connect: Connection refused"
    receiver.delay = 2
    slow = Endpoint.of(entry("slow", url=receiver.url, timeout_seconds=1))
    started = time.monotonic()
    assert sender.post(slow, b"{}").error == "no answer within 1 s"
    assert time.monotonic() - started < 1.9


def test_events_arrive_in_order_and_wait_for_the_one_before(client: Client, endpoint, receiver) -> None:
    push_blob(client, "team/app", b"first")
    receiver.status = 503
    sender.deliver_once(endpoint)
    push_blob(client, "team/app", b"second")
    push_image(client, "team/app", "v1")
    receiver.status = 200
    EndpointState.objects.update(next_attempt_at=None)
    expected = summary(queued())
    sender.deliver_once(endpoint)
    assert summary(receiver.events()) == expected and expected[0][2].startswith("sha256:")
    assert len(receiver.deliveries) == 1  # the backlog went in one envelope


def test_a_long_backlog_goes_in_envelopes_of_at_most_a_batch(endpoint, receiver, monkeypatch) -> None:
    monkeypatch.setattr(sender, "BATCH", 4)
    events = [{"id": str(n), "action": "push", "target": {"repository": "team/app"}} for n in range(10)]
    queries.add(["ci"], events, timezone.now())
    while sender.deliver_once(endpoint) == 0.0:
        pass
    assert [len(d.events) for d in receiver.deliveries] == [4, 4, 2]
    assert [e["id"] for e in receiver.events()] == [str(n) for n in range(10)]


def test_an_event_older_than_max_age_expires_logged_and_counted(client: Client, endpoint, receiver, caplog) -> None:
    push_image(client, "team/app", "v1")
    old = PendingEvent.objects.order_by("id").first()  # the config blob's
    PendingEvent.objects.filter(id=old.id).update(created_at=timezone.now() - timedelta(hours=73))
    receiver.status = 500
    with caplog.at_level(logging.WARNING, logger="notifications"):
        sender.deliver_once(endpoint)
    assert state().expired == 1
    old_id = json.loads(old.payload)["id"]
    assert old_id not in [e["id"] for e in queued()] and len(queued()) == 2
    (line,) = [r.getMessage() for r in caplog.records if "expired undelivered" in r.getMessage()]
    assert old_id in line and "endpoint ci after 73.0 h: push team/app@sha256:" in line
    # Written as every log line is (regsite.logs), with the event's fields for a log pipeline to match.
    (record,) = [r for r in caplog.records if "expired undelivered" in r.getMessage()]
    fields = json.loads(JsonLines().format(record))
    assert fields["logger"] == "notifications" and fields["level"] == "warning"
    assert fields["endpoint"] == "ci" and fields["event_id"] == old_id and fields["action"] == "push"
    assert fields["target"]["repository"] == "team/app" and fields["age_hours"] == 73.0


def test_no_error_or_log_line_shows_a_header_value_or_the_secret(client: Client, settings, caplog) -> None:
    settings.NOTIFICATIONS = [entry(url=f"http://127.0.0.1:{free_port()}/hooks?key=in-the-query",
                                    headers={"Authorization": "Bearer sekrit"}, secret=SECRET)]
    push_blob(client, "team/app", b"x")
    with caplog.at_level(logging.DEBUG):
        sender.deliver_once(Endpoint.of(settings.NOTIFICATIONS[0]))
    lines = [JsonLines().format(record) for record in caplog.records]
    shown = "\n".join(lines) + state().last_error
    assert "failed, attempt 1: cannot connect" in caplog.text
    (failure,) = [json.loads(line) for line in lines if "failed, attempt 1" in line]
    assert (failure["endpoint"], failure["attempt"], failure["events"]) == ("ci", 1, 1)
    assert failure["error"].startswith("cannot connect") and failure["retry_in_seconds"] == 1.0
    assert "sekrit" not in shown and SECRET not in shown and "in-the-query" not in shown


def test_retry_ends_the_backoff_at_once(client: Client, endpoint, receiver) -> None:
    push_blob(client, "team/app", b"x")
    receiver.status = 500
    sender.deliver_once(endpoint)
    EndpointState.objects.update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    receiver.status = 200
    sender.deliver_once(endpoint)
    assert receiver.deliveries == []
    call_command("notifications", "retry", "--endpoint", "ci", stdout=(out := __import__("io").StringIO()))
    assert out.getvalue().startswith("ci: retrying now (1 pending, 1 failed attempts in a row)")
    sender.deliver_once(endpoint)
    assert len(receiver.deliveries) == 1 and queued() == []


def test_events_of_an_endpoint_no_longer_configured_expire_after_72_hours(endpoint) -> None:
    now = timezone.now()
    queries.add(["gone"], [{"id": "old", "action": "push", "target": {}}], now - timedelta(hours=73))
    queries.add(["gone"], [{"id": "new", "action": "push", "target": {}}], now - timedelta(hours=1))
    sender._expire_unconfigured({"ci"})
    assert [e["id"] for e in queued("gone")] == ["new"]
    assert EndpointState.objects.get(name="gone").expired == 1


@pytest.mark.django_db(transaction=True)
def test_the_lock_holder_sends_continuously_one_thread_per_endpoint(client: Client, settings, receiver) -> None:
    dead = entry("dead", url=f"http://127.0.0.1:{free_port()}/x")
    settings.NOTIFICATIONS = [entry(url=receiver.url), dead]
    stop = threading.Event()
    with default_locks().hold(sender.LOCK) as held:
        leader = threading.Thread(target=sender.lead, args=(held, stop))
        leader.start()
        try:
            push_image(client, "team/app", "v1")
            events = receiver.wait_for(lambda got: len(got) == 3, timeout=10)
            push_blob(client, "team/app", b"later")
            receiver.wait_for(lambda got: len(got) == 4, timeout=10)
        finally:
            stop.set()
            leader.join(timeout=10)
    assert not leader.is_alive()
    assert summary(events)[-1] == ("push", "team/app", "v1")
    assert len(queued("dead")) == 4 and EndpointState.objects.get(name="dead").failed >= 1


@pytest.mark.django_db(transaction=True)
def test_a_sender_that_lost_its_database_lease_stops_sending(settings, receiver, monkeypatch) -> None:
    from registry.locks import DatabaseLocks, LockHeld
    from registry.models import Lease

    monkeypatch.setattr(sender, "CHECK_LOCK_EVERY", 0.1)
    settings.NOTIFICATIONS = [entry(url=receiver.url)]
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            with DatabaseLocks().hold(sender.LOCK) as held:
                sender.lead(held, stop)
        except LockHeld as exc:
            failure.append(exc)

    leader = threading.Thread(target=run)
    leader.start()
    try:
        time.sleep(0.5)
        assert leader.is_alive()
        Lease.objects.filter(name=sender.LOCK).update(owner="another-replica")  # its lease ran out and was taken
        leader.join(timeout=10)
    finally:
        stop.set()
        leader.join(timeout=10)
    assert not leader.is_alive() and failure and "was lost" in str(failure[0])
