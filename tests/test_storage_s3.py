"""What the S3 driver does beyond the shared conformance suite: parts of at least 5 MiB, tails, reading
nothing back when requests carry whole parts, server-side moves, retries on throttling, batches."""
from __future__ import annotations

import hashlib
import json
import os
import time
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from registry.storage import s3
from registry.storage.driver import PathNotFound, StorageError
from tests.support.faultproxy import RESET, STALL, FaultProxy
from tests.support.s3 import BUCKET, moto_driver, refuse
from tests.support.server import free_port

MiB = 1024 * 1024


def _upload(driver: s3.S3Driver, path: str, requests: list[bytes]) -> dict[str, Any]:
    """Each item is one request's body, written by a new writer resumed from the last state."""
    state: dict[str, Any] = {}
    for body in requests:
        writer = driver.writer(path, append=True, state=state)
        for start in range(0, len(body), MiB):
            writer.write(body[start:start + MiB])
        writer.commit()
        state = writer.state
    return state


def test_it_reads_nothing_back_when_every_request_carries_a_whole_part() -> None:
    with moto_driver() as driver:
        data = os.urandom(3 * 6 * MiB)
        state = _upload(driver, "uploads/a/data", [data[:6 * MiB], data[6 * MiB:12 * MiB], data[12 * MiB:]])
        assert [part[2] for part in state["parts"]] == [6 * MiB, 6 * MiB, 6 * MiB] and state["tail"] == 0
        driver.writer("uploads/a/data", append=True, state=state).seal()
        assert driver.counters.gets == 0
        assert hashlib.sha256(driver.read("uploads/a/data")).digest() == hashlib.sha256(data).digest()


def test_it_keeps_a_short_request_as_a_tail_and_seals_it_as_the_last_part_server_side() -> None:
    with moto_driver() as driver:
        data = os.urandom(11 * MiB)
        state = _upload(driver, "uploads/b/data", [data[:9 * MiB], data[9 * MiB:]])
        # 9 MiB: one part of 8 MiB (part_size) and 1 MiB left: a tail; then 2 MiB more: read the tail
        # back (the only read), 3 MiB is still under a part: a new tail.
        assert [part[2] for part in state["parts"]] == [8 * MiB] and state["tail"] == 3 * MiB
        assert (driver.counters.gets, driver.counters.bytes_read) == (1, MiB)
        driver.writer("uploads/b/data", append=True, state=state).seal()
        assert driver.counters.gets == 1  # the last tail became the last part by UploadPartCopy
        assert driver.read("uploads/b/data") == data


def test_another_driver_on_the_same_bucket_resumes_an_upload() -> None:
    with moto_driver() as first:
        second = s3.S3Driver(BUCKET, prefix="reg", access_key="testing", secret_key="testing")
        data = os.urandom(12 * MiB)
        state = _upload(first, "uploads/c/data", [data[:6 * MiB]])
        writer = second.writer("uploads/c/data", append=True, state=state)
        writer.write(data[6 * MiB:])
        writer.seal()
        assert first.read("uploads/c/data") == data


def test_a_cancelled_request_leaves_the_previous_tail_in_place() -> None:
    with moto_driver() as driver:
        state = _upload(driver, "uploads/d/data", [b"x" * MiB])
        failed = driver.writer("uploads/d/data", append=True, state=state)
        failed.write(b"y" * (9 * MiB))  # absorbs the tail and uploads a part
        failed.cancel()
        writer = driver.writer("uploads/d/data", append=True, state=state)
        assert writer.size == MiB
        writer.write(b"z")
        writer.seal()
        assert driver.read("uploads/d/data") == b"x" * MiB + b"z"


def test_it_aborts_an_upload_with_its_parts_and_tails() -> None:
    with moto_driver() as driver:
        state = _upload(driver, "uploads/e/data", [os.urandom(6 * MiB), b"tail"])
        driver.abort("uploads/e/data", state)
        uploads = driver.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        assert uploads == [] and list(driver.walk("uploads")) == []


