"""GET /ready on S3 storage: the probe object written in the bucket (one fixed object, overwritten)
decides the storage check; a bucket gone or a store that does not answer fails it, and neither the answer nor
the log line shows a credential."""
from __future__ import annotations

import json
import logging

import pytest
from django.test import Client

from registry.storage import default_driver
from registry.storage.s3 import S3Driver
from regsite import config
from tests.support.s3 import ACCESS_KEY, BUCKET, SECRET_KEY, s3  # noqa: F401  (fixture)
from tests.support.server import free_port

pytestmark = pytest.mark.django_db


def _ready(client: Client) -> tuple[int, dict]:
    response = client.get("/ready")
    return response.status_code, json.loads(response.content)


def _shows_no_credential(*texts: str) -> None:
    for text in texts:
        assert SECRET_KEY not in text and ACCESS_KEY not in text


def test_it_is_ready_on_a_bucket_it_can_write_and_leaves_one_probe_there(client: Client, s3: S3Driver) -> None:
    for _ in range(3):
        assert _ready(client) == (200, {"status": "ready", "checks": {"database": "ok", "storage": "ok"}})
    listed = s3.client.list_objects_v2(Bucket=BUCKET)["Contents"]
    assert [item["Key"] for item in listed] == ["reg/uploads/.probe-ready"]  # overwritten, not piled up


def test_it_fails_storage_when_the_bucket_is_gone(client: Client, s3: S3Driver, caplog) -> None:
    assert _ready(client)[0] == 200
    s3.client.delete_object(Bucket=BUCKET, Key="reg/uploads/.probe-ready")
    s3.client.delete_bucket(Bucket=BUCKET)
    with caplog.at_level(logging.WARNING, logger="ops.readiness"):
        status, body = _ready(client)
    assert status == 503 and body["failing"] == ["storage"], body
    assert body["checks"] == {"database": "ok", "storage": "uploads/ in the bucket is not writable"}
    logged = [r.getMessage() for r in caplog.records if r.name == "ops.readiness"]
    assert any(f"bucket {BUCKET}" in line and "NoSuchBucket" in line for line in logged), logged
    _shows_no_credential(json.dumps(body), *logged)
    s3.client.create_bucket(Bucket=BUCKET)
    assert _ready(client)[0] == 200  # back as soon as the bucket is


def test_it_fails_storage_when_the_store_does_not_answer(client: Client, s3: S3Driver, settings, monkeypatch,
                                                         caplog) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    settings.REGISTRY_STORAGE = {**settings.REGISTRY_STORAGE, "s3_endpoint": endpoint}
    # The driver [storage] describes, but for its retries (8 attempts with backoff: 7.6 s here), which
    # change when the answer comes, not what it is.
    monkeypatch.setattr(config, "s3_driver", lambda storage: S3Driver(
        storage["s3_bucket"], prefix=storage["s3_prefix"], endpoint=storage["s3_endpoint"],
        access_key=storage["s3_access_key"], secret_key=storage["s3_secret_key"], max_attempts=1))
    default_driver.cache_clear()
    with caplog.at_level(logging.WARNING, logger="ops.readiness"):
        status, body = _ready(client)
    assert status == 503 and body["failing"] == ["storage"], body
    assert body["checks"]["storage"] == "uploads/ in the bucket is not writable"
    logged = [r.getMessage() for r in caplog.records if r.name == "ops.readiness"]
    assert any("Could not connect" in line for line in logged), logged
    _shows_no_credential(json.dumps(body), *logged)

