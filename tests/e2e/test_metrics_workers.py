"""/metrics under gunicorn with several workers: one scrape reports the requests of every worker."""
from __future__ import annotations

import glob
import hashlib
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import require_tool
from tests.support.rawhttp import Client
from tests.support.server import RegistryServer

pytestmark = pytest.mark.e2e


def scrape(server: RegistryServer) -> str:
    reply = Client(server.host).request("GET", "/metrics")
    assert reply.status == 200
    return reply.body.decode()


def value(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def health_count(text: str) -> float:
    return value(text, "django_http_responses_total_by_status_view_method_total",
                 method="GET", status="200", view="ops:health")


def per_worker_health(directory: Path) -> dict[int, float]:
    """The health count each worker wrote to its own file: proof the requests were spread."""
    counts = {}
    for path in glob.glob(str(directory / "counter_*.db")):
        pid = int(Path(path).stem.split("_")[1])
        counts[pid] = sum(
            v for key, v, *_ in MmapedDict.read_all_values_from_file(path)
            if "django_http_responses_total_by_status_view_method" in key and "ops:health" in key
        )
    return {pid: n for pid, n in counts.items() if n}


def hit_health(server: RegistryServer, times: int) -> None:
    http = Client(server.host)  # one new connection per request: the kernel hands each to any worker
    with ThreadPoolExecutor(max_workers=6) as pool:
        statuses = list(pool.map(lambda _: http.request("GET", "/health").status, range(times)))
    assert statuses == [200] * times


def wait_for(condition: Callable[[], bool], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_it_counts_30_requests_over_3_workers_in_one_scrape(start_registry, tmp_path: Path) -> None:
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    server = start_registry(workers=3, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    sent = 0
    # The kernel decides which worker accepts each connection; on a busy machine one worker can
    # take a whole round, which would prove nothing, so another round of 30 follows until two did.
    while sent == 0 or len(per_worker_health(metrics_dir)) < 2:
        assert sent < 300, per_worker_health(metrics_dir)
        hit_health(server, 30)
        sent += 30
        text = scrape(server)
        assert health_count(text) == sent
        assert value(text, "django_http_requests_total_by_view_transport_method_total",
                     method="GET", transport="http", view="ops:health") == sent
    spread = per_worker_health(metrics_dir)
    assert sum(spread.values()) == sent, spread

    result = subprocess.run([require_tool("promtool"), "check", "metrics"], input=text,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr

    # A worker that dies keeps its counts; gunicorn replaces it and marks it dead.
    workers = [pid for pid in server.pids() if pid != server.process.pid]
    victim = next(pid for pid in workers if pid in spread)
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: victim not in server.pids() and len(server.pids()) == 4)
    assert health_count(scrape(server)) == sent


def test_it_starts_from_zero_after_a_restart_with_the_same_directory(start_registry, tmp_path: Path) -> None:
    metrics_dir = tmp_path / "prometheus"
    metrics_dir.mkdir()
    first = start_registry(workers=2, name="first", PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    hit_health(first, 5)
    assert health_count(scrape(first)) == 5
    first.stop()
    assert glob.glob(str(metrics_dir / "*.db")), "the files stay after a stop; start-up must clear them"
    second = start_registry(workers=2, name="second", PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    assert health_count(scrape(second)) == 0


def test_it_sums_registry_counters_over_workers(start_registry) -> None:
    server = start_registry(workers=3)
    http = Client(server.host)
    data = b"layer " * 50_000
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = http.request("POST", "/v2/team/app/blobs/uploads/")
    location = start.header("Location")
    chunks = [data[i:i + 100_000] for i in range(0, len(data), 100_000)]
    assert http.request("PATCH", location, chunks, chunked=True).status == 202
    assert http.request("PUT", f"{location}?digest={digest}").status == 201
    for _ in range(6):
        assert http.request("GET", f"/v2/team/app/blobs/{digest}").body == data
    text = scrape(server)
    assert value(text, "registry_bytes_uploaded_total") == len(data)
    assert value(text, "registry_bytes_downloaded_total") == 6 * len(data)
    assert value(text, "registry_blob_operations_total", operation="pull", outcome="success") == 6
    assert value(text, "registry_blob_operations_total", operation="push", outcome="success") == 1
    assert value(text, "registry_upload_sessions_total", event="started") == 1
    assert value(text, "registry_upload_sessions_total", event="completed") == 1
    assert value(text, "registry_storage_blobs") == 1
    assert value(text, "registry_storage_bytes") == len(data)


def test_it_shows_cpu_memory_and_open_files_of_every_gunicorn_process(start_registry) -> None:
    server = start_registry(workers=3)
    text = scrape(server)
    by_pid: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("process_") and "pid" in sample.labels:
                by_pid.setdefault(sample.labels["pid"], {})[sample.name] = sample.value
                assert sample.labels["role"] in ("master", "worker")
    assert {int(pid) for pid in by_pid} == set(server.pids())  # the master and its 3 workers
    for figures in by_pid.values():
        assert figures["process_resident_memory_bytes"] > 10 * 2**20
        assert figures["process_open_fds"] > 3 and figures["process_cpu_seconds_total"] > 0
        assert abs(figures["process_start_time_seconds"] - time.time()) < 600
    checked = subprocess.run([require_tool("promtool"), "check", "metrics"], input=text, capture_output=True,
                             text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
