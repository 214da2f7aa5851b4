"""end-5, end-6, end-13, end-14: chunked and streamed PATCH, status, closing PUT, cancel."""
from __future__ import annotations

import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from registry import hashing, queries
from registry.models import Upload
from registry.services import uploads
from tests.support.registry_client import (
    body_of,
    digest_of,
    error_code,
    patch,
    put_upload,
    start_upload,
)

pytestmark = pytest.mark.django_db

DATA = bytes(range(256)) * 12  # 3072 bytes
NAME = "team/app"


@pytest.fixture
def location(client) -> str:
    return start_upload(client, NAME)["Location"]


def _assert_session_headers(response, location: str, end: int) -> None:
    assert response["Location"] == location
    assert response["Docker-Upload-UUID"] == location.rsplit("/", 1)[1]
    assert response["Range"] == f"0-{end}"
    assert response["Content-Length"] == "0"


def test_it_accepts_chunks_in_order_and_reports_the_range(client, location) -> None:
    first = patch(client, location, DATA[:1000], "0-999")
    assert first.status_code == 202
    _assert_session_headers(first, location, 999)
    second = patch(client, location, DATA[1000:], f"1000-{len(DATA) - 1}")
    assert second.status_code == 202
    _assert_session_headers(second, location, len(DATA) - 1)
    done = put_upload(client, location, digest_of(DATA))
    assert done.status_code == 201
    assert done["Location"] == f"/v2/{NAME}/blobs/{digest_of(DATA)}"
    assert body_of(client.get(done["Location"])) == DATA


def test_it_accepts_streamed_patches_without_content_range(client, location) -> None:
    assert patch(client, location, DATA[:100]).status_code == 202
    response = patch(client, location, DATA[100:])
    assert response.status_code == 202
    _assert_session_headers(response, location, len(DATA) - 1)
    assert put_upload(client, location, digest_of(DATA)).status_code == 201


def test_it_takes_a_final_chunk_on_the_closing_put(client, location) -> None:
    patch(client, location, DATA[:2000], "0-1999")
    done = put_upload(client, location, digest_of(DATA), DATA[2000:],
                      HTTP_CONTENT_RANGE=f"2000-{len(DATA) - 1}")
    assert done.status_code == 201
    assert body_of(client.get(done["Location"])) == DATA


def test_it_takes_a_final_chunk_without_content_range_on_the_closing_put(client, location) -> None:
    patch(client, location, DATA[:10])
    assert put_upload(client, location, digest_of(DATA), DATA[10:]).status_code == 201


def test_it_refuses_a_closing_put_chunk_at_the_wrong_offset_with_416(client, location) -> None:
    patch(client, location, DATA[:10])
    response = put_upload(client, location, digest_of(DATA), DATA[20:], HTTP_CONTENT_RANGE=f"20-{len(DATA) - 1}")
    assert response.status_code == 416
    assert response["Range"] == "0-9"
    assert response["Location"] == location


@pytest.mark.parametrize("content_range", ["1500-2999", "500-1499", "0-999", "999-1998"])
def test_it_refuses_a_gap_or_an_overlap_with_416_and_the_current_range(client, location, content_range) -> None:
    patch(client, location, DATA[:1000], "0-999")
    start, end = map(int, content_range.split("-"))
    response = patch(client, location, DATA[start : end + 1], content_range)
    assert response.status_code == 416
    assert response["Range"] == "0-999"
    assert response["Location"] == location
    assert response["Docker-Upload-UUID"] == location.rsplit("/", 1)[1]
    assert error_code(response) == "BLOB_UPLOAD_INVALID"
    status = client.get(location)
    assert status["Range"] == "0-999"  # the refused chunk left nothing behind


def test_it_continues_after_a_refused_chunk(client, location) -> None:
    patch(client, location, DATA[:1000], "0-999")
    patch(client, location, DATA[1500:], "1500-3071")
    assert patch(client, location, DATA[1000:], "1000-3071").status_code == 202
    assert put_upload(client, location, digest_of(DATA)).status_code == 201