def test_it_aborts_multipart_uploads_no_session_knows() -> None:
    with moto_driver() as driver:
        kept = _upload(driver, "uploads/f/data", [os.urandom(6 * MiB)])
        _upload(driver, "uploads/g/data", [os.urandom(6 * MiB)])
        assert driver.abort_stale_uploads("uploads", keep={kept["upload_id"]}) == 1
        left = driver.client.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
        assert [u["UploadId"] for u in left] == [kept["upload_id"]]


def test_it_moves_a_large_object_by_multipart_copy(monkeypatch) -> None:
    monkeypatch.setattr(s3, "MAX_COPY", 6 * MiB)
    monkeypatch.setattr(s3, "COPY_PART", 5 * MiB)
    with moto_driver() as driver:
        data = os.urandom(11 * MiB + 7)
        driver.write("uploads/h/data", data)
        driver.move("uploads/h/data", "blobs/h/data")
        assert driver.counters.gets == 0  # copied inside the store, not through the registry
        assert driver.read("blobs/h/data") == data
        with pytest.raises(PathNotFound):
            driver.stat("uploads/h/data")


def test_it_retries_throttled_requests_with_backoff(monkeypatch) -> None:
    with moto_driver() as driver:
        attempts: list[str] = []

        def slow_down(request: Any, **_kwargs: Any) -> AWSResponse | None:
            attempts.append(request.method)
            if len(attempts) <= 2:
                body = (b"<?xml version='1.0'?><Error><Code>SlowDown</Code>"
                        b"<Message>Please reduce your request rate.</Message></Error>")
                return AWSResponse(request.url, 503, {}, _Raw(body))
            return None

        driver.client.meta.events.register("before-send.s3.PutObject", slow_down)
        driver.write("throttled", b"data")
        assert len(attempts) == 3 and driver.read("throttled") == b"data"


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs: Any) -> Any:
        yield self._body


def test_it_deletes_and_lists_more_than_one_page_of_objects() -> None:
    with moto_driver() as driver:
        for n in range(1005):
            driver.write(f"many/{n:04d}", b".")
        assert len(driver.list("many")) == 1005
        assert sum(1 for _ in driver.walk("many")) == 1005
        driver.delete("many")
        with pytest.raises(PathNotFound):
            driver.list("many")


def test_it_presigns_blob_urls_on_the_public_endpoint() -> None:
    with moto_driver(redirect_endpoint="https://blobs.example.internal") as driver:
        url = driver.url_for("blobs/x/data", expires_in=60)
        assert url.startswith(f"https://blobs.example.internal/{BUCKET}/reg/blobs/x/data?")
        assert "X-Amz-Signature=" in url and "X-Amz-Expires=60" in url


def test_it_names_the_bucket_when_it_is_missing_or_not_writable() -> None:
    with moto_driver() as driver:
        driver.check("_probe/abcdef0123")
        assert list(driver.walk("_probe")) == []
        missing = s3.S3Driver("no-such-bucket", access_key="testing", secret_key="testing")
        with pytest.raises(s3.CheckFailed, match="bucket 'no-such-bucket' does not exist") as caught:
            missing.check("_probe/abcdef0123")
        assert caught.value.setting == "bucket"
        # The bucket answers HEAD and lists, but a policy refuses writes: moto enforces it with a 403.
        driver.client.put_bucket_policy(Bucket=BUCKET, Policy=json.dumps({"Version": "2012-10-17", "Statement": [
            {"Effect": "Deny", "Principal": "*", "Action": "s3:PutObject", "Resource": f"arn:aws:s3:::{BUCKET}/*"}]}))
        with pytest.raises(s3.CheckFailed, match=f"bucket '{BUCKET}' is not writable") as caught:
            driver.check("_probe/abcdef0123")
        assert caught.value.setting == "bucket"


def test_it_names_a_bucket_that_takes_writes_but_not_reads_or_deletes() -> None:
    with moto_driver() as driver:
        refuse(driver, "GetObject", 403, "AccessDenied")
        with pytest.raises(s3.CheckFailed, match=r"is not readable \(AccessDenied\)"):
            driver.check("_probe/abcdef0123")
    with moto_driver() as driver:
        refuse(driver, "DeleteObject", 403, "AccessDenied")
        with pytest.raises(s3.CheckFailed, match=r"refuses deletes \(AccessDenied\)"):
            driver.check("_probe/abcdef0123")


