"""Each manifest records when it was last pulled, by tag or by digest, at most once a minute."""
from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from registry.models import Manifest
from tests.support.registry_client import push_image

pytestmark = pytest.mark.django_db


def _pulled(digest: str):  # type: ignore[no-untyped-def]
    return Manifest.objects.get(digest=digest).last_pulled_at


def _writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]


def test_a_get_by_tag_or_digest_records_the_time_and_a_head_does_not(client) -> None:
    _, digest = push_image(client, "team/app", "v1")
    assert _pulled(digest) is None
    assert client.head("/v2/team/app/manifests/v1").status_code == 200
    assert _pulled(digest) is None
    before = timezone.now()
    assert client.get("/v2/team/app/manifests/v1").status_code == 200
    first = _pulled(digest)
    assert first is not None and before <= first <= timezone.now()
    Manifest.objects.update(last_pulled_at=timezone.now() - timedelta(minutes=5))
    assert client.get(f"/v2/team/app/manifests/{digest}").status_code == 200
    assert _pulled(digest) >= before


def test_it_writes_at_most_once_a_minute_per_manifest(client) -> None:
    _, digest = push_image(client, "team/app", "v1")
    with CaptureQueriesContext(connection) as first:
        client.get("/v2/team/app/manifests/v1")
    assert len(_writes(first)) == 1
    recorded = _pulled(digest)
    with CaptureQueriesContext(connection) as again:
        for _ in range(20):
            assert client.get("/v2/team/app/manifests/v1").status_code == 200
            assert client.get(f"/v2/team/app/manifests/{digest}").status_code == 200
    assert _writes(again) == []
    assert _pulled(digest) == recorded
    Manifest.objects.update(last_pulled_at=recorded - timedelta(seconds=61))
    with CaptureQueriesContext(connection) as later:
        client.get("/v2/team/app/manifests/v1")
    assert len(_writes(later)) == 1
    assert _pulled(digest) > recorded - timedelta(seconds=61)


def test_a_pull_is_served_when_the_time_cannot_be_written(client, monkeypatch) -> None:
    from django.db import OperationalError

    from registry import queries

    _, digest = push_image(client, "team/app", "v1")

    def locked(*_args: object) -> None:
        raise OperationalError("database is locked")

    monkeypatch.setattr(queries, "touch_pulled", locked)
    response = client.get("/v2/team/app/manifests/v1")
    assert response.status_code == 200 and response["Docker-Content-Digest"] == digest
    assert _pulled(digest) is None
