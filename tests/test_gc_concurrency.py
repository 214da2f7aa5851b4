"""A collection running beside pushes never leaves a manifest that references a missing blob."""
from __future__ import annotations

import random
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Callable

import pytest
from django.db import connection

from registry.digests import Digest
from registry.models import Blob, BlobLink, ManifestReference
from registry.services import blobs, gc, manifests, sweep, uploads
from registry.services.exceptions import ManifestBlobUnknown
from registry.storage import default_driver, paths
from tests.support.lifecycle import (
    MAX_MANIFEST,
    OCI_MANIFEST,
    age_everything,
    digest_of,
    has_data,
    image_manifest,
    push_blob,
)

pytestmark = pytest.mark.django_db(transaction=True)

ITERATIONS = 40


def _race(first: Callable[[], str], second: Callable[[], str]) -> tuple[str, str]:
    """Run both at once (with a little jitter so either may win); each returns an outcome label."""
    barrier = threading.Barrier(2)
    outcomes: list[str] = ["", ""]

    def run(slot: int, work: Callable[[], str]) -> None:
        try:
            barrier.wait()
            time.sleep(random.uniform(0, 0.004))
            outcomes[slot] = work()
        except Exception as exc:  # an unexpected error is an outcome the test refuses below
            outcomes[slot] = f"error: {exc!r}"
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate((first, second))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes[0], outcomes[1]


def _assert_every_reference_is_pullable() -> None:
    refs = ManifestReference.objects.filter(kind=ManifestReference.BLOB).values_list(
        "digest", "manifest__repository_id"
    )
    for digest, repository_id in refs:
        assert Blob.objects.filter(digest=digest).exists(), f"{digest} has no row"
        assert BlobLink.objects.filter(blob__digest=digest, repository_id=repository_id).exists()
        assert has_data(digest), f"{digest} has no data"


def _collect() -> str:
    result = gc.collect(gc.Options(grace=timedelta(hours=24)))
    return f"collected {result.blobs}"


def _put(name: str, body: bytes) -> Callable[[], str]:
    def put() -> str:
        try:
            manifests.put(name, "latest", body, OCI_MANIFEST, MAX_MANIFEST)
        except ManifestBlobUnknown:
            return "refused"
        return "stored"

    return put


@pytest.fixture(autouse=True)
def wide_race_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the collector pause between choosing what to delete and locking it, where a push lands."""
    real = sweep.lock_digests

    def slow_lock(digests):  # type: ignore[no-untyped-def]
        time.sleep(random.uniform(0, 0.01))
        real(digests)

    monkeypatch.setattr(sweep, "lock_digests", slow_lock)
    monkeypatch.setattr(sweep, "WRITER_PAUSE", 0.001)  # fairness to other writers is not tested here


def test_it_never_stores_a_manifest_whose_blobs_a_concurrent_collection_removes() -> None:
    seen: Counter[str] = Counter()
    for i in range(ITERATIONS):
        layer, config = f"layer {i}".encode() * 50, f"config {i}".encode()
        push_blob("team/app", layer)
        push_blob("team/app", config)
        age_everything()  # uploaded long ago, never referenced: collectable

        put_outcome, gc_outcome = _race(_put("team/app", image_manifest(config, [layer])), _collect)

        assert put_outcome in {"stored", "refused"}, put_outcome
        assert gc_outcome.startswith("collected"), gc_outcome
        _assert_every_reference_is_pullable()
        if put_outcome == "stored":
            assert has_data(digest_of(layer)) and has_data(digest_of(config))
        seen[put_outcome] += 1
    assert sum(seen.values()) == ITERATIONS
    print(f"manifest PUT vs collection outcomes: {dict(seen)}")


def test_it_never_loses_a_blob_pushed_again_while_a_collection_removes_it() -> None:
    seen: Counter[str] = Counter()
    for i in range(ITERATIONS):
        layer, config = f"old layer {i}".encode() * 50, f"old config {i}".encode()
        push_blob("team/app", layer)
        push_blob("team/app", config)
        age_everything()

        def push_again(layer: bytes = layer, config: bytes = config) -> str:
            push_blob("team/app", layer)
            push_blob("team/app", config)
            return _put("team/app", image_manifest(config, [layer]))()

        push_outcome, gc_outcome = _race(push_again, _collect)

        # Uploading a blob again (re)starts its grace period, so this push always completes.
        assert push_outcome == "stored", push_outcome
        assert gc_outcome.startswith("collected"), gc_outcome
        _assert_every_reference_is_pullable()
        seen[gc_outcome] += 1
    print(f"re-push vs collection outcomes: {dict(seen)}")


def test_it_stores_the_uploaded_copy_when_a_collection_removed_the_stored_one_meanwhile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = b"stored long ago" * 20
    push_blob("team/app", data)
    age_everything()
    real_link = blobs.link
    calls = []

    def link_after_a_collection(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not calls:  # the upload has seen the stored copy; now a collection removes it
            calls.append(gc.collect(gc.Options()).blobs)
        return real_link(*args, **kwargs)

    monkeypatch.setattr(uploads.blobs, "link", link_after_a_collection)

    push_blob("team/app", data)

    assert calls == [1]
    assert Blob.objects.filter(digest=digest_of(data)).exists() and has_data(digest_of(data))
    stream, _info = blobs.open_blob("team/app", digest_of(data))
    with stream:
        assert stream.read() == data


def test_it_refuses_a_mount_of_a_blob_whose_data_was_collected() -> None:
    data = b"mount source" * 20
    push_blob("team/source", data)
    default_driver().delete(paths.blob_dir(Digest.parse(digest_of(data))))

    assert blobs.mount("team/target", digest_of(data), "team/source") is None
    assert not BlobLink.objects.filter(repository__name="team/target").exists()
