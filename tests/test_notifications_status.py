"""What operators see of notifications: /metrics per endpoint, the UI page, manage.py notifications."""
from __future__ import annotations

import io
import subprocess
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from notifications import queries, sender
from notifications.endpoints import Endpoint
from notifications.models import EndpointState, PendingEvent
from tests.support.notify import entry, queued
from tests.support.registry_client import push_blob, push_image
from tests.support.server import free_port
from tests.support.ui_fixtures import auth_on, plain_static, sign_in, users  # noqa: F401
from tests.test_metrics import promtool, samples, scrape

pytestmark = pytest.mark.django_db


@pytest.fixture
def two(settings) -> list[Endpoint]:
    dead = f"http://127.0.0.1:{free_port()}/hooks?key=secret-in-query"
    settings.NOTIFICATIONS = [entry("ci", url=dead, repositories="team/*"),
                              entry("audit", url="http://127.0.0.1:9/audit", events=["delete"])]
    return [Endpoint.of(e) for e in settings.NOTIFICATIONS]


def label(name: str) -> tuple[tuple[str, str], ...]:
    return (("endpoint", name),)


def test_metrics_show_pending_delivered_failed_and_expired_per_endpoint(client: Client, two) -> None:
    ci, audit = two
    queries.add(["ci"], [{"id": "x", "action": "push", "target": {}}], timezone.now())
    push_image(client, "team/app", "v1")
    sender.deliver_once(ci)  # refused: the port is closed
    PendingEvent.objects.filter(payload__contains='"id":"x"').update(created_at=timezone.now() - timedelta(hours=80))
    EndpointState.objects.filter(name="ci").update(next_attempt_at=None, delivered=7)
    sender.deliver_once(ci)  # expires the old one, fails again
    found = samples(scrape(client))
    assert found[("registry_notifications_pending", label("ci"))] == 3
    assert found[("registry_notifications_delivered_total", label("ci"))] == 7
    assert found[("registry_notifications_failed_total", label("ci"))] == 2
    assert found[("registry_notifications_expired_total", label("ci"))] == 1
    assert 0 < found[("registry_notifications_oldest_pending_seconds", label("ci"))] < 60
    assert found[("registry_notifications_pending", label("audit"))] == 0
    assert found[("registry_notifications_expired_total", label("audit"))] == 0


def test_the_exposition_with_notifications_passes_promtool(client: Client, two) -> None:
    push_blob(client, "team/app", b"x")
    sender.deliver_once(two[0])
    result = subprocess.run([promtool(), "check", "metrics"], input=scrape(client), capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_without_endpoints_there_are_no_notification_metrics(client: Client, settings) -> None:
    settings.NOTIFICATIONS = []
    assert "registry_notifications" not in scrape(client)


def test_the_ui_page_shows_each_endpoints_state_and_last_error(client: Client, two) -> None:
    push_blob(client, "team/app", b"x")
    sender.deliver_once(two[0])
    response = client.get("/ui/notifications/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "ci" in page and "audit" in page and "failing" in page
    assert "cannot connect: Connection refused" in page
    assert "secret-in-query" not in page and "/hooks?…" in page
    assert 'href="/ui/notifications/"' in client.get("/ui/").content.decode()


def test_the_ui_page_needs_sign_in_when_authentication_is_on(client: Client, two, auth_on) -> None:
    assert client.get("/ui/notifications/").status_code == 302
    sign_in(client)
    assert client.get("/ui/notifications/").status_code == 200


def test_a_ui_delete_names_the_signed_in_user_as_the_actor(client: Client, two, auth_on, settings) -> None:
    pusher = Client()
    settings.AUTH_ENABLED = False
    push_image(pusher, "team/app", "v1")
    settings.AUTH_ENABLED = True
    sign_in(client)
    assert client.post("/ui/r/team/app/-/manifests/v1/delete").status_code == 302
    deleted = queued()[-1]
    assert deleted["action"] == "delete" and deleted["target"] == {"repository": "team/app", "tag": "v1"}
    assert deleted["actor"] == {"name": "alice"}


def test_the_ui_has_no_notifications_link_without_endpoints(client: Client, settings) -> None:
    settings.NOTIFICATIONS = []
    assert "/ui/notifications/" not in client.get("/ui/").content.decode()
    assert "No endpoints are configured" in client.get("/ui/notifications/").content.decode()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("notifications", *args, stdout=out)
    return out.getvalue()


def test_the_command_lists_each_endpoint_with_its_state_and_last_error(client: Client, two) -> None:
    push_blob(client, "team/app", b"x")
    sender.deliver_once(two[0])
    text = run("list")
    assert text.startswith("ci  failing  http://127.0.0.1:")
    assert "/hooks?…  events=delete,push  repositories=team/*" in text
    assert "pending 1 (oldest" in text and "delivered 0  failed 1  expired 0" in text
    assert "last error" in text and "cannot connect: Connection refused" in text
    assert "1 failed attempts in a row; next attempt in" in text
    assert "\naudit  ok  http://127.0.0.1:9/audit  events=delete  repositories=**" in text
    assert "secret-in-query" not in text


def test_the_command_lists_pending_events_oldest_first(client: Client, two) -> None:
    push_image(client, "team/app", "v1")
    text = run("list", "--endpoint", "ci", "--events", "--limit", "2")
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("#")]
    assert len(lines) == 2 and "push team/app@sha256:" in lines[0]
    assert "... and 1 more" in text and "audit" not in text


def test_the_command_retries_every_configured_endpoint_or_one(client: Client, two) -> None:
    push_blob(client, "team/app", b"x")
    sender.deliver_once(two[0])
    EndpointState.objects.filter(name="ci").update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    text = run("retry")
    assert "ci: retrying now (1 pending, 1 failed attempts in a row)" in text
    assert "audit: not waiting (0 pending)" in text
    assert EndpointState.objects.get(name="ci").next_attempt_at is None
    with pytest.raises(CommandError, match="no configured endpoint 'nope': configured are ci, audit"):
        run("retry", "--endpoint", "nope")


def test_the_command_says_when_nothing_is_configured(settings) -> None:
    settings.NOTIFICATIONS = []
    assert run("list").startswith("no [[notifications]] endpoints are configured")
    with pytest.raises(CommandError, match="no \\[\\[notifications\\]\\] endpoints are configured"):
        run("retry")
