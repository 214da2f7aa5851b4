"""GET /ready is public and probed every few seconds by every balancer and kubelet: each process runs
its checks at most once per ``[server] ready_cache_seconds`` whatever the call rate, answers the
others with the last results, and on S3 a run is one small request to the store."""
from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.test import Client

from ops import readiness
from registry.storage.s3 import S3Driver
from tests.support.s3 import s3  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, settings) -> Clock:
    settings.READY_CACHE_SECONDS = 5
    clock = Clock()
    monkeypatch.setattr(readiness, "monotonic", clock)
    return clock


@pytest.fixture
def runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the checks run, in order (each check still runs for real)."""
    ran: list[str] = []
    real = readiness.checks

    def counted() -> dict[str, readiness.Check]:
        def wrap(name: str, check: readiness.Check) -> readiness.Check:
            return lambda: (ran.append(name), check())[1]
        return {name: wrap(name, check) for name, check in real().items()}

    monkeypatch.setattr(readiness, "checks", counted)
    return ran


def _ready(client: Client) -> tuple[int, dict]:
    response = client.get("/ready")
    return response.status_code, json.loads(response.content)


def test_it_runs_the_checks_once_per_period_whatever_the_call_rate(client: Client, clock: Clock,
                                                                   runs: list[str]) -> None:
    for _ in range(50):
        assert _ready(client)[0] == 200
        clock.now += 0.09  # 50 calls in 4.5 s
    assert runs == ["database", "storage", "storage_low"]
    clock.now += 0.5
    assert _ready(client)[0] == 200
    assert runs == ["database", "storage", "storage_low"] * 2


def test_a_failure_is_kept_as_long_as_a_success_and_then_checked_again(client: Client, clock: Clock, runs,
                                                                      storage_root) -> None:
    (storage_root / "uploads").write_text("in the way")
    assert _ready(client)[0] == 503
    (storage_root / "uploads").unlink()
    clock.now += 4.9
    status, body = _ready(client)
    assert status == 503 and body["failing"] == ["storage"]  # the store is not asked again yet
    clock.now += 0.1
    assert _ready(client) == (200, {"status": "ready",
                                    "checks": {"database": "ok", "storage": "ok", "storage_low": "ok"}})


def test_zero_runs_the_checks_on_every_call(client: Client, settings, runs: list[str]) -> None:
    settings.READY_CACHE_SECONDS = 0
    for _ in range(3):
        _ready(client)
    assert runs.count("storage") == 3


def test_while_one_caller_runs_the_checks_the_others_get_the_last_results_at_once(clock: Clock,
                                                                                 monkeypatch) -> None:
    entered, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow() -> str | None:
        calls.append(1)
        if len(calls) > 1:
            entered.set()
            assert release.wait(10)
            return "the store does not answer"
        return None

    monkeypatch.setattr(readiness, "checks", lambda: {"storage": slow})
    assert readiness.run() == {"storage": "ok"}
    clock.now += 5
    with ThreadPoolExecutor(1) as pool:
        refreshing = pool.submit(readiness.run)
        assert entered.wait(10)
        # A slow store holds one thread, not every caller's.
        assert [readiness.run() for _ in range(20)] == [{"storage": "ok"}] * 20
        release.set()
        assert refreshing.result(10) == {"storage": "the store does not answer"}
    assert readiness.run() == {"storage": "the store does not answer"} and len(calls) == 2


def test_the_first_callers_wait_for_one_run(clock: Clock, monkeypatch) -> None:
    calls: list[int] = []
    started = threading.Barrier(8)

    def check() -> str | None:
        calls.append(1)
        return None

    monkeypatch.setattr(readiness, "checks", lambda: {"storage": check})

    def call() -> dict[str, str]:
        started.wait(10)
        return readiness.run()

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: call(), range(8)))
    assert results == [{"storage": "ok"}] * 8 and len(calls) == 1


def test_on_s3_a_run_is_one_small_request_and_leaves_at_most_one_object(client: Client, s3: S3Driver,
                                                                       clock: Clock) -> None:
    sent: list[str] = []
    s3.client.meta.events.register("before-call.s3", lambda model, **_: sent.append(model.name))
    for _ in range(10):
        assert _ready(client)[0] == 200
    clock.now += 5
    assert _ready(client)[0] == 200
    assert sent == ["PutObject", "PutObject"]
    listed = s3.client.list_objects_v2(Bucket=s3.bucket).get("Contents", [])
    assert [item["Key"] for item in listed] == ["reg/uploads/.probe-ready"]
