"""An upstream that sends wrong bytes for a digest never gets them stored, nor served complete: the
last piece is held back until the digest matches, and a mismatch ends the response short (a
connection reset, ``Cut``: the server logs no traceback for it), or, for a blob of one piece,
checked before its response begins, is an OCI 502."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Iterator

import pytest

from registry.models import Blob, BlobLink, Manifest
from registry.proxy.blobs import PIECE, Cut
from tests.support.proxy_fixtures import fresh_upstream_state, proxy_entry  # noqa: F401
from tests.support.upstreams import OCI_MANIFEST, CorruptUpstream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def corrupt(settings) -> Iterator[CorruptUpstream]:
    server = CorruptUpstream(os.urandom(3 * PIECE + 12345)).start()
    settings.REGISTRY_PROXIES = [proxy_entry(prefix="bad", url=server.url)]
    yield server
    server.stop()


def received_before_failure(response) -> int:  # type: ignore[no-untyped-def]
    received = 0
    with pytest.raises(Cut, match="do not match"):
        for piece in response.streaming_content:
            received += len(piece)
    response.close()
    return received


def stored_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and "_locks" not in p.parts]


def test_a_corrupt_blob_is_cut_short_and_nothing_is_stored(client, corrupt, storage_root, caplog) -> None:
    manifest = client.get("/v2/bad/library/bad/manifests/latest", headers={"Accept": OCI_MANIFEST})
    assert manifest.status_code == 200  # the manifest itself is fine
    with caplog.at_level(logging.ERROR, logger="registry.proxy.blobs"):
        response = client.get(f"/v2/bad/library/bad/blobs/{corrupt.layer_digest}")
        assert response.status_code == 200 and int(response["Content-Length"]) == len(corrupt.layer)
        received = received_before_failure(response)
    assert received < len(corrupt.layer)
    assert received == 3 * PIECE  # everything but the last piece, which the mismatch withheld
    assert not Blob.objects.filter(digest=corrupt.layer_digest).exists()
    assert not BlobLink.objects.filter(blob__digest=corrupt.layer_digest).exists()
    assert not [p for p in stored_files(storage_root) if "blobs" in p.parts or "uploads" in p.parts]
    assert f"sent {len(corrupt.layer)} bytes for blob {corrupt.layer_digest}" in caplog.text


def test_every_later_pull_asks_again_and_fails_the_same_way(client, corrupt) -> None:
    for _attempt in range(2):
        response = client.get(f"/v2/bad/library/bad/blobs/{corrupt.layer_digest}")
        received_before_failure(response)
    assert corrupt.blob_gets == 2
    assert not Blob.objects.filter(digest=corrupt.layer_digest).exists()


def test_a_ranged_pull_of_a_corrupt_blob_gets_an_error_and_no_bytes(client, corrupt) -> None:
    response = client.get(f"/v2/bad/library/bad/blobs/{corrupt.layer_digest}", headers={"Range": "bytes=0-99"})
    assert response.status_code == 502
    error = json.loads(response.content)["errors"][0]
    assert error["code"] == "UNAVAILABLE" and "do not match" in error["message"]
    assert not Blob.objects.filter(digest=corrupt.layer_digest).exists()


def test_a_small_corrupt_blob_is_a_502_before_any_byte_is_sent(client, settings) -> None:
    # One piece: the whole of it arrives, and is checked, before the response begins.
    server = CorruptUpstream(os.urandom(PIECE // 2)).start()
    try:
        settings.REGISTRY_PROXIES = [proxy_entry(prefix="bad", url=server.url)]
        response = client.get(f"/v2/bad/library/bad/blobs/{server.layer_digest}")
        assert response.status_code == 502 and response["Content-Type"] == "application/json"
        assert int(response["Retry-After"]) > 0
        error = json.loads(response.content)["errors"][0]
        assert error["code"] == "UNAVAILABLE" and "do not match" in error["message"]
        assert not Blob.objects.filter(digest=server.layer_digest).exists()
    finally:
        server.stop()


def test_a_manifest_that_does_not_match_its_digest_is_refused(client, corrupt) -> None:
    corrupt.corrupt_manifest = True
    for reference in (corrupt.manifest_digest, "latest"):  # asked for, or claimed by the upstream
        response = client.get(f"/v2/bad/library/bad/manifests/{reference}", headers={"Accept": OCI_MANIFEST})
        assert response.status_code == 502, response.content
        assert "does not match its digest" in json.loads(response.content)["errors"][0]["message"]
    assert not Manifest.objects.filter(repository__name="bad/library/bad").exists()


def test_a_store_that_fills_up_midway_keeps_nothing(client, settings, monkeypatch, storage_root) -> None:
    from registry.storage import filesystem
    from registry.storage.driver import StorageFull

    server = CorruptUpstream(os.urandom(6 * PIECE)).start()
    try:
        settings.REGISTRY_PROXIES = [proxy_entry(prefix="bad", url=server.url)]
        written = {"bytes": 0}
        write = filesystem.FileWriter.write

        def filling(self, data: bytes) -> int:  # type: ignore[no-untyped-def]
            written["bytes"] += len(data)
            if written["bytes"] > 2 * PIECE:
                raise StorageFull("no space left on the storage device (injected)")
            return write(self, data)

        monkeypatch.setattr(filesystem.FileWriter, "write", filling)
        manifest = client.get("/v2/bad/library/bad/manifests/latest", headers={"Accept": OCI_MANIFEST})
        layer = json.loads(manifest.content)["layers"][0]["digest"]
        # The manifest says the good digest; the upstream's bytes are wrong anyway: what matters
        # here is that the write fails first, and the fetch stops there.
        response = client.get(f"/v2/bad/library/bad/blobs/{layer}")
        received = 0
        with pytest.raises(Cut, match="no space left"):
            for piece in response.streaming_content:
                received += len(piece)
        response.close()
        assert received < 6 * PIECE
        assert not Blob.objects.filter(digest=layer).exists()
        assert not [p for p in stored_files(storage_root) if "blobs" in p.parts or "uploads" in p.parts]
    finally:
        server.stop()
