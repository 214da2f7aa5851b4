"""A migrated database still works for the previous release (0.1.0), so that an upgrade can run old
and new replicas side by side and be rolled back: the columns this release added have defaults in
the database itself, and the statements the previous release runs still succeed."""
from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from registry.models import Repository, Upload

pytestmark = pytest.mark.django_db


def test_the_previous_releases_session_insert_still_works() -> None:
    repository = Repository.objects.create(name="team/app")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:  # 0.1.0's prebuilt INSERT of an upload session, verbatim
        cursor.execute(f"INSERT INTO {connection.ops.quote_name(Upload._meta.db_table)} "
                       "(id, repository_id, algorithm, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)",
                       ["0" * 32, repository.pk, "sha256", now, now])
    session = Upload.objects.get(id="0" * 32)
    assert (session.offset, session.lease_owner, session.storage_state, session.hash_state) == (0, "", None, None)


def test_the_0_2_0_session_insert_still_works() -> None:
    repository = Repository.objects.create(name="team/app")
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:  # 0.2.0's INSERT of an upload session, verbatim: no owner
        cursor.execute(f"INSERT INTO {connection.ops.quote_name(Upload._meta.db_table)} "
                       f"(id, repository_id, algorithm, created_at, updated_at, {connection.ops.quote_name('offset')}, "
                       "storage_state, lease_owner) VALUES (%s, %s, %s, %s, %s, 0, %s, '')",
                       ["1" * 32, repository.pk, "sha256", now, now, "{}"])
    assert Upload.objects.get(id="1" * 32).owner == ""
