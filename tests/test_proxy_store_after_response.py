"""A cold blob's response ends once the client has every verified byte; storing it (the queued writes,
the fsync, its row) finishes after, in the spool's thread. Meanwhile the fetch's lease still holds:
other pulls wait for the stored copy instead of fetching again. A store that fails then leaves
nothing behind, and the next pull fetches again."""
from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client

from registry.models import Blob, BlobLink, Lease
from registry.proxy import blobs as proxy_blobs
from registry.proxy import spool
from registry.storage import filesystem
from registry.storage.driver import StorageFull
from tests.support.proxy_fixtures import fresh_upstream_state, mirror, start_upstream, stored, upstream  # noqa: F401
from tests.support.registry_client import body_of
from tests.support.upstreams import push_blob

pytestmark = pytest.mark.django_db(transaction=True)


def files_under(root: Path, part: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and part in p.parts]


def test_the_response_ends_before_the_store_and_a_pull_meanwhile_waits_for_it(
        client, upstream, mirror, storage_root, monkeypatch) -> None:
    mirror()
    data = os.urandom(3 * proxy_blobs.PIECE + 99)
    layer = push_blob(upstream.url, "library/slow", data)
    release = threading.Event()
    seal = filesystem.FileWriter.seal

    def slow_seal(self) -> None:  # type: ignore[no-untyped-def]
        assert release.wait(30)
        seal(self)

    monkeypatch.setattr(filesystem.FileWriter, "seal", slow_seal)
    path = f"/v2/hub/library/slow/blobs/{layer}"
    assert body_of(client.get(path)) == data  # while the fsync has not happened
    assert not Blob.objects.filter(digest=layer).exists()
    assert Lease.objects.filter(name__startswith="proxy-").exists()

    second: list[bytes] = []

    def pull_meanwhile() -> None:
        try:
            second.append(body_of(Client().get(path)))
        finally:
            connection.close()

    waiting = threading.Thread(target=pull_meanwhile)
    waiting.start()
    waiting.join(0.5)
    assert waiting.is_alive()  # waiting for the stored copy, not fetching a second one
    release.set()
    waiting.join(30)
    assert second == [data]
    stored()
    assert BlobLink.objects.filter(repository__name="hub/library/slow", blob__digest=layer).exists()
    assert upstream.served("GET", f"/v2/library/slow/blobs/{layer}") == 1
    assert not files_under(storage_root, "uploads")
    assert not Lease.objects.filter(name__startswith="proxy-").exists()


def test_a_store_failing_after_the_client_had_every_byte_keeps_nothing(
        client, upstream, mirror, storage_root, monkeypatch, caplog) -> None:
    mirror()
    data = os.urandom(2 * proxy_blobs.PIECE + 5)
    layer = push_blob(upstream.url, "library/full", data)

    def failing_seal(self) -> None:  # type: ignore[no-untyped-def]
        raise StorageFull("no space left on the storage device (injected)")

    path = f"/v2/hub/library/full/blobs/{layer}"
    with monkeypatch.context() as patched, caplog.at_level(logging.WARNING, logger="registry.proxy.blobs"):
        patched.setattr(filesystem.FileWriter, "seal", failing_seal)
        assert body_of(client.get(path)) == data  # verified bytes: the client has its blob
        stored()
    assert f"blob {layer} was not stored: no space left" in caplog.text
    assert not Blob.objects.filter(digest=layer).exists()
    assert not files_under(storage_root, "uploads") and not files_under(storage_root, "blobs")
    assert not Lease.objects.filter(name__startswith="proxy-").exists()
    assert body_of(client.get(path)) == data  # fetched again, and stored this time
    stored()
    assert Blob.objects.filter(digest=layer).exists()
    assert upstream.served("GET", f"/v2/library/full/blobs/{layer}") == 2


class StuckWriter:
    """A storage writer that takes no piece until let go."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.pieces: list[bytes] = []

    def write(self, piece: bytes) -> int:
        assert self.go.wait(30)
        self.pieces.append(piece)
        return len(piece)


def test_a_store_slower_than_the_upstream_holds_the_fetch_to_its_pace() -> None:
    writer = StuckWriter()
    fed = spool.Spool(writer)  # type: ignore[arg-type]
    queued = threading.Event()

    def feed() -> None:
        for n in range(spool.QUEUE + 3):
            fed.write(b"%d" % n)
        queued.set()

    feeder = threading.Thread(target=feed)
    feeder.start()
    # One piece in the writer's hands, QUEUE waiting: the next write waits for room.
    assert not queued.wait(0.5)
    writer.go.set()
    assert queued.wait(30)
    done: list[BaseException | None] = []
    fed.close(done.append)  # returns at once; the spool's thread reports once all is written
    feeder.join()
    fed.stop()
    assert writer.pieces == [b"%d" % n for n in range(spool.QUEUE + 3)] and done == [None]