def test_it_refuses_a_first_chunk_not_starting_at_zero_with_416(client, location) -> None:
    response = patch(client, location, DATA[:10], "5-14")
    assert response.status_code == 416
    assert response["Range"] == "0-0"


def test_it_refuses_a_content_range_that_disagrees_with_the_body_with_size_invalid(client, location) -> None:
    response = patch(client, location, DATA[:10], "0-99")
    assert response.status_code == 400
    assert error_code(response) == "SIZE_INVALID"
    assert client.get(location)["Range"] == "0-0"


@pytest.mark.parametrize("content_range", ["bytes", "10-5", "a-b", "-5"])
def test_it_refuses_a_malformed_content_range_with_400(client, location, content_range) -> None:
    response = patch(client, location, DATA[:10], content_range)
    assert response.status_code == 400
    assert error_code(response) == "BLOB_UPLOAD_INVALID"


def test_it_reports_the_status_with_204(client, location) -> None:
    fresh = client.get(location)
    assert fresh.status_code == 204
    _assert_session_headers(fresh, location, 0)
    patch(client, location, DATA[:100], "0-99")
    status = client.get(location)
    assert status.status_code == 204
    _assert_session_headers(status, location, 99)


@pytest.mark.parametrize("method", ["GET", "PATCH", "PUT", "DELETE"])
def test_it_answers_404_when_the_session_is_used_through_another_repository(client, location, method) -> None:
    other = location.replace(f"/v2/{NAME}/", "/v2/team/other/")
    query = f"?digest={digest_of(b'')}" if method == "PUT" else ""
    response = client.generic(method, other + query, b"", "application/octet-stream")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UPLOAD_UNKNOWN"
    assert client.get(location).status_code == 204  # the real session is untouched


@pytest.mark.parametrize("method", ["GET", "PATCH", "PUT", "DELETE"])
def test_it_answers_404_blob_upload_unknown_for_an_unknown_session(client, method) -> None:
    url = f"/v2/{NAME}/blobs/uploads/{'a' * 32}"
    query = f"?digest={digest_of(b'')}" if method == "PUT" else ""
    response = client.generic(method, url + query, b"", "application/octet-stream")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UPLOAD_UNKNOWN"


def test_it_refuses_an_expired_session_and_removes_its_data(client, location, storage_root, settings) -> None:
    patch(client, location, DATA[:100], "0-99")
    upload_id = location.rsplit("/", 1)[1]
    stale = timezone.now() - timedelta(hours=settings.REGISTRY_UPLOAD_EXPIRY_HOURS, minutes=1)
    Upload.objects.filter(id=upload_id).update(updated_at=stale)
    response = patch(client, location, DATA[100:200], "100-199")
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UPLOAD_UNKNOWN"
    assert not (storage_root / "uploads" / upload_id).exists()
    assert client.get(location).status_code == 404


def test_it_keeps_an_active_session_alive(client, location) -> None:
    upload_id = location.rsplit("/", 1)[1]
    Upload.objects.filter(id=upload_id).update(updated_at=timezone.now() - timedelta(hours=23))
    assert patch(client, location, DATA[:10], "0-9").status_code == 202
    assert Upload.objects.get(id=upload_id).updated_at > timezone.now() - timedelta(minutes=1)


def test_it_cancels_a_session_with_204(client, location, storage_root) -> None:
    patch(client, location, DATA[:100], "0-99")
    response = client.delete(location)
    assert response.status_code == 204
    upload_id = location.rsplit("/", 1)[1]
    assert not (storage_root / "uploads" / upload_id).exists()
    assert client.get(location).status_code == 404
    assert error_code(client.delete(location)) == "BLOB_UPLOAD_UNKNOWN"


def test_it_takes_over_the_lease_of_a_request_that_died_mid_chunk(client, location) -> None:
    patch(client, location, DATA[:1000], "0-999")
    upload_id = location.rsplit("/", 1)[1]
    now = timezone.now()  # leased by a request whose process is gone: nobody holds the file's lock
    dead = _exited_pid()
    queries.acquire_session(upload_id, "team/app", f"abcdef012345.{dead}.{uploads._host()}", now,
                            now + timedelta(minutes=2), now - timedelta(hours=1))
    patch(client, location, DATA[1000:], "1000-3071")
    assert put_upload(client, location, digest_of(DATA)).status_code == 201


