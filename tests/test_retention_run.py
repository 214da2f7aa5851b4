"""Retention against the database: manage.py retention [--dry-run] lists every removal with its rule
and clause and removes tags only; the next collection removes the manifests (referrers with their
subject) and the blobs only they used; the scheduled maintenance does both."""
from __future__ import annotations

import io
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from registry import scheduler
from registry.models import Blob, BlobLink, Manifest, Tag
from registry.policies import quotas
from registry.policies.rules import current
from registry.retention import executor, planner
from registry.services import gc
from tests.support.lifecycle import digest_of, has_data, push_blob, push_image

pytestmark = pytest.mark.django_db

RULE = {"name": "", "repositories": "team/*", "keep_last": 3, "keep_tags": ["^v[0-9]+$"],
        "pulled_within_days": 30, "untagged_after_hours": 72}


@pytest.fixture(autouse=True)
def rules(settings) -> None:
    settings.REGISTRY_RETENTION = [RULE]


def _age(tag: str, days: float) -> None:
    """Fake a push ``days`` ago: the tag, its manifest and the manifest's blobs."""
    then = timezone.now() - timedelta(days=days)
    manifest = Tag.objects.get(name=tag).manifest
    Tag.objects.filter(name=tag).update(updated_at=then)
    Manifest.objects.filter(id=manifest.id).update(created_at=then)
    digests = manifest.references.values_list("digest", flat=True)
    Blob.objects.filter(digest__in=list(digests)).update(created_at=then)
    BlobLink.objects.filter(blob__digest__in=list(digests)).update(created_at=then)


def _seven_images(client) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """t0 (oldest) .. t5, and v1 (old, kept by keep_tags); each with a layer of its own and a shared one."""
    images = {}
    for i, tag in enumerate(["t0", "t1", "t2", "t3", "t4", "t5", "v1"]):
        images[tag] = push_image("team/app", tag, [b"shared base" * 100, f"own {tag}".encode() * 100])
        _age(tag, 200 - i * 10 if tag != "v1" else 300)
    return images


def _command(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("retention", *args, stdout=out)
    return out.getvalue().splitlines()


def test_dry_run_lists_every_removal_with_rule_and_clause_and_changes_nothing(client) -> None:
    images = _seven_images(client)
    client.get("/v2/team/app/manifests/t1")  # pulled now: kept by pulled_within_days

    lines = _command("--dry-run")

    assert lines[0] == 'retention: 1 rule ([[retention]] #1 "team/*"), dry run'
    removed = [line for line in lines if line.startswith("would remove tag")]
    assert [line.split(":", 2)[1] for line in removed] == ["t0", "t2"]
    assert removed[0] == ('would remove tag team/app:t0: [[retention]] #1 "team/*": not among the 3 most recently '
                          "pushed tags (keep_last = 3; it is #6); neither pushed nor pulled within 30 days "
                          "(pulled_within_days = 30; pushed 200 days ago, never pulled)")
    assert [line for line in lines if "manifest" in line and "next collection" in line] == [
        f'the next collection removes manifest team/app@{images["t0"]}: [[retention]] #1 "team/*": its tags go '
        "(t0), pushed 200 days ago",
        f'the next collection removes manifest team/app@{images["t2"]}: [[retention]] #1 "team/*": its tags go '
        "(t2), pushed 180 days ago",
    ]
    assert lines[-1] == ("retention: would remove 2 tags in 1 repository; the next garbage collection removes "
                         "2 manifests, then the blobs only they use that are older than its grace period")
    assert Tag.objects.count() == 7


def test_a_run_removes_tags_and_the_next_collection_the_rest_signatures_with_their_subject(client) -> None:
    images = _seven_images(client)
    kept_signature = push_image("team/app", None, [b"sig of t5"], subject=images["t5"])
    gone_signature = push_image("team/app", None, [b"sig of t0"], subject=images["t0"])
    own_t0 = digest_of(b"own t0" * 100)

    lines = _command()

    assert sorted(Tag.objects.values_list("name", flat=True)) == ["t3", "t4", "t5", "v1"]
    assert "removed tag team/app:t0" in "\n".join(lines)
    assert Manifest.objects.filter(digest=images["t0"]).exists()  # retention removes tags only
    assert has_data(own_t0)

    result = gc.collect(gc.Options(grace=timedelta(hours=1)))

    remaining = set(Manifest.objects.values_list("digest", flat=True))
    assert remaining == {images[t] for t in ("t3", "t4", "t5", "v1")} | {kept_signature}
    assert gone_signature not in remaining and result.manifests == 4  # t0, t1, t2 and t0's signature
    assert not has_data(own_t0) and has_data(digest_of(b"shared base" * 100))
    assert has_data(digest_of(b"sig of t5"))


def test_a_tag_moved_after_the_plan_is_not_removed(client) -> None:
    _seven_images(client)
    policies = current()
    snap = executor.snapshot(Tag.objects.first().repository_id, "team/app")
    made = planner.plan(snap, policies.retention[0], None, timezone.now())
    assert {r.tag.name for r in made.tags} == {"t0", "t1", "t2"}
    push_image("team/app", "t1", [b"t1 pushed again"])  # moves t1 between plan and removal

    removed = executor._remove_tags("team/app", made.tags)

    assert sorted(Tag.objects.values_list("name", flat=True)) == ["t1", "t3", "t4", "t5", "v1"]
    assert len(removed) == 2


def test_repositories_no_rule_covers_are_left_alone(client) -> None:
    for i in range(6):
        push_image("other/app", f"t{i}", [f"x{i}".encode()])
    Tag.objects.update(updated_at=timezone.now() - timedelta(days=400))
    Manifest.objects.update(created_at=timezone.now() - timedelta(days=400))
    assert executor.run().tags == 0
    gc.collect(gc.Options(grace=timedelta(0)))
    assert Tag.objects.count() == 6 == Manifest.objects.count()


def test_the_scheduled_maintenance_applies_retention_then_collects(client, settings) -> None:
    settings.REGISTRY_GC_INTERVAL_HOURS = 2
    settings.REGISTRY_GC_GRACE_HOURS = 1
    settings.REGISTRY_QUOTAS = [{"name": "team", "repositories": "team/*", "max_bytes": "1GiB"}]
    images = _seven_images(client)
    used = quotas.usage(current().quotas[0])
    now = time.time()
    scheduler.run_if_due(now)

    result = scheduler.run_if_due(now + 3 * 3600)

    assert result is not None and result.manifests == 3
    assert not Manifest.objects.filter(digest__in=[images[t] for t in ("t0", "t1", "t2")]).exists()
    freed = 3 * (len(b"own t0" * 100) + 0)
    assert used - quotas.usage(current().quotas[0]) >= freed
    assert quotas.usage(current().quotas[0]) == quotas._count(current().quotas[0], current())


def test_untagged_manifests_of_a_governed_repository_go_after_untagged_after_hours(client) -> None:
    old = push_image("team/app", None, [b"old untagged"])
    young = push_image("team/app", None, [b"young untagged"])
    Manifest.objects.filter(digest=old).update(created_at=timezone.now() - timedelta(hours=73))
    Manifest.objects.filter(digest=young).update(created_at=timezone.now() - timedelta(hours=71))
    push_blob("team/app", b"unrelated")

    result = gc.collect(gc.Options(grace=timedelta(hours=1)))

    assert set(Manifest.objects.values_list("digest", flat=True)) == {young}
    assert result.manifests == 1
