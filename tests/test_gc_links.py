"""The collector's links check reports exactly the links that no manifest of their own repository
references, whatever the range and however the database reads it (registry.queries.collection):
checked against the same question asked link by link through the ORM."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from registry import queries
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository
from registry.queries import collection
from tests.support import scale
from tests.support import scale_content as content

pytestmark = pytest.mark.django_db


def _expected(cutoff: object, doomed: set[int]) -> list[tuple[int, int, str, str]]:
    found = []
    for link in BlobLink.objects.filter(created_at__lt=cutoff).select_related("repository", "blob").order_by("id"):
        references = ManifestReference.objects.filter(kind=ManifestReference.BLOB, digest=link.blob.digest,
                                                      manifest__repository=link.repository)
        if not references.exclude(manifest_id__in=doomed).exists():
            found.append((link.id, link.repository_id, link.repository.name, link.blob.digest))
    return found


@pytest.mark.parametrize("merge_from", [0, 10 ** 9], ids=["merged", "statement"])
@pytest.mark.parametrize("discount", [False, True])
def test_it_reports_the_links_no_manifest_of_their_repository_references(discount: bool, merge_from: int,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection, "MERGE_FROM", merge_from)  # SQLite's two ways, at any size
    scale.load(content.Shape(big_tags=40, small=30, untagged_every=4, orphans=5, files=False))
    # A blob mounted into a repository that no manifest of it uses, though another's does; and a
    # link newer than the cutoff.
    big, small = Repository.objects.get(name=content.BIG), Repository.objects.exclude(name=content.BIG).first()
    mounted = Blob.objects.get(digest=content.image(content.BIG, content.big_tag(1), 1).config_digest)
    cutoff = timezone.now() - timedelta(minutes=1)
    BlobLink.objects.create(repository=small, blob=mounted, created_at=cutoff - timedelta(days=1))
    fresh = BlobLink.objects.filter(repository=big).order_by("id").last()
    BlobLink.objects.filter(id=fresh.id).update(created_at=timezone.now())
    doomed = set(Manifest.objects.filter(repository=big).order_by("id").values_list("id", flat=True)[:7])
    if discount:
        queries.hold_doomed(sorted(doomed))
    try:
        found = [tuple(link) for low, high in queries.link_ranges(9)
                 for link in queries.unreferenced_links(low, high, cutoff, discount=discount)]
    finally:
        queries.forget_doomed()
    expected = _expected(cutoff, doomed if discount else set())
    assert sorted(found) == expected
    # The orphans but the fresh one, the mount, and with the discount the doomed images' configs.
    assert len(expected) == 5 - 1 + 1 + (7 if discount else 0)


def test_a_dry_run_holds_each_doomed_manifest_once_however_many_and_however_often() -> None:
    # Held a chunk per statement: more than one chunk, and ids held again by a later page.
    ids = list(range(1, 1202))
    queries.hold_doomed(ids[:700])
    queries.hold_doomed(ids[600:])
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {collection.DOOMED}")
            assert cursor.fetchone() == (1201, 1201, 1, 1201)
    finally:
        queries.forget_doomed()
