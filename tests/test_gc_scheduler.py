"""The in-service schedule: one collection per interval, whichever worker polls first."""
from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from registry import scheduler
from registry.models import Manifest
from registry.storage import paths
from tests.support.lifecycle import age_everything, has_data, push_blob, push_image

pytestmark = pytest.mark.django_db

HOUR = 3600.0


@pytest.fixture(autouse=True)
def every_two_hours(settings) -> None:  # type: ignore[no-untyped-def]
    settings.REGISTRY_GC_INTERVAL_HOURS = 2
    settings.REGISTRY_GC_GRACE_HOURS = 24


def test_it_waits_one_interval_after_the_first_start(storage_root) -> None:  # type: ignore[no-untyped-def]
    now = time.time()
    assert scheduler.run_if_due(now) is None
    assert float((storage_root / paths.GC_SCHEDULE).read_text()) == pytest.approx(now, abs=0.01)
    assert scheduler.run_if_due(now + 1.9 * HOUR) is None


def test_it_collects_once_an_interval_has_passed_and_then_waits_again() -> None:
    unused = push_blob("team/app", b"unused" * 10)
    age_everything()
    now = time.time()
    scheduler.run_if_due(now)

    result = scheduler.run_if_due(now + 2 * HOUR)

    assert result is not None and result.blobs == 1
    assert not has_data(unused)
    assert scheduler.run_if_due(now + 3 * HOUR) is None
    assert scheduler.run_if_due(now + 4 * HOUR) is not None


def test_it_never_deletes_untagged_manifests_on_its_own() -> None:
    push_image("team/app", None, [b"layer" * 10])
    age_everything()
    now = time.time()
    scheduler.run_if_due(now)

    result = scheduler.run_if_due(now + 2 * HOUR)

    assert result is not None and result.manifests == 0
    assert Manifest.objects.count() == 1


def test_it_skips_a_poll_while_another_collection_runs() -> None:
    now = time.time()
    scheduler.run_if_due(now)
    with scheduler.exclusive():
        assert scheduler.run_if_due(now + 2 * HOUR) is None
    assert scheduler.run_if_due(now + 2 * HOUR) is not None


def test_it_runs_once_when_many_workers_poll_together() -> None:
    now = time.time()
    scheduler.run_if_due(now)
    barrier = threading.Barrier(8)
    results: list[object] = []

    def poll() -> None:
        try:
            barrier.wait()
            results.append(scheduler.run_if_due(now + 2 * HOUR))
        finally:
            connection.close()

    threads = [threading.Thread(target=poll) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sum(result is not None for result in results) == 1


def test_it_starts_no_thread_when_the_interval_is_zero(settings) -> None:  # type: ignore[no-untyped-def]
    settings.REGISTRY_GC_INTERVAL_HOURS = 0
    assert scheduler.start() is None
    assert scheduler.run_if_due() is None


@pytest.mark.django_db(transaction=True)  # the lease's renewing thread has a connection of its own
def test_a_collection_stops_at_its_next_step_once_its_lease_is_lost(monkeypatch) -> None:
    """On object storage: the database away for longer than the lease (a failover) lets another
    replica take the collector's lock; this run must not go on beside that one's."""
    from django.db import OperationalError

    from registry import queries
    from registry.locks import DatabaseLocks
    from registry.services import gc

    monkeypatch.setattr(scheduler, "default_locks", lambda: DatabaseLocks(lease_seconds=0.6))
    now = time.time()
    assert scheduler.run_if_due(now) is None  # the first start: a run is due an interval later
    steps: list[str] = []

    def collect(options: gc.Options, report) -> gc.Result:  # type: ignore[no-untyped-def]
        report("removed blob one")
        steps.append("one")

        def away(*args: object) -> bool:
            raise OperationalError("could not connect to server")

        monkeypatch.setattr(queries, "renew_lease", away)
        time.sleep(1.0)  # past the lease's end, every renewal failing
        report("removed blob two")
        steps.append("two")
        return gc.Result()

    monkeypatch.setattr(gc, "collect", collect)
    assert scheduler.run_if_due(now + 3 * HOUR) is None
    assert steps == ["one"]
