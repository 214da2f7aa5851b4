"""The storage driver conformance suite and the S3 driver's own tests, against a real S3 server (Ceph
RGW, started by tests/support/rgw.py): it checks signatures, enforces the 5 MiB part minimum and
serves UploadPartCopy and presigned Range GETs as S3 does, which an emulator may not."""
from __future__ import annotations

import os
import urllib.error
import urllib.request
import uuid

import pytest

from registry.storage.s3 import S3Driver
from regsite import config
from tests.support.rgw import RGW
from tests.support.s3 import rgw_driver
from tests.test_storage_drivers import *  # noqa: F401,F403 - the suite, run here on RGW

MiB = 1024 * 1024


@pytest.fixture
def driver(rgw: RGW) -> S3Driver:  # replaces the suite's parametrized fixture
    return rgw_driver(rgw.endpoint, rgw.access_key, rgw.secret_key)


def test_rgw_refuses_parts_under_5_mib_and_the_driver_never_sends_them(driver: S3Driver) -> None:
    data = os.urandom(13 * MiB)
    state: dict[str, object] = {}
    for body in (data[:MiB], data[MiB:7 * MiB], data[7 * MiB:7 * MiB + 100], data[7 * MiB + 100:]):
        writer = driver.writer("uploads/x/data", append=True, state=state)
        writer.write(body)
        writer.commit()
        state = writer.state
    driver.writer("uploads/x/data", append=True, state=state).seal()
    assert driver.read("uploads/x/data") == data
    with pytest.raises(Exception, match="EntityTooSmall"):
        upload = driver.client.create_multipart_upload(Bucket=driver.bucket, Key="reg/small")
        parts = [driver.client.upload_part(Bucket=driver.bucket, Key="reg/small", UploadId=upload["UploadId"],
                                           PartNumber=n, Body=b"x" * 100) for n in (1, 2)]
        driver.client.complete_multipart_upload(
            Bucket=driver.bucket, Key="reg/small", UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"PartNumber": n + 1, "ETag": p["ETag"]} for n, p in enumerate(parts)]})


def test_a_presigned_url_serves_ranges(driver: S3Driver) -> None:
    driver.write("blobs/y/data", b"0123456789")
    request = urllib.request.Request(driver.url_for("blobs/y/data"), headers={"Range": "bytes=3-5"})
    with urllib.request.urlopen(request) as response:
        assert (response.status, response.read()) == (206, b"345")
    # What a client sent there by a redirect gets for a range past the end (the registry lets it by).
    past = urllib.request.Request(driver.url_for("blobs/y/data"), headers={"Range": "bytes=10-"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(past)
    assert refused.value.code == 416


def test_rgw_refuses_a_wrong_secret(rgw: RGW) -> None:
    bad = rgw_driver(rgw.endpoint, rgw.access_key, rgw.secret_key)
    wrong = S3Driver(bad.bucket, endpoint=rgw.endpoint, access_key=rgw.access_key, secret_key="not-the-secret")
    with pytest.raises(Exception, match="SignatureDoesNotMatch|AccessDenied"):
        wrong.write("x", b"y")


@pytest.fixture(scope="module")
def reader(rgw: RGW) -> tuple[str, str, str]:
    """Another user of the store: its uid and keys."""
    uid = f"reader{uuid.uuid4().hex[:8]}"
    return (uid, *rgw.add_user(uid))


def _start_line(rgw: RGW, bucket: str, access_key: str, secret_key: str, monkeypatch, tmp_path) -> str:
    """What a server start says of the bucket: the configuration error, or "" when it starts."""
    monkeypatch.chdir(tmp_path)
    cfg = config.load({"SVC_STORAGE_BACKEND": "s3", "SVC_STORAGE_S3_ENDPOINT": rgw.endpoint,
                       "SVC_STORAGE_S3_BUCKET": bucket, "SVC_STORAGE_S3_ACCESS_KEY": access_key,
                       "SVC_STORAGE_S3_SECRET_KEY": secret_key, "SVC_SECRET_KEY": "shared"})
    try:
        config.check_bucket(cfg)
    except config.ConfigError as exc:
        return str(exc)
    return ""


def test_the_start_check_names_the_key_rgw_refuses(rgw: RGW, driver: S3Driver, reader, monkeypatch,
                                                    tmp_path) -> None:
    def line(access_key: str, secret_key: str, bucket: str = driver.bucket) -> str:
        said = _start_line(rgw, bucket, access_key, secret_key, monkeypatch, tmp_path)
        assert secret_key not in said and "\n" not in said
        return said

    assert line(rgw.access_key, rgw.secret_key) == ""
    # RGW answers HEAD with a bare 403 for all of these: the reason comes from a listing.
    assert line(rgw.access_key, "not-the-secret") == (
        "[storage] s3_secret_key: the store refuses the signature (SignatureDoesNotMatch): "
        "this is not the secret of the access key")
    assert line("NOSUCHACCESSKEY", rgw.secret_key) == (
        "[storage] s3_access_key: the store knows no such access key (InvalidAccessKeyId)")
    assert line(*reader[1:]) == f"[storage] s3_bucket: bucket '{driver.bucket}' refuses access (AccessDenied)"
    # Allowed to read the bucket, not to write to it.
    driver.client.put_bucket_acl(Bucket=driver.bucket, GrantRead=f"id={reader[0]}",
                                 GrantFullControl="id=registry")
    assert line(*reader[1:]) == f"[storage] s3_bucket: bucket '{driver.bucket}' is not writable (AccessDenied)"
    assert line(rgw.access_key, rgw.secret_key, "no-such-bucket-here") == (
        "[storage] s3_bucket: bucket 'no-such-bucket-here' does not exist")


# The suite's tests of the local drivers alone need no S3 server.
del test_a_local_driver_refuses_a_second_writer_on_the_same_file  # noqa: F821
del test_the_filesystem_driver_keeps_everything_under_its_root  # noqa: F821