@pytest.mark.parametrize("code, setting", [
    ("InvalidAccessKeyId", "access_key"),
    ("SignatureDoesNotMatch", "secret_key"),
    ("ExpiredToken", "access_key"),
    ("AccessDenied", "bucket"),  # good credentials, someone else's bucket
])
def test_it_names_the_credential_the_store_refuses(code: str, setting: str) -> None:
    # As Ceph RGW answers (tests/e2e/test_storage_rgw.py): a bare 403 to HEAD, the reason in the body
    # of any other answer.
    with moto_driver() as driver:
        refuse(driver, "HeadBucket", 403)
        refuse(driver, "ListObjectsV2", 403, code)
        with pytest.raises(s3.CheckFailed) as caught:
            driver.check("_probe/abcdef0123")
        assert caught.value.setting == setting and f"({code})" in str(caught.value)


def test_it_names_the_credentials_when_a_write_is_refused_for_them() -> None:
    with moto_driver() as driver:
        refuse(driver, "PutObject", 403, "SignatureDoesNotMatch")
        with pytest.raises(s3.CheckFailed, match="SignatureDoesNotMatch") as caught:
            driver.check("_probe/abcdef0123")
        assert caught.value.setting == "secret_key"


def test_it_says_when_there_are_no_credentials_at_all(monkeypatch, tmp_path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    driver = s3.S3Driver("bucket", endpoint=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(s3.CheckFailed, match="no credentials") as caught:
        driver.check("_probe/abcdef0123")
    assert caught.value.setting == "access_key"


def test_it_names_the_endpoint_when_nothing_answers_there() -> None:
    driver = s3.S3Driver("bucket", endpoint=f"http://127.0.0.1:{free_port()}", access_key="testing",
                         secret_key="testing", max_attempts=1)
    with pytest.raises(s3.CheckFailed, match="S3 endpoint not reachable") as caught:
        driver.check("_probe/abcdef0123")
    assert caught.value.setting == "endpoint"


def test_a_bucket_that_is_gone_is_a_failure_of_the_store_never_a_missing_path() -> None:
    with moto_driver():
        gone = s3.S3Driver("no-such-bucket", access_key="testing", secret_key="testing")
        for call in (lambda: gone.stat("blobs/x/data"), lambda: gone.read("blobs/x/data"), lambda: gone.list("blobs"),
                     lambda: list(gone.walk("blobs")), lambda: gone.open("blobs/x/data").read(),
                     lambda: gone.write("blobs/x/data", b"."), lambda: gone.delete("blobs/x")):
            with pytest.raises(StorageError, match="NoSuchBucket") as caught:
                call()
            assert not isinstance(caught.value, PathNotFound)


@pytest.mark.parametrize("mode", [STALL, RESET])
def test_a_store_that_stalls_or_resets_fails_a_request_within_its_deadline(mode: str) -> None:
    proxy = FaultProxy(("127.0.0.1", free_port())).start()  # leads nowhere: never joined in these modes
    proxy.set(mode)
    try:
        driver = s3.S3Driver("bucket", endpoint=f"http://{proxy.host}", access_key="testing",
                             secret_key="testing", timeout=1, max_attempts=2)
        started = time.monotonic()
        with pytest.raises(StorageError):
            driver.read("blobs/x/data")
        # Two attempts of a second each and botocore's backoff between (a second at most here); before,
        # a stalled store held the request for 9 attempts of 120 s.
        assert time.monotonic() - started < 2 * 1 + 1 + 2  # and slack for a loaded machine
        assert proxy.accepted == 2
    finally:
        proxy.stop()


def test_copies_wait_longer_than_other_requests() -> None:
    driver = s3.S3Driver("bucket", endpoint="http://127.0.0.1:9", timeout=7, copy_timeout=600, max_attempts=4)
    assert (driver.client.meta.config.read_timeout, driver.client.meta.config.connect_timeout) == (7, 7)
    assert driver.copier.meta.config.read_timeout == 600
    assert driver.client.meta.config.retries["total_max_attempts"] == 4
