"""Tags a [[retention]] rule removes are deletes their users see: each writes a delete event by the
actor "retention", in the removal's transaction; a dry run and the garbage collector write none."""
from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from notifications.models import PendingEvent
from registry.models import Manifest, Tag
from registry.policies.rules import current
from registry.retention import executor, planner
from registry.services import gc
from tests.support.lifecycle import push_image
from tests.support.notify import entry, queued

pytestmark = pytest.mark.django_db

RULE = {"name": "", "repositories": "team/*", "keep_last": 2, "keep_tags": [], "pulled_within_days": 0,
        "untagged_after_hours": 72}


@pytest.fixture(autouse=True)
def configured(settings) -> None:
    settings.REGISTRY_RETENTION = [RULE]
    settings.NOTIFICATIONS = [entry()]


def _four_old_tags() -> dict[str, str]:
    images = {}
    for days, tag in ((40, "t0"), (30, "t1"), (20, "t2"), (10, "t3")):
        images[tag] = push_image("team/app", tag, [f"own {tag}".encode()])
        Tag.objects.filter(name=tag).update(updated_at=timezone.now() - timedelta(days=days))
    Manifest.objects.update(created_at=timezone.now() - timedelta(days=50))
    PendingEvent.objects.all().delete()
    return images


def _retention(*args: str) -> None:
    call_command("retention", *args, stdout=io.StringIO())


def test_each_tag_retention_removes_is_a_delete_event_by_retention() -> None:
    _four_old_tags()

    _retention()

    events = queued()
    assert [(e["action"], e["target"]) for e in events] == [
        ("delete", {"repository": "team/app", "tag": "t0"}),
        ("delete", {"repository": "team/app", "tag": "t1"}),
    ]
    assert all(e["actor"] == {"name": "retention"} for e in events)
    # One run, one request id: a receiver can tell the removals of one run apart.
    assert len({e["request"]["id"] for e in events}) == 1 and events[0]["request"]["method"] == ""


def test_a_dry_run_and_the_collection_that_follows_write_no_event() -> None:
    _four_old_tags()
    _retention("--dry-run")
    assert queued() == []

    _retention()
    PendingEvent.objects.all().delete()
    result = gc.collect(gc.Options(grace=timedelta(hours=1)))

    assert result.manifests == 2  # t0's and t1's manifests went, as distribution's collector: silently
    assert queued() == []


def test_a_tag_moved_after_the_plan_stays_and_writes_no_event() -> None:
    _four_old_tags()
    made = planner.plan(executor.snapshot(Tag.objects.first().repository_id, "team/app"),
                        current().retention[0], None, timezone.now())
    push_image("team/app", "t0", [b"t0 pushed again"])  # moves t0 between the plan and the removal
    PendingEvent.objects.all().delete()

    executor._remove_tags("team/app", made.tags)

    assert [e["target"] for e in queued()] == [{"repository": "team/app", "tag": "t1"}]


def test_a_removal_that_fails_leaves_its_tags_and_writes_no_event(monkeypatch) -> None:
    _four_old_tags()

    def fail(*_args: object) -> None:
        raise RuntimeError("the outbox write fails")

    monkeypatch.setattr("notifications.queries.add", fail)
    with pytest.raises(RuntimeError):
        _retention()

    assert Tag.objects.count() == 4 and queued() == []


def test_without_endpoints_retention_writes_nothing(settings) -> None:
    settings.NOTIFICATIONS = []
    _four_old_tags()
    _retention()
    assert Tag.objects.count() == 2 and PendingEvent.objects.count() == 0
