"""The storage driver conformance suite and the S3 driver's own tests, against a real S3 server (Ceph
RGW, started by tests/support/rgw.py): it checks signatures, enforces the 5 MiB part minimum and
serves UploadPartCopy and presigned Range GETs as S3 does, which an emulator may not."""
from __future__ import annotations

import os
import urllib.request

import pytest

from registry.storage.s3 import S3Driver
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


def test_rgw_refuses_a_wrong_secret(rgw: RGW) -> None:
    bad = rgw_driver(rgw.endpoint, rgw.access_key, rgw.secret_key)
    wrong = S3Driver(bad.bucket, endpoint=rgw.endpoint, access_key=rgw.access_key, secret_key="not-the-secret")
    with pytest.raises(Exception, match="SignatureDoesNotMatch|AccessDenied"):
        wrong.write("x", b"y")


# The suite's tests of the local drivers alone need no S3 server.
del test_a_local_driver_refuses_a_second_writer_on_the_same_file  # noqa: F821
del test_the_filesystem_driver_keeps_everything_under_its_root  # noqa: F821
