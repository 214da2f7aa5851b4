"""manage.py scrub: finds altered, missing and unrecorded blob data; --repair removes it."""
from __future__ import annotations

import io
import json
import os
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from registry.digests import Digest
from registry.models import Blob, BlobLink
from registry.services import blobs, scrub, sweep
from registry.services.exceptions import BlobUnknown
from registry.storage import default_driver, paths
from tests.support.lifecycle import age_data, digest_of, has_data, has_row, push_blob, push_image

pytestmark = pytest.mark.django_db


def _data_path(digest: str):  # type: ignore[no-untyped-def]
    return default_driver().root / paths.blob_data(Digest.parse(digest))


def _scrub(*args: str) -> tuple[list[str], str | None]:
    out = io.StringIO()
    try:
        call_command("scrub", *args, stdout=out)
    except CommandError as exc:
        return out.getvalue().splitlines(), str(exc)
    return out.getvalue().splitlines(), None


def test_it_passes_an_intact_store() -> None:
    push_image("team/app", "v1", [b"layer one" * 100, b"layer two" * 100])

    lines, error = _scrub()

    assert error is None
    assert lines == [f"checked 3 blobs ({900 + 900 + len(_config())} bytes): 0 problems, 0 removed"]


def _config() -> bytes:
    return json.dumps({"layers": [digest_of(b"layer one" * 100), digest_of(b"layer two" * 100)]}).encode()


def test_it_finds_a_blob_whose_file_was_altered_on_disk() -> None:
    digest = push_blob("team/app", b"original content" * 64)
    path = _data_path(digest)
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01  # one flipped bit, same size
    path.write_bytes(bytes(data))

    lines, error = _scrub()

    altered = digest_of(bytes(data))
    assert f"corrupt blob {digest}: data hashes to {altered}" in lines
    assert error == "1 problems left; run with --repair to remove them"
    assert has_row(digest) and path.exists()  # reported, not touched


def test_it_finds_a_truncated_file_by_its_size() -> None:
    digest = push_blob("team/app", b"x" * 5000)
    os.truncate(_data_path(digest), 4000)

    result = scrub.scrub()

    assert [(p.kind, p.digest, p.detail) for p in result.problems] == [
        (scrub.CORRUPT, digest, "data is 4000 bytes, the blob is 5000")
    ]


def test_it_finds_rows_without_data_and_data_without_rows() -> None:
    lost = push_blob("team/app", b"its file was deleted by hand" * 10)
    _data_path(lost).unlink()
    stray = push_blob("team/app", b"its row was deleted" * 10)
    Blob.objects.filter(digest=stray).delete()
    age_data(stray)

    lines, error = _scrub()

    assert f"missing blob {lost}: its data file is missing" in lines
    assert f"orphaned blob {stray}: {len(b'its row was deleted' * 10)} bytes of data without a blob row" in lines
    assert error == "2 problems left; run with --repair to remove them"


def test_it_ignores_a_fresh_file_without_a_row() -> None:
    stray = push_blob("team/app", b"an upload between its rename and its row" * 10)
    Blob.objects.filter(digest=stray).delete()

    assert scrub.scrub(grace=timedelta(hours=1)).problems == []
    assert [p.kind for p in scrub.scrub(grace=timedelta(0)).problems] == [scrub.ORPHANED]


def test_it_removes_what_is_broken_with_repair_so_that_clients_push_again() -> None:
    corrupt = push_blob("team/app", b"will be corrupted" * 64)
    _data_path(corrupt).write_bytes(b"garbage")
    lost = push_blob("team/app", b"will lose its file" * 10)
    _data_path(lost).unlink()
    stray = push_blob("team/app", b"will lose its row" * 10)
    Blob.objects.filter(digest=stray).delete()
    intact = push_blob("team/app", b"fine" * 10)

    lines, error = _scrub("--repair", "--grace-hours", "0")

    assert error is None
    assert sum(line.endswith("(removed)") for line in lines) == 3
    assert lines[-1] == "checked 3 blobs (" + str(64 * 17 + 18 * 10 + 40) + " bytes): 3 problems, 3 removed"
    for digest in (corrupt, lost, stray):
        assert not has_row(digest) and not has_data(digest)
        assert not BlobLink.objects.filter(blob__digest=digest).exists()
    with pytest.raises(BlobUnknown):
        blobs.stat("team/app", corrupt)
    assert has_row(intact) and has_data(intact)
    assert push_blob("team/app", b"will be corrupted" * 64) == corrupt  # the client pushes it again
    assert _data_path(corrupt).read_bytes() == b"will be corrupted" * 64
    assert _scrub()[1] is None


def test_it_prints_progress_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "PROGRESS_EVERY", 2)
    for i in range(4):
        push_blob("team/app", f"blob {i}".encode())
    lines: list[str] = []

    scrub.scrub(report=lines.append)

    assert lines == ["progress: 2 of 4 blobs checked (12 bytes)", "progress: 4 of 4 blobs checked (24 bytes)"]
