"""The named locks of registry.locks, as one suite every implementation must pass: held for a block,
never waited for, each with a note its next holder reads."""
from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from registry.locks import DatabaseLocks, FileLocks, LockHeld, LockLost, Locks, default_locks
from registry.storage import paths


# The database locks' renewing thread, and the threads of some tests, use connections of their own.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(params=["file", "database"])
def locks(request, tmp_path: Path) -> Locks:  # type: ignore[no-untyped-def]
    return DatabaseLocks() if request.param == "database" else FileLocks(tmp_path / "root")


def test_it_refuses_a_second_holder_at_once(locks) -> None:
    with locks.hold("job"):
        with pytest.raises(LockHeld):
            with locks.hold("job"):
                pass


def test_it_refuses_a_holder_in_another_thread(locks) -> None:
    outcome: list[str] = []

    def try_it() -> None:
        try:
            with locks.hold("job"):
                outcome.append("held")
        except LockHeld:
            outcome.append("refused")

    with locks.hold("job"):
        thread = threading.Thread(target=try_it)
        thread.start()
        thread.join()
    assert outcome == ["refused"]


def test_it_frees_the_lock_when_the_block_ends_even_by_an_error(locks) -> None:
    with pytest.raises(RuntimeError):
        with locks.hold("job"):
            raise RuntimeError("the job failed")
    with locks.hold("job"):
        pass


def test_it_keeps_locks_of_different_names_apart(locks) -> None:
    with locks.hold("one"), locks.hold("two"):
        pass


def test_it_keeps_the_note_for_the_next_holder(locks) -> None:
    with locks.hold("job") as held:
        assert held.note() == ""
        held.set_note("1234.5")
        held.set_note("1750000000.25")
    with locks.hold("job") as held:
        assert held.note() == "1750000000.25"
    with locks.hold("other") as held:
        assert held.note() == ""


def test_it_refuses_names_that_are_not_lock_names(locks) -> None:
    for name in ("", "../x", "a/b", "UPPER", "x" * 65):
        with pytest.raises(ValueError):
            with locks.hold(name):
                pass


def test_the_collectors_file_lock_is_where_earlier_releases_flock_it(storage_root: Path) -> None:
    schedule = storage_root / paths.GC_SCHEDULE
    schedule.parent.mkdir(parents=True)
    fd = os.open(schedule, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(LockHeld):
            with default_locks().hold(paths.GC_LOCK):
                pass
    finally:
        os.close(fd)
    with default_locks().hold(paths.GC_LOCK) as held:
        held.set_note("42.0")
    assert schedule.read_text() == "42.0\n"


def test_a_database_lease_is_renewed_while_held_and_expires_when_its_holder_dies() -> None:
    from datetime import timedelta

    from django.utils import timezone

    from registry import queries
    from registry.models import Lease

    locks = DatabaseLocks(lease_seconds=0.6)
    with locks.hold("job") as held:
        threading.Event().wait(1.0)  # longer than the lease: the renewer keeps it
        held.set_note("still mine")
        with pytest.raises(LockHeld):
            with DatabaseLocks().hold("job"):
                pass
    # A holder that died leaves its lease to run out: then anyone may take it, note included.
    now = timezone.now()
    assert queries.acquire_lease("job", "dead-holder", now, now + timedelta(seconds=0.2)) is not None
    with pytest.raises(LockHeld):
        with locks.hold("job"):
            pass
    threading.Event().wait(0.3)
    with locks.hold("job") as held:
        assert held.note() == "still mine"
    assert Lease.objects.get(name="job").owner == ""


def test_the_s3_backend_locks_in_the_database(settings) -> None:
    settings.REGISTRY_STORAGE = {**settings.REGISTRY_STORAGE, "backend": "s3"}
    default_locks.cache_clear()
    assert isinstance(default_locks(), DatabaseLocks)
    default_locks.cache_clear()


def test_a_failed_renewal_is_logged_and_retried_and_the_lease_kept(monkeypatch, caplog) -> None:
    from django.db import OperationalError

    from registry import queries

    real, calls, renewed = queries.renew_lease, [], threading.Event()

    def flaky(*args):  # type: ignore[no-untyped-def]
        calls.append(args)
        if len(calls) == 1:
            raise OperationalError("the database went away for a moment")
        done = real(*args)
        renewed.set()
        return done

    monkeypatch.setattr(queries, "renew_lease", flaky)
    # Renewals every second; the retry a second after the failure still has a second of lease left
    # to reconnect in (a 0.6 s lease ran out on a busy machine while the thread reconnected).
    locks = DatabaseLocks(lease_seconds=3)
    with caplog.at_level("WARNING", logger="registry.locks"):
        with locks.hold("job") as held:
            assert renewed.wait(30)  # the first renewal failed, a later one went through
            held.set_note("still mine")  # raises LockHeld had the lease run out
            with pytest.raises(LockHeld):
                with DatabaseLocks().hold("job"):
                    pass
    assert len(calls) >= 2
    assert "lock job: renewing its lease failed; retrying" in caplog.messages


def test_a_lease_whose_renewals_fail_past_its_end_is_lost_and_its_holder_told(monkeypatch) -> None:
    """The database away for longer than the lease (a failover): another replica may hold the lock by
    now, so its old holder must not go on as if it still did."""
    from django.db import OperationalError

    from registry import queries

    def away(*args: object) -> bool:
        raise OperationalError("could not connect to server")

    locks = DatabaseLocks(lease_seconds=0.6)
    with locks.hold("job") as held:
        monkeypatch.setattr(queries, "renew_lease", away)
        threading.Event().wait(1.0)  # past the lease's end, every renewal failing
        with pytest.raises(LockLost):
            held.ensure()
        with pytest.raises(LockLost):  # a lost lock writes no note
            held.set_note("still mine?")
        with DatabaseLocks().hold("job") as other:  # the next holder takes it at once
            other.ensure()


def test_a_lease_taken_over_meanwhile_is_lost(monkeypatch) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from registry.models import Lease

    locks = DatabaseLocks(lease_seconds=0.6)
    with locks.hold("job") as held:
        # As if the lease had run out unseen and another replica had taken it.
        Lease.objects.filter(name="job").update(owner="elsewhere", until=timezone.now() + timedelta(hours=1))
        threading.Event().wait(0.5)  # a renewal is due: it finds the lease not ours
        with pytest.raises(LockLost):
            held.ensure()


def test_a_file_lock_is_never_lost(tmp_path: Path) -> None:
    with FileLocks(tmp_path).hold("job") as held:
        held.ensure()
