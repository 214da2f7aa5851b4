"""The ``failover`` workload: PostgreSQL failing over under load, the scenario of
tests/e2e/test_database_failover.py with figures instead of assertions.

Two PostgreSQL 15 nodes under Patroni (etcd as its store, synchronous_mode, Patroni's default
timings; tests/support/patroni.py), two replicas of ours on one Ceph RGW bucket behind HAProxy, and
8 clients pushing, pulling and deleting (tests/support/ledger.py records every 201 and 202). Two
faults: kill -9 of the primary's postmaster (the replicas reach the primary by a multi-host URL),
then a patronictl switchover (through HAProxy checking Patroni's /primary). Each one prints the
unavailability window (from the first failed request to the end of the first success that started
after it), how long errors went on, the answers by status, and what was lost: acknowledged blobs,
manifests and deletes that do not read back as acknowledged. There is no reference side: the CNCF
registry keeps no metadata in a database.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from tests.support.cluster import Cluster
from tests.support.ledger import run_load, unresumable_sessions, verify
from tests.support.patroni import PatroniCluster, PrimaryBalancer, start_patroni
from tests.support.rgw import RGW, start_rgw

NAME = "failover"
CLIENTS = 8


@dataclass
class Scenario:
    name: str
    window_s: float
    errors_s: float
    answers: dict[str, int]
    acknowledged: int  # blobs, manifests and deletes
    lost: list[str]
    stuck_sessions: list[str]
    scrub_clean: bool
    timeline: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        failed = {k: v for k, v in self.answers.items() if k == "0" or k.startswith("5")}
        return (f"{self.name}: window {self.window_s:.1f} s (errors over {self.errors_s:.1f} s), "
                f"{sum(self.answers.values())} requests, failures {failed or 'none'}, "
                f"{self.acknowledged} acknowledged, {len(self.lost)} lost, {len(self.stuck_sessions)} sessions "
                f"stuck, scrub {'clean' if self.scrub_clean else 'NOT clean'}; "
                + ", ".join(f"{k} +{v:.1f} s" for k, v in self.timeline.items()))


def _scenario(name: str, cluster: Cluster, fault: Callable[[dict[str, float]], None], settle: float) -> Scenario:
    timeline: dict[str, float] = {}

    def during() -> None:
        time.sleep(settle)
        fault(timeline)
        time.sleep(settle)

    ledger, outcomes, problems = run_load(cluster.host, CLIENTS, during)
    window = outcomes.window()
    lost = problems + verify(cluster.host, ledger)
    scrub = cluster.replicas[0].manage("scrub")
    return Scenario(name, window[1] if window else 0.0, outcomes.errors_span(), dict(outcomes.counts()),
                    len(ledger.blobs) + len(ledger.manifests) + len(ledger.deleted), lost,
                    unresumable_sessions(cluster.replicas[0], cluster.host), scrub.returncode == 0, timeline)


def _crash(patroni: PatroniCluster) -> Callable[[dict[str, float]], None]:
    def fault(timeline: dict[str, float]) -> None:
        old = patroni.leader()
        start = time.monotonic()
        old.kill_postmaster()
        while not any(node is not old and node.role() == "primary" for node in patroni.nodes):
            time.sleep(0.2)
        timeline["promoted"] = time.monotonic() - start
        patroni.wait_settled()
        timeline["old primary rejoined"] = time.monotonic() - start
    return fault


def _switchover(patroni: PatroniCluster) -> Callable[[dict[str, float]], None]:
    def fault(timeline: dict[str, float]) -> None:
        start = time.monotonic()
        patroni.switchover()
        timeline["switched"] = time.monotonic() - start
        patroni.wait_settled()
        timeline["settled"] = time.monotonic() - start
    return fault


def run(out_dir: Path, quick: bool = False) -> list[Scenario]:
    settle = 4.0 if quick else 10.0
    scratch = Path(tempfile.mkdtemp(prefix="registry-bench-failover-"))
    rgw: RGW | None = None
    patroni: PatroniCluster | None = None
    scenarios: list[Scenario] = []
    try:
        print("  failover: starting Ceph RGW and a Patroni cluster", flush=True)
        rgw = start_rgw(debug_rgw=0)
        patroni = start_patroni()
        cluster = Cluster(patroni, rgw, scratch / "multi-host").start()
        try:
            scenarios.append(_scenario("kill -9 of the primary, multi-host URL", cluster, _crash(patroni), settle))
        finally:
            cluster.stop()
        print(f"  {scenarios[-1].line()}", flush=True)
        balancer = PrimaryBalancer(patroni, scratch / "pg-haproxy").start()
        cluster = Cluster(patroni, rgw, scratch / "haproxy").start(database_url=patroni.new_database(balancer.host))
        try:
            scenarios.append(_scenario("switchover, HAProxy on /primary", cluster, _switchover(patroni), settle))
        finally:
            cluster.stop()
            balancer.stop()
        print(f"  {scenarios[-1].line()}", flush=True)
    finally:
        if patroni is not None:
            patroni.stop()
        if rgw is not None:
            rgw.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "failover.json").write_text(json.dumps([asdict(s) for s in scenarios], indent=1))
    return scenarios
