"""Retention frees space in one run: ``garbagecollect --delete-untagged`` also removes the untagged
manifests of governed repositories (older than its grace period) unless the rule keeps them
(``pulled_within_days``, or a kept tag reaches them); ``untagged_after_hours = 0`` is allowed; and
``retention`` says "the next collection removes" only of what the next collection removes."""
from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from registry.models import Manifest, Tag
from registry.policies.rules import RuleError, retention_rule
from registry.services import gc
from tests.support.lifecycle import digest_of, has_data, push_image

pytestmark = pytest.mark.django_db

RULE = {"name": "", "repositories": "team/*", "keep_last": 1, "keep_tags": [], "pulled_within_days": 0,
        "untagged_after_hours": 24}


def _command(name: str, *args: str) -> list[str]:
    out = io.StringIO()
    call_command(name, *args, stdout=out)
    return out.getvalue().splitlines()


def _four_fresh_images() -> dict[str, str]:
    images = {}
    for i, tag in enumerate(["t0", "t1", "t2", "t3"]):
        images[tag] = push_image("team/app", tag, [b"shared base" * 50, f"own {tag}".encode() * 50])
        Tag.objects.filter(name=tag).update(updated_at=timezone.now() - timedelta(minutes=10 - i))
    return images


def test_retention_then_one_collection_frees_the_removed_images_blobs(settings) -> None:
    settings.REGISTRY_RETENTION = [RULE]
    images = _four_fresh_images()

    lines = _command("retention")
    collected = _command("garbagecollect", "--grace-hours", "0", "--delete-untagged")

    assert sorted(Tag.objects.values_list("name", flat=True)) == ["t3"]
    assert set(Manifest.objects.values_list("digest", flat=True)) == {images["t3"]}
    assert collected[-1].startswith("removed 0 upload sessions, 3 manifests, ")
    for tag in ("t0", "t1", "t2"):
        assert not has_data(digest_of(f"own {tag}".encode() * 50))
    assert has_data(digest_of(b"shared base" * 50)) and has_data(digest_of(b"own t3" * 50))
    # The manifests were pushed minutes ago: a plain collection keeps them for untagged_after_hours,
    # and retention says so rather than that the next collection removes them.
    assert not [line for line in lines if "the next collection removes" in line]
    waiting = [line for line in lines if line.startswith("manifest team/app@")]
    assert len(waiting) == 3 and all("stays untagged until" in line and "--delete-untagged" in line
                                     for line in waiting)
    assert lines[-1] == ("retention: removed 3 tags in 1 repository; 3 manifests whose tags go stay until their rule's "
                         "untagged_after_hours has passed since the push, or garbagecollect --delete-untagged "
                         "removes them")


def test_a_plain_collection_keeps_what_retention_said_stays(settings) -> None:
    settings.REGISTRY_RETENTION = [RULE]
    _four_fresh_images()
    _command("retention")

    assert _command("garbagecollect", "--grace-hours", "0")[-1].startswith("removed 0 upload sessions, 0 manifests")
    assert Manifest.objects.count() == 4


def test_what_the_rule_keeps_by_pulls_stays_even_with_delete_untagged(settings, client) -> None:
    settings.REGISTRY_RETENTION = [{**RULE, "keep_last": 1, "pulled_within_days": 7}]
    images = _four_fresh_images()
    Tag.objects.update(updated_at=timezone.now() - timedelta(days=30))
    Manifest.objects.filter(digest=images["t1"]).update(last_pulled_at=timezone.now() - timedelta(days=1))
    Tag.objects.filter(name="t1").update(updated_at=timezone.now() - timedelta(days=30))
    Tag.objects.filter(name="t1").delete()  # an image pinned by digest, pulled yesterday

    _command("retention")
    _command("garbagecollect", "--grace-hours", "0", "--delete-untagged")

    assert set(Manifest.objects.values_list("digest", flat=True)) == {images["t3"], images["t1"]}


def test_untagged_after_hours_zero_is_allowed_and_the_dry_run_is_exact(settings) -> None:
    settings.REGISTRY_RETENTION = [{**RULE, "untagged_after_hours": 0}]
    images = _four_fresh_images()
    assert retention_rule(0, settings.REGISTRY_RETENTION[0]).untagged_after_hours == 0
    with pytest.raises(RuleError, match="must not be negative"):
        retention_rule(0, {**RULE, "untagged_after_hours": -1})

    planned = [line for line in _command("retention", "--dry-run") if "the next collection removes" in line]
    _command("retention")
    result = gc.collect(gc.Options(grace=timedelta(0)))

    assert len(planned) == 3 == result.manifests
    assert {line.split("@")[1].split(":", 2)[0] + ":" + line.split("@")[1].split(":", 2)[1] for line in planned} == {
        images[t] for t in ("t0", "t1", "t2")}
    assert set(Manifest.objects.values_list("digest", flat=True)) == {images["t3"]}
