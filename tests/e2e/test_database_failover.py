"""PostgreSQL fails over under load, as platform teams run it highly available: two nodes managed by
Patroni with etcd (tests/support/patroni.py), two registry replicas on RGW behind HAProxy, eight
clients pushing, pulling and deleting all along (tests/support/ledger.py keeps every 201 and 202).

- The primary's postmaster is killed (kill -9); Patroni promotes the synchronous standby, then the
  old primary rejoins as a standby. The replicas reach the primary by a multi-host URL.
- A switchover (patronictl), the replicas reaching the primary through HAProxy checking Patroni's
  /primary (the other supported set-up).

Each time: every acknowledged blob and manifest pulls back byte for byte and every acknowledged
delete stays deleted, scrub is clean, every upload session left behind can be resumed, and the
clients saw only 503s with Retry-After meanwhile. The unavailability window is printed (`pytest -s`)
and bounded: the issue's target is 30 s with Patroni's default timings.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import running_rgw, unavailable
from tests.support.cluster import Cluster
from tests.support.ledger import Outcomes, run_load, unresumable_sessions, verify
from tests.support.patroni import PatroniCluster, PatroniUnavailable, PrimaryBalancer, start_patroni
from tests.support.rgw import RGW

CLIENTS = 8
SETTLE = 4.0  # seconds of load before the fault, and after the cluster has settled again
# The target is 30 s (Patroni's defaults fail a crashed primary over in about 10 s here); a
# machine at a load of 10 to 18 stretches Patroni's loop and the replicas' reconnects.
WINDOW_BOUND = 60.0


@pytest.fixture(scope="module")
def store() -> Iterator[RGW]:
    """An RGW of this module's own: its tests run for minutes, apart from the suite's shared one."""
    yield from running_rgw()


@pytest.fixture(scope="module")
def patroni() -> Iterator[PatroniCluster]:
    try:
        cluster = start_patroni()
    except PatroniUnavailable as exc:
        unavailable(str(exc))
    yield cluster
    cluster.stop()


def _report(what: str, outcomes: Outcomes, timeline: dict[str, float]) -> float:
    window = outcomes.window()
    took = window[1] if window else 0.0
    print(f"\n{what}: unavailability window {took:.1f} s (first failure to first success), errors over "
          f"{outcomes.errors_span():.1f} s; " + ", ".join(f"{k} at +{v:.1f} s" for k, v in timeline.items())
          + f"; answers {dict(sorted(outcomes.counts().items()))}")
    return took


def _check(cluster: Cluster, ledger, outcomes: Outcomes, problems: list[str]) -> None:
    assert problems == []
    assert len(ledger.manifests) > CLIENTS and ledger.deleted
    assert verify(cluster.host, ledger) == []
    failed = outcomes.failures()
    assert {o.status for o in failed} <= {503}, outcomes.counts()
    assert all(o.retry_after for o in failed), outcomes.counts()
    scrub = cluster.replicas[0].manage("scrub")
    assert scrub.returncode == 0, scrub.stdout + scrub.stderr
    assert unresumable_sessions(cluster.replicas[0], cluster.host) == []
    for replica in cluster.replicas:
        assert '"status":500' not in replica.log_path.read_text()


def test_a_crashed_primary_fails_over_under_load_and_nothing_acknowledged_is_lost(
        patroni: PatroniCluster, store: RGW, tmp_path: Path) -> None:
    cluster = Cluster(patroni, store, tmp_path).start()  # the multi-host URL
    timeline: dict[str, float] = {}
    try:
        def crash() -> None:
            time.sleep(SETTLE)
            old = patroni.leader()
            start = time.monotonic()
            old.kill_postmaster()
            while not any(node is not old and node.role() == "primary" for node in patroni.nodes):
                time.sleep(0.2)
            timeline["promoted"] = time.monotonic() - start
            patroni.settle_quickly()
            timeline["old primary rejoined"] = time.monotonic() - start
            time.sleep(SETTLE)

        ledger, outcomes, problems = run_load(cluster.host, CLIENTS, crash)
        window = _report("kill -9 of the primary", outcomes, timeline)
        _check(cluster, ledger, outcomes, problems)
        assert window < WINDOW_BOUND
    finally:
        cluster.stop()


def test_a_switchover_under_load_costs_only_503s_with_retry_after(patroni: PatroniCluster, store: RGW,
                                                                   tmp_path: Path) -> None:
    balancer = PrimaryBalancer(patroni, tmp_path / "pg-haproxy").start()
    cluster = Cluster(patroni, store, tmp_path).start(database_url=patroni.new_database(balancer.host))
    timeline: dict[str, float] = {}
    try:
        def switch() -> None:
            time.sleep(SETTLE)
            start = time.monotonic()
            patroni.switchover()
            timeline["switched"] = time.monotonic() - start
            patroni.settle_quickly()
            timeline["settled"] = time.monotonic() - start
            time.sleep(SETTLE)

        ledger, outcomes, problems = run_load(cluster.host, CLIENTS, switch)
        window = _report("switchover", outcomes, timeline)
        _check(cluster, ledger, outcomes, problems)
        assert window < WINDOW_BOUND
    finally:
        cluster.stop()
        balancer.stop()
