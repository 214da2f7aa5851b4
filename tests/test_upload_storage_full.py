"""A full storage device: the driver's StorageFull reaches the client as 507 BLOB_UPLOAD_INVALID, and
the session keeps none of the bytes that did not fit. (tests/faults/test_disk_full.py does this on a
really full filesystem; this runs in every unit run.)"""
from __future__ import annotations

import json
from typing import Any

import pytest

from registry.models import Upload
from registry.services import uploads
from registry.storage.driver import StorageFull
from registry.storage.memory import MemoryDriver, MemoryWriter
from tests.support.registry_client import digest_of, patch, post_upload, start_upload

pytestmark = pytest.mark.django_db

DATA = b"does not fit " * 100


class FullWriter(MemoryWriter):
    def write(self, data: bytes) -> int:
        super().write(data[: len(data) // 2])  # part of it lands, as on a real device
        raise StorageFull("no space left on the storage device writing uploads/...")


class FullDriver(MemoryDriver):
    def writer(self, path: str, append: bool = False, state: dict[str, Any] | None = None) -> MemoryWriter:
        return FullWriter(self, path, append)


@pytest.fixture
def full(monkeypatch) -> FullDriver:  # type: ignore[no-untyped-def]
    driver = FullDriver()
    monkeypatch.setattr(uploads, "default_driver", lambda: driver)
    return driver


def _assert_507(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 507
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "BLOB_UPLOAD_INVALID" and "no space left" in error["message"]


def test_it_answers_507_to_a_monolithic_push_and_keeps_nothing(client, full) -> None:
    _assert_507(post_upload(client, "team/app", f"?digest={digest_of(DATA)}", DATA))
    assert not Upload.objects.exists()
    assert list(full.walk("uploads")) == []


def test_it_answers_507_to_a_chunk_and_cuts_the_session_back(client, full) -> None:
    location = start_upload(client, "team/app")["Location"]
    _assert_507(patch(client, location, DATA, f"0-{len(DATA) - 1}"))
    status = client.get(location)
    assert status.status_code == 204 and status["Range"] == "0-0"
    assert [info.size for info in full.walk("uploads")] == [0]
