"""Clients racing on the same blob, tag or upload leave one consistent result."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import pytest
from django.db import connection
from django.test import Client

from registry.models import Blob, BlobLink, Manifest, Tag, Upload
from tests.support.registry_client import (
    body_of,
    digest_of,
    make_manifest,
    patch,
    post_upload,
    push_blob,
    put_manifest,
    put_upload,
    start_upload,
)

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8
T = TypeVar("T")


def _race(work: Callable[[int, Client], T], count: int = THREADS) -> list[T]:
    """Run ``work(i, client)`` in ``count`` threads released together; each has its own client."""
    barrier = threading.Barrier(count)

    def run(i: int) -> T:
        client = Client()
        try:
            barrier.wait(timeout=10)
            return work(i, client)
        finally:
            connection.close()

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


DATA = b"contended blob " * 20000


def test_it_stores_one_blob_when_the_same_blob_is_pushed_at_once(client, storage_root) -> None:
    digest = digest_of(DATA)

    def push(i: int, c: Client) -> int:
        if i % 2:
            return post_upload(c, "team/app", f"?digest={digest}", DATA).status_code
        location = start_upload(c, "team/app")["Location"]
        assert patch(c, location, DATA[:1000], "0-999").status_code == 202
        return put_upload(c, location, digest, DATA[1000:]).status_code

    assert _race(push) == [201] * THREADS
    assert Blob.objects.filter(digest=digest).count() == 1
    assert BlobLink.objects.filter(blob__digest=digest).count() == 1
    assert not Upload.objects.exists()
    assert [p.read_bytes() == DATA for p in storage_root.glob("blobs/**/data")] == [True]
    assert list((storage_root / "uploads").iterdir()) == []
    assert body_of(client.get(f"/v2/team/app/blobs/{digest}")) == DATA


def test_it_links_a_blob_pushed_into_many_repositories_at_once(client, storage_root) -> None:
    digest = digest_of(DATA)
    statuses = _race(lambda i, c: post_upload(c, f"team/app{i}", f"?digest={digest}", DATA).status_code)
    assert statuses == [201] * THREADS
    assert BlobLink.objects.filter(blob__digest=digest).count() == THREADS
    assert len(list(storage_root.glob("blobs/**/data"))) == 1


def test_it_leaves_the_tag_on_one_whole_manifest_when_pushed_at_once(client) -> None:
    push_blob(client, "team/app", b"{}")
    bodies = [make_manifest(b"{}", [], annotations={"n": str(i)}) for i in range(THREADS)]
    statuses = _race(lambda i, c: put_manifest(c, "team/app", "latest", bodies[i]).status_code)
    assert statuses == [201] * THREADS
    assert Tag.objects.filter(name="latest").count() == 1
    assert Manifest.objects.count() == THREADS
    got = client.get("/v2/team/app/manifests/latest")
    assert got.content in bodies
    assert got["Docker-Content-Digest"] == digest_of(got.content)
    assert client.get("/v2/team/app/tags/list").json()["tags"] == ["latest"]


def test_it_stores_one_manifest_when_the_same_manifest_is_pushed_at_once(client) -> None:
    push_blob(client, "team/app", b"{}")
    body = make_manifest(b"{}", [])
    statuses = _race(lambda i, c: put_manifest(c, "team/app", f"t{i}", body).status_code)
    assert statuses == [201] * THREADS
    assert Manifest.objects.count() == 1
    assert sorted(Tag.objects.values_list("name", flat=True)) == sorted(f"t{i}" for i in range(THREADS))


def test_it_accepts_one_of_several_chunks_racing_for_the_same_offset(client) -> None:
    location = start_upload(client, "team/app")["Location"]
    chunks = [bytes([i]) * 50000 for i in range(THREADS)]
    statuses = _race(lambda i, c: patch(c, location, chunks[i], "0-49999").status_code)
    assert sorted(statuses) == [202] + [416] * (THREADS - 1)
    assert client.get(location)["Range"] == "0-49999"
    winner = next(chunk for chunk, status in zip(chunks, statuses, strict=True) if status == 202)
    done = put_upload(client, location, digest_of(winner))
    assert done.status_code == 201
    assert body_of(client.get(done["Location"])) == winner