def _exited_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_lease_held_on_another_host_is_waited_for(client, location) -> None:
    patch(client, location, DATA[:1000], "0-999")
    upload_id = location.rsplit("/", 1)[1]
    now = timezone.now()
    queries.acquire_session(upload_id, "team/app", f"abcdef012345.{_exited_pid()}.0123456789", now,
                            now + timedelta(minutes=2), now - timedelta(hours=1))
    assert patch(client, location, DATA[1000:], "1000-3071").status_code == 416


def test_it_forgets_the_session_once_complete(client, location) -> None:
    put_upload(client, location, digest_of(DATA), DATA)
    response = client.get(location)
    assert response.status_code == 404
    assert error_code(response) == "BLOB_UPLOAD_UNKNOWN"


def test_it_resumes_the_running_hash_from_the_session_without_reading_the_bytes_back(
        client, location, monkeypatch) -> None:
    patch(client, location, DATA[:1000], "0-999")
    patch(client, location, DATA[1000:], "1000-3071")

    def no_read_back(*args: object) -> str:
        raise AssertionError("the uploaded bytes were read back")

    monkeypatch.setattr(uploads, "_rehash", no_read_back)
    done = put_upload(client, location, digest_of(DATA))
    assert done.status_code == 201
    assert body_of(client.get(done["Location"])) == DATA


def test_it_hashes_the_stored_bytes_again_when_no_saved_hash_fits(client, location) -> None:
    patch(client, location, DATA[:1000], "0-999")
    Upload.objects.filter(id=location.rsplit("/", 1)[1]).update(hash_state=None)
    patch(client, location, DATA[1000:], "1000-3071")
    done = put_upload(client, location, digest_of(DATA))
    assert done.status_code == 201
    assert body_of(client.get(done["Location"])) == DATA


def test_a_saved_hash_of_another_byte_count_is_not_trusted_and_the_bytes_are_hashed_again(
        client, location, monkeypatch) -> None:
    patch(client, location, DATA[:1000], "0-999")
    # A state that is a real hash, of the first 500 bytes, kept with a session at 1000: resumed, it
    # would give the digest of 500 + 2072 bytes and refuse a good upload.
    stale = hashing.new("sha256")
    stale.update(DATA[:500])
    Upload.objects.filter(id=location.rsplit("/", 1)[1]).update(hash_state=stale.state())
    rehashed: list[str] = []
    rehash = uploads._rehash

    def spy(upload_id: str, algorithm: str, drv: object) -> str:
        rehashed.append(upload_id)
        return rehash(upload_id, algorithm, drv)  # type: ignore[arg-type]

    monkeypatch.setattr(uploads, "_rehash", spy)
    patch(client, location, DATA[1000:], "1000-3071")
    done = put_upload(client, location, digest_of(DATA))
    assert done.status_code == 201, done.content
    assert rehashed == [location.rsplit("/", 1)[1]]
    assert body_of(client.get(done["Location"])) == DATA


def test_it_asks_a_put_to_retry_while_a_chunk_is_still_being_written(client, location) -> None:
    patch(client, location, DATA[:1000], "0-999")
    upload_id = location.rsplit("/", 1)[1]
    now = timezone.now()  # another request, in a live process (this one), holds the session's lease
    holder = uploads._owner()
    assert queries.acquire_session(upload_id, "team/app", holder, now, now + timedelta(minutes=2),
                                   now - timedelta(hours=1)) is not None
    response = put_upload(client, location, digest_of(DATA[:1000]))
    # Not 416: the other request may be this PUT's own first attempt, its answer lost in a failover.
    assert response.status_code == 503 and response["Retry-After"] == "1"
    queries.release_session(upload_id, holder)
    done = put_upload(client, location, digest_of(DATA[:1000]))
    assert done.status_code == 201
    assert body_of(client.get(done["Location"])) == DATA[:1000]
