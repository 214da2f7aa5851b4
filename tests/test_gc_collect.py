"""Garbage collection: what it removes, what it keeps, and that a dry run changes nothing."""
from __future__ import annotations

import json
from datetime import timedelta
from typing import Callable

import pytest
from django.db import connection
from django.utils import timezone

from registry.digests import Digest
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Tag, Upload
from registry.services import blobs, gc, manifests, sweep, uploads
from registry.storage import default_driver, paths
from tests.support.lifecycle import (
    age_data,
    age_everything,
    digest_of,
    has_data,
    has_row,
    push_blob,
    push_image,
    push_index,
)

pytestmark = pytest.mark.django_db

NOW = timedelta(0)


def _snapshot() -> tuple:
    files = sorted(info.path for info in default_driver().walk("blobs"))
    rows = tuple(
        sorted(model.objects.values_list("id", flat=True))
        for model in (Blob, BlobLink, Manifest, ManifestReference, Tag, Upload)
    )
    return files, rows


def test_it_changes_nothing_in_a_dry_run_and_reports_what_a_real_run_removes() -> None:
    push_image("team/app", "v1", [b"shared" * 100, b"only-v1" * 100])
    push_image("team/app", "v2", [b"shared" * 100, b"only-v2" * 100])
    manifests.delete("team/app", "v1", delete_enabled=True)  # v1's manifest is now untagged
    push_blob("team/app", b"never-referenced" * 10)
    uploads.start("team/app")
    age_everything()
    before = _snapshot()

    lines: list[str] = []
    dry = gc.collect(gc.Options(delete_untagged=True, dry_run=True), report=lines.append)

    assert _snapshot() == before
    assert all(line.startswith("would remove") for line in lines)
    real = gc.collect(gc.Options(delete_untagged=True))
    assert (dry.uploads, dry.manifests, dry.blob_links, dry.blobs, dry.bytes_freed) == (
        real.uploads, real.manifests, real.blob_links, real.blobs, real.bytes_freed
    )
    assert (real.uploads, real.manifests, real.blobs) == (1, 1, 3)  # only-v1, v1's config, never-referenced


def test_it_keeps_shared_layers_when_one_of_two_images_is_deleted() -> None:
    shared = [b"base-os" * 500, b"runtime" * 500]
    one = push_image("team/one", "latest", [*shared, b"app-one" * 300])
    two = push_image("team/two", "latest", [*shared, b"app-two" * 300])
    manifests.delete("team/one", one, delete_enabled=True)
    age_everything()

    result = gc.collect(gc.Options())

    for layer in shared + [b"app-two" * 300]:
        assert has_row(digest_of(layer)) and has_data(digest_of(layer))
    assert not has_row(digest_of(b"app-one" * 300)) and not has_data(digest_of(b"app-one" * 300))
    assert result.blobs == 2  # app-one and team/one's config
    assert result.bytes_freed == len(b"app-one" * 300) + _config_size(shared + [b"app-one" * 300])
    # team/one's links to the shared layers are unreferenced there now: dropped; team/two keeps its own.
    assert not BlobLink.objects.filter(repository__name="team/one").exists()
    assert BlobLink.objects.filter(repository__name="team/two").count() == 4
    assert manifests.get("team/two", "latest").digest == two


def _config_size(layers: list[bytes]) -> int:
    return len(json.dumps({"layers": [digest_of(d) for d in layers]}).encode())


def test_it_keeps_a_blob_pushed_within_the_grace_period() -> None:
    push_blob("team/app", b"old-and-unused" * 10)
    age_everything()
    push_blob("team/app", b"in-flight-layer" * 10)  # a push whose manifest has not arrived yet

    result = gc.collect(gc.Options(grace=timedelta(hours=24)))

    assert result.blobs == 1
    assert not has_row(digest_of(b"old-and-unused" * 10))
    assert has_row(digest_of(b"in-flight-layer" * 10)) and has_data(digest_of(b"in-flight-layer" * 10))


def test_it_keeps_an_old_blob_that_was_pushed_again_within_the_grace_period() -> None:
    data = b"re-pushed" * 10
    push_blob("team/app", data)
    age_everything()
    push_blob("team/app", data)  # the same blob again: its link's time is refreshed

    assert gc.collect(gc.Options()).blobs == 0
    assert has_row(digest_of(data)) and has_data(digest_of(data))


def test_it_keeps_an_old_blob_mounted_into_another_repository_within_the_grace_period() -> None:
    data = b"mounted" * 10
    push_blob("team/source", data)
    age_everything()
    assert blobs.mount("team/target", digest_of(data), "team/source") is not None

    assert gc.collect(gc.Options()).blobs == 0
    assert has_data(digest_of(data))


def test_it_deletes_untagged_manifests_only_when_asked() -> None:
    untagged = push_image("team/app", None, [b"layer-x" * 10])
    tagged = push_image("team/app", "v1", [b"layer-y" * 10])
    age_everything()

    assert gc.collect(gc.Options()).manifests == 0
    assert Manifest.objects.filter(digest=untagged).exists()

    result = gc.collect(gc.Options(delete_untagged=True))

    assert result.manifests == 1
    assert not Manifest.objects.filter(digest=untagged).exists()
    assert Manifest.objects.filter(digest=tagged).exists()
    assert not has_data(digest_of(b"layer-x" * 10)) and has_data(digest_of(b"layer-y" * 10))


