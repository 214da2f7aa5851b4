"""S3 drivers for tests: on moto (an in-process emulator, for fast unit tests) or on a real server."""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

from registry.storage.s3 import S3Driver

BUCKET = "registry-tests"
# What the registry is configured with by the s3 fixture: moto checks no signature, so the secret is
# only there to be looked for where it must never appear.
ACCESS_KEY = "testing"
SECRET_KEY = "s3-secret-that-must-never-show"


@contextmanager
def moto_driver(prefix: str = "reg", **options: object) -> Iterator[S3Driver]:
    """An S3Driver on a fresh moto bucket, with fake credentials that never leave the process."""
    from moto import mock_aws

    saved = {k: os.environ.pop(k, None) for k in ("AWS_CA_BUNDLE", "AWS_PROFILE")}
    try:
        with mock_aws():
            driver = S3Driver(BUCKET, prefix=prefix, region="us-east-1", access_key="testing",
                              secret_key="testing", **options)  # type: ignore[arg-type]
            driver.client.create_bucket(Bucket=BUCKET)
            yield driver
    finally:
        for key, value in saved.items():
            if value is not None:
                os.environ[key] = value


@pytest.fixture
def s3(settings: Any) -> Iterator[S3Driver]:
    """The registry on a moto bucket (``[storage] backend = "s3"``): its default driver."""
    from registry.storage import default_driver

    with moto_driver(prefix="reg"):
        settings.REGISTRY_STORAGE = {**settings.REGISTRY_STORAGE, "backend": "s3", "s3_bucket": BUCKET,
                                     "s3_prefix": "reg", "s3_access_key": ACCESS_KEY, "s3_secret_key": SECRET_KEY,
                                     "s3_endpoint": "", "redirect_endpoint": ""}
        default_driver.cache_clear()
        driver = default_driver()
        driver.client.create_bucket(Bucket=BUCKET)
        assert isinstance(driver, S3Driver)
        yield driver
        default_driver.cache_clear()


def rgw_driver(endpoint: str, access_key: str, secret_key: str, **options: object) -> S3Driver:
    """An S3Driver on a new bucket of a real S3 server."""
    bucket = f"registry-{uuid.uuid4().hex[:12]}"
    driver = S3Driver(bucket, prefix="reg", endpoint=endpoint, access_key=access_key, secret_key=secret_key,
                      **options)  # type: ignore[arg-type]
    driver.client.create_bucket(Bucket=bucket)
    return driver


def refuse(driver: S3Driver, operation: str, status: int, code: str | None = None) -> None:
    """Have the store answer every ``operation`` (``HeadBucket``, ``PutObject``...) of ``driver`` with
    ``status`` and an S3 error body of ``code``, or no body at all (as every answer to a HEAD)."""
    from botocore.awsrequest import AWSPreparedRequest, AWSResponse

    body = b"" if code is None else (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>' + code.encode() + b"</Code></Error>")

    def answer(request: AWSPreparedRequest, **_kwargs: object) -> AWSResponse:
        return AWSResponse(request.url, status, {}, _Raw(body))

    driver.client.meta.events.register(f"before-send.s3.{operation}", answer)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_kwargs: object) -> Iterator[bytes]:
        yield self._body
