"""An upload request that loses the database under it (a failover): a 503, and the session is not left
leased to the request that failed: the client's retry goes on from where the session was, instead
of 416 "another chunk of this upload is in progress" until the lease ran out (60 s)."""
from __future__ import annotations

import time
from typing import Iterator

import pytest
from django.db import OperationalError

from registry import queries
from registry.services import lease_release
from tests.support.registry_client import digest_of, patch, put_upload, start_upload

pytestmark = pytest.mark.django_db(transaction=True)  # the lease is given back by another thread


@pytest.fixture(autouse=True)
def _retry_thread_stopped() -> Iterator[None]:
    """A test ends once the retry thread has stopped: it opens a database connection of its own,
    and PostgreSQL refuses to drop a test database someone is connected to (a clean-clone run
    warned so when the thread was still between its last release and closing its connection)."""
    yield
    deadline = time.monotonic() + 10
    while lease_release._thread is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease_release._thread is None


def _fail_once(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = getattr(queries, name)
    calls: list[int] = []

    def flaky(*args: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args)

    monkeypatch.setattr(queries, name, flaky)


def test_a_chunk_that_loses_the_database_leaves_the_session_to_the_retry(client, monkeypatch) -> None:
    monkeypatch.setattr(lease_release, "RETRY_SECONDS", 0.1)
    location = start_upload(client, "team/app")["Location"]
    location = patch(client, location, b"a" * 10, "0-9")["Location"]
    _fail_once(monkeypatch, "save_session")  # the chunk's progress is not recorded...
    _fail_once(monkeypatch, "release_session")  # ...nor its lease given back
    lost = patch(client, location, b"b" * 10, "10-19")
    assert lost.status_code == 503 and lost["Retry-After"]
    deadline = time.monotonic() + 10
    while lease_release.pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    # Where the upload is: on a filesystem the file is the truth (the chunk is there), on an object
    # store the row (it is not): the client goes on from there either way.
    where = client.get(location)
    assert where.status_code == 204 and where["Range"] in ("0-9", "0-19"), where.content
    if where["Range"] == "0-9":
        retried = patch(client, location, b"b" * 10, "10-19")
        assert retried.status_code == 202, retried.content
    done = put_upload(client, location, digest_of(b"a" * 10 + b"b" * 10))
    assert done.status_code == 201, done.content


def test_the_same_process_takes_over_a_lease_it_could_not_give_back(client, monkeypatch) -> None:
    location = start_upload(client, "team/app")["Location"]
    location = patch(client, location, b"a" * 10, "0-9")["Location"]
    _fail_once(monkeypatch, "save_session")
    release = queries.release_session

    def away(upload_id: str, owner: str) -> None:  # the database stays away for the release thread
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(queries, "release_session", away)
    assert patch(client, location, b"b" * 10, "10-19").status_code == 503
    assert lease_release.pending() == 1  # and stays so until the end: the retry must take it over
    where = client.get(location)["Range"]
    if where == "0-9":
        assert patch(client, location, b"b" * 10, "10-19").status_code == 202
    done = put_upload(client, location, digest_of(b"a" * 10 + b"b" * 10))
    assert done.status_code == 201, done.content
    monkeypatch.setattr(queries, "release_session", release)
    deadline = time.monotonic() + 10
    while lease_release.pending() and time.monotonic() < deadline:  # a no-op now: the lease changed hands
        time.sleep(0.05)
    assert lease_release.pending() == 0


def test_a_closing_put_finding_the_session_busy_is_told_to_retry(client) -> None:
    """A closing PUT sent again while the lease of its first attempt is still being given back (by
    another process, once the database answers): 503 with Retry-After, which clients retry, where a
    416 made them start the upload over. A chunk racing another chunk is still refused with 416."""
    from datetime import timedelta

    from django.utils import timezone

    location = start_upload(client, "team/app")["Location"]
    location = patch(client, location, b"a" * 10, "0-9")["Location"]
    upload_id = location.rstrip("/").rsplit("/", 1)[-1].split("?")[0]
    now = timezone.now()
    assert queries.acquire_session(upload_id, "team/app", "a-request-elsewhere", now, now + timedelta(seconds=60),
                                   now - timedelta(hours=1)) is not None
    busy = put_upload(client, location, digest_of(b"a" * 10))
    assert busy.status_code == 503 and busy["Retry-After"] == "1", busy.content
    assert busy.json()["errors"][0]["code"] == "UNAVAILABLE"
    assert patch(client, location, b"b", "10-10").status_code == 416
    queries.release_session(upload_id, "a-request-elsewhere")
    assert put_upload(client, location, digest_of(b"a" * 10)).status_code == 201
