"""The executor makes planner.plan's plan a page at a time over the database, in bounded memory.

planner.plan over a snapshot in memory is the rule's specification; the executor must say the same
thing, line for line, about repositories with indexes, referrers, immutable tags, pulls and pages
smaller than the repository, and its memory must not grow with the number of tags.
"""
from __future__ import annotations

import tracemalloc
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from registry.policies.rules import current
from registry.retention import executor, planner
from tests.support import scale
from tests.support import scale_content as content
from tests.support.lifecycle import push_image, push_index

pytestmark = pytest.mark.django_db

RULE = {"name": "", "repositories": "team/*", "keep_last": 3, "keep_tags": ["^v[0-9]+$"],
        "pulled_within_days": 30, "untagged_after_hours": 72}


def _age(digest: str, days: float, pulled_days: float | None = None) -> None:
    then = timezone.now() - timedelta(days=days)
    Manifest.objects.filter(digest=digest).update(
        created_at=then, last_pulled_at=None if pulled_days is None else timezone.now() - timedelta(days=pulled_days))
    Tag.objects.filter(manifest__digest=digest).update(updated_at=then)


def _planned_lines(name: str, now) -> list[str]:  # type: ignore[no-untyped-def]
    policies = current()
    repository = Repository.objects.get(name=name)
    made = planner.plan(executor.snapshot(repository.pk, name), policies.retention_for(name),
                        policies.immutable_for(name), now)
    return ([f"would remove tag {name}:{r.tag.name}: {r.reason}" for r in made.tags]
            + [f"the next collection removes manifest {name}@{m.manifest.digest}: {m.reason}" for m in made.manifests]
            + [f"manifest {name}@{k.manifest.digest}: {k.reason}" for k in made.kept])


def _a_repository_of_every_kind() -> None:
    images = [push_image("team/app", f"t{i}", [b"base" * 50, f"own {i}".encode() * 50]) for i in range(9)]
    for i, digest in enumerate(images):
        _age(digest, 200 - 10 * i, pulled_days=5 if i == 2 else None)
    push_image("team/app", "v7", [b"kept by pattern"])
    for digest in (push_image("team/app", None, [b"untagged old"]), push_image("team/app", None, [b"untagged 2"])):
        _age(digest, 100)
    arm = push_image("team/app", None, [b"arm"])
    amd = push_image("team/app", None, [b"amd"])
    index = push_index("team/app", "multi", [arm, amd])
    for digest in (arm, amd, index):
        _age(digest, 300)
    signature = push_image("team/app", "sig-t0", [b"sig"], subject=images[0])  # tagged referrer, goes with t0
    kept_signature = push_image("team/app", None, [b"sig 8"], subject=images[8])
    for digest in (signature, kept_signature):
        _age(digest, 150)
    push_image("team/app", "prod-1", [b"immutable"])
    _age(Tag.objects.get(name="prod-1").manifest.digest, 400)


def test_the_executor_plans_what_the_planner_specifies_line_for_line(settings, monkeypatch) -> None:
    settings.REGISTRY_RETENTION = [RULE]
    settings.REGISTRY_IMMUTABLE = [{"name": "", "repositories": "team/*", "tags": ["^prod-"]}]
    _a_repository_of_every_kind()
    monkeypatch.setattr(executor, "PAGE", 2)  # pages smaller than the repository
    now = timezone.now()
    lines: list[str] = []

    executor.run(dry_run=True, report=lines.append, now=now)

    assert lines == _planned_lines("team/app", now)
    assert any("on a referrer of" in line for line in lines) and any("listed only by index" in line for line in lines)


def test_the_executor_says_what_stays_untagged_as_the_planner_does(settings, monkeypatch) -> None:
    settings.REGISTRY_RETENTION = [{**RULE, "keep_last": 1, "keep_tags": [], "pulled_within_days": 7,
                                    "untagged_after_hours": 24}]
    images = [push_image("team/app", f"t{i}", [f"fresh {i}".encode()]) for i in range(4)]  # young manifests
    for i in range(4):
        Tag.objects.filter(name=f"t{i}").update(updated_at=timezone.now() - timedelta(days=30 - i))
    push_image("team/app", None, [b"sig"], subject=images[0])  # stays with its young subject
    arm = push_image("team/app", "arm", [b"arm"])
    index = push_index("team/app", "multi", [arm])
    for digest in (arm, index):
        _age(digest, 40)
    Tag.objects.filter(name="multi").delete()
    Manifest.objects.filter(digest=index).update(last_pulled_at=timezone.now() - timedelta(days=1))
    monkeypatch.setattr(executor, "PAGE", 2)
    now = timezone.now()
    lines: list[str] = []

    outcome = executor.run(dry_run=True, report=lines.append, now=now)

    assert lines == _planned_lines("team/app", now)
    assert (outcome.tags, outcome.manifests, outcome.waiting, outcome.kept) == (4, 0, 4, 1)
    assert [line for line in lines if "kept: pulled" in line] == [next(line for line in lines if arm in line
                                                                       and line.startswith("manifest "))]
    assert sum("while a manifest pushed within untagged_after_hours" in line for line in lines) == 1


def _peak_of_a_dry_run(settings, tags: int) -> int:  # type: ignore[no-untyped-def]
    settings.REGISTRY_RETENTION = [{"name": "", "repositories": "scale/*", "keep_last": 10}]
    scale.load(content.Shape(big_tags=tags, small=0, files=False))
    reported = [0]

    def count(_line: str) -> None:
        reported[0] += 1

    tracemalloc.start()
    try:
        outcome = executor.run(dry_run=True, report=count)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (outcome.tags, outcome.manifests) == (tags - 10, tags - 10)
    assert reported[0] == 2 * (tags - 10)
    with connection.cursor() as cursor:
        for model in (Tag, ManifestReference, Manifest, BlobLink, Blob, Repository):
            cursor.execute(f"DELETE FROM {model._meta.db_table}")
    return peak


def test_a_plan_over_many_tags_takes_no_more_memory_than_over_few(settings) -> None:
    # 5,000 tags are enough: planner.plan over a snapshot in memory peaks at 7.8 MiB there.
    few = _peak_of_a_dry_run(settings, 500)
    many = _peak_of_a_dry_run(settings, 5_000)
    print(f"peak of a dry run over 500 tags: {few / 1024:.0f} KiB, over 5,000: {many / 1024:.0f} KiB")
    assert many < few * 1.5 + 1024 * 1024, (few, many)
