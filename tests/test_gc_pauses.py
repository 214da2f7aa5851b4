"""The collector's write transactions give SQLite's waiting writers a turn (sweep.writing): once
they have held the lock for WRITER_BUDGET, the next one starts at least WRITER_PAUSE after the
last one ended, and what the collector did without the lock in between counts towards the pause,
SQLite's checkpoints in its commits included. On PostgreSQL writers wait on row locks, not by
polling, and nothing pauses."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from registry.services import sweep

pytestmark = pytest.mark.django_db(transaction=True)  # sweep.writing pauses after outermost transactions only


class Clock:
    """sweep's ``time``: a monotonic clock that the test moves, and sleeps that move it."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(sweep, "time", fake)
    monkeypatch.setattr(sweep, "_turns", threading.local())
    monkeypatch.setattr(sweep, "WRITER_BUDGET", 0.1)
    monkeypatch.setattr(sweep, "WRITER_PAUSE", 0.1)
    return fake


def hold(clock: Clock, seconds: float) -> None:
    with sweep.writing():
        clock.now += seconds


def pausing() -> bool:
    return connection.vendor == "sqlite"


def test_once_the_lock_was_held_for_the_budget_the_next_transaction_waits_out_the_pause(clock: Clock) -> None:
    hold(clock, 0.06)
    hold(clock, 0.06)  # 0.12 s held in all: writers' turn from here
    assert clock.slept == []  # not after the transaction: before the next one, if there is one
    hold(clock, 0.01)
    assert clock.slept == ([0.1] if pausing() else [])


def test_the_work_done_without_the_lock_counts_towards_the_pause(clock: Clock) -> None:
    hold(clock, 0.12)
    clock.now += 0.07  # deleting the files it took out of the tree, say
    hold(clock, 0.01)
    assert clock.slept == ([0.03] if pausing() else [])
    hold(clock, 0.12)
    clock.now += 0.5
    hold(clock, 0.01)
    assert clock.slept == ([0.03] if pausing() else [])  # the writers had their turn already


def test_short_transactions_pause_once_their_time_adds_up_to_the_budget(clock: Clock) -> None:
    for _ in range(3):
        hold(clock, 0.03)
    hold(clock, 0.01)
    assert clock.slept == []  # 0.1 s not reached
    hold(clock, 0.03)  # 0.13 s in all
    hold(clock, 0.01)
    assert clock.slept == ([0.1] if pausing() else [])


def test_a_transaction_inside_another_pauses_nothing(clock: Clock) -> None:
    with sweep.writing():
        hold(clock, 0.2)
        hold(clock, 0.01)
    assert clock.slept == []


def test_a_commit_that_checkpoints_the_log_counts_towards_the_pause_not_the_lock(
    clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit = connection._commit

    def checkpointing() -> None:
        commit()
        clock.now += 0.05  # copying the write-ahead log into the database, the lock released

    monkeypatch.setattr(connection, "_commit", checkpointing)
    hold(clock, 0.06)
    hold(clock, 0.06)  # 0.12 s held, the commits' 0.05 s each not counted: the writers' turn starts here
    hold(clock, 0.01)
    assert clock.slept == ([0.05] if pausing() else [])  # its checkpoint took half the pause
