"""manage.py garbagecollect: options, what it prints, and one collection at a time."""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from registry import scheduler
from registry.models import Manifest
from registry.services import manifests
from tests.support.lifecycle import age_everything, digest_of, has_data, push_blob, push_image

pytestmark = pytest.mark.django_db


def _run(*args: str) -> list[str]:
    out = io.StringIO()
    call_command("garbagecollect", *args, stdout=out)
    return out.getvalue().splitlines()


def test_it_prints_what_it_would_remove_without_removing_it() -> None:
    unused = push_blob("team/app", b"unused" * 100)
    age_everything()

    lines = _run("--dry-run")

    assert lines[0] == "garbage collection: grace 24 h, untagged manifests kept, dry run"
    assert f"would remove blob {unused} (600 bytes)" in lines
    assert lines[-1] == (
        "would remove 0 upload sessions, 0 manifests, 1 blob links, 1 blobs, 0 orphaned files; "
        "would free 600 bytes"
    )
    assert has_data(unused)


def test_it_removes_a_deleted_image_and_prints_the_bytes_freed() -> None:
    layer = b"layer of a deleted image" * 100
    image = push_image("team/app", "v1", [layer], config=b"{}")
    manifests.delete("team/app", image, delete_enabled=True)

    lines = _run("--grace-hours", "0")

    assert f"removed blob {digest_of(layer)} ({len(layer)} bytes)" in lines
    assert lines[-1].endswith(f"2 blobs, 0 orphaned files; freed {len(layer) + 2} bytes")
    assert not has_data(digest_of(layer))


def test_it_removes_untagged_manifests_with_delete_untagged() -> None:
    untagged = push_image("team/app", None, [b"x" * 10])

    lines = _run("--delete-untagged", "--grace-hours", "0.5")
    assert Manifest.objects.filter(digest=untagged).exists()  # pushed less than half an hour ago

    age_everything()
    lines = _run("--delete-untagged")
    assert lines[0] == "garbage collection: grace 24 h, untagged manifests removed"
    assert f"removed manifest team/app@{untagged}" in lines
    assert not Manifest.objects.filter(digest=untagged).exists()


def test_it_refuses_a_negative_grace_period() -> None:
    with pytest.raises(CommandError, match="non-negative number of hours"):
        _run("--grace-hours", "-1")


def test_it_refuses_to_run_beside_another_collection() -> None:
    with scheduler.exclusive():
        with pytest.raises(CommandError, match="another garbage collection is running"):
            _run()
    assert _run()[-1].startswith("removed 0 upload sessions")
