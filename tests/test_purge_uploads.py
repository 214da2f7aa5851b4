"""Expired upload sessions go with their partial data; live ones stay (manage.py purgeuploads)."""
from __future__ import annotations

import io
import os
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from registry.models import Upload
from registry.services import uploads
from registry.storage import default_driver, paths

pytestmark = pytest.mark.django_db


def _session_with_data(data: bytes) -> str:
    session = uploads.start("team/app")
    uploads.append("team/app", session.id, uploads.Body(io.BytesIO(data), len(data)))
    return session.id


def _idle(upload_id: str, hours: float) -> None:
    Upload.objects.filter(id=upload_id).update(updated_at=timezone.now() - timedelta(hours=hours))


def _has_data(upload_id: str) -> bool:
    return (default_driver().root / paths.upload_data(upload_id)).exists()


def _purge(*args: str) -> str:
    out = io.StringIO()
    call_command("purgeuploads", *args, stdout=out)
    return out.getvalue().strip()


def test_it_removes_an_expired_session_and_keeps_a_live_one() -> None:
    expired = _session_with_data(b"abandoned half-pushed layer")
    live = _session_with_data(b"a push in progress")
    _idle(expired, hours=25)
    _idle(live, hours=23)

    assert _purge() == "removed 1 upload sessions idle for more than 24 h"

    assert list(Upload.objects.values_list("id", flat=True)) == [live]
    assert not _has_data(expired) and not (default_driver().root / paths.upload_dir(expired)).exists()
    assert _has_data(live)
    status = uploads.status("team/app", live)
    assert status.offset == len(b"a push in progress")


def test_it_only_counts_in_a_dry_run() -> None:
    expired = _session_with_data(b"abandoned")
    _idle(expired, hours=48)

    assert _purge("--dry-run") == "would remove 1 upload sessions idle for more than 24 h"
    assert Upload.objects.filter(id=expired).exists() and _has_data(expired)


def test_it_takes_the_idle_time_from_the_command_line() -> None:
    session = _session_with_data(b"idle for two hours")
    _idle(session, hours=2)

    assert _purge("--older-than-hours", "3") == "removed 0 upload sessions idle for more than 3 h"
    assert _purge("--older-than-hours", "1.5") == "removed 1 upload sessions idle for more than 1.5 h"
    assert not Upload.objects.exists()


def test_it_removes_old_upload_data_left_without_a_session() -> None:
    session = _session_with_data(b"the row went, the data stayed")
    Upload.objects.filter(id=session).delete()  # e.g. a crash between the two deletions
    old = (timezone.now() - timedelta(days=2)).timestamp()
    os.utime(default_driver().root / paths.upload_data(session), (old, old))
    fresh = uploads.start("team/app")
    Upload.objects.filter(id=fresh.id).delete()  # a session being created: data first, row next

    assert _purge() == "removed 1 upload sessions idle for more than 24 h"
    assert not (default_driver().root / paths.upload_dir(session)).exists()
    assert (default_driver().root / paths.upload_dir(fresh.id)).exists()


def test_it_keeps_a_session_that_a_chunk_refreshed_after_it_was_found_expired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    session = _session_with_data(b"slow but alive")
    _idle(session, hours=30)
    real_filter = Upload.objects.filter
    refreshed = []

    def chunk_lands_first(*args, **kwargs):  # type: ignore[no-untyped-def]
        if kwargs.get("id") == session and not refreshed:
            refreshed.append(True)
            Upload.objects.all().update(updated_at=timezone.now())  # a PATCH arrives just now
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(Upload.objects, "filter", chunk_lands_first)

    assert uploads.purge_expired() == 0
    assert refreshed and Upload.objects.filter(id=session).exists() and _has_data(session)
