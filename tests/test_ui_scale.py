"""The UI stays fast with 10,000 repositories: pages cost a fixed number of queries, each bounded."""
from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from typing import Iterator

import pytest
from django.db import connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from tests.support.ui_fixtures import plain_static  # noqa: F401

pytestmark = [pytest.mark.django_db, pytest.mark.serial]  # timing-sensitive: run alone (make test)
REPOSITORIES = 10_000
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _insert(model, columns: list[str], rows: list[tuple]) -> None:
    table = model._meta.db_table
    marks = ", ".join(["%s"] * len(columns))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


@pytest.fixture(scope="module")
def many_repositories(django_db_setup, django_db_blocker) -> Iterator[None]:
    """10,000 repositories, each with one tagged manifest referencing a shared and an own blob.

    Written once for the module with plain INSERTs (the ORM would take many seconds), removed after
    with plain DELETEs (the ORM's delete() loads every row to collect what refers to it: 4 s on
    PostgreSQL).
    """
    now = timezone.now()
    n = REPOSITORIES
    with django_db_blocker.unblock():
        with transaction.atomic():
            # pushed_at as a push keeps it (registry.queries.repositories.touch_pushed)
            _insert(Repository, ["id", "name", "created_at", "pushed_at"],
                    [(i + 1, f"team{i % 100:02d}/service-{i:05d}", now, now - timedelta(minutes=i)) for i in range(n)])
            _insert(Blob, ["id", "digest", "size", "created_at"],
                    [(i + 1, _digest(f"own-{i}"), 1024 * (i + 1), now) for i in range(n)]
                    + [(n + 1, _digest("shared"), 5 * 1024 * 1024, now)])
            _insert(BlobLink, ["repository_id", "blob_id", "created_at"],
                    [(i + 1, i + 1, now) for i in range(n)] + [(i + 1, n + 1, now) for i in range(n)])
            _insert(Manifest, ["id", "repository_id", "digest", "media_type", "size", "body", "artifact_type",
                               "subject_digest", "annotations", "created_at"],
                    [(i + 1, i + 1, _digest(f"manifest-{i}"), OCI_MANIFEST, 400, b"{}", "", "", "{}",
                      now - timedelta(minutes=i)) for i in range(n)])
            _insert(ManifestReference, ["manifest_id", "digest", "kind"],
                    [(i + 1, _digest(f"own-{i}"), "blob") for i in range(n)])
            _insert(Tag, ["repository_id", "name", "manifest_id", "updated_at"],
                    [(i + 1, "latest", i + 1, now - timedelta(minutes=i)) for i in range(n)])
        # Table statistics as autovacuum keeps them on a live server: planned on an empty-table
        # estimate, PostgreSQL's plans for the pages took 8 to 20 s here after the bulk insert.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        # The process's first request imports the middleware, the URLs and the views (compiled from
        # source where bytecode is not written): up to 1.8 s on a loaded machine, none of it a page's.
        Client().get("/ui/sign-in")
        yield
        with transaction.atomic(), connection.cursor() as cursor:
            for model in (Tag, ManifestReference, Manifest, BlobLink, Blob, Repository):
                cursor.execute(f"DELETE FROM {model._meta.db_table}")
            remaining = {model.__name__: model.objects.count() for model in (Repository, Blob, Manifest)}
        assert remaining == {"Repository": 0, "Blob": 0, "Manifest": 0}, remaining


def _measure(client: Client, path: str, **params: str) -> tuple[str, int, float]:
    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        response = client.get(path, params)
        elapsed = time.perf_counter() - started
    assert response.status_code == 200
    return response.content.decode(), len(queries), elapsed


def test_it_pages_10000_repositories_in_a_few_bounded_queries(client: Client, many_repositories) -> None:
    body, count, elapsed = _measure(client, "/ui/repositories/")
    assert "10000 repositories" in body
    assert "team00/service-00000" in body and "1–50 of 10000" in body
    assert count <= 6, f"{count} queries"
    assert elapsed < 1.0, f"{elapsed:.2f}s"

    body, count, elapsed = _measure(client, "/ui/repositories/", after="team36/service-06836")
    assert "50 shown of 10000" in body and "team36/service-06936" in body and count <= 6 and elapsed < 1.0


def test_it_sorts_and_searches_10000_repositories_in_the_database(client: Client, many_repositories) -> None:
    body, count, elapsed = _measure(client, "/ui/repositories/", sort="recent")
    newest = body.index("team00/service-00000")
    assert newest < body.index("team01/service-00001")
    assert count <= 6 and elapsed < 1.0, (count, elapsed)

    body, count, elapsed = _measure(client, "/ui/repositories/", q="service-0424")
    assert "10 repositories" in body and "team42/service-04242" in body
    assert count <= 6 and elapsed < 1.0, (count, elapsed)


def test_it_sizes_each_row_from_its_own_blobs(client: Client, many_repositories) -> None:
    body, _, _ = _measure(client, "/ui/repositories/", q="team00/service-00000")
    assert "5.0 MiB" in body  # 5 MiB shared + 1 KiB own


def test_it_builds_the_overview_of_10000_repositories_in_a_few_queries(client: Client, many_repositories) -> None:
    body, count, elapsed = _measure(client, "/ui/")
    assert "10000</span>" in body
    assert count <= 6 and elapsed < 1.0, (count, elapsed)


def test_it_pages_the_tags_of_a_repository_with_thousands_of_tags(client: Client, many_repositories) -> None:
    now = timezone.now()
    _insert(Tag, ["repository_id", "name", "manifest_id", "updated_at"],
            [(1, f"build-{i:04d}", 1, now) for i in range(3000)])
    body, count, elapsed = _measure(client, "/ui/r/team00/service-00000/", sort="name")
    assert "build-0000" in body and "build-0049" in body and "build-0050" not in body
    assert "1–50 of 3001" in body
    assert count <= 12 and elapsed < 1.0, (count, elapsed)
