"""What replication shows: /metrics, the UI page, manage.py replicate (--dry-run, --list, a run), and
a webhook event when a run ends; and pushes write event items only for the policies that want them."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from replication.models import Item
from tests.support.notify import entry as endpoint, queued
from tests.support.proxy_fixtures import start_upstream  # noqa: F401
from tests.support.registry_client import push_image
from tests.support.replication import policy_entry, run_until_idle
from tests.support.upstreams import Distribution

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def dest(start_upstream, settings) -> Distribution:  # noqa: F811
    upstream = start_upstream("dest")
    settings.REPLICATION = [policy_entry(url=upstream.url, repositories=["team/**"], username="robot",
                                         password="not-shown-anywhere")]
    return upstream


def test_a_push_writes_an_item_only_for_the_policies_that_want_it(client: Client, settings, dest) -> None:
    settings.REPLICATION += [policy_entry(name="nightly", url=dest.url, trigger="schedule"),
                             policy_entry(name="releases", url=dest.url, tags=["^v"])]
    push_image(client, "team/app", "latest")
    push_image(client, "other/app", "v1")
    assert sorted(Item.objects.values_list("policy", "repository", "tag")) == [
        ("dr", "team/app", "latest"), ("releases", "other/app", "v1")]


def test_metrics_and_the_ui_page(client: Client, dest) -> None:
    push_image(client, "team/app", "v1", layers=[b"z" * 4096])
    text = client.get("/metrics").content.decode()
    assert 'registry_replication_pending{policy="dr"} 1.0' in text
    run_until_idle()
    text = client.get("/metrics").content.decode()
    assert 'registry_replication_items_total{policy="dr"} 1.0' in text
    assert 'registry_replication_failures_total{policy="dr"} 0.0' in text
    assert 'registry_replication_lag_seconds{policy="dr"} 0.0' in text
    assert 'registry_replication_bytes_total{policy="dr"}' in text
    page = client.get("/ui/replication/").content.decode()
    assert "dr" in page and dest.url.split("//")[1] in page and "succeeded" in page
    assert "not-shown-anywhere" not in page and "robot" not in page


def test_manage_py_replicate(client: Client, dest) -> None:
    push_image(client, "team/app", "v1")
    push_image(client, "team/app", "v2")
    out = StringIO()
    call_command("replicate", "dr", "--dry-run", stdout=out)
    assert "would copy team/app:v1" in out.getvalue() and "2 to copy" in out.getvalue()
    Item.objects.all().delete()  # the event items: the manual run below covers them
    out = StringIO()
    call_command("replicate", "dr", stdout=out)
    assert "succeeded: 2 copied, 0 skipped" in out.getvalue()
    out = StringIO()
    call_command("replicate", "dr", "--dry-run", stdout=out)
    assert "team/app:v1: up to date" in out.getvalue() and "everything is up to date" in out.getvalue()
    out = StringIO()
    call_command("replicate", "--list", stdout=out)
    assert "dr  ok  push" in out.getvalue() and "not-shown-anywhere" not in out.getvalue()
    with pytest.raises(CommandError, match="no \\[\\[replication\\]\\] policy 'nope'"):
        call_command("replicate", "nope")


def test_a_webhook_event_when_a_run_ends(client: Client, settings, dest) -> None:
    settings.NOTIFICATIONS = [endpoint(events=["replication"])]
    push_image(client, "team/app", "v1")
    assert queued() == []  # pushes are not what this endpoint wants
    run_until_idle()
    [event] = queued()
    assert event["action"] == "replication" and event["actor"] == {"name": "replication:dr"}
    target = event["target"]
    assert {k: target[k] for k in ("policy", "direction", "trigger", "state", "copied", "failed")} == {
        "policy": "dr", "direction": "push", "trigger": "event", "state": "succeeded", "copied": 1, "failed": 0}
