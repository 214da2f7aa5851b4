"""The registry on the S3 backend (moto here; tests/e2e/test_replicas.py runs it on Ceph RGW): chunked
uploads with whole parts and tails, the running hash kept between requests, redirects, and garbage
collection, scrub, purgeuploads and deleterepo working on the bucket."""
from __future__ import annotations

import hashlib
import io
import os
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone

from registry.models import Blob, Upload
from registry.services import gc, scrub, uploads
from registry.storage.driver import StorageError
from registry.storage.s3 import S3Driver
from tests.support.registry_client import digest_of, patch, put_upload, start_upload
from tests.support.s3 import BUCKET, s3  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
MiB = 1024 * 1024


def _chunked_push(client: Any, name: str, data: bytes, sizes: list[int]) -> str:
    location = start_upload(client, name)["Location"]
    offset = 0
    for size in sizes:
        location = patch(client, location, data[offset:offset + size], f"{offset}-{offset + size - 1}")["Location"]
        offset += size
    done = put_upload(client, location, digest_of(data))
    assert done.status_code == 201, done.content
    return digest_of(data)


def test_a_chunked_upload_is_a_multipart_upload_checked_without_reading_back(client, s3: S3Driver) -> None:
    data = os.urandom(14 * MiB)
    blob_digest = _chunked_push(client, "team/app", data, [6 * MiB, 6 * MiB, 2 * MiB])
    assert s3.counters.gets == 0  # whole parts, and the hash resumed from the session each time
    assert s3.read(f"blobs/sha256/{blob_digest[7:9]}/{blob_digest[7:]}/data") == data
    assert list(s3.walk("uploads")) == []  # the upload's objects went with the commit


def test_small_chunks_become_a_tail_read_back_once_per_request(client, s3: S3Driver) -> None:
    data = os.urandom(3 * MiB)
    _chunked_push(client, "team/app", data, [MiB, MiB, MiB])
    assert s3.counters.bytes_read == MiB + 2 * MiB  # each later chunk prepends the tail before it


def test_blob_gets_redirect_to_a_presigned_url_and_heads_answer_from_the_database(client, s3, settings) -> None:
    blob_digest = _chunked_push(client, "team/app", b"layer bytes", [11])
    reply = client.get(f"/v2/team/app/blobs/{blob_digest}")
    assert reply.status_code == 307 and "X-Amz-Signature=" in reply["Location"]
    assert reply["Docker-Content-Digest"] == blob_digest
    gets = s3.counters.gets
    head = client.head(f"/v2/team/app/blobs/{blob_digest}")
    assert head.status_code == 200 and head["Content-Length"] == "11" and s3.counters.gets == gets
    settings.REGISTRY_REDIRECT = False
    ranged = client.get(f"/v2/team/app/blobs/{blob_digest}", HTTP_RANGE="bytes=2-6")
    assert ranged.status_code == 206 and b"".join(ranged.streaming_content) == b"yer b"


def test_garbage_collection_and_scrub_work_on_the_bucket(client, s3: S3Driver) -> None:
    kept = _chunked_push(client, "team/app", b"referenced by nothing yet", [25])
    Upload.objects.all().delete()
    result = gc.collect(gc.Options(grace=timedelta(0)))
    assert result.blobs == 1 and result.bytes_freed == 25
    assert list(s3.walk("blobs")) == []
    s3.write("blobs/sha256/ab/" + "ab" * 32 + "/data", b"orphan")  # data without a row
    found = scrub.scrub(repair=True, grace=timedelta(0))
    assert [p.kind for p in found.problems] == ["orphaned"] and list(s3.walk("blobs")) == []
    assert kept


def test_scrub_forgets_no_blob_when_the_bucket_is_gone(client, s3: S3Driver) -> None:
    kept = _chunked_push(client, "team/app", b"a layer", [7])
    s3.delete("blobs")
    s3.client.delete_bucket(Bucket=BUCKET)  # or a mistyped s3_bucket: every key answers 404
    with pytest.raises(StorageError, match="NoSuchBucket"):
        scrub.scrub(repair=True, grace=timedelta(0))
    assert Blob.objects.filter(digest=kept).exists()


def test_expired_sessions_abort_their_multipart_uploads(client, s3: S3Driver) -> None:
    location = start_upload(client, "team/app")["Location"]
    patch(client, location, os.urandom(6 * MiB), f"0-{6 * MiB - 1}")
    assert s3.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    Upload.objects.update(updated_at=timezone.now() - timedelta(days=2))
    assert uploads.purge_expired() == 1
    assert not s3.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")
    assert list(s3.walk("uploads")) == []


