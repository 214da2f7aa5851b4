"""The path to PostgreSQL goes silent under a serving registry (tests/support/faultproxy.py between the
two: connections accepted, nothing answered, nothing closed): requests fail with 503 and Retry-After
within the configured bounds, the request threads never all hang (/health answers throughout), and
/ready turns 503 within seconds and green again once the path is back."""
from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable, Iterator

import pytest

from tests.faults.wire import Registry
from tests.support.faultproxy import PASS, STALL, FaultProxy
from tests.support.postgres import Postgres
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e

CONNECT_TIMEOUT, STATEMENT_TIMEOUT, POOL_TIMEOUT, GRACE = 2, 2, 3, 5
# The longest a request may take while the path is silent: a connection from the pool (pool_timeout,
# its check included), then an answer on it (statement_timeout plus the grace, for a query sent just
# before the path went silent).
BOUND = POOL_TIMEOUT + STATEMENT_TIMEOUT + GRACE
SLACK = 3.0  # a machine running other suites at a load of 10 to 18


@dataclass
class Answer:
    started: float
    seconds: float
    status: int
    retry_after: str | None
    body: bytes = b""


def _get(url: str, timeout: float = 60) -> Answer:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
            return Answer(started, time.monotonic() - started, response.status, None, body)
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return Answer(started, time.monotonic() - started, exc.code, exc.headers.get("Retry-After"), body)


@pytest.fixture
def silenced(start_registry: Callable[..., RegistryServer], postgres: Postgres) -> Iterator[tuple[RegistryServer,
                                                                                               FaultProxy]]:
    proxy = FaultProxy(("127.0.0.1", postgres.port)).start()
    url = (postgres.new_database().replace(f":{postgres.port}/", f":{proxy.port}/")
           + f"?connect_timeout={CONNECT_TIMEOUT}")
    # /ready's results are not reused between calls here (ready_cache_seconds, tests/test_ready_cache.py):
    # with two workers each keeping its own for 5 s, a call could otherwise get the other worker's
    # "ready" from before the path went silent, and what is measured is the database probe's bound.
    server = start_registry(workers=2, SVC_DATABASE_URL=url, SVC_DATABASE_POOL_SIZE="4",
                            SVC_DATABASE_STATEMENT_TIMEOUT=str(STATEMENT_TIMEOUT),
                            SVC_DATABASE_POOL_TIMEOUT=str(POOL_TIMEOUT), SVC_SERVER_THREADS="8",
                            SVC_SERVER_READY_CACHE_SECONDS="0")
    yield server, proxy
    proxy.stop()


def test_requests_fail_within_their_bounds_and_health_answers_throughout(silenced) -> None:
    server, proxy = silenced
    client = Registry(server.host)
    client.push_image("team/app", "v1", [b"layer"])
    manifest = f"{server.url}/v2/team/app/manifests/v1"
    answers: list[Answer] = []
    health: list[Answer] = []
    done = threading.Event()

    def pull() -> None:
        while not done.is_set():
            answers.append(_get(manifest))

    def watch_health() -> None:
        while not done.is_set():
            health.append(_get(f"{server.url}/health", timeout=30))
            done.wait(0.3)

    # Fewer clients than the 16 request threads: what is shown is that none stays stuck for good.
    threads = [threading.Thread(target=pull) for _ in range(6)] + [threading.Thread(target=watch_health)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    proxy.set(STALL)
    silent = time.monotonic()
    time.sleep(15)
    proxy.set(PASS)
    back = time.monotonic()
    time.sleep(8)
    done.set()
    for thread in threads:
        thread.join()

    assert {a.status for a in answers} <= {200, 503}, sorted({a.status for a in answers})
    failed = [a for a in answers if a.status == 503]
    assert failed and all(a.retry_after for a in failed)
    assert max(a.seconds for a in answers) < BOUND + SLACK, sorted(a.seconds for a in answers)[-5:]
    # Once the pool knows the server is unreachable, a request waits a second at most, not pool_timeout.
    late = [a.seconds for a in failed if a.started > silent + BOUND + SLACK]
    assert late and max(late) < 1 + SLACK, late
    slow = [(round(a.started - silent, 1), a.status, round(a.seconds, 1)) for a in health
            if a.status != 200 or a.seconds > 2]
    assert all(a.status == 200 and a.seconds < 2 + SLACK for a in health), slow
    recovered = [a for a in answers if a.started > back]
    first_ok = min(a.started for a in recovered if a.status == 200)
    assert first_ok - back < 5, "the registry did not come back within seconds of the database"
    assert all(a.status == 200 for a in recovered if a.started > first_ok + 3)
    assert '"status":500' not in server.log_path.read_text()


def test_ready_turns_503_within_seconds_and_green_again_after(silenced) -> None:
    server, proxy = silenced

    def until(status: int, within: float) -> tuple[float, Answer]:
        started = time.monotonic()
        while True:
            answer = _get(f"{server.url}/ready", timeout=30)
            # A load balancer's check gives up after a few seconds: /ready must answer before.
            assert answer.seconds < 2 + SLACK, answer
            if answer.status == status:
                return time.monotonic() - started, answer
            assert time.monotonic() - started < within, f"/ready never answered {status}"
            time.sleep(0.2)

    until(200, 10)
    proxy.set(STALL)
    took, failing = until(503, 10)
    assert json.loads(failing.body)["checks"]["database"] == "database does not answer"
    assert took < 2 + SLACK  # one bounded probe (regsite.db.PRIMARY_PROBE_SECONDS) after the path went silent
    proxy.set(PASS)
    assert until(200, 15)[0] < 5
