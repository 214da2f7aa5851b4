"""The collector walks a repository's candidates in push order (registry.queries.graph), so that
each page it deletes lies together in the table and the indexes by push time: manifests pushed at
the same moment, on either side of a page's end, are each decided once, and nothing is skipped."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from registry.models import Manifest, Repository
from registry.services import gc, reachability
from tests.support import scale
from tests.support import scale_content as content

pytestmark = pytest.mark.django_db
IMAGES = 5 * reachability.PAGE + 50
SAME_MOMENT = 7  # manifests per push time: groups straddle every page's end


def _pushed_in_groups() -> list[int]:
    """The big repository's manifests, every other one untagged, pushed SAME_MOMENT at a time."""
    scale.load(content.Shape(big_tags=IMAGES, small=0, untagged_every=2, files=False))
    ids = list(Manifest.objects.filter(repository__name=content.BIG).order_by("id").values_list("id", flat=True))
    start = timezone.now() - timedelta(days=3)
    for n, manifest_id in enumerate(ids):
        Manifest.objects.filter(id=manifest_id).update(created_at=start + timedelta(seconds=n // SAME_MOMENT))
    return ids


def test_a_walk_yields_each_candidate_once_in_push_order_across_pages_of_equal_push_times() -> None:
    ids = _pushed_in_groups()
    untagged = set(Manifest.objects.filter(id__in=ids, tags__isnull=True).values_list("id", flat=True))
    big = Repository.objects.get(name=content.BIG).id

    walked = [node.id for page in reachability.pages(big, reachability.untagged_roots(timezone.now()))
              for node in page]

    assert len(walked) > 2 * reachability.PAGE
    assert walked == sorted(untagged)


def test_a_collection_deletes_every_untagged_manifest_and_keeps_the_tagged_ones() -> None:
    ids = _pushed_in_groups()
    tagged = set(Manifest.objects.filter(id__in=ids, tags__isnull=False).values_list("id", flat=True))

    dry = gc.collect(gc.Options(delete_untagged=True, dry_run=True))
    result = gc.collect(gc.Options(delete_untagged=True))

    assert dry.manifests == result.manifests == len(ids) - len(tagged)
    assert set(Manifest.objects.filter(repository__name=content.BIG).values_list("id", flat=True)) == tagged
