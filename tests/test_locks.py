"""The named locks of registry.locks, as one suite every implementation must pass: held for a block,
never waited for, each with a note its next holder reads."""
from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from registry.locks import FileLocks, LockHeld, Locks, default_locks
from registry.storage import paths


@pytest.fixture(params=["file"])
def locks(request, tmp_path: Path) -> Locks:  # type: ignore[no-untyped-def]
    return FileLocks(tmp_path / "root")


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