def test_it_keeps_the_children_of_a_tagged_index_and_the_referrers_of_a_kept_manifest() -> None:
    amd64 = push_image("team/app", None, [b"amd64" * 10])
    arm64 = push_image("team/app", None, [b"arm64" * 10])
    index = push_index("team/app", "multi", [amd64, arm64])
    signature = push_image("team/app", None, [b"signature" * 10], subject=amd64)
    orphan_sbom = push_image("team/app", None, [b"sbom" * 10], subject=digest_of(b"gone"))
    untagged_index = push_index("team/app", "tmp", [arm64])
    Tag.objects.filter(name="tmp").delete()
    age_everything()

    lines: list[str] = []
    gc.collect(gc.Options(delete_untagged=True), report=lines.append)

    kept = set(Manifest.objects.values_list("digest", flat=True))
    assert kept == {index, amd64, arm64, signature}
    assert f"removed manifest team/app@{orphan_sbom}" in lines
    assert f"removed manifest team/app@{untagged_index}" in lines


def test_it_keeps_an_untagged_manifest_pushed_within_the_grace_period() -> None:
    child = push_image("team/app", None, [b"child" * 10])  # an index push sends its children first

    assert gc.collect(gc.Options(delete_untagged=True)).manifests == 0
    assert Manifest.objects.filter(digest=child).exists()


def test_it_removes_data_files_left_without_a_row() -> None:
    data = b"crashed between row and data deletion" * 10
    push_blob("team/app", data)
    Blob.objects.filter(digest=digest_of(data)).delete()  # a collection that died after its commit
    path = default_driver().root / paths.blob_data(Digest.parse(digest_of(data)))
    age_data(digest_of(data))

    result = gc.collect(gc.Options())

    assert result.orphaned_files == 1 and result.bytes_freed == len(data)
    assert not has_data(digest_of(data))
    assert not path.parent.exists()


def test_the_orphan_walk_tells_files_with_rows_from_files_without_at_every_prefix_boundary() -> None:
    """files_without_rows reads each prefix directory's rows as one range of the digest index: a
    row just outside the range (the prefixes either side, the other algorithm) must not hide a file
    without a row, nor a row be missed for a file with one."""
    driver = default_driver()
    with_row, without_row = set(), set()
    for algorithm, length in (("sha256", 64), ("sha512", 128)):
        for prefix in ("00", "09", "0a", "0f", "10", "9f", "a0", "fe", "ff"):
            for fill, keep in (("0", False), ("7", True), ("f", False)):
                digest = Digest(algorithm, prefix + fill * (length - 2))
                driver.write(paths.blob_data(digest), b"data")
                if keep:
                    Blob.objects.create(digest=str(digest), size=4)
                (with_row if keep else without_row).add(str(digest))
    walked: list[int] = []

    found = [pair for batch in sweep.files_without_rows(driver, timezone.now() + timedelta(minutes=1), walked.append)
             for pair in batch]

    assert sorted(found) == sorted((digest, 4) for digest in without_row)
    assert sum(walked) == len(with_row) + len(without_row)


def test_it_takes_a_collected_blobs_data_out_under_the_lock_and_deletes_it_after(monkeypatch) -> None:
    data = b"never referenced" * 10
    push_blob("team/app", data)
    age_everything()
    driver = default_driver()
    calls: list[tuple[str, str, int]] = []  # the call, its path, the transactions open (the test's own too)

    def recording(name: str) -> Callable[..., object]:
        real = getattr(driver, name)

        def recorded(path: str, *rest: str) -> object:
            calls.append((name, path, len(connection.atomic_blocks)))
            return real(path, *rest)
        return recorded

    for name in ("detach", "delete"):
        monkeypatch.setattr(driver, name, recording(name))

    assert gc.collect(gc.Options()).blobs == 1

    blob_dir = paths.blob_dir(Digest.parse(digest_of(data)))
    (detach, detached, locked), (delete, deleted, after) = calls
    assert (detach, detached) == ("detach", blob_dir)
    assert (delete, deleted.startswith(f"{paths.TRASH}/")) == ("delete", True)
    assert locked == after + 1  # renamed inside the collector's locking transaction, deleted after it
    assert not has_data(digest_of(data))
    assert driver.list(paths.TRASH) == []


def test_it_empties_what_a_crashed_collection_left_in_the_trash_unless_a_dry_run() -> None:
    driver = default_driver()
    left = paths.trash("ab" * 16)
    driver.write(f"{left}/data", b"renamed, not yet deleted")

    assert gc.collect(gc.Options(dry_run=True)).orphaned_files == 0
    assert driver.read(f"{left}/data")
    lines: list[str] = []
    gc.collect(gc.Options(), report=lines.append)
    assert driver.list(paths.TRASH) == []
    assert "emptied 1 entries a crashed collection left in the trash" in lines


def test_it_keeps_a_fresh_data_file_without_a_row() -> None:
    data = b"renamed into place, row not yet written" * 10
    push_blob("team/app", data)
    Blob.objects.filter(digest=digest_of(data)).delete()

    assert gc.collect(gc.Options(grace=timedelta(hours=1))).orphaned_files == 0
    assert has_data(digest_of(data))


def test_it_purges_expired_upload_sessions() -> None:
    stale = uploads.start("team/app")
    Upload.objects.filter(id=stale.id).update(updated_at=timezone.now() - timedelta(days=3))
    live = uploads.start("team/app")

    assert gc.collect(gc.Options()).uploads == 1
    assert list(Upload.objects.values_list("id", flat=True)) == [live.id]


def test_it_prints_progress_lines_on_large_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sweep, "PROGRESS_EVERY", 2)
    monkeypatch.setattr(sweep, "BATCH", 2)
    monkeypatch.setattr(sweep, "RANGE", 2)
    for i in range(5):
        push_blob("team/app", f"blob {i}".encode())
    lines: list[str] = []

    gc.collect(gc.Options(grace=NOW, dry_run=True), report=lines.append)

    assert "progress: 4 of 5 blobs checked" in lines
    assert "progress: 4 blob files checked" in lines