def test_deleterepo_forgets_the_repository_and_its_sessions(client, s3: S3Driver) -> None:
    location = start_upload(client, "team/gone")["Location"]
    patch(client, location, os.urandom(6 * MiB), f"0-{6 * MiB - 1}")
    out = io.StringIO()
    call_command("deleterepo", "team/gone", "--no-input", stdout=out)
    assert "team/gone" in out.getvalue()
    assert not Upload.objects.exists() and list(s3.walk("uploads")) == []
    assert not s3.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads")


def test_the_digest_of_a_finished_upload_matches_hashlib(client, s3: S3Driver) -> None:
    data = os.urandom(9 * MiB + 5)
    blob_digest = _chunked_push(client, "team/app", data, [5 * MiB + 1, 4 * MiB + 4])
    assert blob_digest == "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("sizes", [[11], [6 * MiB, 2 * MiB]], ids=["tail", "multipart"])
def test_a_closing_put_cut_short_by_the_database_succeeds_when_retried(client, s3: S3Driver, monkeypatch,
                                                                      sizes: list[int]) -> None:
    """A failover between the store sealing the upload and the row's commit: the client's retry of its
    PUT must finish the upload (it was sealed again and again, failing for good, before)."""
    from django.db import OperationalError

    from registry import queries

    data = os.urandom(sum(sizes))
    location = start_upload(client, "team/app")["Location"]
    offset = 0
    for size in sizes:
        location = patch(client, location, data[offset:offset + size], f"{offset}-{offset + size - 1}")["Location"]
        offset += size
    delete_session = queries.delete_session
    calls = []

    def lost(upload_id: str) -> None:
        calls.append(upload_id)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        delete_session(upload_id)

    monkeypatch.setattr(queries, "delete_session", lost)
    failed = put_upload(client, location, digest_of(data))
    assert failed.status_code == 503 and failed["Retry-After"]
    done = put_upload(client, location, digest_of(data))
    assert done.status_code == 201, done.content
    blob_digest = digest_of(data)
    assert s3.read(f"blobs/sha256/{blob_digest[7:9]}/{blob_digest[7:]}/data") == data
    assert list(s3.walk("uploads")) == [] and not Upload.objects.exists()


def test_a_committed_upload_is_a_201_even_when_removing_its_objects_fails(client, s3: S3Driver, monkeypatch) -> None:
    """The store failing just after the row's commit (RGW killed): the blob is pushed, and was answered
    503 (whose retry then found no session: 404); what is left of the upload goes with purgeuploads."""
    data = b"a layer"
    location = patch(client, start_upload(client, "team/app")["Location"], data, "0-6")["Location"]
    remove = uploads._remove_data

    def store_away(upload_id: str, drv: Any) -> None:
        raise StorageError("S3 request failed: Connection refused")

    monkeypatch.setattr(uploads, "_remove_data", store_away)
    done = put_upload(client, location, digest_of(data))
    assert done.status_code == 201, done.content
    assert client.head(f"/v2/team/app/blobs/{digest_of(data)}").status_code == 200
    monkeypatch.setattr(uploads, "_remove_data", remove)
    assert list(s3.walk("uploads"))  # left behind, without a session
    call_command("purgeuploads", "--older-than-hours", "0")
    assert list(s3.walk("uploads")) == []


def test_a_chunk_sent_to_an_upload_its_failed_put_had_closed_is_refused_not_a_503(client, s3: S3Driver,
                                                                                  monkeypatch) -> None:
    """After a closing PUT that the database failed under (the store had sealed the upload), a PATCH
    cannot append any more: a 503 there was retried for ever; the PUT, sent again, finishes it."""
    from django.db import OperationalError

    from registry import queries

    data = b"a layer"
    location = patch(client, start_upload(client, "team/app")["Location"], data, "0-6")["Location"]
    delete_session = queries.delete_session
    monkeypatch.setattr(queries, "delete_session", lambda upload_id: (_ for _ in ()).throw(
        OperationalError("server closed the connection unexpectedly")))
    assert put_upload(client, location, digest_of(data)).status_code == 503
    monkeypatch.setattr(queries, "delete_session", delete_session)
    more = patch(client, location, b"more", "7-10")
    assert more.status_code == 400 and more.json()["errors"][0]["code"] == "BLOB_UPLOAD_INVALID", more.content
    assert "PUT" in more.json()["errors"][0]["message"]
    assert put_upload(client, location, digest_of(data)).status_code == 201
