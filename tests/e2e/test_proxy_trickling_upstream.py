"""A trickling upstream under gunicorn: it sends one byte every 2 s (under the read timeout), and 20
clients keep pulling through its cache, manifests and one blob, each coming back a second after it
was answered (sooner than any Retry-After). Pulls of the registry's own repositories meanwhile keep
answering fast (p99 < 250 ms), and every pull through the cache ends within the cache's deadline
(``total_timeout_seconds``): 503 or 504 with Retry-After (a blob answer already streaming may end
short instead)."""
from __future__ import annotations

import http.client
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Callable

import pytest

from tests.faults.wire import Registry
from tests.support.server import RegistryServer
from tests.support.trickling_upstream import TricklingUpstream
from tests.support.upstreams import OCI_MANIFEST

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # a latency bound: run alone (make test)
DEADLINE = 6  # [[proxy]] total_timeout_seconds
CLIENTS = 20
ATTACK_SECONDS = 15
AGAIN_AFTER = 1.0  # seconds a client waits before it pulls again


@dataclass(frozen=True)
class Ended:
    path: str
    status: int
    seconds: float
    retry_after: str
    cut_short: bool


def pull_through(port: int, path: str) -> Ended:
    started = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE * 4)
    try:
        conn.request("GET", path, headers={"Accept": OCI_MANIFEST})
        response = conn.getresponse()
        try:
            response.read()
            cut = False
        except http.client.IncompleteRead:
            cut = True
        return Ended(path, response.status, time.monotonic() - started, response.getheader("Retry-After", ""), cut)
    finally:
        conn.close()


def keep_pulling(port: int, path: str, ended: list[Ended], failures: list[str], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            ended.append(pull_through(port, path))
        except OSError as exc:
            failures.append(f"{path}: {exc!r}")
        stop.wait(AGAIN_AFTER)


def probe(client: Registry, path: str, latencies: list[float], failures: list[str], stop: threading.Event) -> None:
    while not stop.is_set():
        started = time.monotonic()
        try:
            reply = client.request("GET", path, headers={"Accept": OCI_MANIFEST})
            if reply.status != 200:
                failures.append(f"{path}: {reply.status}")
        except OSError as exc:
            failures.append(f"{path}: {exc!r}")
        latencies.append(time.monotonic() - started)
        stop.wait(0.1)


def run_all(targets: list[Callable[[], None]]) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    return threads


def test_a_trickling_upstream_stalls_only_its_own_pulls(start_registry: Callable[..., RegistryServer],
                                                         tmp_path) -> None:
    upstream = TricklingUpstream(interval=2.0).start()
    try:
        workdir = tmp_path / "server"
        workdir.mkdir()
        (workdir / "config.toml").write_text(
            f'[[proxy]]\nprefix = "slow"\nurl = "{upstream.url}"\ntimeout_seconds = 10\n'
            f"total_timeout_seconds = {DEADLINE}\n")
        server = start_registry()
        client = Registry(server.host, timeout=10)
        _, manifest = client.push_image("team/app", "v1", [b"layer of a local image" * 100])
        layer = client.pull_image("team/app", "v1")
        local_blob = next(d for d, data in layer.items() if data.startswith(b"layer"))

        # Half ask for manifests (each of its own repository), half for one blob of one repository.
        paths = [f"/v2/slow/library/app{n}/manifests/v1" for n in range(CLIENTS // 2)]
        paths += [f"/v2/slow/library/app/blobs/{upstream.layer_digest}"] * (CLIENTS - CLIENTS // 2)
        ended: list[Ended] = []
        failures: list[str] = []
        latencies: dict[str, list[float]] = {"/v2/team/app/manifests/v1": [], f"/v2/team/app/blobs/{local_blob}": []}
        stop = threading.Event()
        pullers = run_all([lambda p=path: keep_pulling(server.port, p, ended, failures, stop) for path in paths])
        time.sleep(1.0)  # every puller is waiting on the upstream, or refused
        probes = run_all([lambda p=path, found=found: probe(client, p, found, failures, stop)
                          for path, found in latencies.items()])
        time.sleep(ATTACK_SECONDS)
        stop.set()
        for thread in probes + pullers:
            thread.join(DEADLINE * 4)
            assert not thread.is_alive()

        assert failures == []
        for path, found in latencies.items():
            p99 = statistics.quantiles(found, n=100, method="inclusive")[98]
            assert len(found) > ATTACK_SECONDS * 5 and p99 < 0.25, (path, len(found), p99, max(found))
        assert len(ended) >= CLIENTS * 2
        for pull in ended:
            assert pull.seconds < DEADLINE + 1.5, pull
            if pull.status == 200:
                assert pull.cut_short, pull  # a trickle never delivers a whole blob within the deadline
            else:
                assert pull.status in (503, 504) and int(pull.retry_after) > 0, pull
        assert {pull.status for pull in ended} >= {503, 504}  # some reached the upstream, some were refused
        assert upstream.wait_idle(DEADLINE), "the cache still holds connections to the upstream"
        log = server.log_path.read_text()
        assert "Traceback" not in log and '"status":500' not in log
    finally:
        upstream.stop()
